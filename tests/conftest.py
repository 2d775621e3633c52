"""Session-wide fixtures: the third-party servers of the `realserver` tests, and a guard
that fails any test writing into the user's `~/.steadyloop`.

Each server starts on first use, once per session, on a port the OS picks, and stops
when the session ends; a session that selects no real-server test starts neither.

In-process clients get steadyloop.testing's runtime (below).

The guard: steadyloop's defaults (blob store, example tools' outbox and sandbox) live
under `~/.steadyloop`, so a test that starts a worker or a CLI command without pointing
them elsewhere writes into the home of whoever runs the suite. Each test's teardown
compares the directory with what it was before the test, and fails the test that
changed it. Point commands at `tmp_path` instead (`STEADYLOOP_HOME`, or
`STEADYLOOP_BLOB_DIR` / `--blob-dir` and `STEADYLOOP_OUTBOX_DIR`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from real_servers import ServerProcess, start_llamacpp, start_llmock
from temporalio.runtime import Runtime

from steadyloop.testing import time_skipping_runtime

# Every in-process client of the suite uses the runtime `AgentEnv` uses: the time-skipping
# test server's workers would otherwise each print core's "Temporal Server 1.16.0 or newer
# is required" warning (a known limit of that server, see steadyloop/testing/_core_logs.py)
# straight to stderr, into pytest's progress line. Other core logs go to logging, which
# pytest captures per test.
Runtime.set_default(time_skipping_runtime(), error_if_already_set=False)

# Read when a test starts, so a suite run with HOME pointed elsewhere guards that home.
_STEADYLOOP_HOME = "~/.steadyloop"


def home_fingerprint(root: Path) -> dict[str, tuple[int, int]]:
    """(mtime, size) of `root`, of its entries and of theirs: creating, renaming or
    removing a file changes its directory's entry, appending changes its own. Three
    levels cover a blob store (`blobs/<2 hex>/<sha256>`) in a few hundred stats."""
    found: dict[str, tuple[int, int]] = {}
    level = [root]
    for depth in range(3):
        deeper: list[Path] = []
        for path in level:
            try:
                stat = path.stat()
                if depth < 2 and path.is_dir():
                    deeper.extend(path.iterdir())
            except OSError:  # gone meanwhile, or unreadable: nothing to compare
                continue
            found[str(path)] = (stat.st_mtime_ns, stat.st_size)
        level = deeper
    return found


@pytest.fixture(autouse=True)
def _leaves_the_users_home_alone() -> Iterator[None]:
    root = Path(_STEADYLOOP_HOME).expanduser()
    before = home_fingerprint(root)
    yield
    after = home_fingerprint(root)
    if after != before:
        changed = sorted(
            path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
        )
        pytest.fail(
            f"this test wrote into {root} (the user's home): {', '.join(changed[:5])}; "
            "point the worker and the commands at tmp_path (STEADYLOOP_HOME, or "
            "STEADYLOOP_BLOB_DIR / --blob-dir and STEADYLOOP_OUTBOX_DIR)",
            pytrace=False,
        )


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


def _encodable(value: Any) -> Any:
    """`value` with every lone surrogate in its strings written as `\\udcff`."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {key: _encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_encodable(item) for item in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report: Any) -> Generator[None, Any, Any]:
    """Reports cross to pytest-xdist's controller as UTF-8: the hostile-value tests log
    and fail with lone surrogates in their text, which would otherwise crash the worker
    that ran them ("surrogates not allowed") instead of reporting the test."""
    data = yield
    return _encodable(data)
