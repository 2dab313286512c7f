"""The layering rules of the house, checked by ``run-tests`` before anything is built.

1. The core knows nothing of Python: only ``src/python`` (behind the ``python`` feature) names
   PyO3 or the bindings.
2. The client and the emulator do not import each other outside their tests: both read the
   crate's neutral modules (``webhook``, ``limits``, ``time``, ``rng``, ``text``), so the test
   server is its own reading of the spec.
3. No import loop: neither between the Rust files of the crate (``use`` and paths through
   ``crate::``, ``super::``, ``self::`` or a child module; a child naming its parent module's
   own items is not an arrow) nor between the modules of the Python package (imports under
   ``if TYPE_CHECKING:`` aside).

4. A file holds one concern: no Rust file under ``src/`` is over 800 lines, not counting its
   ``#[cfg(test)] mod tests`` and the test files (``tests.rs``, ``tests/``), and no file of the
   Python package either. No generated data table is allowed more today; the files not yet
   split are named in ``LONG_FOR_NOW`` and ``PY_LONG_FOR_NOW``.
5. Names explain themselves: no two Rust types (struct, enum, trait, type alias) outside tests
   share a name; the pairs not yet renamed are named in ``SHARED_NAMES_FOR_NOW``.
6. Imports at the top: an import inside a function of the Python package says why on its line
   or the comment line above it: ``# cycle: ...`` for one of the package's modules, which must
   then import this one when it is imported (else the import belongs at the top), ``# optional:
   NAME`` for an optional heavy dependency (``OPTIONAL``), ``# platform: NAME`` for a module of
   one platform (``PLATFORM``). Anything else goes to the top of the module.
7. Names explain themselves (continued): no Rust function outside tests and the bindings
   returns a tuple of three or more (``TUPLES`` names the exceptions); ``@overload`` stands
   only in ``_overloads.py`` (the ``output=`` typing of each family, shared by both clients),
   ``_check.py`` and the stubs; a binding lets go of the GIL through ``runtime::detach`` only.
8. One resolver reads the settings: ``python/surveillance/_config.py`` alone reads the
   environment (``os.environ``, ``os.getenv``) in the Python package, and no Rust code (the
   core, the emulator or the bindings) reads a ``SURVEILLANCE_*`` variable (a lookup, through
   ``std::env`` or a function or closure of the environment, of a ``"SURVEILLANCE_..."``
   literal): the native client takes what the resolver resolved. The Rust code reads only
   the platform's variables (``HOME``, ``XDG_CACHE_HOME``, ``SSL_CERT_FILE``, proxies...).
   The emulator reads none of its own.
9. The binding sits above the package it serves: the native module imports no module of the
   Python package but ``surveillance.errors`` (the exception classes it raises); times, the
   results' text and HTML, the report's DataFrame are the binding's own.
10. The events planner (``src/client/events/``) reads as a planner: no function of it is over
   ``PLANNER_MAX_FN`` lines, and none takes a bare ``bool`` (a mode says what it is: a goal,
   an enum); each field of its state (``struct Planner``) is written only by the files that
   own it (``PLANNER_OWNERS``), and each field of a window (``struct Window``) only by
   ``window.rs``, whose calls name each change of a window's state: a file that writes
   another's is a breach. The planner's own
   files (``PLANNER_PURE``) do no I/O: no client, no task, no ``await``, no file, no clock
   (its driver, ``run.rs``, does all of that, and hands it the time).

Run as ``python3 tests/check_layers.py`` from the project's root; exits 1 naming each breach.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

SRC = pathlib.Path("src")
PACKAGE = pathlib.Path("python/surveillance")
CORE = ("client", "emulator", "webhook", "limits.rs", "time.rs", "rng.rs", "text.rs")
MAX_LINES = 800
# Files over MAX_LINES (tests aside) still to split by concern; none may grow past its size here.
LONG_FOR_NOW: dict[str, int] = {}
# Type names that two modules still share (to rename); a new pair is a breach.
SHARED_NAMES_FOR_NOW: set[str] = set()


PLANNER = SRC / "client" / "events"
PLANNER_MAX_FN = 80
# The planner's own files, which do no I/O; the others of the folder are its driver (`run.rs`,
# `count.rs`), the page's request and parsing (`page.rs`), the cache's files (`files.rs`) and
# the pages held or carried between fetches (`held.rs`, `carry.rs`).
PLANNER_PURE = (
    "mod.rs",
    "book.rs",
    "fetch.rs",
    "search.rs",
    "seek.rs",
    "done.rs",
    "cached.rs",
    "progress.rs",
    "window.rs",
)
# What I/O looks like in Rust: the client and its parts, tasks and awaits, files, the clock.
_IO = re.compile(
    r"\bClient\b|\basync\b|\.await\b|\btokio::|\bstd::fs\b|\bfetch_page\b|\.(?:http|cache|held|"
    r"shape|config)\(\)|\bInstant::now\b|\.elapsed\(\)|\bSystemTime\b|\bnow_ms\b"
)
# The one file that writes each field of the planner's state (`struct Planner`); a field not
# named is written where it is made only. The others change it through that file's calls.
PLANNER_OWNERS: dict[str, str] = {
    "windows": "book.rs",
    "queue": "book.rs",
    "next_id": "book.rs",
    "notes": "book.rs",
    "frontier": "done.rs",
    "counted": "done.rs",
    "predicted": "done.rs",
    "replaced": "done.rs",
    "densest": "done.rs",
    "progress": "progress.rs",
    "expected_at": "progress.rs",
    "density": "search.rs",
    "precision": "search.rs",
    "goal": "fetch.rs",
    "sorting": "fetch.rs",
    "sent": "fetch.rs",
    "stage": "fetch.rs",
    "cache_writes": "cached.rs",
}
# A write of a field: assigned, or changed through a method that changes it.
_WRITE = (
    r"(?:\.\w+)*(?:\s*(?:=(?![=>])|\+=|-=|\|=)|\.(?:insert|push|push_back|push_front|extend|"
    r"remove|retain|take|clear|pop_front|abort_all|spawn|join_next|values_mut|get_mut|entry|"
    r"append|truncate|sort\w*)\()"
)


# --- Rust ---------------------------------------------------------------------------------------
def _module_dir(f: pathlib.Path) -> pathlib.Path:
    """The folder that stands for the module of file `f` (`a/mod.rs` and `a.rs`: `a`)."""
    if f.name in ("mod.rs", "lib.rs"):
        return f.parent
    return f.with_suffix("")


def _file_of(parts: list[str], base: pathlib.Path) -> pathlib.Path | None:
    """The deepest file that a path's segments under `base` reach."""
    found = None
    here = base
    for p in parts:
        here = here / p
        if (here.with_suffix(".rs")).is_file():
            found = here.with_suffix(".rs")
        elif (here / "mod.rs").is_file():
            found = here / "mod.rs"
        else:
            break
    return found


