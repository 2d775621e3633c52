"""Session-wide fixtures: the third-party servers of the `realserver` tests.

Each server starts on first use, once per session, on a port the OS picks, and stops
when the session ends; a session that selects no real-server test starts neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from real_servers import ServerProcess, start_llamacpp, start_llmock


def _running(start: Callable[[Path], ServerProcess], log: Path) -> Iterator[str]:
    server = start(log)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llamacpp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _running(start_llamacpp, tmp_path_factory.mktemp("llamacpp") / "server.log")


@pytest.fixture(scope="session")
def llmock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _running(start_llmock, tmp_path_factory.mktemp("llmock") / "server.log")
