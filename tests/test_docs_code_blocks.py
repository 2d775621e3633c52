"""Every code block of the documentation runs in CI, or says why it does not.

The README and every page under docs/ are walked block by block. The obvious ways a
snippet rots, and what here prevents each:
- A block nobody runs drifts from the API it shows. An unmarked `python` block is run
  as `__main__`, and an unmarked `toml` block is loaded as the config file it shows; any
  other unmarked block fails, naming its page and line, so a new block cannot slip in.
- A marker that claims a test which does not exist, or does not read the page, is a
  claim nobody checks: a marker naming `tests/....py` needs that file to exist and to
  mention the page.
- A figure nobody can reproduce: an output block (no language, `text`, `console`) must
  name the script that prints it, an existing file, or be what the block above printed,
  in which case the run compares the output to it.
- `<!-- not run: why -->` needs a reason: shell commands that need a provider key, a
  cluster, or serve until stopped.
"""

from __future__ import annotations

import contextlib
import io
import re
import tomllib
from pathlib import Path

import pytest
from docs_pages import ROOT, CodeBlock, code_blocks, pages

from steadyloop._worker.config import load_config

RUN = frozenset({"python", "toml"})
OUTPUT = frozenset({"", "text", "console"})
ABOVE = "printed by the block above"
SET_UP_LINE = 3  # the README's first block, kept as it was: no marker above it
FILE = re.compile(r"\b(?:tests|benchmarks|examples|scripts|steadyloop)/[\w./-]+\.\w+")


def all_blocks() -> list[CodeBlock]:
    return [block for path in pages() for block in code_blocks(path)]


def problem(block: CodeBlock) -> str | None:
    """Why `block` is neither run nor rightly marked, or None."""
    marker = block.marker
    if block.page == "README.md" and block.line == SET_UP_LINE:
        return None  # the set-up commands: test_docs_site.py holds them to .ci/run
    if marker is None:
        if block.language in RUN:
            return None
        kind = f"`{block.language}`" if block.language else "bare"
        return (
            f"{block.where}: a {kind} block nobody runs: run it (python, toml), include a "
            "tested file, name its test or script, or mark it <!-- not run: why -->"
        )
    if "not run:" in marker:
        reason = marker.split("not run:", 1)[1].removesuffix("-->").strip()
        return None if len(reason.split()) >= 3 else f"{block.where}: 'not run' needs a reason"
    named = FILE.findall(marker)
    missing = [name for name in named if not (ROOT / name).is_file()]
    if missing:
        return f"{block.where}: its marker names files that do not exist: {missing}"
    if "output:" in marker:
        if block.language not in OUTPUT:
            return f"{block.where}: an output marker on a `{block.language}` block"
        if not named and ABOVE not in marker:
            return f"{block.where}: an output block that names no script printing it"
        return None
    tests = [name for name in named if name.startswith("tests/")]
    if not tests:
        return f"{block.where}: a marker that names no test and says no 'not run:' reason"
    page = Path(block.page).name
    if not any(page in (ROOT / name).read_text(encoding="utf-8") for name in tests):
        return f"{block.where}: {tests} never read {page}"
    return None


def test_every_block_is_run_or_says_why_not() -> None:
    blocks = all_blocks()
    assert len(blocks) >= 30  # the walk found the pages
    problems = [p for p in map(problem, blocks) if p]
    assert not problems, "\n".join(problems)


def test_an_unmarked_shell_block_is_refused() -> None:
    bare = CodeBlock("docs/x.md", 3, "bash", "steadyloop run hi\n", None)
    assert problem(bare) == (
        "docs/x.md:3: a `bash` block nobody runs: run it (python, toml), include a tested "
        "file, name its test or script, or mark it <!-- not run: why -->"
    )
    vague = CodeBlock("docs/x.md", 3, "bash", "x\n", "<!-- not run: no -->")
    assert problem(vague) == "docs/x.md:3: 'not run' needs a reason"
    claimed = CodeBlock("docs/x.md", 3, "python", "x\n", "<!-- tested: tests/test_layout.py -->")
    assert problem(claimed) == "docs/x.md:3: ['tests/test_layout.py'] never read x.md"
    figure = CodeBlock("docs/x.md", 3, "text", "1.5x\n", "<!-- output: a fast run -->")
    assert problem(figure) == "docs/x.md:3: an output block that names no script printing it"


def runnable(language: str) -> list[tuple[CodeBlock, str | None]]:
    """The unmarked blocks of `language`, each with the output block that follows it."""
    found: list[tuple[CodeBlock, str | None]] = []
    for path in pages():
        blocks = code_blocks(path)
        for index, block in enumerate(blocks):
            if block.language == language and block.marker is None:
                after = blocks[index + 1] if index + 1 < len(blocks) else None
                printed = after.text if after and after.marker and ABOVE in after.marker else None
                found.append((block, printed))
    return found


def python_cases() -> list[object]:
    """The python blocks to run; one that starts a Temporal server is marked slow."""
    server = ("AgentEnv(", "connect(", "dev_server(")
    return [
        pytest.param(
            block,
            printed,
            id=block.where,
            marks=[pytest.mark.slow] * any(s in block.text for s in server),
        )
        for block, printed in runnable("python")
    ]


@pytest.mark.parametrize(("block", "printed"), python_cases())
def test_a_python_block_runs_as_a_script(
    block: CodeBlock, printed: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run in this process as `__main__` (a subprocess a block would spend seconds
    importing steadyloop again under load), from an empty directory, with HOME in it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.text, block.where, "exec"), {"__name__": "__main__"})
    if printed is not None:
        assert out.getvalue() == printed, block.where


@pytest.mark.parametrize("block", [b for b, _ in runnable("toml")], ids=lambda b: b.where)
def test_a_toml_block_loads_as_a_config_file(block: CodeBlock, tmp_path: Path) -> None:
    tomllib.loads(block.text)  # a clear error first, if it is not TOML at all
    config = tmp_path / "steadyloop.toml"
    config.write_text(block.text, encoding="utf-8")
    load_config(config, {})
