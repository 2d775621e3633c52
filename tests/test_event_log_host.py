"""The run's output host as an event log: cursors that survive everything a host lives
through (time-skipping server, the real `OutputStreamWorkflow`, the real reader).

Property: over random interleavings of publishes (the loop's events and text on its two
topics), the host's continue-as-new (it rolls over every few dozen history events),
idle closes followed by restarts, and followers that disconnect after a random number
of events and come back with only their last cursor, the events read across all
reconnects equal the single-pass read from the start, cursors strictly increasing.
And the refusals: a cursor behind what the host retains, or of an epoch the host left
behind (it was terminated, so it started over), raises `CursorExpired`, never a
silent skip forward.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.output_publisher import ensure_stream_host, publish_events
from steadyloop._output.forwarding import (
    CLOSE_OUTPUT_STREAM_SIGNAL,
    HOST_EPOCH_MEMO,
    OUTPUT_STREAM_WORKFLOW,
    OUTPUT_TOPIC,
    OutputDelta,
)
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._workflows.output_stream import OutputStreamInput, OutputStreamWorkflow
from steadyloop.client._event_log import host_events
from steadyloop.events import (
    CursorExpired,
    DecisionEvent,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    parse_cursor,
)
from steadyloop.events._publishing import PublishRunEvents

pytestmark = pytest.mark.slow
HOST_MAX_EVENTS = 50  # the smallest the host allows: it rolls over every few publishes
IDLE_S = 3_600.0  # the host's default idle close
READ_GUARD_S = 30.0
ROLL_OVER_GUARD_S = 10.0
PROPERTY = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass
class Lab:
    loop: asyncio.AbstractEventLoop
    env: WorkflowEnvironment
    task_queue: str

    @property
    def client(self) -> Client:
        return self.env.client

    def run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self.loop.run_until_complete(coroutine)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()

    async def start() -> Lab:
        env = await stack.enter_async_context(
            await WorkflowEnvironment.start_time_skipping(
                data_converter=pydantic_data_converter,
                test_server_existing_path=time_skipping_server_path(),
            )
        )
        task_queue = f"host-{uuid.uuid4().hex[:8]}"
        await stack.enter_async_context(
            Worker(env.client, task_queue=task_queue, workflows=[OutputStreamWorkflow])
        )
        return Lab(loop, env, task_queue)

    built = loop.run_until_complete(start())
    try:
        yield built
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


@dataclass
class Host:
    """One host under test, what was published to it, and what followers read."""

    lab: Lab
    host_id: str = field(default_factory=lambda: f"run-{uuid.uuid4().hex[:8]}/output/r")
    published: list[str] = field(default_factory=list)  # each item's label, in order
    sequence: int = 0
    cursor: str | None = None
    read: list[RunEventItem] = field(default_factory=list)
    executions: set[str] = field(default_factory=set)
    over: bool = False

    async def publish_events(self, count: int, *, stop: bool = False) -> None:
        self.sequence += 1
        labels = [f"e{len(self.published) + i}" for i in range(count)]
        events: list[RunEventItem] = [
            DecisionEvent(turn=0, decision="message_sent", detail=label) for label in labels
        ]
        if stop:
            events.append(StopEvent(turn=0, reason="final_answer"))
            labels.append("stop")
        batch = PublishRunEvents(
            stream_id=self.host_id,
            task_queue=self.lab.task_queue,
            host_max_events=HOST_MAX_EVENTS,
            publisher_id="loop:test",
            sequence=self.sequence,
            events=events,
        )
        await while_rolling_over(lambda: publish_events(self.lab.client, batch))
        self.published += labels
        await self.note_execution()

    async def publish_text(self, count: int) -> None:
        await ensure_stream_host(
            self.lab.client, self.host_id, self.lab.task_queue, HOST_MAX_EVENTS
        )
        stream = WorkflowStreamClient.create(self.lab.client, self.host_id)
        topic = stream.topic(OUTPUT_TOPIC, type=OutputDelta)
        labels = [f"t{len(self.published) + i}" for i in range(count)]
        for label in labels:
            topic.publish(OutputDelta(turn=1, attempt=1, kind="text", text=label))
        await while_rolling_over(stream.flush)  # a retried flush resends the same batch
        self.published += labels
        await self.note_execution()

    async def idle_close(self) -> None:
        """Let the host's idle timer pass, and wait until it has ended.

        The host closes after one whole window with nothing published, so the window
        running when the last publish came only starts the count: two may pass."""
        handle = self.lab.client.get_workflow_handle(self.host_id)
        for _ in range(3):
            await self.lab.env.sleep(timedelta(seconds=IDLE_S + 1))
            for _ in range(50):
                if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                    return
                await asyncio.sleep(0.02)
        raise AssertionError("the host did not close when idle")

    async def follow(self, most: int) -> None:
        """A follower that reads up to `most` events after the last cursor, then leaves."""
        wanted = min(most, len(self.published) - len(self.read))
        if wanted <= 0:
            return

        async def over() -> bool:
            return self.over

        got: list[RunEventItem] = []

        async def read() -> None:
            async for event in host_events(
                self.lab.client, self.host_id, self.cursor, run_over=over, poll_s=0.01
            ):
                got.append(event)
                if len(got) == wanted:
                    return

        await asyncio.wait_for(read(), READ_GUARD_S)
        self.read += got
        self.cursor = got[-1].cursor

    async def note_execution(self) -> int:
        """Record the host's current execution; return its history length."""
        described = await self.lab.client.get_workflow_handle(self.host_id).describe()
        self.executions.add(described.run_id)
        return described.raw_description.workflow_execution_info.history_length

    async def wait_out_roll_over(self) -> None:
        """If the host's history is full, wait (publishing nothing) until it rolls over."""
        before = len(self.executions)
        for _ in range(int(ROLL_OVER_GUARD_S / 0.02)):
            if await self.note_execution() < HOST_MAX_EVENTS or len(self.executions) > before:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the host did not roll over within {ROLL_OVER_GUARD_S} s")


