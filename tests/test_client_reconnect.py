"""`RunHandle.events()` through a Temporal that stops answering: it retries from its
cursor (one `on_lost` call per outage) and carries on, or raises `TemporalLost` naming
the cursor once the server stayed away for `reconnect_bound`; any other error is the
read's own and passes through at once.

The log reader is replaced by a scripted one (what it yields, when it fails, from which
cursor it was opened); `tests/test_follow_temporal_restart.py` does it with a real
server SIGKILLed mid-follow.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

import steadyloop.client._runs as runs
from steadyloop.client import RunHandle, TemporalLost
from steadyloop.events import RunEventItem, TextDeltaEvent
from steadyloop.events._cursor import Cursor, format_cursor


def cursor(offset: int) -> str:
    return format_cursor(Cursor(0, offset))


def delta(offset: int) -> TextDeltaEvent:
    return TextDeltaEvent(turn=1, attempt=1, text=f"t{offset}", cursor=cursor(offset))


def gone() -> RPCError:
    return RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")


class ScriptedLog:
    """A run's log of `length` events; each opening fails with `failures.pop(0)` (None:
    it does not fail): the first after yielding `before` events, any later one at once."""

    def __init__(self, length: int, failures: list[BaseException | None], before: int) -> None:
        self.length = length
        self.failures = failures
        self.before = before
        self.opened_after: list[str | None] = []

    async def read(self, after: str | None) -> AsyncIterator[RunEventItem]:
        self.opened_after.append(after)
        start = 0 if after is None else int(after.split("-")[1]) + 1
        failure = self.failures.pop(0) if self.failures else None
        limit = self.before if after is None else 0
        for yielded, offset in enumerate(range(start, self.length)):
            if failure is not None and yielded == limit:
                raise failure
            yield delta(offset)
        if failure is not None:
            raise failure


class _NoClient:
    namespace = "default"

    def get_workflow_handle(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> ScriptedLog:
    scripted = ScriptedLog(4, [], before=2)

    def run_events(_client: Any, _wid: str, _rid: str, after: str | None, **_: Any) -> Any:
        return scripted.read(after)

    async def completed(_self: RunHandle) -> str:
        return "completed"  # this log has no stop event: the follower asks how it ended

    monkeypatch.setattr(runs, "run_events", run_events)
    monkeypatch.setattr(RunHandle, "status", completed)
    return scripted


def handle() -> RunHandle:
    return RunHandle(_NoClient(), "run-1", first_execution_run_id="first")  # type: ignore[arg-type]


async def test_events_ride_out_an_outage_from_the_cursor_and_say_it_once(log: ScriptedLog) -> None:
    # Two failed reads (one outage) after the second event, then the server answers.
    log.failures = [gone(), gone(), None]
    lost: list[BaseException] = []
    read = [e.cursor async for e in handle().events(on_lost=lost.append)]
    assert read == [cursor(0), cursor(1), cursor(2), cursor(3)]  # nothing skipped or repeated
    assert log.opened_after == [None, cursor(1), cursor(1)]  # again from the cursor
    assert len(lost) == 1 and "tcp connect error" in str(lost[0])


async def test_events_give_up_after_the_bound_naming_the_cursor(log: ScriptedLog) -> None:
    log.failures = [gone()] * 100
    lost: list[BaseException] = []
    read: list[str] = []
    started = asyncio.get_running_loop().time()
    with pytest.raises(TemporalLost) as raised:
        async for event in handle().events(
            reconnect_bound=timedelta(seconds=0.3), on_lost=lost.append
        ):
            read.append(event.cursor)
    waited = asyncio.get_running_loop().time() - started
    assert read == [cursor(0), cursor(1)]
    assert raised.value.cursor == cursor(1) and raised.value.workflow_id == "run-1"
    assert raised.value.waited_s >= 0.3 and waited < 5.0
    assert f"events(after={cursor(1)!r})" in str(raised.value)
    assert "unknown, not failed" in str(raised.value)
    assert len(lost) == 1


async def test_an_error_that_is_not_a_lost_server_passes_through_at_once(
    log: ScriptedLog,
) -> None:
    log.failures = [RPCError("boom", RPCStatusCode.INTERNAL, b"")]
    lost: list[BaseException] = []
    with pytest.raises(RPCError, match="boom"):
        async for _ in handle().events(on_lost=lost.append):
            pass
    assert lost == [] and log.opened_after == [None]
