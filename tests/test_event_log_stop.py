"""A follower reads to the stop of a run that published one, or says what it missed.

The host is a fake here (no server): what decides the outcome is when the host answers
relative to the run's end, and a fake holds that still. The run is over from the start
(its worker was killed as it ended); the host holds the final text and the stop but
answers nothing for longer than the follower's quiet bound. A follower must read on to
the stop; one whose host never answers raises `StopUnread` naming the cursor after the
last event it read. A run that failed (no stop) still ends its followers once quiet.
Whether a stop is owed is whether the run completed (`run_completed`), also for a run
whose workflow id was used again since.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import RawValue
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.contrib.workflow_streams import WorkflowStreamItem

import steadyloop.client._event_log as event_log
from steadyloop._output.forwarding import OUTPUT_TOPIC, OutputDelta
from steadyloop._workflows.output_stream import OutputStreamSummary
from steadyloop.client import StopUnread
from steadyloop.client._event_log import OwedStop, host_events, run_completed
from steadyloop.events import (
    EVENTS_TOPIC,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
)

HOST_ID = "support-42/1/output/r1"
RUN = "support-42/1"
QUIET_S = 0.05  # the follower's quiet bound, shortened
SILENT_S = 0.4  # how long the slow host answers nothing: many quiet bounds
GUARD_S = 10.0
CONVERTER = pydantic_data_converter.payload_converter


def text_item(text: str) -> tuple[str, Payload]:
    delta = OutputDelta(turn=1, attempt=1, kind="text", text=text)
    return OUTPUT_TOPIC, CONVERTER.to_payloads([delta])[0]


def stop_item() -> tuple[str, Payload]:
    stop = StopEvent(turn=1, reason="final_answer", final_answer="Hello there")
    return EVENTS_TOPIC, CONVERTER.to_payloads([stop])[0]


@dataclass
class FakeHost:
    """An output host whose log is `items`, of which it answers the first `answered`
    (the rest once `answer()` is called). `ended`: it completed, its result holding its
    whole log, while polls of it still answer only what they did (its worker is gone)."""

    items: list[tuple[str, Payload]]
    answered: int
    ended: bool = False
    base: int = 0  # the oldest offset still held (retention dropped those before it)
    more: asyncio.Event = field(default_factory=asyncio.Event)

    def answer(self) -> None:
        self.answered = len(self.items)
        self.more.set()

    # -- the host workflow's handle ------------------------------------------------

    async def describe(self) -> Any:
        host = self

        class Described:
            run_id = "host-run-1"
            status = (
                WorkflowExecutionStatus.COMPLETED if host.ended else WorkflowExecutionStatus.RUNNING
            )

            async def memo_value(self, _key: str, default: int, **_: Any) -> int:
                return default

        return Described()

    async def result(self, **_: Any) -> OutputStreamSummary:
        log = [
            {"topic": topic, "data": base64.b64encode(p.SerializeToString()).decode()}
            for topic, p in self.items[self.base :]
        ]
        state = {"log": log, "base_offset": self.base}
        summary = {"offset": len(self.items), "reason": "closed", "state": state}
        return OutputStreamSummary.model_validate(summary)  # as its result decodes

    # -- its stream -------------------------------------------------------------------

    async def subscribe(
        self, _topics: object, *, from_offset: int, **_: Any
    ) -> AsyncIterator[WorkflowStreamItem[RawValue]]:
        offset = max(from_offset, self.base)  # a dropped offset: from the oldest held
        while True:
            while offset < self.answered:
                topic, payload = self.items[offset]
                yield WorkflowStreamItem(topic=topic, data=RawValue(payload), offset=offset)
                offset += 1
            self.more = asyncio.Event()
            await self.more.wait()


class FakeClient:
    data_converter = pydantic_data_converter

    def __init__(self, host: FakeHost) -> None:
        self.host = host

    def get_workflow_handle(self, workflow_id: str, **_: Any) -> FakeHost:
        assert workflow_id == HOST_ID
        return self.host


@pytest.fixture
def stream_of_fake_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """`WorkflowStreamClient.create(client, host_id)` answers with the fake host."""

    class Streams:
        @staticmethod
        def create(client: FakeClient, host_id: str) -> FakeHost:
            assert host_id == HOST_ID
            return client.host

    monkeypatch.setattr(event_log, "WorkflowStreamClient", Streams)


def answering(value: bool) -> Callable[[], Awaitable[bool]]:
    async def answer() -> bool:
        return value

    return answer


async def follow(
    host: FakeHost, *, completed: bool, patience_s: float, after: str | None = None
) -> list[RunEventItem]:
    """What a follower reads of `host`, the run over from the start (`completed`: it
    returned, so it published a stop); raises what the follower raises."""
    owed = OwedStop(RUN, answering(completed), patience_s)
    read: list[RunEventItem] = []

    async def read_all() -> None:
        async for event in host_events(
            cast(Client, FakeClient(host)),
            HOST_ID,
            after,
            run_over=answering(True),
            poll_s=0.01,
            quiet_s=QUIET_S,
            owed_stop=owed,
        ):
            read.append(event)

    await asyncio.wait_for(read_all(), GUARD_S)
    return read


def answer_later(host: FakeHost, delay_s: float) -> asyncio.TimerHandle:
    return asyncio.get_running_loop().call_later(delay_s, host.answer)


@pytest.mark.usefixtures("stream_of_fake_host")
async def test_a_slow_host_is_read_on_to_the_final_text_and_the_stop() -> None:
    """The issue: the run is over, the host silent for many quiet bounds, then it answers
    the final text and the stop. Ending at the first quiet bound read neither."""
    host = FakeHost([text_item("Hello"), text_item(" there"), stop_item()], answered=1)
    later = answer_later(host, SILENT_S)
    try:
        read = await follow(host, completed=True, patience_s=GUARD_S)
    finally:
        later.cancel()
    assert [e.text for e in read if isinstance(e, TextDeltaEvent)] == ["Hello", " there"]
    assert isinstance(read[-1], StopEvent) and read[-1].final_answer == "Hello there"
    assert [e.cursor for e in read] == [f"000000-00000000000{n}" for n in range(3)]


@pytest.mark.usefixtures("stream_of_fake_host")
async def test_a_host_that_never_answers_raises_stop_unread_naming_the_cursor() -> None:
    host = FakeHost([text_item("Hello"), text_item(" there"), stop_item()], answered=1)
    with pytest.raises(StopUnread) as raised:
        await follow(host, completed=True, patience_s=0.2)
    cursor = "000000-000000000000"  # after the one event the host answered
    assert raised.value.cursor == cursor and raised.value.workflow_id == RUN
    assert f"events(after={cursor!r})" in str(raised.value)  # how to read on
    assert RUN in str(raised.value) and "result()" in str(raised.value)


@pytest.mark.usefixtures("stream_of_fake_host")
async def test_following_again_after_the_named_cursor_reads_the_rest() -> None:
    host = FakeHost([text_item("Hello"), text_item(" there"), stop_item()], answered=1)
    with pytest.raises(StopUnread) as raised:
        await follow(host, completed=True, patience_s=0.1)
    host.answer()  # the host's worker is back
    rest = await follow(host, completed=True, patience_s=GUARD_S, after=raised.value.cursor)
    assert [e.type for e in rest] == ["text_delta", "stop"]


@pytest.mark.usefixtures("stream_of_fake_host")
async def test_a_host_that_ended_meanwhile_is_read_from_its_result() -> None:
    """Its polls never answer (no worker), but it completed holding the stop: the
    follower cut short by the patience reads the rest from the host's result."""
    host = FakeHost([text_item("Hello"), text_item(" there"), stop_item()], answered=1)
    asyncio.get_running_loop().call_later(0.05, setattr, host, "ended", True)
    read = await follow(host, completed=True, patience_s=0.2)
    assert [e.type for e in read] == ["text_delta", "text_delta", "stop"]


