"""The 1.9 MB check on activity inputs applies only where payloads reach Temporal inline.

With `steadyloop_data_converter`'s external storage a 3 MB transcript reaches Temporal as
a reference, so the run goes on; without it the run stops with `PayloadTooLarge` (and
never loops on a refused workflow task). The limit is what the worker's describe-tools
activity reported, in history: at the start of a run with tools, on demand in one
without. What decides the outcome: the run's result, what the provider received, the
history's size, and that the history replays.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from loop_harness import ALL_TOOLS, ENDPOINT, MODEL, running_loop
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._run.models import RunInput
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.errors import PAYLOAD_TOO_LARGE
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)
from steadyloop.tools._payloads import DESCRIBE_TOOLS_ACTIVITY

pytestmark = pytest.mark.slow

BIG = 3_000_000  # characters in the user message: the request is over 3 MB
WITH_AND_WITHOUT_TOOLS = pytest.mark.parametrize(
    "tools", [ALL_TOOLS, []], ids=["limit-learned-at-start", "limit-asked-on-demand"]
)


def big_run(tools: list[str]) -> RunInput:
    return RunInput(endpoint=ENDPOINT, model=MODEL, prompt="y" * BIG, tools=tools)


NOTE_CHARS = 20_000  # under the runaway guard's 24 KiB of arguments


def calls_note(call_id: str, text: str) -> ScriptedResponse:
    return tool_calls_response(ScriptedCall("note", {"text": text}, id=call_id))


def done() -> list[ScriptedResponse]:
    return [text_response("read it all")]


@WITH_AND_WITHOUT_TOOLS
async def test_a_request_over_the_inline_limit_completes_with_payload_storage(
    tools: list[str], tmp_path: Path
) -> None:
    async with running_loop(done(), blob_dir=tmp_path) as loop:
        handle = await loop.start(big_run(tools))
        result = await handle.result()
        history = await handle.fetch_history()
        requests = loop.server.requests
    assert result.stop_reason == "final_answer" and result.final_answer == "read it all"
    # The provider received the whole transcript, the big message intact.
    assert len(requests) == 1
    messages = requests[0].messages
    assert messages[-1] == {"role": "user", "content": "y" * BIG}
    assert len(requests[0].body) > MAX_INLINE_PAYLOAD_BYTES
    # History holds references: far less than the one request it scheduled.
    assert sum(event.ByteSize() for event in history.events) < 100_000
    # The worker's limit came from describe-tools, once, recorded in history: a local
    # activity's marker when the run's tools were described at its start, else an activity.
    described = [
        e
        for e in history.events
        if (
            e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name
            == DESCRIBE_TOOLS_ACTIVITY
        )
        or (
            e.HasField("marker_recorded_event_attributes")
            and any(
                DESCRIBE_TOOLS_ACTIVITY.encode() in p.data
                for p in e.marker_recorded_event_attributes.details["data"].payloads
            )
        )
    ]
    assert len(described) == 1
    replay = await Replayer(
        workflows=[ToolLoopWorkflow], data_converter=steadyloop_data_converter(tmp_path)
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None, replay.replay_failure


# Under Temporal's 2 MB as a run input, over the 1.9 MB check as a model request; each
# scripted turn then adds about 40 KB (a note call and its answer), so the third request
# would pass 2 MB: unchecked, a real server would refuse that turn's workflow task again
# and again (the time-skipping server does not enforce the limit: the run would finish).
UNDER_TWO_MB = 2_040_000


@WITH_AND_WITHOUT_TOOLS
async def test_the_same_request_without_payload_storage_stops_naming_the_limit(
    tools: list[str],
) -> None:
    notes = [calls_note(f"n{turn}", str(turn) * NOTE_CHARS) for turn in range(3)]
    async with running_loop([*notes, *done()], blob_storage=False) as loop:
        run = big_run(tools).model_copy(update={"prompt": "y" * UNDER_TWO_MB})
        handle = await loop.start(run)
        with pytest.raises(WorkflowFailureError) as failure:
            # The run fails by itself; the guard only turns a hang into a failure.
            await asyncio.wait_for(handle.result(), timeout=60)
        assert loop.server.requests == []
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == PAYLOAD_TOO_LARGE and "2 MB" in cause.message
    assert "1,900,000-byte limit" in cause.message and "STEADYLOOP_BLOB_DIR" in cause.message


async def test_stored_payloads_still_have_an_upper_bound() -> None:
    async with running_loop(done(), max_stored_payload_bytes=2_500_000) as loop:
        handle = await loop.start(big_run([]))
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        assert loop.server.requests == []
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == PAYLOAD_TOO_LARGE
    assert "2,500,000-byte limit the worker sets on one stored activity input" in cause.message
