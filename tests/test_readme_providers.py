"""The streams page's table of providers and gateway quirks (docs/streams.md) points only
at tests that exist.

Each row names its evidence as a pytest node id (`path::test[case]`; a following
`[case]` alone reuses the test before it). A renamed test or case would leave the
page claiming evidence nobody runs, so each is looked up here.
"""

from __future__ import annotations

import re
from pathlib import Path

from docs_pages import section

ROOT = Path(__file__).parent.parent
PAGE = "streams.md"
SECTION = "Providers and gateways it is held to"


def table_rows() -> list[str]:
    rows = [line for line in section(PAGE, SECTION).splitlines() if line.startswith("| ")]
    return rows[1:]  # the header


def node_ids(row: str) -> list[str]:
    evidence = row.rstrip(" |").rsplit(" | ", 1)[1]
    ids: list[str] = []
    for item in re.findall(r"`([^`]+)`", evidence):
        if item.startswith("[") and ids:
            item = ids[-1].split("[", 1)[0] + item
        ids.append(item)
    return ids


def test_every_row_names_a_test_that_exists() -> None:
    rows = table_rows()
    assert len(rows) >= 10
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("*.py"))
    for row in rows:
        ids = node_ids(row)
        assert ids, f"a row without a test: {row}"
        for node in ids:
            path, _, rest = node.partition("::")
            function, _, case = rest.partition("[")
            test_file = ROOT / path
            assert test_file.is_file(), node
            assert f"def {function}(" in test_file.read_text(encoding="utf-8"), node
            if case:
                assert f'"{case.rstrip("]")}"' in sources, f"no case {case} for {node}"
