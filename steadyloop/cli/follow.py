"""Following a run from outside: print its event log, in run order, then take its result.

The run's events come from `steadyloop.client.RunHandle.events()`, one ordered log
(text deltas, tool calls, their answers, approvals waiting, ambiguous receipts, the
timeline, people's decisions, the stop), read by long polls on the run's output host:
following costs no query per poll, and a run that ended is read from its host's result
with no worker. `EventPrinter` (`progress`) turns each event into its lines; nothing is
merged here.

Four things the log does not carry are asked for once, when they happen, never per
poll: the text of a turn that forwarded none (`--no-stream`), beside its tool calls, is
read from the transcript (`transcript` query, or the result once the run ended); a
retried attempt's text comes before the loop publishes the retry's timeline
events, so its model events are read first (`timeline` query, or the result once the
run ended) and the retry is said before that attempt's text; and an ambiguous receipt's
arguments and a timed-out call's late result are read with one `ambiguous_receipts`
query, to print the commands that resolve them (`receipts.waiting_lines`, `late_lines`).

A log that cannot be read (no such host, the reader gave up) does not end following:
that is said once, and the outcome follows from the workflow's result (its failure is
raised as `WorkflowFailureError`).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from steadyloop.cli.progress import EventPrinter, ProgressDisplay, one_line, status_line
from steadyloop.cli.receipts import late_lines, waiting_lines
from steadyloop.client import RunHandle as ClientRunHandle
from steadyloop.events import (
    AmbiguousReceiptEvent,
    CursorExpired,
    InvalidCursor,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    TimelineEntryEvent,
    ToolCallEvent,
)
from steadyloop.run.models import AmbiguousCall, RunResult
from steadyloop.run.timeline import RunEvent
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

QUERY_TIMEOUT = timedelta(seconds=5)
# Seconds without a first event before the status asks whether a worker is running.
WORKER_HINT_S = 2.0
_QUERY_ERRORS = (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError, TimeoutError)
_LOG_ERRORS = (
    RPCError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    CursorExpired,
    InvalidCursor,
)

RunHandle = WorkflowHandle[ToolLoopWorkflow, RunResult]


async def follow(
    client: Client,
    handle: RunHandle,
    display: ProgressDisplay,
    *,
    task_queue: str | None = None,
    ended: bool = False,
) -> RunResult:
    """Print the run's events on `display` until it stops; return its result.

    `ended`: the run had ended when following began, so the calls that waited for a
    person are not offered commands (nothing waits any more). `display.answer_shown`
    then says whether the final answer was printed.
    """
    printer = EventPrinter(handle.id, steering=not ended)
    result = asyncio.ensure_future(handle.result())
    # Until the log says anything, the reason may be that no worker runs the run.
    quiet = asyncio.get_running_loop().call_later(
        WORKER_HINT_S, display.status, status_line(None, task_queue=task_queue)
    )
    attempts: set[tuple[int, int]] = set()
    spoken: set[int] = set()  # turns whose text was printed (or looked for)
    receipts_shown: set[str] = set()
    late_shown: set[str] = set()
    try:
        try:
            async for event in ClientRunHandle(client, handle.id).events():
                quiet.cancel()
                if isinstance(event, TextDeltaEvent):
                    if (event.turn, event.attempt) not in attempts:
                        attempts.add((event.turn, event.attempt))
                        # A retry is said before the attempt's text; an attempt that
                        # continues shown text (`stops.continuation`) goes on in its line.
                        if event.attempt > 1 and event.turn not in spoken:
                            entries = await _timeline(handle, result, printer.last_seq)
                            for line in printer.timeline_lines(entries):
                                display.event(line)
                    spoken.add(event.turn)
                    display.text(event)
                    continue
                if isinstance(event, ToolCallEvent) and event.turn not in spoken:
                    spoken.add(event.turn)  # the turn's text, when none was forwarded
                    said = await _turn_text(handle, result, event.call_id)
                    if said:
                        display.event(one_line(f"turn {event.turn}  model: {said}"))
                for line in printer.lines(event):
                    display.event(line)
                if not ended:
                    for line in await _receipt_lines(handle, event, receipts_shown, late_shown):
                        display.event(line)
                if isinstance(event, StopEvent):
                    if not display.showed(event.final_answer or ""):
                        for line in printer.answer_line(event):
                            display.event(line)
                    break
                if not ended:  # an ended run's log is read at once: no status to follow
                    display.status(printer.status())
        except _LOG_ERRORS as error:
            display.event(
                f"(live view unavailable: {error}; the outcome follows when the run ends)"
            )
        outcome = await result
        for line in printer.flush():
            display.event(line)
        display.answer_shown = printer.answer_printed or display.showed(outcome.final_answer or "")
        return outcome
    finally:
        quiet.cancel()
        if not result.done():
            result.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await result
        display.close()


async def _timeline(
    handle: RunHandle, result: asyncio.Future[RunResult], after: int
) -> list[RunEvent]:
    """The run's timeline after event `after`: from its result once it ended, else by
    one query (a worker answers: it is streaming this run's text)."""
    if result.done() and not result.cancelled() and result.exception() is None:
        return [entry for entry in result.result().timeline if entry.seq > after]
    try:
        return await handle.query(ToolLoopWorkflow.timeline, after, rpc_timeout=QUERY_TIMEOUT)
    except _QUERY_ERRORS:
        return []


async def _turn_text(handle: RunHandle, result: asyncio.Future[RunResult], call_id: str) -> str:
    """What the model said beside call `call_id`, for a turn whose text the log does
    not hold (`--no-stream`): from the result once the run ended, else one query."""
    if result.done() and not result.cancelled() and result.exception() is None:
        transcript = result.result().transcript
    else:
        try:
            transcript = await handle.query(ToolLoopWorkflow.transcript, rpc_timeout=QUERY_TIMEOUT)
        except _QUERY_ERRORS:
            return ""
    for message in transcript:
        if message.role == "assistant" and any(c.id == call_id for c in message.tool_calls):
            return (message.content or "").strip()
    return ""


async def _receipt_lines(
    handle: RunHandle, event: RunEventItem, shown: set[str], late: set[str]
) -> list[str]:
    """An ambiguous receipt's commands, and a late result's, once each (one query)."""
    is_late = isinstance(event, TimelineEntryEvent) and event.kind == "tool_late"
    if not isinstance(event, AmbiguousReceiptEvent) and not is_late:
        return []
    try:
        calls: list[AmbiguousCall] = await handle.query(
            ToolLoopWorkflow.ambiguous_receipts, rpc_timeout=QUERY_TIMEOUT
        )
    except _QUERY_ERRORS:
        return []
    lines: list[str] = []
    for call in calls:
        if call.key not in shown:
            shown.add(call.key)
            lines.extend(waiting_lines(handle.id, call))
        if call.late_result is not None and call.key not in late:
            late.add(call.key)
            lines.extend(late_lines(handle.id, call))
    return lines
