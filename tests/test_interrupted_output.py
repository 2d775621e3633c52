"""An interrupt while the model streams keeps what the person was reading (time-skipping
environment, real HTTP to the scripted provider, a real subscriber).

What decides the outcome: the run stops `interrupted` with `RunResult.partial` holding
exactly the text a subscriber received of that turn, read to the end (including the
batch the cancelled activity's publisher sends as it exits), so `resume_input` goes on
from it; an interrupt before any output keeps nothing; a run that forwards nothing keeps
nothing and never reads the output host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from loop_harness import ENDPOINT, Loop, run_input, running_loop
from routing_harness import endpoint_health
from steering_harness import GUARD_S, eventually, trickle
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from steadyloop._activities.output_publisher import OutputPublisher
from steadyloop._output.forwarding import (
    READ_FORWARDED_OUTPUT_ACTIVITY,
    ForwardingOptions,
    OutputDelta,
)
from steadyloop._run.models import RunInput, RunResult
from steadyloop._run.resume import resume_input
from steadyloop._stops.budget import estimate_tokens
from steadyloop._workflows.model_turn import INTERRUPT_SETTLE
from steadyloop.client._event_log import follow_output
from steadyloop.testing import Pause, sse_response, text_chunks

pytestmark = pytest.mark.slow

# Longer than the gap between words, so the publisher holds queued text when the
# cancel reaches the activity: a read of the host that does not wait for the activity
# to end misses that last batch.
BATCH_S = 0.5


def forwarding_run(batch_interval_s: float = BATCH_S, deadline_s: float | None = None) -> RunInput:
    return run_input("say hello", deadline_s=deadline_s).model_copy(
        update={"forwarding": ForwardingOptions(enabled=True, batch_interval_s=batch_interval_s)}
    )


async def follow(loop: Loop, workflow_id: str, into: list[OutputDelta]) -> None:
    async for delta in follow_output(loop.client, workflow_id, poll_s=0.02):
        into.append(delta)


async def scheduled_activities(handle: WorkflowHandle[Any, Any]) -> list[str]:
    history = await handle.fetch_history()
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def interrupt_when(
    loop: Loop,
    run: RunInput,
    ready: Callable[[list[OutputDelta]], bool],
) -> tuple[RunResult, list[OutputDelta], list[str]]:
    """Start `run`, follow its output, interrupt once `ready(seen)` holds; the result,
    everything the subscriber received (to the end), and the activities scheduled."""
    handle = await loop.start(run)
    seen: list[OutputDelta] = []
    watcher = asyncio.ensure_future(follow(loop, handle.id, seen))
    await eventually(lambda: ready(seen), "the run reaches the point to interrupt")
    await handle.signal("interrupt", "I have read enough")
    result = await handle.result()
    await asyncio.wait_for(watcher, GUARD_S)  # the host ends when the run closes it
    return result, seen, await scheduled_activities(handle)


# With a deadline the routed turn runs in a task of its own, raced against a timer
# (`before_deadline`); the interrupt must still wait for the activity through it.
@pytest.mark.parametrize("deadline_s", [None, 3600.0], ids=["no_deadline", "deadline"])
async def test_an_interrupt_mid_stream_keeps_exactly_what_the_subscriber_received(
    monkeypatch: pytest.MonkeyPatch, deadline_s: float | None
) -> None:
    # What the model activity handed its publisher (the worker runs in this process):
    # all of it must reach the person, the batch sent as the cancelled activity exits
    # too. A run that read the host and closed it before the activity ended would drop
    # that batch (the close makes the last send fail), short of what was forwarded.
    forwarded: list[OutputDelta] = []
    publish = OutputPublisher.publish

    def recording(self: OutputPublisher, delta: OutputDelta, *, now: bool = False) -> None:
        forwarded.append(delta)
        publish(self, delta, now=now)

    monkeypatch.setattr(OutputPublisher, "publish", recording)
    async with running_loop([trickle(400, gap_s=0.05)]) as loop:
        run = forwarding_run(deadline_s=deadline_s)
        result, seen, scheduled = await interrupt_when(
            loop, run, lambda seen: sum(d.kind == "text" for d in seen) >= 3
        )

    shown = "".join(d.text for d in seen if d.turn == 1 and d.kind == "text")
    assert result.stop_reason == "interrupted" and "I have read enough" in result.detail
    assert shown and not shown.endswith("w399 ")  # it was cut mid-stream
    assert shown == "".join(d.text for d in forwarded if d.kind == "text")  # nothing dropped
    partial = result.partial
    assert partial is not None
    assert partial.text == shown  # everything the person received, the last batch too
    assert partial.source == "stream" and partial.complete
    assert partial.turn == 1 and partial.attempt == 1
    assert "interrupted" in partial.cause and "I have read enough" in partial.cause
    assert scheduled.count(READ_FORWARDED_OUTPUT_ACTIVITY) == 1
    # The cut turn's tokens count: no usage chunk came, so what it showed is estimated
    # (about four characters a token), and the stop says so.
    tokens = estimate_tokens(len(shown))
    assert tokens > 0 and result.stats.completion_tokens == tokens
    assert f"(the model turn was cancelled after about {tokens} output tokens, estimated)" in (
        result.detail
    )
    # The transcript stays valid; the resumed run carries the shown text as the
    # assistant's last message, then asks it to go on.
    assert [m.role for m in result.transcript] == ["system", "user"]
    resumed = resume_input(run, result)
    assert [m.role for m in resumed.messages] == ["system", "user", "assistant", "user"]
    assert resumed.messages[2].content == shown


async def test_an_interrupt_before_any_output_keeps_nothing_and_is_no_endpoint_failure() -> None:
    # The cancel cannot reach an activity that receives nothing (it heartbeats on chunks),
    # so the attempt ends by its own watchdog after the interrupt: a stall the table
    # would retry and hold against the endpoint, were the turn not cancelled.
    silent = sse_response([Pause(30.0), *text_chunks("never shown")], done=False)
    async with running_loop([silent, trickle(5)], first_token_s=2.0) as loop:
        result, seen, scheduled = await interrupt_when(
            loop, forwarding_run(), lambda _: bool(loop.server.exchanges)
        )
        health = await endpoint_health(loop.client, ENDPOINT)

    assert result.stop_reason == "interrupted"
    assert seen == [] and result.partial is None
    assert len(loop.server.requests) == 1  # not retried after the interrupt
    assert result.stats.completion_tokens == 0  # nothing streamed: nothing counted
    assert health is None or health.breaker.recent_failures == []
    # The host was asked (nothing there); a turn that showed nothing has nothing to keep.
    assert scheduled.count(READ_FORWARDED_OUTPUT_ACTIVITY) == 1


async def test_a_stream_that_stalls_after_the_interrupt_keeps_its_text_and_no_failure() -> None:
    # Text, then silence: the activity hears of the cancel only when its stall watchdog
    # ends it, with a failure that says output was shown. The turn was interrupted: the
    # run stops `interrupted`, not `output_interrupted`, and the endpoint is not blamed.
    stalls = sse_response([*text_chunks("The answer is"), Pause(30.0)], done=False)
    async with running_loop([stalls], inter_chunk_s=2.0) as loop:
        result, seen, _ = await interrupt_when(loop, forwarding_run(), lambda seen: bool(seen))
        health = await endpoint_health(loop.client, ENDPOINT)

    assert result.stop_reason == "interrupted"
    assert result.partial is not None
    assert result.partial.text == "The answer is" == "".join(d.text for d in seen)
    assert result.partial.source == "stream" and result.partial.complete
    assert len(loop.server.requests) == 1
    assert health is None or health.breaker.recent_failures == []


async def test_an_attempt_that_does_not_end_is_waited_for_within_the_bound_only() -> None:
    # Text, then silence longer than the settle bound and no watchdog before it: the
    # cancel never reaches the activity, as with a dead worker. The run still stops
    # after `INTERRUPT_SETTLE`, keeping the text marked possibly incomplete.
    stalls = sse_response([*text_chunks("The answer is"), Pause(60.0)], done=False)
    async with running_loop([stalls], inter_chunk_s=120.0) as loop:
        result, seen, _ = await interrupt_when(loop, forwarding_run(), lambda seen: bool(seen))

    assert result.stop_reason == "interrupted"
    assert result.partial is not None
    assert result.partial.text == "The answer is" == "".join(d.text for d in seen)
    assert not result.partial.complete and "had not ended" in result.partial.cause
    stopped_after = result.stats.wall_time_s
    assert INTERRUPT_SETTLE.total_seconds() <= stopped_after < 60.0


async def test_an_interrupt_without_forwarding_keeps_nothing_and_reads_no_host() -> None:
    async with running_loop([trickle(400)]) as loop:
        handle = await loop.start(run_input("say hello"))
        await eventually(lambda: loop.server.exchanges, "the model request arrives")
        await handle.signal("interrupt", "stop")
        result = await handle.result()
        scheduled = await scheduled_activities(handle)

    assert result.stop_reason == "interrupted" and result.partial is None
    assert READ_FORWARDED_OUTPUT_ACTIVITY not in scheduled
