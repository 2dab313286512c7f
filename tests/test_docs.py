"""The documentation site (docs/, built by ./build-docs) is tested like code: it builds with
warnings as errors, its API reference covers every public name, its command-line reference
is generated from the parser, the notebook is rendered, and the README is a landing page that
links only to files of the repository. (Every code block of its pages runs in test_readme.py.)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: The package and its public modules: each one's ``__all__`` is what the reference covers.
PUBLIC_MODULES = [
    "surveillance",
    "surveillance.errors",
    "surveillance.types",
    "surveillance.publish",
    "surveillance.sync",
    "surveillance.analysis",
    "surveillance.dask",
    "surveillance.dlt",
    "surveillance.airflow",
    "surveillance.dagster",
    "surveillance.client",
    "surveillance.aio",
    "surveillance.emulator",
]

pytest.importorskip("sphinx", reason="the docs extra is not installed (pip install '.[docs]')")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as ./build-docs builds it: a fresh environment, warnings as errors."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html"]
        + [str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert done.stderr.strip() == "", done.stderr[-5000:]
    return out


def _inventory(site: Path) -> set[str]:
    """The names of objects.inv: every object the site documents."""
    data = (site / "objects.inv").read_bytes()
    body = zlib.decompress(data.split(b"\n", 4)[4]).decode("utf-8")
    return {line.split(" ", 1)[0] for line in body.splitlines()}


def test_the_site_builds_with_warnings_as_errors(site):
    for page in ("index", "guide/dwell-time", "reference/index", "reference/cli", "benchmarks"):
        assert (site / f"{page}.html").is_file(), page


def test_the_reference_covers_every_public_name(site):
    documented = _inventory(site)
    modules = {name: importlib.import_module(name) for name in PUBLIC_MODULES}
    # A name may be documented under any public module that exports it, or where it is defined.
    homes: dict[str, set[str]] = {}
    for name, module in modules.items():
        for public in module.__all__:
            homes.setdefault(public, set()).add(f"{name}.{public}")
            origin = getattr(getattr(module, public), "__module__", None)
            if isinstance(origin, str) and origin.startswith("surveillance"):
                homes[public].add(f"{origin}.{public}")
    missing = [
        public
        for public, candidates in sorted(homes.items())
        if not public.startswith("__") and not candidates & documented  # __version__: every page
    ]
    assert missing == []
    assert len(homes) > 60


def test_overloads_are_in_the_reference(site):
    page = re.sub(r"<[^>]+>", "", (site / "reference" / "clients.html").read_text("utf-8"))
    for output in ("arrow", "pandas", "polars"):
        assert f"output: Literal['{output}']" in page, output


def test_the_cli_reference_is_generated_from_the_parser(site):
    from surveillance.cli import build_parser

    page = re.sub(r"<[^>]+>", "", (site / "reference" / "cli.html").read_text(encoding="utf-8"))
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for command, p in sub.choices.items():
        assert f"surveillance {command}" in page, command
        for action in p._actions:
            for option in action.option_strings:
                assert option in page, (command, option)
    for status in ("0", "1", "2", "75", "130"):
        assert re.search(rf"^\s*{status}\s", parser.epilog, re.M), status
        assert re.search(rf"\b{status}\s+\w", page), status


def test_the_notebook_is_rendered_with_its_outputs(site):
    page = (site / "guide" / "dwell_time.html").read_text(encoding="utf-8")
    assert "Dwell time by local hour" in page
    assert "<img" in page  # the saved plot
    assert "dwell_summary" in page


def test_the_dwell_time_task_is_two_clicks_from_the_start_page(site):
    """The start page links to the task's page, whose first example does the task."""
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="guide/dwell-time.html"' in index
    assert "one brand into pandas, with local hours" in index
    page = (site / "guide" / "dwell-time.html").read_text(encoding="utf-8")
    assert "with_local_time" in page and "output=" in page


def test_the_readme_is_a_landing_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "pip install . &amp;&amp; surveillance demo" in text.replace("&&", "&amp;&amp;")
    assert "./run-tests" in text and "./build-docs" in text
    assert "API.md" not in text


def test_no_page_links_to_a_file_that_is_not_there():
    pages = [README] + sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
    missing = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            generated = path.name == "dwell_time.ipynb" and path.parent == DOCS / "guide"
            if not path.exists() and not generated:
                missing.append(f"{page.relative_to(ROOT)}: {target}")
        assert "API.md" not in page.read_text(encoding="utf-8"), page
    assert missing == []


def test_the_docs_extra_holds_what_the_build_needs():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    docs = re.search(r"^docs = \[(.*?)\]", text, re.M | re.S)
    assert docs
    names = {re.split(r"[<>=!\[]", req)[0] for req in re.findall(r'"([^"]+)"', docs.group(1))}
    assert {"sphinx", "pydata-sphinx-theme", "myst-nb", "sphinx-argparse"} <= names


def _public_callables():
    """Every public function, and every public method of a public class, of the reference."""
    seen: set[int] = set()
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for public in module.__all__:
            obj = getattr(module, public)
            if id(obj) in seen or public.startswith("__"):
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                if issubclass(obj, BaseException) or obj.__module__ == "surveillance.types":
                    continue  # exceptions and records: data, not calls
                for attr in dir(obj):
                    raw = inspect.getattr_static(obj, attr)
                    if attr.startswith("_") or isinstance(raw, property):
                        continue
                    method = getattr(obj, attr)
                    defined = getattr(method, "__module__", None) or ""
                    if callable(method) and defined.startswith("surveillance"):
                        yield f"{obj.__name__}.{attr}", method
            elif inspect.isfunction(obj) or inspect.isfunction(getattr(obj, "__wrapped__", None)):
                yield f"{name}.{public}", obj


#: Calls without arguments that still send a request, and so can fail as one.
SENDS = {"access_token"}


def test_every_public_function_names_the_errors_it_raises():
    """A public call that takes an argument (which it checks) or sends a request says what it
    raises: a ``Raises:`` section, or "Raises nothing" where it raises nothing of its own."""
    silent = []
    for name, call in _public_callables():
        try:
            params = [p for p in inspect.signature(call).parameters if p not in ("self", "cls")]
        except (TypeError, ValueError):
            params = ["?"]
        if not params and name.rsplit(".", 1)[-1] not in SENDS:
            continue
        doc = inspect.getdoc(call) or ""
        if "Raises:" not in doc and "Raises nothing" not in doc:
            silent.append(name)
    assert silent == []


def test_the_service_calls_name_every_error_of_a_request():
    """Reading methods name the errors any request can end in (the issue that asked for this
    reference found QuotaExhaustedError, AuthError and TransportError missing)."""
    import surveillance as sv

    for cls in (sv.Client, sv.AsyncClient):
        for method in ("events", "iter_events", "event_batches", "plan_events", "sites"):
            doc = inspect.getdoc(getattr(cls, method)) or ""
            for error in ("QuotaExhaustedError", "AuthError", "TransportError", "ApiError"):
                assert f"{error}:" in doc, (cls.__name__, method, error)