async def while_rolling_over(send: Callable[[], Awaitable[None]]) -> None:
    """Send, again if the signal reached the execution that was just continuing-as-new.

    The time-skipping server can route a signal by workflow id to the execution that
    is ending (`NOT_FOUND`, "Completed workflow"). Production publishers retry it the
    same way (the output publisher, and Temporal's retry of the publish activity). The
    host deduplicates by publisher id and sequence, so nothing lands twice.
    """
    for attempt in range(50):
        try:
            return await send()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND or attempt == 49:
                raise
            await asyncio.sleep(0.02)


def label(event: RunEventItem) -> str:
    if isinstance(event, DecisionEvent):
        return event.detail
    if isinstance(event, TextDeltaEvent):
        return event.text
    assert isinstance(event, StopEvent), event
    return "stop"


Step = tuple[str, int]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("events"), st.integers(1, 4)),
        st.tuples(st.just("text"), st.integers(1, 4)),
        st.tuples(st.just("follow"), st.integers(1, 6)),
        st.tuples(st.just("idle"), st.just(0)),
    ),
    min_size=4,
    max_size=24,
)


async def play(lab: Lab, steps: list[Step]) -> Host:
    host = Host(lab)
    for kind, count in steps:
        if kind == "events":
            await host.publish_events(count)
        elif kind == "text":
            await host.publish_text(count)
        elif kind == "follow":
            await host.follow(count)
        elif host.published:  # idle: a host that never started cannot close
            await host.idle_close()
    await host.publish_events(1, stop=True)
    host.over = True
    await host.follow(len(host.published))
    return host


async def single_pass(host: Host) -> list[RunEventItem]:
    async def over() -> bool:
        return True

    async def read() -> list[RunEventItem]:
        return [
            event
            async for event in host_events(
                host.lab.client, host.host_id, None, run_over=over, poll_s=0.01
            )
        ]

    return await asyncio.wait_for(read(), READ_GUARD_S)


@PROPERTY
@given(steps=STEPS)
def test_events_read_across_reconnects_equal_the_single_pass_read(
    lab: Lab, steps: list[Step]
) -> None:
    async def check() -> None:
        host = await play(lab, steps)
        whole = await single_pass(host)
        assert [label(e) for e in host.read] == host.published  # nothing lost or repeated
        assert host.read == whole  # the same events, with the same cursors
        cursors = [parse_cursor(e.cursor) for e in whole]
        assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
        assert {c.epoch for c in cursors} == {0}  # restarts carried the log: no new epoch

    lab.run(check())


def test_a_host_rolls_over_and_restarts_after_an_idle_close_with_its_offsets_going_on(
    lab: Lab,
) -> None:
    """The interleaving the property must cover, made certain: the host continues-as-new
    (publishes go on until it has, twice), closes when idle twice and is started again,
    a follower reading between each."""

    async def check() -> None:
        host = Host(lab)
        await publish_until(host, executions=3)
        await host.follow(5)
        await host.idle_close()
        await host.publish_events(2)
        await host.follow(3)
        await host.idle_close()
        await host.publish_text(2)
        await host.publish_events(1, stop=True)
        host.over = True
        await host.follow(len(host.published))
        assert [label(e) for e in host.read] == host.published
        assert len(host.executions) >= 5  # rolled over twice, and started again twice
        assert host.read == await single_pass(host)

    lab.run(check())


