"""The layering check of run-tests (tests/check_layers.py) passes on this tree and fails on
each breach it guards against: an import loop in Rust or Python, the client importing the
emulator, the core naming the bindings, the binding importing a module of the package, a
second reader of the settings, the events planner's long functions, bare `bool` modes and
writes of another file's state."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECK = ROOT / "tests" / "check_layers.py"


def check(root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECK)], cwd=root, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def tree(tmp_path):
    """A copy of the crate's sources and of the Python package."""
    shutil.copytree(ROOT / "src", tmp_path / "src")
    shutil.copytree(ROOT / "python" / "surveillance", tmp_path / "python" / "surveillance")
    return tmp_path


def prepend(path: pathlib.Path, line: str) -> None:
    path.write_text(line + "\n" + path.read_text())


def test_this_tree_keeps_its_layers():
    done = check(ROOT)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "file, line, said",
    [
        ("src/webhook/messages.rs", "use super::problems::Problem;", "Rust import loop"),
        ("python/surveillance/_time.py", "from . import cli", "Python import loop"),
        ("src/client/stats.rs", "use crate::emulator::State;", "stay apart"),
        ("src/emulator/data.rs", "use crate::client::Limits;", "stay apart"),
        ("src/rng.rs", "use pyo3::prelude::*;", "names the Python bindings"),
    ],
)
def test_a_breach_fails_the_check(tree, file, line, said):
    prepend(tree / file, line)
    done = check(tree)
    assert done.returncode == 1
    assert said in done.stderr, done.stderr


def test_type_checking_imports_and_a_childs_use_of_its_parent_are_not_loops(tree):
    # The CLI imports _time; publish/prepare.rs names items of publish/mod.rs, which uses it.
    prepend(tree / "python/surveillance/_time.py", "from typing import TYPE_CHECKING")
    append(tree / "python/surveillance/_time.py", "\nif TYPE_CHECKING:\n    from . import cli\n")
    assert check(tree).returncode == 0


def append(path: pathlib.Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


@pytest.mark.parametrize(
    "file, text, said",
    [
        ("src/rng.rs", "// x\n" * 800, "split it by concern"),
        ("src/rng.rs", "pub struct Planner;\n", "type `Planner` is declared in"),
        ("src/rng.rs", "fn pull() -> (u8, bool, u8) { (0, true, 0) }\n", "name its parts"),
        (
            "src/python/conversions/arrow.rs",
            "fn f(py: Python<'_>) { py.detach(|| ()) }\n",
            "use `runtime::detach(py, ...)`",
        ),
        (
            "src/python/results/mod.rs",
            'fn f(py: Python<\'_>) { py.import("surveillance._time"); }\n',
            "the binding imports `surveillance._time`",
        ),
        (
            "src/python/publish/report.rs",
            "static C: PyOnceLock<Py<PyType>> = PyOnceLock::new();\n"
            'fn f(py: Python<\'_>) { C.import(py, "surveillance.publish", "PublishError"); }\n',
            "the binding imports `surveillance.publish`",
        ),
        (
            "python/surveillance/_time.py",
            "\nfrom typing import overload\n\n@overload\ndef f(x: int) -> int: ...\n",
            "`@overload` outside _overloads.py",
        ),
        ("python/surveillance/_time.py", "\nx = 1\n" * 800, "split it by concern"),
        ("python/surveillance/_time.py", "\ndef f():\n    import json\n", "move it to the top"),
        (
            "python/surveillance/_time.py",
            "\ndef f():\n    from . import errors  # cycle: none\n",
            "no import-time loop back to this module",
        ),
        (
            "python/surveillance/_time.py",
            "\ndef f():\n    import pandas\n",
            "say `# optional: pandas`",
        ),
    ],
)
def test_a_long_file_a_shared_name_or_a_late_import_without_its_reason_fails(
    tree, file, text, said
):
    if file.endswith(".rs"):  # before the file's tests, which the line count leaves out
        prepend(tree / file, text)
    else:
        append(tree / file, text)
    done = check(tree)
    assert done.returncode == 1
    assert said in done.stderr, done.stderr


def test_a_late_import_with_its_reason_passes(tree):
    # _time imports _check when it is imported, so _check can import _time only late.
    append(
        tree / "python/surveillance/_check.py",
        "\n\ndef f():\n    from . import _time  # cycle: _time imports _check\n"
        "    import pandas  # optional: pandas\n\n    return _time, pandas\n",
    )
    done = check(tree)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "file, code",
    [
        (
            "src/client/cache/disk.rs",
            'fn f() -> Option<String> { std::env::var("SURVEILLANCE_X").ok() }',
        ),
        (
            "src/python/client/mod.rs",
            "fn f(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {\n"
            '    env(\n        "SURVEILLANCE_CACHE",\n    )\n}',
        ),
        ("src/client/config.rs", 'fn f(e: E) { let _ = from_env(env, "SURVEILLANCE_REGION"); }'),
        ("src/client/config.rs", 'fn f() { let _ = required(s.x, env, "x", "SURVEILLANCE_X"); }'),
        ("python/surveillance/cli/config.py", "import os\nX = os.environ.get('SURVEILLANCE_X')"),
        ("python/surveillance/dlt.py", "from os import getenv"),
    ],
)
def test_a_second_reader_of_the_variables_fails(tree, file, code):
    prepend(tree / file, code)
    done = check(tree)
    assert done.returncode == 1
    assert re.search(rf"^{file}:[12]: reads .*_config\.py", done.stderr, re.M), done.stderr


def test_a_variable_named_in_a_message_is_no_read(tree):
    # The core names a setting's variable in its errors; the resolver reads it.
    message = 'fn f(arg: &str) -> String { format!("pass `{arg}=` or set `SURVEILLANCE_X`") }'
    prepend(tree / "src/client/config.rs", message)
    done = check(tree)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "text, said",
    [
        (
            "impl Planner {\n    fn grown(&mut self) {\n"
            + "        self.sent += 0;\n" * 80
            + "    }\n}\n",
            "`grown` is 82 lines, over 80: split it",
        ),
        (
            "impl Planner {\n    fn switched(&mut self, counting: bool) -> bool {\n"
            "        counting\n    }\n}\n",
            "`switched` takes a bare `bool`",
        ),
        (
            "impl Planner {\n    fn meddles(&mut self) {\n        self.frontier = 0;\n    }\n}\n",
            "writes `frontier`, which done.rs owns",
        ),
        (
            "impl Planner {\n    fn meddles(&mut self) {\n        self.windows.clear();\n"
            "    }\n}\n",
            "writes `windows`",
        ),
        (
            "impl Planner {\n    fn meddles(&mut self, w: &mut Window) {\n"
            "        w.mode = Mode::Walking;\n    }\n}\n",
            "writes a window's `mode`, which window.rs owns",
        ),
        (
            "impl Planner {\n    fn sends(&mut self, c: &crate::client::Client) {\n"
            "        let _ = c.held();\n    }\n}\n",
            "`Client` in the planner, which does no I/O",
        ),
        (
            "impl Planner {\n    fn waits(&mut self) -> bool {\n"
            "        std::time::Instant::now().elapsed().is_zero()\n    }\n}\n",
            "`Instant::now` in the planner, which does no I/O",
        ),
    ],
)
def test_a_planner_function_too_long_a_bool_mode_or_a_write_of_anothers_state_fails(
    tree, text, said
):
    append(tree / "src/client/events/seek.rs", "\n" + text)
    done = check(tree)
    assert done.returncode == 1
    assert said in done.stderr, done.stderr