def _expand(tree: str) -> list[str]:
    """The paths of a `use` tree: `a::{b, c::{d, e}}` -> `a::b`, `a::c::d`, `a::c::e`."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    head, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    return [p for item in items if item.strip() for p in _expand(head + item.strip())]


def _test_files(texts: dict[pathlib.Path, str]) -> set[pathlib.Path]:
    """Files that are test modules as a whole (`#[cfg(test)] mod x;`)."""
    tests = set()
    for f, t in texts.items():
        for m in re.findall(r"#\[cfg\(test\)\]\s*mod (\w+);", t):
            tests |= {_module_dir(f) / f"{m}.rs", _module_dir(f) / m / "mod.rs"}
    return tests


def rust_imports() -> dict[pathlib.Path, set[pathlib.Path]]:
    """File -> the files it names, outside tests."""
    texts = {f: f.read_text() for f in SRC.rglob("*.rs")}
    tests = _test_files(texts)
    graph: dict[pathlib.Path, set[pathlib.Path]] = {}
    for f, t in texts.items():
        if f in tests:
            continue
        code = re.split(r"#\[cfg\(test\)\]\s*mod tests \{", t)[0]
        code = re.sub(r"//[^\n]*", "", code)
        children = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+);", code, re.M))
        paths = [p for u in re.findall(r"\buse\s+([^;]+);", code, re.S) for p in _expand(u)]
        paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", code)
        here = _module_dir(f)
        out = set()
        for path in paths:
            parts = [p for p in re.split(r"\s*::\s*", path.split(" as ")[0].strip()) if p]
            if not parts:
                continue
            if parts[0] == "crate":
                base, rest = SRC, parts[1:]
            elif parts[0] == "super":
                base, rest = here.parent, parts[1:]
                while rest and rest[0] == "super":
                    base, rest = base.parent, rest[1:]
            elif parts[0] == "self":
                base, rest = here, parts[1:]
            elif parts[0] in children:
                base, rest = here, parts
            else:
                continue
            target = _file_of(rest, base) if rest else None
            if target is None:
                target = base / "mod.rs" if (base / "mod.rs").is_file() else None
                if base == SRC:
                    target = SRC / "lib.rs"
            # A module's own items (its mod.rs) are its children's context, as farm-studio
            # reads it: a child naming them is not an arrow of a loop.
            inside = target is not None and target.name in ("mod.rs", "lib.rs")
            if inside and f.is_relative_to(target.parent):
                continue
            if target is not None and target != f and target not in tests:
                out.add(target)
        graph[f] = out
    return graph


def product_code() -> dict[pathlib.Path, str]:
    """Each Rust file under src/ that is not a test file -> its text before its test module."""
    texts = {f: f.read_text() for f in SRC.rglob("*.rs")}
    tests = _test_files(texts)
    return {
        f: re.split(r"#\[cfg\(test\)\]\s*mod tests \{", t)[0]
        for f, t in texts.items()
        if f not in tests and f.name != "tests.rs" and "tests" not in f.relative_to(SRC).parts
    }


def long_files(code: dict[pathlib.Path, str]) -> list[str]:
    """Files over MAX_LINES lines, tests aside (or over their size in LONG_FOR_NOW)."""
    bad = []
    for f, text in sorted(code.items()):
        lines = len(text.rstrip("\n").split("\n"))
        limit = max(MAX_LINES, LONG_FOR_NOW.get(f.as_posix(), 0))
        if lines > limit:
            bad.append(f"{f}: {lines} lines (tests aside) over {limit}: split it by concern")
    return bad


def shared_type_names(code: dict[pathlib.Path, str]) -> list[str]:
    """Type names (struct, enum, trait, type alias, at a file's top level) two files declare."""
    where: dict[str, list[pathlib.Path]] = {}
    item = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type)\s+(\w+)", re.M)
    for f, text in sorted(code.items()):
        for name in dict.fromkeys(item.findall(text)):
            where.setdefault(name, []).append(f)
    return [
        f"type `{name}` is declared in " + " and ".join(map(str, files)) + ": rename one"
        for name, files in sorted(where.items())
        if len(files) > 1 and name not in SHARED_NAMES_FOR_NOW
    ]


