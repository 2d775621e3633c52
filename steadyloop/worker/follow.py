"""Following a run from outside: poll its queries while it runs, then take its result.

The `progress` query is polled (it is cheap: it reads workflow state on the worker);
the `transcript` query only when progress moved, so a long transcript is not fetched
four times a second. While a model or tool activity is in flight the server's
description of the run is read too, so retries (attempt 2, 3 and the last failure)
show up while they happen instead of as an unexplained pause.

Queries need a worker to answer them. Until one does (none running, or busy) the
status says so and following goes on: a query failing never ends the follow; only
the workflow's result (or its failure, raised as `WorkflowFailureError`) does.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import (
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError

from steadyloop.chat import ChatMessage
from steadyloop.run_models import RunProgress, RunResult
from steadyloop.worker.progress import (
    ActivityState,
    ProgressDisplay,
    TranscriptReader,
    status_line,
)
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

DEFAULT_POLL_INTERVAL_S = 0.3
QUERY_TIMEOUT = timedelta(seconds=5)
_QUERY_ERRORS = (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError, TimeoutError)

RunHandle = WorkflowHandle[ToolLoopWorkflow, RunResult]


async def follow(
    handle: RunHandle,
    display: ProgressDisplay,
    *,
    task_queue: str | None = None,
    poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
) -> RunResult:
    """Show the run's progress on `display` until it ends; return its result."""
    reader = TranscriptReader()
    result = asyncio.ensure_future(handle.result())
    last: RunProgress | None = None
    try:
        while not result.done():
            progress = await _progress(handle)
            if progress is not None and progress != last:
                transcript = await _transcript(handle)
                if transcript is not None:
                    for line in reader.new_lines(transcript):
                        display.event(line)
                last = progress
            activity = None
            if progress is not None and progress.phase in ("model", "tools"):
                activity = await _activity_in_flight(handle)
            if not result.done():
                display.status(status_line(progress, activity, task_queue=task_queue))
            await asyncio.wait({result}, timeout=poll_interval_s)
        outcome = result.result()
        for line in reader.new_lines(outcome.transcript):
            display.event(line)
        return outcome
    finally:
        if not result.done():
            result.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await result
        display.close()


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
    return ActivityState(
        name=busiest.activity_type.name, attempt=busiest.attempt, last_failure=failure or None
    )
