"""Following a run from outside: print its event log, in run order, then take its result.

The run's events come from `steadyloop.client.RunHandle.events()`, one ordered log
(text deltas, tool calls, their answers, approvals waiting, ambiguous receipts, the
timeline, people's decisions, the stop), read from the run's history (a run that does
not forward) or by long polls on its output host: following costs no query per poll,
and a run that ended is read with no worker. `EventPrinter` (`progress`) turns each
event into its lines; nothing is merged here.

The log holds every fact printed, so following sends no query: the text of a turn
that forwarded none (`--no-stream`) rides on its first tool call (`ToolCallEvent.said`);
an ambiguous receipt carries the call's arguments, how its attempt was lost and, once it
arrives, the late result, for the commands that resolve it
(`receipts.receipt_event_lines`, `late_event_lines`); and a retried attempt's timeline
events are published before that attempt runs, so the retry is said before its text.

A log that cannot be read (no such host, the reader gave up) does not end following:
that is said once, and the outcome follows from the workflow's result (its failure is
raised as `WorkflowFailureError`).
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from steadyloop._cli.progress import EventPrinter, ProgressDisplay, one_line, status_line
from steadyloop._cli.receipts import late_event_lines, receipt_event_lines
from steadyloop._run.models import RunResult
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunHandle as ClientRunHandle
from steadyloop.client import StopUnread
from steadyloop.events import (
    AmbiguousReceiptEvent,
    CursorExpired,
    InvalidCursor,
    StopEvent,
    TextDeltaEvent,
    ToolCallEvent,
)

# Seconds without a first event before the status asks whether a worker is running.
WORKER_HINT_S = 2.0
_LOG_ERRORS = (
    RPCError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    CursorExpired,
    InvalidCursor,
    StopUnread,
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
    spoken: set[int] = set()  # turns whose text was printed (or looked for)
    receipts_shown: set[str] = set()
    late_shown: set[str] = set()
    try:
        try:
            async for event in ClientRunHandle(client, handle.id).events():
                quiet.cancel()
                if isinstance(event, TextDeltaEvent):
                    # A retry's timeline events come before the attempt's text (the loop
                    # publishes them before it runs); an attempt that continues shown
                    # text (`stops.continuation`) goes on in its line.
                    spoken.add(event.turn)
                    display.text(event)
                    continue
                if isinstance(event, ToolCallEvent) and event.turn not in spoken:
                    spoken.add(event.turn)  # the turn's text, when none was forwarded
                    if event.said:
                        display.event(one_line(f"turn {event.turn}  model: {event.said}"))
                for line in printer.lines(event):
                    display.event(line)
                if not ended and isinstance(event, AmbiguousReceiptEvent):
                    for line in _receipt_lines(handle.id, event, receipts_shown, late_shown):
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


def _receipt_lines(
    workflow_id: str, event: AmbiguousReceiptEvent, shown: set[str], late: set[str]
) -> list[str]:
    """An ambiguous receipt's commands, and its late result's, once each."""
    lines: list[str] = []
    if event.key not in shown:
        shown.add(event.key)
        lines.extend(receipt_event_lines(workflow_id, event))
    if event.late is not None and event.key not in late:
        late.add(event.key)
        lines.extend(late_event_lines(workflow_id, event))
    return lines