def _rust_functions(text: str) -> list[tuple[str, str, int, int]]:
    """(name, signature, first line, lines) of each function with a body in `text`, its
    strings, characters and comments skipped when its braces are matched."""
    out = []
    for m in re.finditer(
        r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?fn\s+(\w+)", text, re.M
    ):
        i, depth, sig_end = m.end(), 0, None
        while i < len(text):
            ch = text[i]
            if text.startswith("//", i):
                i = text.find("\n", i)
                i = len(text) if i < 0 else i
                continue
            if ch == '"':
                i += 1
                while i < len(text) and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif ch == "'" and re.match(r"'(\\.|[^\\'])'", text[i : i + 4]):
                i = text.index("'", i + 1 + (text[i + 1] == "\\"))
            elif ch == ";" and sig_end is None and depth == 0:
                break
            elif ch == "{":
                sig_end = i if sig_end is None else sig_end
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    first = text.count("\n", 0, m.start()) + 1
                    last = text.count("\n", 0, i) + 1
                    out.append((m.group(1), text[m.end() : sig_end], first, last - first + 1))
                    break
            i += 1
    return out


def planner_breaches(code: dict[pathlib.Path, str]) -> list[str]:
    """Rule 8: the planner's functions short, and none switched by a bare `bool`."""
    bad = []
    for f, text in sorted(code.items()):
        if not f.is_relative_to(PLANNER):
            continue
        for name, signature, line, lines in _rust_functions(text):
            if lines > PLANNER_MAX_FN:
                bad.append(
                    f"{f}:{line}: `{name}` is {lines} lines, over {PLANNER_MAX_FN}: split it"
                )
            if re.search(r"\w+\s*:\s*bool\b", signature):
                bad.append(f"{f}:{line}: `{name}` takes a bare `bool`: say the mode with a type")
    return bad + planner_owners(code) + window_owner(code) + planner_io(code)


