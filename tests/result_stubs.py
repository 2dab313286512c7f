"""The results' stubs (``python/surveillance/_core_results.pyi``) against each result's one
field list, the ``_fields`` that the native class is made from (``result_class!`` in
``src/python/results/fields.rs``): the constructor's parameters and a property per field, in
order, with the field's annotation and doc.

``python tests/result_stubs.py`` writes them (after a build: it reads the built module), so
that a field added in its Rust file reaches the stub; ``tests/test_results.py`` checks them.
"""

from __future__ import annotations

import ast
import inspect
import json
import pathlib
import sys
import textwrap
from typing import Any

STUB = pathlib.Path(__file__).resolve().parent.parent / "python/surveillance/_core_results.pyi"
#: The results made from a field list.
RESULTS = (
    "EventPlan",
    "Cost",
    "Quota",
    "Stats",
    "CacheEntry",
    "CacheInfo",
    "PublishReport",
    "Failure",
)
WIDTH = 100


def fields(cls: Any) -> list[tuple[str, str, str]]:
    """``(name, annotation, doc)`` of each field of ``cls``, in order: its field list and
    its attribute's docstring."""
    return [
        (name, annotation, " ".join((vars(cls)[name].__doc__ or "").split()))
        for name, annotation in cls._fields
    ]


def arguments(cls: Any) -> list[tuple[str, str]]:
    """``(name, annotation)`` of each argument of the constructor of ``cls``, in order."""
    return list(cls._arguments)


def _default(cls: Any, name: str) -> str:
    default = inspect.signature(cls).parameters[name].default
    if default is inspect.Parameter.empty:
        return ""
    if isinstance(default, str):  # as the formatter writes a string: in double quotes
        return " = " + json.dumps(default)
    return " = ..." if default is ... else f" = {default!r}"


def _keyword_only(cls: Any) -> bool:
    kinds = {p.kind for p in inspect.signature(cls).parameters.values()}
    return kinds == {inspect.Parameter.KEYWORD_ONLY}


def _docstring(doc: str, indent: str) -> list[str]:
    lines = textwrap.wrap(doc, WIDTH - len(indent) - 6) or [""]
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [indent + line for line in lines[1:]] + [f'{indent}"""']


def written(cls: Any) -> list[str]:
    """The stub's lines of the fields of ``cls``: its ``__new__`` and a property each."""
    name = cls.__name__
    params = [f"        {f}: {a}{_default(cls, f)}," for f, a in arguments(cls)]
    star = ["        *,"] if _keyword_only(cls) else []
    out = ["    def __new__(", "        cls,", *star, *params, f"    ) -> {name}: ..."]
    for field, annotation, doc in fields(cls):
        out += ["    @property", f"    def {field}(self) -> {annotation}:"]
        out += _docstring(doc, "        ")
    return out


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _span(node: ast.ClassDef, names: set[str]) -> tuple[int, int]:
    """The first and last line (1-based) of the class's ``__new__`` and field properties."""
    members = [
        n
        for n in node.body
        if isinstance(n, ast.FunctionDef) and (n.name == "__new__" or n.name in names)
    ]
    first = min(m.decorator_list[0].lineno if m.decorator_list else m.lineno for m in members)
    return first, max(m.end_lineno or m.lineno for m in members)


def mismatches(module: Any, stub: pathlib.Path = STUB) -> list[str]:
    """How ``stub`` differs from the field lists (empty when it says what they say)."""
    text = stub.read_text(encoding="utf-8")
    tree = ast.parse(text)
    classes = _classes(tree)
    bad = []
    for name in RESULTS:
        cls = getattr(module, name)
        node = classes.get(name)
        if node is None:
            bad.append(f"{name}: not in {stub.name}")
            continue
        members = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
        new = members.get("__new__")
        given = [(a.arg, ast.unparse(a.annotation)) for a in new.args.args[1:]] if new else []
        given += [(a.arg, ast.unparse(a.annotation)) for a in (new.args.kwonlyargs if new else [])]
        wanted = arguments(cls)
        if given != wanted:
            bad.append(f"{name}.__new__ takes {given}, its fields are {wanted}")
        for field, annotation, _ in fields(cls):
            prop = members.get(field)
            returns = ast.unparse(prop.returns) if prop and prop.returns else None
            if returns != annotation:
                bad.append(f"{name}.{field}: the stub says {returns}, the field {annotation}")
        lines = text.splitlines()
        if new is not None and not bad:
            first, last = _span(node, {f for f, _, _ in fields(cls)})
            if lines[first - 1 : last] != written(cls):
                bad.append(f"{name}: its fields' stub is not as written from the field list")
    return bad


def write(module: Any) -> None:
    """Writes each result's ``__new__`` and field properties into the stub."""
    for name in RESULTS:
        cls = getattr(module, name)
        lines = STUB.read_text(encoding="utf-8").splitlines()
        node = _classes(ast.parse("\n".join(lines)))[name]
        first, last = _span(node, {f for f, _, _ in fields(cls)})
        lines[first - 1 : last] = written(cls)
        STUB.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.path.insert(0, str(STUB.parent.parent))
    from surveillance import _core

    write(_core)
    print("\n".join(mismatches(_core)) or f"{STUB.name}: written from the field lists")
