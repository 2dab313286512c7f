"""The layering check of run-tests (tests/check_layers.py) passes on this tree and fails on
each breach it guards against: an import loop in Rust or Python, the client importing the
emulator, the core naming the bindings."""

from __future__ import annotations

import pathlib
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
    # emulator.py already imports the client under TYPE_CHECKING; publish/prepare.rs names
    # items of publish/mod.rs, which uses it.
    prepend(tree / "python/surveillance/client.py", "from typing import TYPE_CHECKING")
    with open(tree / "python/surveillance/client.py", "a") as f:
        f.write("\nif TYPE_CHECKING:\n    from .emulator import Emulator\n")
    assert check(tree).returncode == 0
