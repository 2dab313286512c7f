"""``./run-tests`` installs into a virtual environment of its own (``.venv``, made when missing),
never into the interpreter on PATH, and ``./build-wheels`` tests the wheel in another one, made
new, with no Rust on PATH; none of the scripts clears or installs into an environment it did
not make: run here with stand-ins for Python, cargo and the tools that record what they are
asked, so that nothing is built or installed and nothing leaves the machine."""

from __future__ import annotations

import os
import platform
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: A stand-in for an interpreter: logs its command line (and the opt-level a build is given, and
#: whether pytest has cargo on PATH); `-m venv DIR` makes DIR/bin/python, a copy of itself, and a
#: `surveillance` command; maturin makes an empty sdist and wheel where `--out` says, auditwheel
#: finds manylinux_2_17, `-c` prints the package's folder in its environment, a script on stdin
#: (`-`) runs in the real interpreter; everything else succeeds.
FAKE_PYTHON = """#!/bin/sh
echo "$0 $*" >>"$RUN_TESTS_LOG"
out=; prev=
for arg; do [ "$prev" = --out ] && out=$arg; prev=$arg; done
case "$1 $2 $3" in
"-m venv "*)
    mkdir -p "$prev/bin"
    cp "$0" "$prev/bin/python"
    printf '#!/bin/sh\\necho surveillance 0.1.0\\n' >"$prev/bin/surveillance"
    chmod +x "$prev/bin/surveillance" ;;
"-m maturin sdist")
    mkdir -p "$out/x/surveillance-0.1.0"
    tar -czf "$out/surveillance-0.1.0.tar.gz" -C "$out/x" surveillance-0.1.0
    rm -r "$out/x" ;;
"-m maturin build")
    echo "opt-level ${CARGO_PROFILE_RELEASE_OPT_LEVEL:-of Cargo.toml}" >>"$RUN_TESTS_LOG"
    : >"$out/surveillance-0.1.0-cp39-abi3-manylinux_2_17_x86_64.whl" ;;
"-m pytest "*)
    if command -v cargo >/dev/null; then echo "cargo on PATH" >>"$RUN_TESTS_LOG"; fi ;;
"-m auditwheel show")
    echo 'consistent with the following platform tag: "manylinux_2_17_x86_64".' ;;
"-c "*)
    echo "$(dirname "$(dirname "$0")")/lib/surveillance" ;;
"-  ")
    exec "$REAL_PYTHON" - ;;
esac
exit 0
"""


#: The scripts that keep their tools in the environment that ``VENV`` names.
SCRIPTS = ("run-tests", "build-wheels", "build-docs")


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def sandbox(tmp_path):
    """A directory holding only copies of run-tests, build-wheels and build-docs, stand-ins for
    cargo, rustup and actionlint first on PATH, two stand-in interpreters, and the log they all
    write to."""
    if shutil.which("bash") is None or (platform.system(), platform.machine()) != (
        "Linux",
        "x86_64",
    ):
        pytest.skip("run-tests and build-wheels are bash scripts for Linux x86_64")
    repo = tmp_path / "repo"
    repo.mkdir()
    for script in SCRIPTS:
        shutil.copy(ROOT / script, repo / script)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cargo", "rustup", "actionlint"):
        _executable(bin_dir / tool, f'#!/bin/sh\necho "{tool} $*" >>"$RUN_TESTS_LOG"\n')
    log = tmp_path / "log"
    log.touch()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "VENV", "PYTHON", "DIST", "CARGO_TARGET_DIR")
        and not k.startswith("CARGO_PROFILE_")
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        RUN_TESTS_LOG=str(log),
        REAL_PYTHON=sys.executable,
        SURVEILLANCE_QUOTA_DIR=str(tmp_path / "quota"),
    )
    pythons = [_executable(tmp_path / f"python{i}", FAKE_PYTHON) for i in (1, 2)]
    return repo, env, log, pythons