def planner_io(code: dict[pathlib.Path, str]) -> list[str]:
    """Rule 10: the planner's own files do no I/O (outside their tests)."""
    bad = []
    for f, text in sorted(code.items()):
        if f.parent != PLANNER or f.name not in PLANNER_PURE:
            continue
        tests = text.find("#[cfg(test)]\nmod tests {")
        for m in _IO.finditer(text[: tests if tests >= 0 else len(text)]):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(
                f"{f}:{line}: `{m.group(0)}` in the planner, which does no I/O: its driver "
                "(run.rs) does"
            )
    return bad


def _planner_fields(name: str) -> tuple[list[str], list[str]]:
    """The fields of the planner's `struct <name>` (in its mod.rs), and the breach when there is
    no such struct to check."""
    declared = (PLANNER / "mod.rs").read_text()
    body = re.search(rf"\nstruct {name} \{{(.*?)\n\}}", declared, re.S)
    if body is None:
        return [], [f"{PLANNER / 'mod.rs'}: no `struct {name}` to check"]
    return re.findall(r"^\s+(\w+):", body.group(1), re.M), []


def planner_owners(code: dict[pathlib.Path, str]) -> list[str]:
    """Rule 8: each field of the planner's state written only by the files that own it."""
    fields, bad = _planner_fields("Planner")
    for f, text in sorted(code.items()):
        if not f.is_relative_to(PLANNER):
            continue
        for name in fields:
            owner = PLANNER_OWNERS.get(name)
            written = re.search(rf"\b(?:self|p)\.{name}{_WRITE}|&mut (?:self|p)\.{name}\b", text)
            if written and f.name != owner and not _makes(text, written.start()):
                line = text.count("\n", 0, written.start()) + 1
                owned = owner or "the planner's maker"
                bad.append(f"{f}:{line}: writes `{name}`, which {owned} owns")
    return bad


def window_owner(code: dict[pathlib.Path, str]) -> list[str]:
    """Rule 10: each field of a window written only by window.rs (where it is made aside)."""
    fields, bad = _planner_fields("Window")
    names = "|".join(fields)
    write = re.compile(rf"\b\w+\.({names}){_WRITE}|&mut \w+\.({names})\b")
    for f, text in sorted(code.items()):
        if f.parent != PLANNER or f.name not in PLANNER_PURE or f.name == "window.rs":
            continue
        tests = text.find("#[cfg(test)]\nmod tests {")
        for m in write.finditer(text[: tests if tests >= 0 else len(text)]):
            line = text.count("\n", 0, m.start()) + 1
            name = m.group(1) or m.group(2)
            bad.append(
                f"{f}:{line}: writes a window's `{name}`, which window.rs owns: call the change "
                "it names there"
            )
    return bad


def _makes(text: str, at: int) -> bool:
    """Whether the write at `at` is in the function that makes the planner (`Planner::new`)."""
    return any(
        name == "new" and first <= text.count("\n", 0, at) + 1 < first + lines
        for name, _, first, lines in _rust_functions(text)
    )


# Functions that may return a tuple of three or more, with the reason.
TUPLES = {"civil_from_days": "(year, month, day), as the algorithm it implements states it"}


def _tuple_parts(text: str) -> int:
    """How many parts the tuple at the start of `text` (which opens with `(`) has."""
    depth, parts = 0, 1
    for ch in text:
        depth += ch in "(<["
        depth -= ch in ")>]"
        if depth == 0:
            return parts
        if ch == "," and depth == 1:
            parts += 1
    return parts


