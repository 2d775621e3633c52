"""A worker killed (SIGKILL) mid-stream, on the local dev server, with forwarding on.

After output was shown: the first worker dies with the turn half-streamed; a second
worker takes over; the model's last heartbeat says output was produced, so the turn is
not replayed (the provider sees one request) and the run stops `output_interrupted`
with the text a person saw, read back from the run's output host.

Before any output: the same kill, but the stream had sent nothing; the lost attempt is
retried on the second worker and the run completes.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from polling import eventually
from receipts_e2e_harness import e2e_run
from temporalio.client import Client, WorkflowHandle

from steadyloop._output.forwarding import ForwardingOptions, OutputDelta
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop.client._event_log import follow_output
from steadyloop.testing import (
    Pause,
    RecordedRequest,
    ScriptedResponse,
    sse_response,
    text_chunks,
    text_response,
)

pytestmark = pytest.mark.slow

FORWARDING = ForwardingOptions(enabled=True, batch_interval_s=0.05)
HEARTBEAT_TIMEOUT_S = 2.0


async def model_heartbeat(client: Client, handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """The model activity's last heartbeat as the *server* holds it ({} when none yet)."""
    description = await handle.describe()
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name != STREAM_COMPLETION_ACTIVITY:
            continue
        if not pending.heartbeat_details.payloads:
            return {}
        details = await client.data_converter.decode(pending.heartbeat_details.payloads)
        last = details[-1]
        return last if isinstance(last, dict) else {}
    return {}


async def test_a_worker_killed_after_output_was_shown_does_not_replay_the_turn(
    tmp_path: Path,
) -> None:
    requests: list[RecordedRequest] = []

    def model(request: RecordedRequest) -> ScriptedResponse:
        requests.append(request)
        # Half an answer, then silence (the worker streaming it is killed meanwhile).
        return sse_response([*text_chunks("The first half of"), Pause(120)], done=False)

    async with e2e_run(model, tmp_path) as e2e:
        first = await e2e.start_worker()
        handle = await e2e.start(
            forwarding=FORWARDING, model_heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S
        )
        seen: list[OutputDelta] = []

        async def watch() -> None:
            async for delta in follow_output(e2e.client, handle.id, poll_s=0.05):
                seen.append(delta)

        watcher = asyncio.ensure_future(watch())

        async def shown_and_flagged() -> bool | None:
            # The whole half answer, not its first batch: the kill must land in the
            # silence after it, or the person saw less (and the partial says less).
            heartbeat = await model_heartbeat(e2e.client, handle)
            whole = "".join(d.text for d in seen) == "The first half of"
            return True if whole and heartbeat.get("produced_output") else None

        await eventually(shown_and_flagged, timeout_s=20, what="output shown and heartbeated")
        await first.kill()
        await e2e.start_worker()
        result = await handle.result(rpc_timeout=None)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(watcher, 10)
        watcher.cancel()

    shown = "".join(d.text for d in seen)
    assert shown == "The first half of"
    assert len(requests) == 1  # the turn was not replayed
    assert result.stop_reason == "output_interrupted"
    assert result.partial is not None
    assert result.partial.source == "stream"  # read back from the host: the worker died
    assert result.partial.text == shown and result.partial.complete
    assert "Heartbeat" in result.partial.cause or "heartbeat" in result.partial.cause.lower()


async def test_a_worker_killed_before_any_output_is_retried_and_the_run_completes(
    tmp_path: Path,
) -> None:
    requests: list[RecordedRequest] = []

    def model(request: RecordedRequest) -> ScriptedResponse:
        requests.append(request)
        if len(requests) == 1:
            return sse_response([Pause(120), *text_chunks("too late")], done=False)
        return text_response("all done")

    async with e2e_run(model, tmp_path) as e2e:
        first = await e2e.start_worker()
        handle = await e2e.start(
            forwarding=FORWARDING,
            model_heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
            model_retry_initial_s=0.1,
        )

        async def streaming() -> bool | None:
            return True if requests else None

        await eventually(streaming, timeout_s=20, what="the first model request")
        await first.kill()
        await e2e.start_worker()
        result = await handle.result(rpc_timeout=None)

    assert len(requests) == 2, (result.stop_reason, result.detail)  # retried, on the second worker
    assert result.stop_reason == "final_answer" and result.final_answer == "all done"
    assert result.partial is None
    assert result.stats.retries == {"model_timeout_heartbeat": 1}