@pytest.mark.usefixtures("stream_of_fake_host")
async def test_an_ended_host_drained_without_the_stop_raises_stop_unread() -> None:
    """The stop's publish was given up (the run completed all the same): the host ended
    with no stop, so none comes; the follower says so instead of ending as if whole."""
    host = FakeHost([text_item("Hello")], answered=1, ended=True)
    with pytest.raises(StopUnread, match="000000-000000000000"):
        await follow(host, completed=True, patience_s=0.1)


@pytest.mark.parametrize("ended", [False, True])
@pytest.mark.usefixtures("stream_of_fake_host")
async def test_a_follower_back_after_the_stops_cursor_ends_at_once(ended: bool) -> None:
    """What `events(after=snapshot.cursor)` does once the run completed: the event at
    the cursor is the stop, so nothing is owed, and no patience is waited out."""
    host = FakeHost([text_item("Hello"), stop_item()], answered=2, ended=ended)
    loop = asyncio.get_running_loop()
    began = loop.time()
    read = await follow(host, completed=True, patience_s=GUARD_S * 10, after="000000-000000000001")
    assert read == [] and loop.time() - began < GUARD_S / 2


@pytest.mark.parametrize("ended", [False, True])
@pytest.mark.usefixtures("stream_of_fake_host")
async def test_a_cursor_whose_own_event_was_dropped_still_reads_on(ended: bool) -> None:
    """Reading the event at the cursor again is a look, not a need: when retention
    dropped it but kept what follows, the follower reads on, with no `CursorExpired`."""
    host = FakeHost([text_item("Hello"), text_item(" there"), stop_item()], 3, ended, base=1)
    read = await follow(host, completed=True, patience_s=GUARD_S, after="000000-000000000000")
    assert [e.type for e in read] == ["text_delta", "stop"]


