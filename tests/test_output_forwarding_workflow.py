"""Forwarding through Temporal: the run's output host, a subscriber, and what the loop does
with an attempt that already showed output (time-skipping environment, real HTTP).

What decides the outcome downstream: a subscriber reads the answer as it streams; the
loop's own history holds no per-token events; an attempt that showed output is never
repeated (one request to the provider) and the run stops `output_interrupted` with the
text that was shown; an attempt that showed nothing is retried and the run completes.
The host's history grows with time, not with the stream's speed (one publish a batch
interval), and a subscriber whose poll fails mid-stream still reads every piece once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any

import pytest
from loop_harness import ENDPOINT, MODEL, Loop, run_input, running_loop
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateHandle,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.output_publisher import OutputPublisher, ensure_host, read_forwarded
from steadyloop._chat import ChatMessage
from steadyloop._output.forwarding import (
    OUTPUT_TOPIC,
    ForwardingOptions,
    ForwardTarget,
    OutputDelta,
    output_stream_id,
)
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunResult
from steadyloop._stream.completion import CompletionRequest
from steadyloop._workflows.output_stream import OutputStreamSummary
from steadyloop.client._event_log import follow_output
from steadyloop.errors import OUTPUT_ALREADY_FORWARDED
from steadyloop.testing import (
    Pause,
    ScriptedCall,
    ScriptedResponse,
    finish_chunk,
    sse_response,
    text_chunks,
    tool_call_chunks,
)

PER_TOKEN_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
}


def forwarding_run(**limits: object) -> RunInput:
    run = run_input("say hello", **limits)
    return run.model_copy(
        update={"forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05)}
    )


def slow_answer(words: str, pause_s: float = 0.05) -> ScriptedResponse:
    parts: list[object] = []
    for index, chunk in enumerate(text_chunks(words)):
        parts.append(chunk)
        if index:
            parts.append(Pause(pause_s))
    return sse_response([*parts, finish_chunk()])  # type: ignore[list-item]


async def collect(client: Client, workflow_id: str, into: list[OutputDelta]) -> None:
    async for delta in follow_output(client, workflow_id, poll_s=0.02):
        into.append(delta)


async def event_types(handle: WorkflowHandle[object, object]) -> list[int]:
    return [event.event_type async for event in handle.fetch_history_events()]


class Watched:
    """A run's result, what a subscriber saw of its output, and its workflow id."""

    def __init__(
        self, result: RunResult, seen: list[OutputDelta], run_id: str, first_run: str
    ) -> None:
        self.result = result
        self.seen = seen
        self.run_id = run_id
        self.first_run = first_run  # the run's first execution: the key of its output host

    def text(self) -> str:
        return "".join(d.text for d in self.seen if d.kind == "text")


async def run_and_watch(loop: Loop, run: RunInput) -> Watched:
    handle = await loop.start(run)
    seen: list[OutputDelta] = []
    watcher = asyncio.ensure_future(collect(loop.client, handle.id, seen))
    result = await handle.result()
    await asyncio.wait_for(watcher, 30)  # the host ends when the run closes it
    assert handle.first_execution_run_id is not None
    return Watched(result, seen, handle.id, handle.first_execution_run_id)


async def test_a_subscriber_reads_the_answer_and_the_loop_history_holds_no_tokens() -> None:
    answer = "one two three four five six seven eight"
    async with running_loop([slow_answer(answer)]) as loop:
        watched = await run_and_watch(loop, forwarding_run())
        loop_events = await event_types(loop.client.get_workflow_handle(watched.run_id))
        host = loop.client.get_workflow_handle(
            output_stream_id(watched.run_id, watched.first_run), result_type=OutputStreamSummary
        )
        summary = await host.result()
        host_events = await event_types(host)

    result = watched.result
    assert result.stop_reason == "final_answer" and result.final_answer == answer
    assert watched.text() == answer
    assert {(d.turn, d.attempt) for d in watched.seen} == {(1, 1)}
    assert not PER_TOKEN_EVENTS & set(loop_events)  # tokens went to the host only
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in host_events
    assert summary.reason == "closed"


async def test_a_stall_after_output_was_shown_stops_the_run_without_a_retry() -> None:
    stalls = sse_response([*text_chunks("The answer is"), Pause(3.0)], done=False)
    async with running_loop([stalls, slow_answer("never sent")], inter_chunk_s=0.3) as loop:
        watched = await run_and_watch(loop, forwarding_run())
        requests = len(loop.server.requests)

    result = watched.result
    assert result.stop_reason == "output_interrupted"
    assert requests == 1  # never repeated: no second answer under the first
    assert result.partial is not None
    assert result.partial.text == "The answer is" == watched.text()
    assert result.partial.source == "activity" and result.partial.turn == 1
    assert "stall" in result.partial.cause
    # The transcript stays valid for a provider: the partial text is not in it.
    assert [m.role for m in result.transcript] == ["system", "user"]