def long_tuples(code: dict[pathlib.Path, str]) -> list[str]:
    """Functions returning a tuple of three or more (`-> (a, b, c)`, `-> Result<(a, b, c)>`,
    `-> Vec<(a, b, c)>`): its parts want names, in a struct. A binding's function hands Python
    a tuple, which Python unpacks by name at once, and is left out."""
    bad = []
    fn = re.compile(r"fn (\w+)[^{;]*?->\s*(?:\w+<)?(\()")
    for f, text in sorted(code.items()):
        for m in fn.finditer(text):
            parts = _tuple_parts(text[m.start(2) :])
            attributes = text[: m.start()].rsplit("\n\n", 1)[-1]
            if "#[pyfunction]" in attributes or "#[pyo3(" in attributes:
                continue
            if parts >= 3 and m.group(1) not in TUPLES:
                bad.append(f"{f}: `{m.group(1)}` returns a tuple of {parts}: name its parts")
    return bad


# Where a binding may let go of the GIL with pyo3's own `detach`: the runtime's `detach`, which
# holds a thread that would take the GIL back once the interpreter exits (a daemon thread's
# call), instead of letting CPython end it inside the extension (an abort).
DETACH_IN = {"src/python/runtime/mod.rs"}


def bare_detaches(code: dict[pathlib.Path, str]) -> list[str]:
    """The bindings let go of the GIL through `runtime::detach` only."""
    return [
        f"{f}: `.detach(` outside runtime/mod.rs: use `runtime::detach(py, ...)`"
        for f, text in sorted(code.items())
        if f.as_posix() not in DETACH_IN and re.search(r"\.detach\(", text)
    ]


# --- Python -------------------------------------------------------------------------------------
# Python files over MAX_LINES still to split by concern; none may grow past its size here.
PY_LONG_FOR_NOW: dict[str, int] = {}
# Files whose imports inside functions are still to sort out.
LATE_IMPORTS_FOR_NOW: set[str] = set()
# What may be imported inside a function, with its reason in a comment on the line or the
# comment line just above it: `# optional: pandas`, `# platform: fcntl`, `# cycle: a <-> b`.
OPTIONAL = {
    "pandas", "polars", "pyarrow", "dask", "distributed", "dlt", "matplotlib", "tqdm",
    "ipywidgets", "IPython", "arro3", "opentelemetry",
}  # fmt: skip
PLATFORM = {"fcntl", "msvcrt", "winreg"}
REASON = re.compile(r"#\s*(cycle|optional|platform):")


def _module_name(f: pathlib.Path) -> list[str]:
    """`python/surveillance/cli/sync.py` -> ["surveillance", "cli", "sync"]."""
    parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _file_of_module(parts: list[str]) -> pathlib.Path | None:
    """The package's Python file of a dotted module name, if it is one."""
    here = PACKAGE.parent.joinpath(*parts)
    for f in (here.with_suffix(".py"), here / "__init__.py"):
        if f.is_file():
            return f
    return None


def _is_extension(parts: list[str]) -> bool:
    """A compiled module (`_core`), known by its stubs: not a file of the import graph."""
    return PACKAGE.parent.joinpath(*parts).with_suffix(".pyi").is_file()


def _imported(
    f: pathlib.Path, node: ast.Import | ast.ImportFrom
) -> list[tuple[str, pathlib.Path | None]]:
    """(the name as written, the package's file it loads or None) of each name of an import."""
    if isinstance(node, ast.Import):
        return [
            (
                a.name,
                _file_of_module(a.name.split(".")) if a.name.startswith("surveillance") else None,
            )
            for a in node.names
        ]
    if node.level:
        base = _module_name(f)
        if f.name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
    else:
        base = []
    mod = base + (node.module.split(".") if node.module else [])
    if not mod or mod[0] != "surveillance":
        return [(node.module or "", None)]
    out = []
    for a in node.names:
        if _is_extension(mod + [a.name]):
            continue
        sub = _file_of_module(mod + [a.name])  # `from . import x`: the module x
        out.append(
            ("." * node.level + ".".join(mod[len(base) :] + [a.name]), sub or _file_of_module(mod))
        )
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    return {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }


