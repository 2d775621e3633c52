"""The documentation's pages (`docs/*.md`, the MkDocs site) as the tests read them.

The README's sections moved to one page per concept (issue 29); a test that pins a
section's text reads it from its page through `section`, so a section that moves again
fails here by name rather than as an `IndexError` somewhere in a split.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    """The text of `docs/<name>`."""
    return (DOCS / name).read_text(encoding="utf-8")


def section(name: str, heading: str) -> str:
    """The `## heading` section of `docs/<name>`: from its heading to the next `## ` or
    the page's end (a `### ` subsection stays in it)."""
    text = page(name)
    marker = f"## {heading}\n"
    assert f"\n{marker}" in text, f"docs/{name} has no section '## {heading}'"
    return marker + text.split(f"\n{marker}", 1)[1].split("\n## ", 1)[0]