async def test_a_stall_before_any_output_is_retried_and_the_run_completes() -> None:
    # The budget holds the retried answer too: 1.5 s, so it is on time on a loaded machine
    # (the same 0.3 s failed a telemetry test's on-time call once in CI).
    silent = sse_response([Pause(4.0), *text_chunks("late")], done=False)
    async with running_loop([silent, slow_answer("hello there")], first_token_s=1.5) as loop:
        watched = await run_and_watch(loop, forwarding_run(model_retry_initial_s=0.1))
        requests = len(loop.server.requests)

    result = watched.result
    assert result.stop_reason == "final_answer" and result.final_answer == "hello there"
    assert requests == 2
    assert result.stats.retries == {"model_stall": 1}
    assert {d.attempt for d in watched.seen} == {2}  # the failed attempt showed nothing


async def test_a_defect_after_output_was_shown_is_not_retried() -> None:
    """Text, then a tool call cut by the token limit: a defect that would normally buy a
    fresh completion, but the text was already shown, so the run stops instead."""
    cut = sse_response(
        [
            *text_chunks("Let me look that up."),
            *tool_call_chunks([ScriptedCall("lookup", '{"key": "a')]),
            finish_chunk("length"),
        ]
    )
    async with running_loop([cut, slow_answer("never sent")]) as loop:
        result = (await run_and_watch(loop, forwarding_run())).result
        requests = len(loop.server.requests)

    assert result.stop_reason == "output_interrupted" and requests == 1
    assert result.partial is not None and result.partial.text == "Let me look that up."
    assert "truncated" in result.partial.cause


async def test_without_forwarding_the_same_defect_is_retried() -> None:
    cut = sse_response(
        [
            *text_chunks("Let me look that up."),
            *tool_call_chunks([ScriptedCall("lookup", '{"key": "a')]),
            finish_chunk("length"),
        ]
    )
    async with running_loop([cut, slow_answer("done")]) as loop:
        result = await loop.run(run_input("say hello"))
        requests = len(loop.server.requests)
    assert result.stop_reason == "final_answer" and requests == 2


async def test_a_new_attempt_refuses_when_the_host_shows_an_earlier_attempt_s_output() -> None:
    """The heartbeat that says "output shown" is coalesced; the host holds exactly what was
    published. So attempt 2 of a turn reads the host first and refuses to stream."""
    async with running_loop([slow_answer("must not be streamed")]) as loop:
        stream_id = f"refuse-{uuid.uuid4()}/output"
        publisher = WorkflowStreamClient.create(loop.client, stream_id)
        await loop.client.start_workflow(
            "steadyloop.OutputStream",
            {"max_events": 2000},
            id=stream_id,
            task_queue=loop.task_queue,
        )
        publisher.topic(OUTPUT_TOPIC, type=OutputDelta).publish(
            OutputDelta(turn=4, attempt=1, kind="text", text="Already shown")
        )
        await publisher.flush()
        request = CompletionRequest(
            endpoint=ENDPOINT,
            model=MODEL,
            messages=[ChatMessage(role="user", content="hi")],
            forward=ForwardTarget(stream_id=stream_id, turn=4, attempt=2),
        )
        env = ActivityEnvironment(client=loop.client)
        env.info = dataclasses.replace(env.info, task_queue=loop.task_queue)
        env.payload_converter = pydantic_data_converter.payload_converter
        async with ModelActivities(
            EndpointRegistry([loop.server.endpoint(ENDPOINT)]), environ={}
        ) as model:
            with pytest.raises(ApplicationError) as info:
                await env.run(model.stream_completion, request)
            error = info.value
        requests = len(loop.server.requests)

    assert isinstance(error, ApplicationError)
    assert error.type == OUTPUT_ALREADY_FORWARDED and error.non_retryable
    assert error.details[1]["text"] == "Already shown"
    assert requests == 0  # nothing was asked of the provider


