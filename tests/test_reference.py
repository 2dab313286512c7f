"""The reference as ``help()``, Jupyter's ``?`` and the site show it: every public callable of
``surveillance.__all__``, and every public method of its classes, documents its parameters,
what it returns, what it raises and an example; the examples run here, against one emulator
shared by the module (as ``sv``, ``emu``, ``client`` and ``async_client``); and no signature
shows a private name, ``Ellipsis``, an alias the reference does not explain, or ``Any`` for a
result that is known."""

from __future__ import annotations

import builtins
import doctest
import inspect
import re
import sys
import typing
from typing import Any, Callable, Iterator

import pytest
import surveillance as sv

#: Names a signature may show besides the package's public ones: the standard library's
#: types and the modules of the tables ``output=`` gives.
KNOWN = (
    set(dir(builtins))
    | set(typing.__all__)
    | {"os", "datetime", "pandas", "polars", "pyarrow", "dask", "asyncio", "collections", "abc"}
)
#: The aliases the reference explains: the public names of ``surveillance.types`` (each with
#: its own entry), of ``surveillance.publish`` and of the package.
EXPLAINED = set(sv.types.__all__) | set(sv.publish.__all__) | set(sv.__all__)

#: Classes that users make themselves: their constructor is documented as a call is.
CONSTRUCTED = {sv.Client, sv.AsyncClient, sv.Limits, sv.Emulator}


