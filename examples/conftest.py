"""This repository marks every test that starts a Temporal server `slow` (see pyproject);
the examples' tests all do. (Your own project needs nothing like this.)"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)