@pytest.mark.usefixtures("stream_of_fake_host")
async def test_a_run_that_failed_ends_its_followers_once_quiet_with_no_error() -> None:
    """No stop was ever published: the documented end, at the first quiet bound after
    the run is over, without waiting out the patience."""
    host = FakeHost([text_item("Hello")], answered=1)
    loop = asyncio.get_running_loop()
    began = loop.time()
    read = await follow(host, completed=False, patience_s=GUARD_S * 10)
    assert [e.type for e in read] == ["text_delta"]
    assert loop.time() - began < GUARD_S / 2


class FakeRuns:
    """A workflow id whose latest execution began as `first` with `status`, and the close
    event of each execution of the chain that began as `r1`."""

    def __init__(
        self, first: str, status: WorkflowExecutionStatus, closes: dict[str, HistoryEvent]
    ) -> None:
        self.first, self.status, self.closes = first, status, closes

    def get_workflow_handle(self, _workflow_id: str, *, run_id: str | None = None) -> Any:
        runs = self

        class Handle:
            async def describe(self) -> Any:
                described = type("Described", (), {})()
                described.status = runs.status
                described.raw_description = type("Raw", (), {})()
                info = type("Info", (), {"first_run_id": runs.first})()
                described.raw_description.workflow_execution_info = info
                return described

            async def fetch_history_events(self, **_: Any) -> AsyncIterator[HistoryEvent]:
                if run_id in runs.closes:
                    yield runs.closes[run_id]

        return Handle()


def closed(kind: EventType.ValueType, new_run: str = "") -> HistoryEvent:
    event = HistoryEvent(event_type=kind)
    if new_run:
        event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id = new_run
    return event


@pytest.mark.parametrize(
    ("status", "owed"),
    [
        (WorkflowExecutionStatus.COMPLETED, True),
        (WorkflowExecutionStatus.FAILED, False),
        (WorkflowExecutionStatus.TERMINATED, False),
        (WorkflowExecutionStatus.RUNNING, False),
    ],
)
async def test_a_stop_is_owed_by_a_run_that_completed(
    status: WorkflowExecutionStatus, owed: bool
) -> None:
    runs = FakeRuns("r1", status, {})
    assert await run_completed(cast(Client, runs), RUN, "r1") is owed


@pytest.mark.parametrize(
    ("last", "owed"),
    [
        (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, True),
        (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, False),
    ],
)
async def test_a_run_whose_id_was_used_again_is_judged_by_its_own_chain(
    last: EventType.ValueType, owed: bool
) -> None:
    """The id's latest execution is another run's (it completed): the run's own chain,
    continued-as-new once, decides."""
    can = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    closes = {"r1": closed(can, "r2"), "r2": closed(last)}
    runs = FakeRuns("another", WorkflowExecutionStatus.COMPLETED, closes)
    assert await run_completed(cast(Client, runs), RUN, "r1") is owed
