"""A worker killed (SIGKILL) mid-answer, on the local dev server, with a real worker
process: the run's event log still holds every event up to the cut, then the stop.

Turn 1 calls a tool; turn 2 streams half an answer, then the worker streaming it is
killed. A second worker takes over: the turn is not repeated (its output was shown) and
the run stops `output_interrupted`. A follower that stayed connected throughout, one
that reconnects with only its last cursor, and one that arrives after the end all read
the same log: the call, its answer, the half answer, the stop with what was shown.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from polling import eventually
from receipts_e2e_harness import e2e_run
from temporalio.client import Client, WorkflowHandle

from steadyloop._output.forwarding import ForwardingOptions
from steadyloop.client._event_log import run_events
from steadyloop.events import (
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from steadyloop.testing import (
    Pause,
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    sse_response,
    text_chunks,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

FORWARDING = ForwardingOptions(enabled=True, batch_interval_s=0.05)
HALF = "The first half of"
READ_GUARD_S = 60.0


async def read_all(
    client: Client, handle: WorkflowHandle[Any, Any], after: str | None = None
) -> list[RunEventItem]:
    assert handle.first_execution_run_id is not None

    async def read() -> list[RunEventItem]:
        return [
            event
            async for event in run_events(
                client, handle.id, handle.first_execution_run_id or "", after, poll_s=0.05
            )
        ]

    return await asyncio.wait_for(read(), READ_GUARD_S)


def text(events: list[RunEventItem]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDeltaEvent))


async def test_a_follower_reads_every_event_up_to_a_sigkill_then_the_stop(
    tmp_path: Path,
) -> None:
    requests: list[RecordedRequest] = []

    def model(request: RecordedRequest) -> ScriptedResponse:
        requests.append(request)
        if len(requests) == 1:
            return tool_calls_response(ScriptedCall("notify", {"text": "hello"}, id="n1"))
        # Half an answer, then silence (the worker streaming it is killed meanwhile).
        return sse_response([*text_chunks(HALF), Pause(120)], done=False)

    async with e2e_run(model, tmp_path) as e2e:
        first = await e2e.start_worker()
        handle = await e2e.start(
            forwarding=FORWARDING, model_heartbeat_timeout_s=2.0, model_retry_initial_s=0.1
        )
        assert handle.first_execution_run_id is not None
        live: list[RunEventItem] = []

        async def follow() -> None:
            async for event in run_events(
                e2e.client, handle.id, handle.first_execution_run_id or "", poll_s=0.05
            ):
                live.append(event)

        follower = asyncio.ensure_future(follow())

        async def half_shown() -> bool | None:
            return True if text(live) == HALF else None

        await eventually(half_shown, timeout_s=30, what="the half answer read by a follower")
        cut = live[-1].cursor  # a second follower leaves here, at the cut
        await first.kill()
        await e2e.start_worker()
        result = await handle.result(rpc_timeout=None)
        await asyncio.wait_for(follower, READ_GUARD_S)
        after_cut = await read_all(e2e.client, handle, cut)
        late = await read_all(e2e.client, handle)

    assert len(requests) == 2  # the half-shown turn was not repeated
    assert result.stop_reason == "output_interrupted"
    kinds = [e.type for e in live]
    assert kinds[:2] == ["tool_call", "tool_result"]
    call, answered = live[0], live[1]
    assert isinstance(call, ToolCallEvent) and call.call_id == "n1" and call.sha
    assert isinstance(answered, ToolResultEvent) and answered.text == "notified 'hello'"
    assert text(live) == HALF  # every piece up to the cut, once
    stop = live[-1]
    assert isinstance(stop, StopEvent) and stop.reason == "output_interrupted"
    assert stop.partial == HALF and stop.shown
    assert after_cut == live[live.index(next(e for e in live if e.cursor == cut)) + 1 :]
    assert isinstance(after_cut[-1], StopEvent)
    assert late == live  # a follower arriving after the end reads the same log
