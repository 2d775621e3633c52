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

Temporal going away (a restart; `worker --dev` runs it in the worker's process) is said in
one line and ridden out, from the follower's cursor, for the reconnect bound
(`steadyloop.client._reconnect`); after it, `TemporalLost` (exit 4 in `outcome`).
A log that cannot be read (no such host, the reader gave up) does not end following:
that is said once, and the outcome follows from the workflow's result (its failure is
raised as `WorkflowFailureError`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, timedelta

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from steadyloop._cli.progress import EventPrinter, ProgressDisplay, one_line, status_line
from steadyloop._cli.receipts import late_event_lines, receipt_event_lines
from steadyloop._run.models import RunResult
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunFailed, StopUnread
from steadyloop.client import RunHandle as ClientRunHandle
from steadyloop.client._reconnect import DEFAULT_RECONNECT_BOUND, Reconnect
from steadyloop.events import (
    AmbiguousReceiptEvent,
    CursorExpired,
    InvalidCursor,
    StopEvent,
    TextDeltaEvent,
    ToolCallEvent,
)

# Seconds without a first event before the status says what the run is doing (then
# again every QUIET_REFRESH_S until the first event).
WORKER_HINT_S = 2.0
QUIET_REFRESH_S = 2.0
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
    reconnect_bound: timedelta = DEFAULT_RECONNECT_BOUND,
) -> RunResult:
    """Print the run's events on `display` until it stops; return its result.

    `ended`: the run had ended when following began, so the calls that waited for a
    person are not offered commands (nothing waits any more). `display.answer_shown`
    then says whether the final answer was printed. Temporal going away is said in one
    line per outage, and following goes on from its cursor when it answers again;
    `TemporalLost` when it does not within `reconnect_bound`.
    """
    printer = EventPrinter(handle.id, steering=not ended)
    lost = _LostLine(display, client, reconnect_bound)
    waiting = Reconnect(handle.id, reconnect_bound.total_seconds(), lost.say)
    result = asyncio.ensure_future(waiting.call(handle.result))
    # Until the log says anything, say what the run is doing: a model turn of a run that
    # forwards nothing says nothing until it ends, and no worker says nothing at all.
    quiet = asyncio.ensure_future(_while_quiet(handle, display, task_queue))
    spoken: set[int] = set()  # turns whose text was printed (or looked for)
    receipts_shown: set[str] = set()
    late_shown: set[str] = set()
    try:
        try:
            events = ClientRunHandle(client, handle.id).events(
                reconnect_bound=reconnect_bound, on_lost=lost.say
            )
            async for event in events:
                quiet.cancel()
                lost.said = False  # the server answered: a later outage is said again
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
        except RunFailed:
            pass  # the log ended without a stop: the run's outcome, next, says why
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
        with contextlib.suppress(asyncio.CancelledError):
            await quiet
        if not result.done():
            result.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await result
        display.close()


class _LostLine:
    """The one line a follower prints when Temporal stops answering (the events and the
    result are read apart, and each notices: said once until an event arrives)."""

    def __init__(self, display: ProgressDisplay, client: Client, bound: timedelta) -> None:
        self.display = display
        self.client = client
        self.bound_s = bound.total_seconds()
        self.said = False

    def say(self, error: BaseException) -> None:
        if self.said:
            return
        self.said = True
        cause = one_line(str(error) or type(error).__name__, 60)
        address = self.client.service_client.config.target_host
        self.display.event(
            f"(lost Temporal at {address}: {cause}; retrying for up to "
            f"{self.bound_s:.0f}s, the run goes on meanwhile)"
        )


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


async def _while_quiet(handle: RunHandle, display: ProgressDisplay, task_queue: str | None) -> None:
    """Until the first event, what the run's pending activities say it is doing; a run
    that cannot be described keeps the question whether a worker runs it."""
    await asyncio.sleep(WORKER_HINT_S)
    while True:
        try:
            described = await handle.describe()
            pending = list(described.raw_description.pending_activities)
        except RPCError:
            pending = []
        display.status(quiet_line(pending, task_queue))
        await asyncio.sleep(QUIET_REFRESH_S)


def quiet_line(pending: Sequence[PendingActivityInfo], task_queue: str | None) -> str:
    """The status before a run's first event: the model asked (since when, which
    attempt), a tool running, an activity no worker has taken, or no worker at all.
    Times are the server's (UTC), so the line stays the same while nothing changes."""
    for activity in pending:
        name = activity.activity_type.name
        what = "asking the model" if name == STREAM_COMPLETION_ACTIVITY else f"running {name}"
        if activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
            started = activity.last_started_time.ToDatetime(tzinfo=UTC)
            attempt = f", attempt {activity.attempt}" if activity.attempt > 1 else ""
            return f"{what} (since {started:%H:%M:%S} UTC{attempt})"
    if pending:
        where = f" on task queue {task_queue!r}" if task_queue else ""
        return f"waiting for a worker{where} to take the run's next step"
    return status_line(None, task_queue=task_queue)
