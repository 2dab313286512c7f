"""``./run-tests`` installs into a virtual environment of its own (``.venv``, made when missing),
never into the interpreter on PATH: run here with stand-ins for Python and cargo that record
what they are asked, so that nothing is installed and nothing leaves the machine."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: A stand-in for an interpreter: logs its command line; `-m venv DIR` makes DIR/bin/python, a
#: copy of itself; everything else succeeds.
FAKE_PYTHON = """#!/bin/sh
echo "$0 $*" >>"$RUN_TESTS_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    for dir; do :; done
    mkdir -p "$dir/bin"
    cp "$0" "$dir/bin/python"
fi
exit 0
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def sandbox(tmp_path):
    """A directory holding only a copy of run-tests, stand-ins for cargo and rustup first on
    PATH, two stand-in interpreters, and the log they all write to."""
    if shutil.which("bash") is None:
        pytest.skip("run-tests is a bash script")
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ROOT / "run-tests", repo / "run-tests")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cargo", "rustup"):
        _executable(bin_dir / tool, '#!/bin/sh\necho "cargo-or-rustup $*" >>"$RUN_TESTS_LOG"\n')
    log = tmp_path / "log"
    log.touch()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "VENV", "PYTHON")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        RUN_TESTS_LOG=str(log),
        SURVEILLANCE_QUOTA_DIR=str(tmp_path / "quota"),
    )
    pythons = [_executable(tmp_path / f"python{i}", FAKE_PYTHON) for i in (1, 2)]
    return repo, env, log, pythons


def _run(repo: Path, env: dict, log: Path, python: Path) -> list:
    log.write_text("")
    out = subprocess.run(
        ["bash", str(repo / "run-tests")],
        env=dict(env, PYTHON=str(python)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return log.read_text().splitlines()


def test_run_tests_installs_into_its_own_virtual_environment(sandbox):
    repo, env, log, (python, other) = sandbox
    venv_python = str(repo / ".venv" / "bin" / "python")

    lines = _run(repo, env, log, python)
    # The interpreter on PATH only makes the environment: no pip, no build, no pytest.
    assert [line for line in lines if line.startswith(str(python))] == [
        f"{python} -m venv --clear {repo / '.venv'}"
    ]
    installs = [line for line in lines if " -m pip install" in line]
    assert installs and all(line.startswith(venv_python + " ") for line in installs)
    assert any(line.startswith(f"{venv_python} -m pytest") for line in lines)

    # Made once: the next run uses it as it is.
    lines = _run(repo, env, log, python)
    assert not [line for line in lines if line.startswith(str(python))]
    assert any(line.startswith(f"{venv_python} -m pip install") for line in lines)

    # PYTHON still chooses the interpreter: another one makes the environment again from it.
    lines = _run(repo, env, log, other)
    assert [line for line in lines if line.startswith(str(other))] == [
        f"{other} -m venv --clear {repo / '.venv'}"
    ]


def test_the_virtual_environment_is_ignored_by_git():
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "/.venv" in ignored or ".venv" in ignored or ".venv/" in ignored
