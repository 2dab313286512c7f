"""What the documentation says a user installs is what pyproject.toml installs: the required
dependencies are named wherever the install is described (never "no required dependency"
while there are some), and a guide's example needs nothing beyond the extra it names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def _requirements(key: str) -> list[str]:
    """The requirements of ``key = [...]`` in pyproject.toml (``dependencies``, or an extra)."""
    # The list ends at the `]` that ends its line (a requirement's extras hold one too).
    found = re.search(rf"^{re.escape(key)} = \[(.*?)\][ \t]*(#[^\n]*)?$", PYPROJECT, re.M | re.S)
    assert found, key
    return re.findall(r'"([^"]+)"', found.group(1))


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()


def _extras_of(requirement: str) -> set[str]:
    found = re.match(r"[A-Za-z0-9._-]+\[([^\]]*)\]", requirement)
    return {x.strip() for x in found.group(1).split(",")} if found else set()


def test_the_docs_name_the_required_dependencies():
    required = [_name(r) for r in _requirements("dependencies")]
    assert required == ["platformdirs", "tomli"]
    for page in PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        said = re.search(r"no (required )?(python |runtime )?dependenc", text, re.I)
        assert not said, f"{page.relative_to(ROOT)} says {said.group(0)!r}"
    # Where the install is described: the landing page and the guide's first page.
    for page in (ROOT / "README.md", ROOT / "docs" / "guide" / "getting-started.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        for name in required:
            assert f"`{name}`" in text, f"{page.relative_to(ROOT)} does not name {name}"
        # tomli is required below Python 3.11 only, as its marker says.
        assert 'python_version < \\"3.11\\"' in PYPROJECT and "3.11" in text, page


def test_the_dlt_guide_needs_only_what_the_dlt_extra_installs():
    page = (ROOT / "docs" / "guide" / "dask-dlt.md").read_text(encoding="utf-8")
    section = page.split("## Load a warehouse with dlt", 1)[1].split("\n## ", 1)[0]
    assert "pip install 'surveillance[dlt]'" in section
    extra = _requirements("dlt")
    names = {_name(r) for r in extra}
    dlt_extras = set().union(*(_extras_of(r) for r in extra if _name(r) == "dlt"))
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert blocks
    stdlib = getattr(sys, "stdlib_module_names", {"os", "sys", "datetime", "pathlib"})
    for code in blocks:
        for module in re.findall(r"^\s*(?:import|from)\s+(\w+)", code, re.M):
            assert module == "surveillance" or module in stdlib or module in names, module
        # A destination of dlt comes with its own extra of dlt (dlt[duckdb] brings duckdb).
        for destination in re.findall(r"dlt\.destinations\.(\w+)", code):
            assert destination in dlt_extras, (destination, extra)
