"""The user guide stays a guide: each page says what to do in at most 900 words (how the client
does it belongs to docs/contributing/how-it-works.md), and the start page leads to every task.
These run without the docs extra (test_docs.py, which builds the site, needs it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GUIDE = DOCS / "guide"
#: The most words a guide page may have.
GUIDE_WORDS = 900


def _prose_words(text: str) -> int:
    """The words of a Markdown page as it reads: everything but its fenced blocks (code,
    output, directives); tables, headings, lists and inline code count."""
    kept, fence = [], ""
    for line in text.splitlines():
        opening = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence:
            if opening and opening.group(1).startswith(fence) and line.strip() == opening.group(1):
                fence = ""
        elif opening:
            fence = opening.group(1)
        else:
            kept.append(line)
    return len(" ".join(kept).split())


def _guide_pages() -> dict[str, str]:
    """Every page of the guide, the notebook (rendered from examples/) by its Markdown cells."""
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted(GUIDE.glob("*.md"))}
    notebook = json.loads((ROOT / "examples" / "dwell_time.ipynb").read_text(encoding="utf-8"))
    pages["dwell_time.ipynb"] = "\n".join(
        "".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"
    )
    return pages


def test_words_are_counted_outside_fenced_blocks():
    page = (
        "# Title\n\nTwo words.\n\n```python\nnot = counted\n```\n\n| a | b |\n````text\nx\n````\n"
    )
    assert _prose_words(page) == 9  # "#", "Title", "Two", "words.", "|", "a", "|", "b", "|"


def test_no_guide_page_is_over_900_words():
    words = {name: _prose_words(text) for name, text in _guide_pages().items()}
    assert len(words) > 10
    assert {name: n for name, n in words.items() if n > GUIDE_WORDS} == {}


def test_the_start_page_lists_async_profiles_and_scheduling():
    """The start page's task table has a row for each, linking to the guide page that does it,
    and the guide's table of contents holds those pages."""
    rows = [
        line
        for line in (DOCS / "index.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and "](guide/" in line
    ]
    toc = (GUIDE / "index.md").read_text(encoding="utf-8").split()
    for topic, page in (("asyncio", "async"), ("profile", "profiles"), ("schedul", "scheduling")):
        assert any(topic in row and f"](guide/{page}.md)" in row for row in rows), topic
        assert (GUIDE / f"{page}.md").is_file() and page in toc, page
