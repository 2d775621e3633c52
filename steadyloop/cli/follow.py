"""Following a run from outside: poll its queries while it runs, then take its result.

The `progress` query is polled (it is cheap: it reads workflow state on the worker);
the `transcript` query only when progress moved, so a long transcript is not fetched
four times a second, and `pending_approvals` / `ambiguous_receipts` only when calls wait
for a person (each is shown once, with the command that decides it). While a model or
tool activity is in flight the server's description of the run is read too, so retries
(attempt 2, 3 and the last failure) show up while they happen instead of as an
unexplained pause.

Queries need a worker to answer them. Until one does (none running, or busy) the
status says so and following goes on: a query failing never ends the follow; only
the workflow's result (or its failure, raised as `WorkflowFailureError`) does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import timedelta

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from steadyloop.chat import ChatMessage
from steadyloop.cli.progress import (
    ActivityState,
    ProgressDisplay,
    TranscriptReader,
    approval_line,
    status_line,
)
from steadyloop.cli.receipts import waiting_lines
from steadyloop.output.follow import follow_output
from steadyloop.run.models import AmbiguousCall, RunProgress, RunResult
from steadyloop.run.steering import PendingApproval
from steadyloop.stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

DEFAULT_POLL_INTERVAL_S = 0.3
# After the run's result, how long its forwarded text may take to finish printing.
OUTPUT_DRAIN_S = 3.0
QUERY_TIMEOUT = timedelta(seconds=5)
_QUERY_ERRORS = (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError, TimeoutError)

RunHandle = WorkflowHandle[ToolLoopWorkflow, RunResult]


async def follow(
    handle: RunHandle,
    display: ProgressDisplay,
    *,
    task_queue: str | None = None,
    poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
    output: Client | None = None,
) -> RunResult:
    """Show the run's progress on `display` until it ends; return its result.

    With `output` (a client), the run's forwarded text is printed as it streams.
    """
    reader = TranscriptReader(streamed=output is not None)
    result = asyncio.ensure_future(handle.result())
    tokens = None
    if output is not None:
        tokens = asyncio.ensure_future(_print_output(output, handle, display))
    last: RunProgress | None = None
    announced: set[str] = set()  # calls already shown as waiting for approval
    ambiguous: set[str] = set()  # keys of ambiguous calls already shown
    try:
        while not result.done():
            progress = await _progress(handle)
            if progress is not None and progress != last:
                transcript = await _transcript(handle)
                if transcript is not None:
                    for line in reader.new_lines(transcript):
                        display.event(line)
                if progress.pending_approvals:
                    for call in await _pending_approvals(handle):
                        if call.call_id not in announced:
                            announced.add(call.call_id)
                            display.event(approval_line(handle.id, call))
                if progress.ambiguous:
                    for waiting in await _ambiguous_calls(handle):
                        if waiting.key not in ambiguous:
                            ambiguous.add(waiting.key)
                            for line in waiting_lines(handle.id, waiting):
                                display.event(line)
                last = progress
            activity = None
            if progress is not None and progress.phase in ("model", "tools"):
                activity = await _activity_in_flight(handle)
            if not result.done():
                display.status(
                    status_line(progress, activity, task_queue=task_queue, workflow_id=handle.id)
                )
            await asyncio.wait({result}, timeout=poll_interval_s)
        outcome = result.result()
        if tokens is not None:  # the host drains and ends once the run closed it
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(tokens), OUTPUT_DRAIN_S)
        for line in reader.new_lines(outcome.transcript):
            display.event(line)
        return outcome
    finally:
        if tokens is not None and not tokens.done():
            tokens.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await tokens
        if not result.done():
            result.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await result
        display.close()


async def _print_output(client: Client, handle: RunHandle, display: ProgressDisplay) -> None:
    """Print the run's forwarded text as it arrives; a broken live view never ends following."""
    try:
        async for delta in follow_output(client, handle.id):
            display.text(delta)
    except RPCError:
        display.event("(live output unavailable; the answer follows when the run ends)")


async def _progress(handle: RunHandle) -> RunProgress | None:
    try:
        return await handle.query(ToolLoopWorkflow.progress, rpc_timeout=QUERY_TIMEOUT)
    except _QUERY_ERRORS:
        return None


async def _transcript(handle: RunHandle) -> list[ChatMessage] | None:
    try:
        return await handle.query(ToolLoopWorkflow.transcript, rpc_timeout=QUERY_TIMEOUT)
    except _QUERY_ERRORS:
        return None


async def _pending_approvals(handle: RunHandle) -> list[PendingApproval]:
    try:
        return await handle.query(ToolLoopWorkflow.pending_approvals, rpc_timeout=QUERY_TIMEOUT)
    except _QUERY_ERRORS:
        return []


async def _ambiguous_calls(handle: RunHandle) -> list[AmbiguousCall]:
    try:
        return await handle.query(ToolLoopWorkflow.ambiguous_receipts, rpc_timeout=QUERY_TIMEOUT)
    except _QUERY_ERRORS:
        return []


async def _activity_in_flight(handle: RunHandle) -> ActivityState | None:
    """The pending activity with the highest attempt, or None (none, or not describable)."""
    try:
        description = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
    except _QUERY_ERRORS:
        return None
    pending = description.raw_description.pending_activities
    if not pending:
        return None
    busiest = max(pending, key=lambda activity: activity.attempt)
    failure = busiest.last_failure.message if busiest.HasField("last_failure") else None
    stream: dict[str, object] | None = None
    if busiest.activity_type.name == STREAM_COMPLETION_ACTIVITY:
        stream = await _last_heartbeat(busiest.heartbeat_details.payloads)
    return ActivityState(
        name=busiest.activity_type.name,
        attempt=busiest.attempt,
        last_failure=failure or None,
        stream=stream,
    )


async def _last_heartbeat(payloads: Sequence[Payload]) -> dict[str, object] | None:
    """The model stream's last heartbeat as a dict (progress is plain JSON), or None."""
    if not payloads:
        return None
    try:
        details = await pydantic_data_converter.decode(payloads)
    except Exception:
        return None
    last = details[-1] if details else None
    return last if isinstance(last, dict) else None
