"""Sphinx configuration of the documentation site (``./build-docs`` at the repository's root).

Sphinx with the PyData theme and MyST Markdown, as pandas, pyarrow and polars' API reference
use: the guide is Markdown, the API reference is generated from the installed package's
docstrings and signatures (overloads included), the command-line reference from the CLI's own
parser, and the dwell-time notebook is rendered with its saved outputs (never executed here).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

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
autodoc_preserve_defaults = True
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


def setup(app) -> None:
    app.connect("builder-inited", _copy_inputs)
