"""Reading one run's event log from outside: `run_events(client, workflow_id, run_id, after)`.

This is the one reader of a run's log: the client's `RunHandle.events()` (and through it
the command line, the web server's streams and AG-UI) read it, and `follow_output` is
its text alone.

A run that does not forward its output keeps its log in its own history
(`steadyloop.client._history_log`); what follows is the host, where a run that forwards
keeps it.

The log is the run's output host (`steadyloop._workflows.output_stream`): the model
activity publishes its text deltas there (`OUTPUT_TOPIC`) and the loop everything else
(`EVENTS_TOPIC`), once per step, so reading needs no query of the run and no merging:
the host's offsets are the run's order. The host is keyed to the run's *execution*
(`output_stream_id(workflow_id, run_id)`), so a workflow id used again never shows an
older run's events.

How the obvious reader goes wrong, and what this one does instead:
- `WorkflowStreamClient.subscribe` answers a truncated offset by starting again from
  the oldest item held: a silent skip forward. Every topic is read here, so offsets
  are contiguous and any gap is seen: it raises `CursorExpired` naming the oldest
  cursor still held.
- A host that closed when idle and was started again would begin at offset 0; the
  one who starts it carries the ended host's log (`ensure_host`), so offsets go on,
  and the host's `epoch` (its memo) changes only when that was impossible: a cursor of
  another epoch is expired, never read as the new epoch's offset.
- A poll can fail while the host lives (the host continued-as-new in the same task a
  signal landed): reading resumes right after the last event yielded.

A host that ended is read from its result (what it retained), so following a finished
run needs no worker at all; a running host is long-polled (updates its worker answers).

What a follower can rely on: each event after its cursor once, in run order, and then
the stop; or a typed error naming the cursor to follow again after. Never a silent end
short of the stop of a run that published one:
- A run that completed published its stop before it returned, so a follower that finds
  the run over with the stop unread keeps reading (the host may be slow: its worker was
  just killed, and the stop waits on the host for the next one) for `STOP_PATIENCE_S`,
  then raises `StopUnread` naming the cursor after the last event it read
  (`events(after=...)` reads on from there; the run's result says how it stopped).
- A run that ended without one (it failed, or was terminated from outside) ends its
  followers once the run is over and the host has been quiet for `QUIET_CHECK_S` (the
  run is described then, no query), rather than when the host closes itself after an
  idle hour.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar, cast

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._output.forwarding import (
    HOST_EPOCH_MEMO,
    OUTPUT_TOPIC,
    OutputDelta,
    output_stream_id,
)
from steadyloop._workflows.output_stream import OutputStreamSummary
from steadyloop.client._errors import StopUnread
from steadyloop.client._history_log import (
    history_events,
    history_latest_cursor,
    keeps_log_in_history,
)
from steadyloop.client._reconnect import unreachable
from steadyloop.events._cursor import Cursor, format_cursor, parse_cursor
from steadyloop.events._errors import CursorExpired, InvalidCursor
from steadyloop.events._models import (
    EVENTS_TOPIC,
    ApprovalWaitingEvent,
    DecisionEvent,
    ReasoningDeltaEvent,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    parse_event,
)

__all__ = [
    "DEFAULT_POLL_S",
    "HOST_MISSING",
    "MAX_POLL_FAILURES",
    "STOP_PATIENCE_S",
    "OwedStop",
    "first_run_id",
    "follow_output",
    "host_events",
    "latest_cursor",
    "run_completed",
    "run_events",
    "run_over",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_POLL_S = 0.1
# Failed polls in a row (with backoff, about 25 s in all) before reading gives up.
MAX_POLL_FAILURES = 10
MAX_BACKOFF_S = 5.0
# Seconds without a new item after which a follower asks whether the run is over.
QUIET_CHECK_S = 5.0
# Why a log kept in the run's history can end short of its stop: the run's result, which
# carries the last events, had to leave them out to fit one payload.
RESULT_LEFT_EVENTS_OUT = (
    "its log in history ends without the stop: the run's result left its last events "
    "out to fit Temporal's payload limit, so they are not kept anywhere"
)
# Seconds a follower reads on for the stop a completed run owes it, from when it first
# finds the run over with the stop unread, before `StopUnread`: the host answers once a
# worker of its task queue picks it up again (Temporal retries a killed worker's task
# after its timeouts, a few seconds).
STOP_PATIENCE_S = 30.0
# Why a run over has no log to read (`CursorExpired.detail`): a run whose workflow failed
# before it published anything never started its host (`RunHandle.events` then says how
# the run failed instead).
HOST_MISSING = "the run's output host was never started or is gone"


@dataclass(frozen=True)
class OwedStop:
    """How a follower learns that a run owes it a stop, and how long it reads on for it.

    `completed()` is asked once, when the run is first found over with no stop read; a
    run that completed published its stop before it returned (`workflow_id` names it in
    `StopUnread`)."""

    workflow_id: str
    completed: Callable[[], Awaitable[bool]]
    patience_s: float = STOP_PATIENCE_S


async def run_events(
    client: Client,
    workflow_id: str,
    run_id: str,
    after: str | None = None,
    *,
    poll_s: float = DEFAULT_POLL_S,
    stop_patience_s: float = STOP_PATIENCE_S,
) -> AsyncGenerator[RunEventItem, None]:
    """Every event of the run after cursor `after` (None: from its first), in run order,
    then its stop.

    `run_id` is the run's first execution run id (`WorkflowHandle.first_execution_run_id`,
    or `first_run_id(handle)`): it stays the run's across
    continue-as-new. Raises `InvalidCursor` for a cursor this library did not write,
    `CursorExpired` when what follows `after` is no longer held, and `StopUnread` (naming
    the cursor to follow again after) when the run completed but its stop could not be
    read within `stop_patience_s` of the follower finding it over, or a log kept in
    history ends short of it (the run's result left its last events out to fit).

    A run already over when reading begins is read whole from `after` (its log is
    bounded: what its host retained, or its history) before the first event is given,
    so each `approval_waiting` says how its call was `decided` (paired with the call's
    `decision` event later in the log): code that approves on it does not approve again.
    """
    if not await run_over(client, workflow_id, run_id):
        async for event in _log_events(
            client, workflow_id, run_id, after, poll_s=poll_s, stop_patience_s=stop_patience_s
        ):
            yield event
        return
    held: list[RunEventItem] = []
    try:
        async for event in _log_events(
            client, workflow_id, run_id, after, poll_s=poll_s, stop_patience_s=stop_patience_s
        ):
            held.append(event)
    except Exception:
        for event in with_decisions(held):
            yield event
        raise
    for event in with_decisions(held):
        yield event


def with_decisions(events: list[RunEventItem]) -> list[RunEventItem]:
    """`events` with each `approval_waiting` marked `decided` when a later `decision`
    event of the same turn and call id approved or rejected it."""
    later: dict[tuple[int, str], Literal["approved", "rejected"]] = {}
    paired: list[RunEventItem] = []
    for event in reversed(events):
        if isinstance(event, DecisionEvent) and event.call_id is not None:
            if event.decision in ("approved", "rejected"):
                later[(event.turn, event.call_id)] = event.decision
        elif isinstance(event, ApprovalWaitingEvent):
            decided = later.get((event.turn, event.call_id))
            if decided is not None:
                event = event.model_copy(update={"decided": decided})
        paired.append(event)
    paired.reverse()
    return paired


async def _log_events(
    client: Client,
    workflow_id: str,
    run_id: str,
    after: str | None,
    *,
    poll_s: float,
    stop_patience_s: float,
) -> AsyncGenerator[RunEventItem, None]:
    """`run_events` as the log gives them (no pairing)."""

    async def over() -> bool:
        return await run_over(client, workflow_id, run_id)

    async def completed() -> bool:
        return await run_completed(client, workflow_id, run_id)

    position = parse_cursor(after) if after is not None else None
    if await keeps_log_in_history(client, workflow_id, run_id):
        last, read = after, False
        async for event in history_events(client, workflow_id, run_id, position, poll_s=poll_s):
            yield event
            if isinstance(event, StopEvent):
                return
            last, read = event.cursor, True
        # A completed run whose log ends short of the stop: its result left its last
        # events out to fit one payload (unless the cursor was the stop's own).
        if await completed() and (
            read or not await _history_stop_at(client, workflow_id, run_id, position)
        ):
            raise StopUnread(workflow_id, last, 0.0, why=RESULT_LEFT_EVENTS_OUT)
        return
    owed = OwedStop(workflow_id, completed, stop_patience_s)
    host_id = output_stream_id(workflow_id, run_id)
    async for event in host_events(
        client, host_id, after, run_over=over, poll_s=poll_s, owed_stop=owed
    ):
        yield event


async def _history_stop_at(
    client: Client, workflow_id: str, run_id: str, position: Cursor | None
) -> bool:
    """Whether the event at `position` of a log kept in history is the stop (a follower
    back with the stop's own cursor has read it: nothing follows, and nothing is owed)."""
    if position is None:
        return False
    before = None if position.offset == 0 else Cursor(position.epoch, position.offset - 1)
    async for event in history_events(client, workflow_id, run_id, before, poll_s=None):
        return isinstance(event, StopEvent)
    return False


async def host_events(
    client: Client,
    host_id: str,
    after: str | None,
    *,
    run_over: Callable[[], Awaitable[bool]],
    poll_s: float = DEFAULT_POLL_S,
    quiet_s: float = QUIET_CHECK_S,
    owed_stop: OwedStop | None = None,
) -> AsyncGenerator[RunEventItem, None]:
    """The events of output host `host_id` after `after`, across its continue-as-new,
    idle closes and restarts; ends at a `stop` event. Without one, once `run_over()` and
    the host is drained or quiet for `quiet_s`: then, when `owed_stop` says the run
    completed, it reads on for the stop for `owed_stop.patience_s` and raises `StopUnread`
    naming the cursor after the last event read; else it ends (`run_events` is this for
    one run's host)."""
    position = parse_cursor(after) if after is not None else None
    host = client.get_workflow_handle(host_id)
    ending = _Ending(run_over, owed_stop)
    drained: str | None = None
    while True:
        described = await _describe(host)
        if described is None:
            if await run_over():
                raise CursorExpired(after, None, HOST_MISSING)
            await asyncio.sleep(poll_s)
            continue
        if described.run_id == drained:
            if await ending.over():
                ending.end(position)
                return
            await asyncio.sleep(poll_s)
            continue
        epoch = await described.memo_value(HOST_EPOCH_MEMO, 0, type_hint=int)
        _check_epoch(position, epoch)
        next_offset = 0 if position is None else position.offset + 1
        # Each read takes the event at `position` again (when held): a follower back
        # after the stop's cursor ends there, instead of waiting for a stop it has read.
        overlap = position is not None
        ended_read = described.status == WorkflowExecutionStatus.COMPLETED
        if ended_read:
            # An ended host's result holds what it retained: read with no worker.
            chain = _read_ended(
                client, host_id, described.run_id, epoch, next_offset, overlap=overlap
            )
        else:
            quiet = (quiet_s, ending.over)
            chain = _read_chain(client, host_id, epoch, next_offset, poll_s, quiet, overlap=overlap)
        async for event in chain:
            at = parse_cursor(event.cursor)
            if position is not None and at <= position:
                if isinstance(event, StopEvent):
                    return  # resumed after the stop: nothing follows it
                continue  # read already
            position = at
            yield event
            if isinstance(event, StopEvent):
                return
        # The chain ended (idle, closed, or quiet with the run over): wait for a restart,
        # unless one is already running, or for the run's end.
        ended = await _describe(host)
        running = ended is None or ended.status == WorkflowExecutionStatus.RUNNING
        if running and await ending.over():
            ending.end(position)
            return  # quiet, and the run ended without a stop (it failed or was terminated)
        drained = _drained(described.run_id if ended_read else None, ended, running, ending)


def _drained(
    read_ended: str | None,
    ended: WorkflowExecutionDescription | None,
    running: bool,
    ending: _Ending,
) -> str | None:
    """The host execution now read to its end (None: read the host again).

    An ended host's result was read whole (`read_ended`). A running chain that ended by
    itself left its execution drained; one cut short because the run was over may have
    missed the tail of a host that closed meanwhile, which its result then holds."""
    if read_ended is not None:
        return read_ended
    if running or ended is None or ending.cut:
        return None
    return ended.run_id


class _Ending:
    """When a follower that has read no stop may stop reading: the run is over and owes
    no stop, or it owes one (it completed) and the patience has run out.

    Every answer is final once given (a closed run stays closed), so the run's close is
    asked once it is over, and `over()` stays True after its first True."""

    def __init__(self, run_over: Callable[[], Awaitable[bool]], owed: OwedStop | None) -> None:
        self._run_over = run_over
        self._owed = owed
        self._stop_owed: bool | None = None
        self._since: float | None = None  # when the run was first found over, stop unread
        self.cut = False  # `over()` said so: reading ends short of the stop

    async def over(self) -> bool:
        """Whether reading may end short of the stop now (`end` then says how)."""
        if self.cut:
            return True
        if not await self._run_over():
            return False
        if self._stop_owed is None:
            self._stop_owed = self._owed is not None and await self._owed.completed()
        if self._owed is not None and self._stop_owed:
            now = asyncio.get_running_loop().time()
            self._since = now if self._since is None else self._since
            if now - self._since < self._owed.patience_s:
                return False
        self.cut = True
        return True

    def end(self, position: Cursor | None) -> None:
        """Raise `StopUnread` naming `position` when the run owes a stop; else return (the
        run ended without one, as it failed or was terminated)."""
        if self._owed is not None and self._stop_owed:
            cursor = None if position is None else format_cursor(position)
            raise StopUnread(self._owed.workflow_id, cursor, self._owed.patience_s)


async def latest_cursor(client: Client, workflow_id: str, run_id: str) -> str | None:
    """The cursor of the run's newest event so far (None: nothing published yet).

    For a snapshot: read this first, then the run's state, and follow `after=` it. An
    event published in between is then both in the snapshot and read again, never in
    neither. A host that ended answers from its result, with no worker; a running one
    by query.
    """

    if await keeps_log_in_history(client, workflow_id, run_id):
        return await history_latest_cursor(client, workflow_id, run_id)
    host = client.get_workflow_handle(output_stream_id(workflow_id, run_id))
    described = await _describe(host)
    if described is None:
        return None
    epoch = await described.memo_value(HOST_EPOCH_MEMO, 0, type_hint=int)
    if described.status == WorkflowExecutionStatus.COMPLETED:
        ended = client.get_workflow_handle(
            host.id, run_id=described.run_id, result_type=OutputStreamSummary
        )
        offset = (await ended.result(follow_runs=False)).offset
    else:
        offset = await WorkflowStreamClient.create(client, host.id).get_offset()
    return None if offset == 0 else format_cursor(Cursor(epoch, offset - 1))


def _check_epoch(position: Cursor | None, epoch: int) -> None:
    """A cursor of another epoch than the host's is never read as one of its offsets."""
    at = None if position is None else format_cursor(position)
    if position is not None and position.epoch > epoch:
        raise InvalidCursor(at or "", f"its epoch {position.epoch} is past the host's {epoch}")
    if (position is None and epoch > 0) or (position is not None and position.epoch < epoch):
        raise CursorExpired(
            at,
            None,
            f"the run's output host started over at epoch {epoch} without its earlier log",
        )


async def _read_chain(
    client: Client,
    host_id: str,
    epoch: int,
    next_offset: int,
    poll_s: float,
    quiet: tuple[float, Callable[[], Awaitable[bool]]] | None = None,
    *,
    overlap: bool = False,
) -> AsyncGenerator[RunEventItem, None]:
    """One host's continue-as-new chain from `next_offset` to its end, gaps refused;
    with `quiet` (seconds, run_over), also ends when nothing came for that long and the
    run is over. `overlap`: the item before `next_offset` too, when still held."""
    stream = WorkflowStreamClient.create(client, host_id)
    converter = client.data_converter.payload_converter
    low = next_offset - 1 if overlap and next_offset > 0 else next_offset
    failures = 0
    while True:
        try:
            items = stream.subscribe(
                None,
                from_offset=low,
                result_type=RawValue,
                poll_cooldown=timedelta(seconds=poll_s),
            )
            async for item in items if quiet is None else _until_quiet(items, *quiet):
                if item.offset < low:
                    continue  # already yielded (a poll answered twice)
                if item.offset > next_offset:
                    raise _expired(epoch, next_offset, item.offset)
                next_offset = max(next_offset, item.offset + 1)
                low = next_offset
                failures = 0
                cursor = format_cursor(Cursor(epoch, item.offset))
                event = _decode(converter, item.topic, item.data, cursor)
                if event is not None:
                    yield event
            return
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:
            if unreachable(error):
                raise  # no server: the follower retries from its cursor (`_reconnect`)
            failures += 1
            if failures >= MAX_POLL_FAILURES:
                raise
            logger.info("event poll failed (reading again from offset %d): %s", next_offset, error)
            await asyncio.sleep(min(poll_s * 2**failures, MAX_BACKOFF_S))


async def _until_quiet(
    items: AsyncIterator[T], quiet_s: float, over: Callable[[], Awaitable[bool]]
) -> AsyncGenerator[T, None]:
    """`items`, ending early once none came for `quiet_s` and `over()` says so.

    The items are pulled by a task of their own into a queue: cancelling a wait for the
    next item of an async generator would close the generator.
    """
    queue: asyncio.Queue[tuple[bool, T | BaseException | None]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in items:
                await queue.put((True, item))
            await queue.put((False, None))
        except Exception as error:  # the reader's own retry decides
            await queue.put((False, error))

    task = asyncio.create_task(pump(), name="steadyloop-event-reader")
    try:
        while True:
            try:
                is_item, value = await asyncio.wait_for(queue.get(), quiet_s)
            except TimeoutError:
                if await over():
                    return
                continue
            if is_item:
                yield cast(T, value)
            elif isinstance(value, BaseException):
                raise value
            else:
                return
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _read_ended(
    client: Client, host_id: str, run_id: str, epoch: int, next_offset: int, *, overlap: bool
) -> AsyncGenerator[RunEventItem, None]:
    """What an ended host retained, from its result (a history read, no workflow task);
    `overlap` as for `_read_chain`."""
    ended = client.get_workflow_handle(host_id, run_id=run_id, result_type=OutputStreamSummary)
    summary = await ended.result(follow_runs=False)
    converter = client.data_converter.payload_converter
    base = summary.state.base_offset
    if next_offset < base:
        raise _expired(epoch, next_offset, base)
    low = next_offset - 1 if overlap and next_offset > 0 else next_offset
    for index, item in enumerate(summary.state.log):
        offset = base + index
        if offset < low:
            continue
        payload = Payload()
        payload.ParseFromString(base64.b64decode(item.data))
        decoded = _decode(
            converter, item.topic, RawValue(payload), format_cursor(Cursor(epoch, offset))
        )
        if decoded is not None:
            yield decoded


def _expired(epoch: int, next_offset: int, oldest: int) -> CursorExpired:
    before = format_cursor(Cursor(epoch, next_offset - 1)) if next_offset else None
    return CursorExpired(
        before,
        format_cursor(Cursor(epoch, oldest)),
        "the host dropped older items to bound its history",
    )


def _decode(converter: Any, topic: str, raw: RawValue, cursor: str) -> RunEventItem | None:
    """The event an item carries, stamped with its cursor (None: a topic not ours)."""
    if topic == OUTPUT_TOPIC:
        delta: OutputDelta = converter.from_payload(raw.payload, OutputDelta)
        kind = TextDeltaEvent if delta.kind == "text" else ReasoningDeltaEvent
        return kind(turn=delta.turn, attempt=delta.attempt, text=delta.text, cursor=cursor)
    if topic == EVENTS_TOPIC:
        event = parse_event(raw.payload.data)
        return event.model_copy(update={"cursor": cursor})
    return None


async def _describe(handle: Any) -> WorkflowExecutionDescription | None:
    try:
        description: WorkflowExecutionDescription = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return description


async def follow_output(
    client: Client,
    run_workflow_id: str,
    run_id: str | None = None,
    *,
    poll_s: float = DEFAULT_POLL_S,
) -> AsyncIterator[OutputDelta]:
    """The text and reasoning the run forwards, in order, until its stop: its event log
    (`run_events`) with every other event left out, so what follows holds for it too.

    `run_id`: the run's first execution run id (None: the latest run of the id)."""
    if run_id is None:
        run_id = await first_run_id(client.get_workflow_handle(run_workflow_id))
    async for event in run_events(client, run_workflow_id, run_id, poll_s=poll_s):
        if isinstance(event, TextDeltaEvent | ReasoningDeltaEvent):
            kind = "text" if isinstance(event, TextDeltaEvent) else "reasoning"
            yield OutputDelta(turn=event.turn, attempt=event.attempt, kind=kind, text=event.text)


async def first_run_id(run: WorkflowHandle[Any, Any]) -> str:
    """The first execution run id of the run `run` names: with the workflow id, the key of
    its log (a workflow id used again names another run).

    A handle from `start_workflow` knows it; otherwise the execution is described (the
    latest run of the id, when the handle names no run).
    """
    if run.first_execution_run_id:
        return run.first_execution_run_id
    info = (await run.describe()).raw_description.workflow_execution_info
    return info.first_run_id or info.execution.run_id


async def run_over(client: Client, run_workflow_id: str, run_id: str) -> bool:
    """Whether the run that began as execution `run_id` has ended.

    The id's latest execution answers, unless the id was used again since: then that is
    another run, and this one is over.
    """
    described = await client.get_workflow_handle(run_workflow_id).describe()
    first = described.raw_description.workflow_execution_info.first_run_id
    if first and first != run_id:
        return True
    return described.status is not None and described.status != WorkflowExecutionStatus.RUNNING


async def run_completed(client: Client, run_workflow_id: str, run_id: str) -> bool:
    """Whether the run that began as execution `run_id` completed: returned its result.

    A run returns only after publishing its stop, so its followers are owed one; False
    while it runs, or when it closed otherwise (failed, terminated, timed out, canceled).
    """
    described = await client.get_workflow_handle(run_workflow_id).describe()
    first = described.raw_description.workflow_execution_info.first_run_id
    if not first or first == run_id:
        return described.status == WorkflowExecutionStatus.COMPLETED
    return await _chain_completed(client, run_workflow_id, run_id)


async def _chain_completed(client: Client, run_workflow_id: str, run_id: str) -> bool:
    """Whether the chain from execution `run_id` completed, read from the close event of
    each execution in it: the id was used again since, so describing it names another run."""
    execution = run_id
    while True:
        handle = client.get_workflow_handle(run_workflow_id, run_id=execution)
        events = handle.fetch_history_events(
            event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
        )
        close = await anext(aiter(events), None)
        if close is None:
            return False  # no close event: the chain still runs
        if close.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
        attributes = close.workflow_execution_continued_as_new_event_attributes
        execution = attributes.new_execution_run_id