def _methods(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The public methods that ``cls`` defines or inherits from the package (not from
    ``object``, ``dict`` or an exception), properties and fields aside."""
    for attr in sorted(dir(cls)):
        if attr.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, attr)
        if isinstance(raw, (classmethod, staticmethod)):
            raw = raw.__func__
        if not (inspect.isfunction(raw) or inspect.ismethoddescriptor(raw)):
            continue
        if inspect.ismethoddescriptor(raw) and not inspect.isroutine(raw):
            continue  # a native class's field
        owner = getattr(raw, "__objclass__", None)
        module = getattr(owner, "__module__", None) or getattr(raw, "__module__", "") or ""
        if module.startswith("surveillance"):
            yield attr, getattr(cls, attr)


def public_callables() -> dict[str, Callable[..., Any]]:
    """Every public function of ``surveillance.__all__``, the constructors of its classes that
    users make, and every public method of its classes, by name."""
    found: dict[str, Callable[..., Any]] = {}
    for name in sv.__all__:
        obj = getattr(sv, name)
        if name.startswith("__"):
            continue
        if inspect.isclass(obj):
            if typing.is_typeddict(obj) or getattr(obj, "_is_protocol", False):
                continue  # records and method types: read, not called
            if obj in CONSTRUCTED:
                found[name] = obj
            for attr, method in _methods(obj):
                found[f"{name}.{attr}"] = method
        elif inspect.isroutine(obj):
            found[name] = obj  # a function (the aliases of surveillance.types are not calls)
    return found


CALLABLES = public_callables()


def _sections(doc: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\s*(\w+):\s*$", doc, re.M)}


def _parameters(call: Callable[..., Any]) -> list[str]:
    try:
        params = inspect.signature(call).parameters
    except (TypeError, ValueError):
        return []
    return [p for p in params if p not in ("self", "cls")]


def _returns_nothing(call: Callable[..., Any]) -> bool:
    if inspect.isclass(call):
        return True  # a constructor returns its instance
    try:
        returned = inspect.signature(call).return_annotation
    except (TypeError, ValueError):
        return False
    return returned in (None, "None")


def test_the_reference_counts_every_public_callable():
    names = set(CALLABLES)
    assert {"Client", "Client.events", "Client.publish", "AsyncClient.event_batches"} <= names
    assert {"Emulator.client", "validate", "write_parquet", "scan_events"} <= names
    assert {"PublishReport.raise_on_failure", "SyncResult.raise_if_incomplete"} <= names
    assert len(names) > 80


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_every_public_callable_documents_its_call(name):
    """Parameters (``Args:``), the result (``Returns:`` or ``Yields:``, but where it returns
    None), the errors (``Raises:``, or "Raises nothing") and an example (``>>>``)."""
    call = CALLABLES[name]
    doc = inspect.getdoc(call) or ""
    sections = _sections(doc)
    missing = []
    if _parameters(call) and "Args" not in sections:
        missing.append("Args:")
    if not _returns_nothing(call) and not sections & {"Returns", "Yields"}:
        missing.append("Returns:")
    if "Raises" not in sections and "Raises nothing" not in doc:
        missing.append("Raises:")
    if ">>>" not in doc:
        missing.append("an example")
    assert not missing, f"{name} lacks {', '.join(missing)}"


def _names(text: str) -> set[str]:
    """The dotted names of an annotation's or a default's text, each by its first part."""
    return {m.group(1) for m in re.finditer(r"(?<![\w.'\"])([A-Za-z_]\w*)(?:\.\w+)*", text)}


def _shown(call: Callable[..., Any]) -> list[tuple[str, str]]:
    """What ``inspect.signature`` shows of ``call``: (what, text) for each annotation, default
    and the result."""
    try:
        sig = inspect.signature(call)
    except (TypeError, ValueError):
        return []

    def text(annotation: Any) -> str:
        # A string (``from __future__ import annotations``) is shown as it is written.
        return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)

    shown = []
    for p in sig.parameters.values():
        if p.annotation is not p.empty:
            shown.append((f"the annotation of {p.name}", text(p.annotation)))
        if p.default is not p.empty:
            shown.append((f"the default of {p.name}", repr(p.default)))
    if sig.return_annotation is not sig.empty:
        shown.append(("the result", text(sig.return_annotation)))
    return shown


#: Every class of ``surveillance.__all__`` that is made by a call (results and exceptions
#: included: their signature is shown at the head of their entry), records aside.
CLASSES = {
    name: obj
    for name, obj in ((n, getattr(sv, n)) for n in sv.__all__)
    if inspect.isclass(obj)
    and not (typing.is_typeddict(obj) or getattr(obj, "_is_protocol", False))
}


@pytest.mark.parametrize("name", sorted(set(CALLABLES) | set(CLASSES)))
def test_signatures_show_only_what_the_reference_explains(name):
    call = CALLABLES.get(name, CLASSES.get(name))
    for what, text in _shown(call):
        assert "Ellipsis" not in text and "..." not in text, f"{name}: {what} is {text}"
        if what.startswith("the default"):
            assert not re.search(r"\b_\w", text), f"{name}: {what} is {text}"
            continue
        for word in _names(text):
            assert not word.startswith("_"), f"{name}: {what} names the private {word}"
            assert word in KNOWN | EXPLAINED, f"{name}: {what} names {word}, unexplained"
        if what == "the result":
            assert text != "Any", f"{name}: its result shows as Any"


@pytest.fixture(scope="module")
def namespace(_reference_emulator):
    """What the examples find, as the doctests of the package do (the conftest.py beside
    pyproject.toml): the package as ``sv``, the emulator of the examples as ``emu``, and a
    client of each kind of it."""
    emu = _reference_emulator
    client = emu.client()
    async_client = emu.async_client()
    yield {"sv": sv, "emu": emu, "client": client, "async_client": async_client}
    client.close()
    async_client.close()


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_the_examples_run(name, namespace):
    call = CALLABLES[name]
    finder = doctest.DocTestFinder(recurse=False)
    # The names of the module that defines it, as pytest's --doctest-modules gives them.
    module = sys.modules.get(getattr(call, "__module__", None) or "surveillance")
    globs = {**vars(module or sv), **namespace}
    tests = [t for t in finder.find(call, name, globs=globs) if t.examples]
    assert tests, f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    assert runner.failures == 0, f"{name}: {runner.failures} of its examples failed (above)"