async def publish_until(host: Host, *, executions: int) -> None:
    """Publish (events and text by turns) until the host has had `executions` executions.

    Signals that arrive together share a workflow task, so no count of publishes is
    sure to fill its history. Once the history is full, publishing pauses until the host
    has rolled over. Without the pause, a signal that lands in the continue-as-new task
    fails that task (`UnhandledCommand`). The time-skipping server then writes the
    failure into the history and sends the whole history again. Replaying it (164
    events: 34-57 ms) takes longer than the gap between publishes, so every retry fails
    too. In measured runs, 27 of 40 tasks failed and the history reached 186 events
    against a bound of 50. The dev server retried once and rolled over. A real
    publisher's batches are 0.25 s apart.
    """
    for _ in range(200):
        if len(host.executions) >= executions:
            return
        await host.publish_events(3)
        await host.publish_text(3)
        await host.wait_out_roll_over()
    raise AssertionError(f"the host had {len(host.executions)} executions")


def test_a_cursor_behind_the_hosts_retention_raises_naming_the_oldest_held(lab: Lab) -> None:
    async def check() -> None:
        host = Host(lab)
        # A host that keeps only its newest 5 items when it rolls over.
        await lab.client.start_workflow(
            OUTPUT_STREAM_WORKFLOW,
            OutputStreamInput(max_events=HOST_MAX_EVENTS, retain_items=5),
            id=host.host_id,
            task_queue=lab.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            memo={HOST_EPOCH_MEMO: 0},
        )
        await publish_until(host, executions=2)  # it rolled over, dropping its oldest items
        host.cursor = "000000-000000000000"  # a follower that read only the first item
        with pytest.raises(CursorExpired) as raised:
            await host.follow(1)
        oldest = raised.value.oldest
        assert oldest is not None and parse_cursor(oldest).offset > 1
        assert "snapshot" in str(raised.value) and oldest in str(raised.value)
        with pytest.raises(CursorExpired):  # from the start: the start is gone too
            await single_pass(host)

    lab.run(check())


def test_a_host_that_started_over_refuses_cursors_of_its_old_epoch(lab: Lab) -> None:
    async def check() -> None:
        host = Host(lab)
        await host.publish_events(3)
        await host.follow(3)
        old = host.cursor
        # Terminated: it leaves no log, so the next start is a new epoch at offset 0.
        await lab.client.get_workflow_handle(host.host_id).terminate("test")
        await host.publish_events(2)
        described = await lab.client.get_workflow_handle(host.host_id).describe()
        assert await described.memo_value(HOST_EPOCH_MEMO, type_hint=int) == 1
        with pytest.raises(CursorExpired, match="started over at epoch 1"):
            await host.follow(1)
        assert host.cursor == old
        with pytest.raises(CursorExpired):
            await single_pass(host)

    lab.run(check())


def test_an_ended_host_is_read_with_no_worker_at_all(lab: Lab) -> None:
    """A follower of a finished run reads its log from the host's result: no workflow
    task, so no worker needs to be up (the run's workers may be long gone)."""

    async def check() -> None:
        queue = f"gone-{uuid.uuid4().hex[:8]}"
        host = Host(dataclasses.replace(lab, task_queue=queue))
        async with Worker(lab.client, task_queue=queue, workflows=[OutputStreamWorkflow]):
            await host.publish_events(2)
            await host.publish_text(2)
            await host.follow(1)
            await host.publish_events(1, stop=True)
            handle = lab.client.get_workflow_handle(host.host_id)
            await handle.signal(CLOSE_OUTPUT_STREAM_SIGNAL)
            await handle.result()
        host.over = True
        # No worker polls `queue` from here: a query or a poll would wait forever.
        whole = await asyncio.wait_for(single_pass(host), 10)
        await asyncio.wait_for(host.follow(10), 10)  # the rest, after the cursor it held
        assert [label(e) for e in whole] == host.published
        assert host.read == whole

    lab.run(check())


def test_a_run_that_ended_without_a_stop_ends_its_followers_once_the_host_is_quiet(
    lab: Lab,
) -> None:
    """A run that failed (no stop event) leaves its host running until its idle close,
    an hour later; a follower ends instead once the run is over and nothing came for
    `quiet_s`, with every event the host holds."""

    async def check() -> None:
        host = Host(lab)
        await host.publish_events(2)
        await host.publish_text(1)
        got: list[RunEventItem] = []
        asked: list[bool] = []

        async def over() -> bool:
            asked.append(host.over)
            return host.over

        async def read() -> None:
            async for event in host_events(
                lab.client, host.host_id, None, run_over=over, poll_s=0.01, quiet_s=0.2
            ):
                got.append(event)
                if len(got) == 3:
                    host.over = True  # the run fails here, publishing nothing more

        await asyncio.wait_for(read(), 10)
        assert [label(e) for e in got] == host.published
        assert asked and asked[-1] is True
        status = (await lab.client.get_workflow_handle(host.host_id).describe()).status
        assert status == WorkflowExecutionStatus.RUNNING  # the host itself still waits

    lab.run(check())
