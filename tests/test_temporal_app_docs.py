"""docs/temporal-app.md shows the orders example's files as they are: each block marked
`examples/orders/NAME: kept identical` is compared with the file, which the example's
own tests run (examples/orders/test_orders.py, tests/test_orders_e2e.py)."""

from __future__ import annotations

import re

import pytest
from docs_pages import ROOT, code_blocks

PAGE = ROOT / "docs" / "temporal-app.md"
MARKER = re.compile(r"examples/orders/([\w.]+): kept identical")


def shown() -> list[tuple[str, str]]:
    found = []
    for block in code_blocks(PAGE):
        match = MARKER.search(block.marker or "")
        if match:
            found.append((match.group(1), block.text))
    return found


def test_the_page_shows_every_file_a_user_writes() -> None:
    names = {name for name, _ in shown()}
    assert names == {"worker.py", "workflows.py", "payments.py", "models.py", "test_orders.py"}


@pytest.mark.parametrize(("name", "text"), shown())
def test_a_block_is_its_file(name: str, text: str) -> None:
    assert text == (ROOT / "examples" / "orders" / name).read_text(encoding="utf-8")