def _run(repo: Path, env: dict, log: Path, python: Path, script: str = "run-tests") -> list:
    log.write_text("")
    out = subprocess.run(
        ["bash", str(repo / script)],
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
    test_python = str(repo / "build" / "wheels" / "venv" / "bin" / "python")

    lines = _run(repo, env, log, python)
    # The interpreter on PATH only makes the environment: no pip, no build, no pytest.
    assert [line for line in lines if line.startswith(str(python))] == [
        f"{python} -m venv --clear {repo / '.venv'}"
    ]
    installs = [line for line in lines if " -m pip install" in line]
    assert installs and all(line.startswith((venv_python, test_python)) for line in installs)
    # The wheel is built from the sdist, with the profile of cargo test and for the host (so
    # that it shares cargo test's build of the dependencies; the release build's zig and tag
    # check are build-wheels' own), and tested in a new environment made from .venv's
    # interpreter, with no cargo on PATH.
    build = next(line for line in lines if line.startswith(f"{venv_python} -m maturin build"))
    assert "--compatibility linux" in build and "--zig" not in build
    assert f"--manifest-path {repo}/build/wheels/sdist/surveillance-0.1.0/Cargo.toml" in build
    assert "opt-level 1" in lines
    assert f"{venv_python} -m venv {repo}/build/wheels/venv" in lines
    wheel = f"{repo}/build/test-wheels/surveillance-0.1.0-cp39-abi3-manylinux_2_17_x86_64.whl"
    assert f"{test_python} -m pip install --quiet --disable-pip-version-check {wheel}" in lines
    # The tests' dependencies go in with uv, run from the tools' environment.
    extras = f"{venv_python} -m uv pip install --quiet --python {test_python} {wheel}[test,docs]"
    assert extras in lines
    tests = [line for line in lines if line.startswith(f"{test_python} -m pytest")]
    assert len(tests) == 1 and "cargo on PATH" not in lines

    # Made once: the next run uses it as it is.
    lines = _run(repo, env, log, python)
    assert not [line for line in lines if line.startswith(str(python))]
    assert any(line.startswith(f"{venv_python} -m pip install") for line in lines)

    # PYTHON still chooses the interpreter: another one makes the environment again from it.
    lines = _run(repo, env, log, other)
    assert [line for line in lines if line.startswith(str(other))] == [
        f"{other} -m venv --clear {repo / '.venv'}"
    ]


def test_build_wheels_builds_the_release_profile_into_dist(sandbox):
    repo, env, log, (python, _) = sandbox
    venv_python = str(repo / ".venv" / "bin" / "python")
    # Even where the shell exports the quick profile (as for editable builds).
    env = dict(env, CARGO_PROFILE_RELEASE_OPT_LEVEL="1", CARGO_PROFILE_RELEASE_LTO="false")

    lines = _run(repo, env, log, python, "build-wheels")
    assert [line for line in lines if line.startswith(str(python))] == [
        f"{python} -m venv --clear {repo / '.venv'}"
    ]
    assert "opt-level of Cargo.toml" in lines
    assert any(
        line.startswith(f"{venv_python} -m maturin sdist --out {repo}/dist") for line in lines
    )
    assert sorted(p.name for p in (repo / "dist").iterdir()) == [
        "surveillance-0.1.0-cp39-abi3-manylinux_2_17_x86_64.whl",
        "surveillance-0.1.0.tar.gz",
    ]
    build = next(line for line in lines if line.startswith(f"{venv_python} -m maturin build"))
    assert "--zig --compatibility manylinux2014" in build


def test_the_virtual_environment_is_ignored_by_git():
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "/.venv" in ignored or ".venv" in ignored or ".venv/" in ignored


def _tree(path: Path) -> dict:
    """Every file and folder under ``path``: a file's bytes, None for a folder."""
    return {
        str(p.relative_to(path)): None if p.is_dir() else p.read_bytes()
        for p in sorted(path.rglob("*"))
    }


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("kind", ["a-venv", "a-folder"])
def test_an_environment_the_scripts_did_not_make_is_left_as_it_is(sandbox, tmp_path, script, kind):
    repo, env, log, (python, _) = sandbox
    # The user's own environment (or any folder of theirs) named by VENV, or made as .venv in
    # the checkout: it holds no record of being made by the scripts.
    for venv in (tmp_path / "mine", repo / ".venv"):
        if kind == "a-venv":
            (venv / "bin").mkdir(parents=True)
            _executable(venv / "bin" / "python", FAKE_PYTHON)
            (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
            site = venv / "lib" / "python3.12" / "site-packages" / "theirs"
            site.mkdir(parents=True)
            (site / "__init__.py").write_text("x = 1\n")
        else:
            venv.mkdir()
            (venv / "notes.txt").write_text("mine")
        before = _tree(venv)
        log.write_text("")
        run_env = dict(env, PYTHON=str(python))
        if venv != repo / ".venv":
            run_env["VENV"] = str(venv)
        out = subprocess.run(
            ["bash", str(repo / script)], env=run_env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"{script}: VENV={venv} " in out.stderr and ".made-from" in out.stderr, out.stderr
        # No interpreter ran (only run-tests' look at cargo's version): no environment made or
        # cleared, nothing installed; the folder is as it was.
        lines = log.read_text().splitlines()
        assert all(line.startswith("cargo ") for line in lines), lines
        assert _tree(venv) == before


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_empty_folder_named_by_venv_is_made_an_environment(sandbox, tmp_path, script):
    repo, env, log, (python, _) = sandbox
    venv = tmp_path / "empty"
    venv.mkdir()
    lines = _run(repo, dict(env, VENV=str(venv)), log, python, script)
    assert [line for line in lines if line.startswith(str(python))] == [
        f"{python} -m venv --clear {venv}"
    ]
    assert (venv / ".made-from").read_text().strip() == str(python)


def test_build_docs_installs_every_requirement_of_the_docs_extra(sandbox):
    repo, env, log, (python, _) = sandbox
    venv = repo / ".venv"
    lines = _run(repo, env, log, python, "build-docs")
    wanted = (venv / "docs-requirements.txt").read_text().split()
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("docs = ["))
    assert wanted == re.findall(r'"([^"]+)"', line.split("#", 1)[0])
    assert "dask[dataframe]>=2023.1" in wanted and "pyarrow>=14" in wanted
    assert any(f"-r {venv}/docs-requirements.txt" in line for line in lines)