async def test_the_publisher_sends_one_signal_a_batch_interval_however_fast_text_arrives() -> None:
    """`batch_interval_s` is what bounds the host's history: text arriving faster than a
    signal's round trip must still cost one signal per interval, not one per round trip
    (a flush that kept sending until nothing was left never stopped while text arrived)."""
    interval = 0.2
    pieces = [f"t{index} " for index in range(300)]
    async with running_loop([]) as loop:
        target = ForwardTarget(
            stream_id=f"batches-{uuid.uuid4()}/output",
            turn=1,
            attempt=1,
            batch_interval_s=interval,
        )
        await ensure_host(loop.client, target, loop.task_queue)
        started = time.monotonic()
        async with OutputPublisher(loop.client, target) as publisher:
            for index, piece in enumerate(pieces):
                publisher.publish(
                    OutputDelta(turn=1, attempt=1, kind="text", text=piece), now=index == 0
                )
                await asyncio.sleep(0.002)
        elapsed = time.monotonic() - started
        shown = await read_forwarded(
            loop.client, pydantic_data_converter.payload_converter, target.stream_id, turn=1
        )
        history = await event_types(loop.client.get_workflow_handle(target.stream_id))

    assert publisher.failed is None
    assert shown.text == "".join(pieces)  # every piece, once, in order
    signals = history.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    # The first piece at once, then one batch a whole interval, then the rest on close.
    assert 2 <= signals <= 2 + elapsed / interval, (signals, elapsed)


class FailOnePoll(Interceptor):
    """Fails the subscriber's `fail_call`-th poll the way the server does when the host's
    continue-as-new task fails (a signal landed during it): the admitted update is
    aborted with "unexpected workflow task failure", which the stream client raises."""

    def __init__(self, fail_call: int) -> None:
        self.fail_call = fail_call
        self.calls = 0
        self.failed = 0

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _FailOnePollOutbound(next, self)


class _FailOnePollOutbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, owner: FailOnePoll) -> None:
        super().__init__(next)
        self.owner = owner

    async def start_workflow_update(
        self, input: StartWorkflowUpdateInput
    ) -> WorkflowUpdateHandle[Any]:
        self.owner.calls += 1
        if self.owner.calls == self.owner.fail_call:
            self.owner.failed += 1
            raise RPCError(
                "Unable to perform workflow execution update due to unexpected workflow task "
                "failure.",
                RPCStatusCode.FAILED_PRECONDITION,
                b"",
            )
        return await super().start_workflow_update(input)


async def test_a_subscriber_whose_poll_fails_mid_stream_still_reads_every_piece_once() -> None:
    words = " ".join(f"w{index}" for index in range(40))
    faults = FailOnePoll(fail_call=3)
    async with running_loop([slow_answer(words, pause_s=0.03)]) as loop:
        config = loop.client.config()
        config["interceptors"] = [faults]
        subscriber = Client(**config)
        handle = await loop.start(forwarding_run())
        seen: list[OutputDelta] = []
        watcher = asyncio.ensure_future(collect(subscriber, handle.id, seen))
        result = await handle.result()
        await asyncio.wait_for(watcher, 30)

    assert faults.failed == 1 and faults.calls > 3  # the fault happened mid-stream
    assert result.final_answer == words
    assert "".join(d.text for d in seen) == words  # nothing lost, nothing repeated


async def test_a_host_that_idled_out_mid_call_is_started_again_and_the_rest_is_still_shown() -> (
    None
):
    """A model silent for longer than the run's `host_idle_close_s` finds its host ended:
    the publisher starts it again with its log, so what follows is shown, after what was."""
    async with running_loop([]) as loop:
        target = ForwardTarget(
            stream_id=f"idle-{uuid.uuid4()}/output",
            turn=1,
            attempt=1,
            batch_interval_s=0.05,
            host_idle_close_s=1.0,
        )
        await ensure_host(loop.client, target, loop.task_queue)
        host = loop.client.get_workflow_handle(target.stream_id)
        first_run = (await host.describe()).run_id
        async with OutputPublisher(loop.client, target, loop.task_queue) as publisher:
            publisher.publish(OutputDelta(turn=1, attempt=1, kind="text", text="before "), now=True)
            for _ in range(200):  # a hang guard: the host ends after its idle second
                if (await host.describe()).status == WorkflowExecutionStatus.COMPLETED:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the host never closed when idle")
            publisher.publish(OutputDelta(turn=1, attempt=1, kind="text", text="after"), now=True)
        shown = await read_forwarded(
            loop.client, pydantic_data_converter.payload_converter, target.stream_id, turn=1
        )
        now = await host.describe()
    assert publisher.failed is None
    assert shown.text == "before after"  # both, once, in order, across the restart
    assert now.run_id != first_run, "the host was not started again"