def _local_imports(tree: ast.AST) -> set[int]:
    """The imports inside a function (run at call time, not at import time)."""
    return {
        id(n)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(fn)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }


def python_files() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def python_imports() -> dict[pathlib.Path, set[pathlib.Path]]:
    """Module -> the package's modules it imports when it is imported (imports inside functions
    and under `if TYPE_CHECKING:` aside)."""
    graph: dict[pathlib.Path, set[pathlib.Path]] = {}
    for f in python_files():
        tree = ast.parse(f.read_text(), str(f))
        skip = _type_checking_nodes(tree) | _local_imports(tree)
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
                out |= {t for _, t in _imported(f, node) if t is not None and t != f}
        graph[f] = out
    return graph


def _reaches(
    graph: dict[pathlib.Path, set[pathlib.Path]], start: pathlib.Path, goal: pathlib.Path
) -> bool:
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        if v == goal:
            return True
        if v not in seen:
            seen.add(v)
            todo.extend(graph.get(v, ()))
    return False


def local_import_breaches(graph: dict[pathlib.Path, set[pathlib.Path]]) -> list[str]:
    """Imports inside functions without their reason: a package module imported late must close
    a loop of import-time imports (`# cycle:`), anything else must be an optional heavy
    dependency (`# optional:`) or a platform's own module (`# platform:`)."""
    bad = []
    for f in python_files():
        if f.as_posix() in LATE_IMPORTS_FOR_NOW:
            continue
        text = f.read_text()
        lines = text.split("\n")
        tree = ast.parse(text, str(f))
        local = _local_imports(tree)
        for node in ast.walk(tree):
            if id(node) not in local:
                continue
            assert isinstance(node, (ast.Import, ast.ImportFrom))
            said = lines[node.lineno - 1]
            above = node.lineno - 2
            while above >= 0 and lines[above].strip().startswith("#"):
                said += "\n" + lines[above]
                above -= 1
            reason = REASON.search(said)
            why = reason.group(1) if reason else None
            for name, target in _imported(f, node):
                where = f"{f}:{node.lineno}: `{name}` imported inside a function"
                top = name.lstrip(".").split(".")[0]
                if target is not None:
                    if why != "cycle":
                        bad.append(f"{where}: move it to the top, or say `# cycle: ...`")
                    elif not _reaches(graph, target, f):
                        bad.append(
                            f"{where}: no import-time loop back to this module: move it to the top"
                        )
                elif top in OPTIONAL:
                    if why != "optional":
                        bad.append(f"{where}: say `# optional: {top}`")
                elif top in PLATFORM:
                    if why != "platform":
                        bad.append(f"{where}: say `# platform: {top}`")
                else:
                    bad.append(f"{where}: not an optional heavy dependency: move it to the top")
    return bad


# Where `@overload` may stand: the families of `output=` typing, written once for both
# clients, and the argument checks; the stubs mirror the binding.
OVERLOADS_IN = {"python/surveillance/_overloads.py", "python/surveillance/_check.py"}


def overload_ladders() -> list[str]:
    """A method typed per `output=` takes its family from `_overloads.py` instead of writing
    its own ladder of `@overload`s."""
    return [
        f"{f}: `@overload` outside _overloads.py: type it with its family there"
        for f in python_files()
        if f.as_posix() not in OVERLOADS_IN
        and re.search(r"^\s*@(typing\.)?overload\b", f.read_text(), re.M)
    ]


def python_long_files() -> list[str]:
    bad = []
    for f in python_files() + sorted(PACKAGE.rglob("*.pyi")):
        lines = len(f.read_text().rstrip("\n").split("\n"))
        limit = max(MAX_LINES, PY_LONG_FOR_NOW.get(f.as_posix(), 0))
        if lines > limit:
            bad.append(f"{f}: {lines} lines over {limit}: split it by concern")
    return bad


