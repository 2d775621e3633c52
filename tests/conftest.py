"""Session-wide fixtures: the third-party servers of the `realserver` tests.

Each server starts on first use, once per session, on a port the OS picks, and stops
when the session ends; a session that selects no real-server test starts neither.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from real_servers import start_llamacpp, start_llmock


@pytest.fixture(scope="session")
def llamacpp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = start_llamacpp(tmp_path_factory.mktemp("llamacpp") / "server.log")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llmock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = start_llmock(tmp_path_factory.mktemp("llmock") / "server.log")
    try:
        yield server.url
    finally:
        server.stop()
