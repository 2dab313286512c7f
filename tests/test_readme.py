"""Every code block of README.md and of the documentation's pages (docs/) runs as written.

- ```` ```python ```` blocks run as they are, each on its own, in a temporary directory, with no
  ``SURVEILLANCE_*`` variable set (they start their own emulator).
- In ```` ```sh ```` blocks, the lines that run a read command of the ``surveillance`` CLI run in
  bash against an emulator whose credentials are in the ``SURVEILLANCE_*`` variables; they
  must exit 0 and write nothing on stderr. Other shell lines (``pip install``, ``./run-tests``,
  ``export``, cron lines, ``surveillance demo``/``emulator``, which have their own tests in
  test_cli.py) are shown, not run.
- ```` ```text ```` blocks are output or syntax, not code. A block must say which it is.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import surveillance as sv

from conftest import reset_opentelemetry, service_env

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The pages whose blocks run: the README and every page of the site but those it generates
#: from other files (the changelog, the benchmarks' results, the reference).
DOCUMENTS = [README] + sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
FENCES = [
    (lang, code, path)
    for path in DOCUMENTS
    for lang, code in re.findall(
        r"^```([^\n`]*)\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M
    )
]
PYTHON = [(code, path) for lang, code, path in FENCES if lang == "python"]
#: MyST directives (```{toctree}, ```{include}, ```{eval-rst}...) are the site's own.
KINDS = {"python", "sh", "text"}
#: CLI subcommands whose README lines run (they only read, and end by themselves).
RUN = {"events", "sites", "devices", "cameras", "reports", "--version", "--help"}
CLI_LINES = [
    line.strip()
    for lang, code, _ in FENCES
    if lang == "sh"
    for line in code.splitlines()
    if line.strip().startswith("surveillance ") and line.split()[1] in RUN
]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)).replace("/", "_").removesuffix(".md")


def test_every_block_says_what_it_is():
    assert FENCES
    unknown = [
        (str(path), lang)
        for lang, _, path in FENCES
        if lang not in KINDS and not lang.startswith("{")
    ]
    assert unknown == []
    assert len(PYTHON) >= 3 and len(CLI_LINES) >= 3
    readme_python = [code for code, path in PYTHON if path == README]
    assert len(readme_python) >= 1


@pytest.mark.parametrize(
    "code,path",
    PYTHON,
    ids=[f"{_name(path)}-python{i}" for i, (_, path) in enumerate(PYTHON)],
)
def test_python_block_runs(code, path, tmp_path, monkeypatch):
    for extra in ("airflow", "dagster"):  # the scheduling guide's recipes need their extras
        uses = re.search(rf"^(from|import) (surveillance\.)?{extra}\b", code, re.M)
        if uses and importlib.util.find_spec(extra) is None:
            pytest.skip(f"the {extra} extra is not installed")
    monkeypatch.chdir(tmp_path)
    for var in list(os.environ):
        if var.startswith("SURVEILLANCE_") and var != "SURVEILLANCE_QUOTA_DIR":
            monkeypatch.delenv(var)
    try:
        exec(compile(code, str(path), "exec"), {"__name__": "__readme__"})
    finally:
        reset_opentelemetry()  # the monitoring guide sets the global providers


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory):
    """The environment of the shell lines: an emulator's credentials, and a `surveillance`
    command on PATH that runs this interpreter's package."""
    bin_dir = tmp_path_factory.mktemp("bin")
    script = bin_dir / "surveillance"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m surveillance.cli "$@"\n')
    script.chmod(0o755)
    with sv.Emulator(seed=2, sites=3, days=2, events_per_day=100) as emu:
        yield service_env(emu, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize("line", CLI_LINES, ids=[f"sh{i}" for i in range(len(CLI_LINES))])
def test_cli_line_runs(line, shell_env, tmp_path):
    out = subprocess.run(
        ["bash", "-o", "pipefail", "-c", line],
        cwd=tmp_path,
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.strip()
    files = re.findall(r"-o (\S+)", line)
    assert all((tmp_path / f).stat().st_size > 0 for f in files)


def test_the_first_section_says_what_the_quota_means_for_a_first_day():
    first = README.read_text(encoding="utf-8").split("\n## ", 1)[0]
    for said in (
        "first day",
        "2,400 requests a day",
        "surveillance quota",
        "surveillance plan",
        "refused",
        "surveillance sync",
        "75",
    ):
        assert said in first, said