#: The one Python module that reads the environment.
RESOLVER = "python/surveillance/_config.py"
#: A lookup of a `SURVEILLANCE_*` variable in Rust: `std::env::var("SURVEILLANCE_X")`, a call
#: of a function or closure of the environment (`env(..)`, `var(..)`, `from_env(env, ..)`)
#: with such a literal, or any call that hands the environment (`env`) and such a literal.
RUST_ENV_READ = re.compile(
    r"\b(?:var|var_os|env|from_env|\w*_env)\s*\(\s*(?:[\w&]+\s*,\s*)?\"SURVEILLANCE_\w*\""
    r"|\b\w+\s*\((?:[^()\"]|\"[^\"]*\")*?\benv\b(?:[^()\"]|\"[^\"]*\")*?\"SURVEILLANCE_\w*\""
)


def environment_reads() -> list[str]:
    """The places that read the environment besides the one resolver (rule 8)."""
    bad = []
    for f, text in product_code().items():
        for m in RUST_ENV_READ.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(
                f"{f}:{line}: reads a SURVEILLANCE_ variable: the setting is resolved by "
                f"{RESOLVER} and given to the core"
            )
    for f in python_files():
        if f.as_posix() == RESOLVER:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            read = (
                isinstance(node, ast.Attribute)
                and node.attr in ("environ", "environb", "getenv", "getenvb")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "os"
                and any(a.name in ("environ", "getenv") for a in node.names)
            )
            if read:
                bad.append(
                    f"{f}:{node.lineno}: reads the environment: read it in {RESOLVER} "
                    "(the one resolver of the settings)"
                )
    return bad


def cycles(graph: dict[pathlib.Path, set[pathlib.Path]]) -> list[list[pathlib.Path]]:
    """One loop through each strongly connected group of more than one file."""
    index: dict[pathlib.Path, int] = {}
    low: dict[pathlib.Path, int] = {}
    stack: list[pathlib.Path] = []
    groups = []

    def visit(v: pathlib.Path) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


# The package's modules that the native module may import: the exceptions it raises.
BINDING_IMPORTS = {"surveillance.errors"}
# Where the binding names a module to import: `py.import("m")`, `PyModule::import(py, "m")`,
# `PyOnceLock::import(py, "m", "name")`, `import_exception!(m, Name)`.
_BINDING_IMPORT = re.compile(
    r'\bimport\(\s*(?:\w+(?:\(\))?\s*,\s*)?"([\w.]+)"|import_exception!\(\s*([\w.]+)\s*,'
)


def binding_imports() -> list[str]:
    """The package's modules that the native module imports besides ``BINDING_IMPORTS``."""
    bad = []
    for f in sorted((SRC / "python").rglob("*.rs")):
        text = f.read_text()
        for m in _BINDING_IMPORT.finditer(text):
            module = m.group(1) or m.group(2)
            if module.split(".")[0] == "surveillance" and module not in BINDING_IMPORTS:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(
                    f"{f}:{line}: the binding imports `{module}`: the native module needs "
                    f"nothing of the package but {', '.join(sorted(BINDING_IMPORTS))}"
                )
    return bad


def main() -> int:
    bad = []
    rust = rust_imports()
    python_layer = SRC / "python"
    for f, targets in rust.items():
        text = f.read_text()
        if not f.is_relative_to(python_layer) and f.relative_to(SRC).parts[0] in CORE:
            if re.search(r"\bpyo3\b|crate::python\b", text.split("#[cfg(test)]")[0]):
                bad.append(f"{f}: the core names the Python bindings")
        for part, other in (("client", "emulator"), ("emulator", "client")):
            if f.is_relative_to(SRC / part):
                for t in targets:
                    if t.is_relative_to(SRC / other):
                        bad.append(f"{f} imports {t}: the {part} and the {other} stay apart")
    code = product_code()
    bad += long_files(code) + shared_type_names(code) + long_tuples(code) + bare_detaches(code)
    bad += binding_imports()
    bad += planner_breaches(code)
    python = python_imports()
    bad += python_long_files() + local_import_breaches(python) + overload_ladders()
    bad += environment_reads()
    for kind, graph in (("Rust", rust), ("Python", python)):
        for group in cycles(graph):
            bad.append(f"{kind} import loop: " + " <-> ".join(map(str, group)))
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
