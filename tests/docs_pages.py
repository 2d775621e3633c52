"""The documentation's pages (`docs/*.md`, the MkDocs site) as the tests read them.

The documentation is one page per concept; a test that pins a section's text reads it
from its page through `section`, so a section that moves fails here by name rather
than as an `IndexError` somewhere in a split.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a page: where it starts (1-based line of its fence), its
    language (`""` for none), its text, and the marker comment that covers it, if any."""

    page: str
    line: int
    language: str
    text: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """Every page the docs tests walk: the README (the landing page) and docs/**/*.md."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def code_blocks(path: Path) -> list[CodeBlock]:
    """The fenced blocks of a page. A marker is an HTML comment above a block; it covers
    the blocks after it up to the first line of prose, so the files of one example share
    one marker and a block added under new prose has none."""
    name = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[CodeBlock] = []
    marker: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        end = index
        if line.startswith("<!--"):
            while "-->" not in lines[end]:
                end += 1
            marker = " ".join(lines[index : end + 1])
        elif line.startswith("```"):
            end += 1
            while not lines[end].startswith("```"):
                end += 1
            text = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append(CodeBlock(name, index + 1, line[3:].strip(), text, marker))
        elif line.strip():
            marker = None
        index = end + 1
    return blocks
