"""Sphinx configuration of the documentation site (``./build-docs`` at the repository's root).

Sphinx with the PyData theme and MyST Markdown, as pandas, pyarrow and polars' API reference
use: the guide is Markdown, the API reference is generated from the installed package's
docstrings and signatures (overloads included), the command-line reference from the CLI's own
parser, and the dwell-time notebook is rendered with its saved outputs (never executed here).
"""

from __future__ import annotations

import inspect
import shutil
import sys
import typing
from pathlib import Path
from types import SimpleNamespace

import surveillance

sys.path.insert(0, str(Path(__file__).resolve().parent))  # cli_parser, for reference/cli.md

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

project = "surveillance"
author = "the surveillance authors"
copyright = "the surveillance authors"  # noqa: A001 (Sphinx's name)
version = release = surveillance.__version__

extensions = [
    "myst_nb",  # MyST Markdown pages and the rendered notebook
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the docstrings' Args/Returns/Raises sections
    "sphinxarg.ext",  # the CLI reference, from surveillance.cli.build_parser()
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
nb_execution_mode = "off"  # the notebook is committed with its outputs; the tests run it


autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Defaults as their values (``max_retries: int = 3``), not as the source names them: the
# constants of the native module that a signature's default is read from are not the reader's.
autodoc_preserve_defaults = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields: a NamedTuple's fields are documented once

html_theme = "pydata_sphinx_theme"
html_title = "surveillance"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "header_links_before_dropdown": 6,
}
html_static_path: list[str] = []


def _copy_inputs(app) -> None:
    """The notebook lives in examples/ (the tests run it there); the site renders a copy. The
    CLI's exit statuses are its parser's epilog, written where reference/cli.md includes it."""
    shutil.copyfile(ROOT / "examples" / "dwell_time.ipynb", HERE / "guide" / "dwell_time.ipynb")
    from surveillance.cli import build_parser

    epilog = build_parser().epilog or ""
    (HERE / "reference" / "exit-statuses.txt").write_text(epilog + "\n", encoding="utf-8")


#: What the type parameters of surveillance._overloads' protocols stand for, dicts aside.
_RESULTS = {"_A": "pyarrow.Table", "_P": "pandas.DataFrame", "_L": "polars.DataFrame"}


def _output_signatures(app, what, name, obj, options, signature, return_annotation):
    """A method with ``output=`` shows one signature per output, as its type checker reads it:
    the overloads of its family's protocol (``__overloads__``, set by surveillance._overloads),
    with the results filled in (an async method's are what it returns awaited)."""
    marked = getattr(obj, "__overloads__", None)
    if marked is None:
        return None
    protocol, dicts = marked
    results = {"_D": dicts, **_RESULTS}
    # The defaults are the method's own (an overload writes ``...`` for each).
    defaults = inspect.signature(obj).parameters
    lines = []
    # The protocol has no implementation of __call__: its overloads are found by their name.
    name = SimpleNamespace(
        __module__=protocol.__module__, __qualname__=f"{protocol.__name__}.__call__"
    )
    for variant in typing.get_overloads(name):
        params, star = [], False
        for p in list(inspect.signature(variant).parameters.values())[1:]:
            if p.kind is p.KEYWORD_ONLY and not star:
                params.append("*")
                star = True
            text = f"{p.name}: {p.annotation}"
            # The dicts' rung is the default; a table's rung is matched only by naming it.
            if p.default is not p.empty and not (p.name == "output" and "dicts" not in text):
                text += f" = {defaults[p.name].default!r}"
            params.append(text)
        result = variant.__annotations__["return"]
        for var, shown in results.items():
            result = result.replace(var, shown)
        lines.append(f"({', '.join(params)}) -> {result}")
    return "\n".join(lines), None


def setup(app) -> None:
    app.connect("builder-inited", _copy_inputs)
    app.connect("autodoc-process-signature", _output_signatures)
