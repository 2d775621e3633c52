"""The command line's follower before the event log, kept as the baseline of
`bench_follow_cost.py`: poll the run's queries while it runs, then take its result.

The `progress` query is polled (it is cheap: it reads workflow state on the worker);
the `transcript` query only when progress moved, so a long transcript is not fetched
four times a second, and `pending_approvals` / `ambiguous_receipts` only when calls wait
for a person (each is shown once, with the command that decides it). While a model or
tool activity is in flight the server's description of the run is read too, so retries
(attempt 2, 3 and the last failure) show up while they happen instead of as an
unexplained pause.

Output comes in the run's order. The run's forwarded text arrives on its own channel,
faster than polling sees the transcript, so before the first text of a turn (or of a
retried attempt) is printed, the transcript and the timeline are read and everything
before it is printed first: a tool's answer never lands after the next turn's text,
and a retry is said before the attempt that follows it. Attaching to a run under way
prints what happened so far from the transcript, then streams only the turn in flight.

The loop answers no `timeline` query any more (what the guarantees did is on its event
log): this follower still sends it where it did, so its cost stays the baseline's, and
reads the refusal as no events (`RunEvent` is that query's old answer, kept here).

Queries need a worker to answer them. Until one does (none running, or busy) the
status says so and following goes on: a query failing never ends the follow; only
the workflow's result (or its failure, raised as `WorkflowFailureError`) does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from steadyloop._chat import ChatMessage
from steadyloop._cli.progress import (
    EVENT_WIDTH,
    ActivityState,
    ProgressDisplay,
    approval_line,
    one_line,
    status_line,
)
from steadyloop._cli.receipts import late_lines, waiting_lines
from steadyloop._run.models import AmbiguousCall, RunProgress, RunResult
from steadyloop._run.steering import PendingApproval
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client._event_log import first_run_id, follow_output


class RunEvent(BaseModel):
    """One entry of the `timeline` query as the loop answered it."""

    seq: int
    turn: int
    at: int = 0
    phase: str
    kind: str
    text: str
    call_id: str | None = None


DEFAULT_POLL_INTERVAL_S = 0.3
# After the run's result, how long its forwarded text may take to finish printing.
OUTPUT_DRAIN_S = 3.0
# How long what follows a turn's text waits for that text to arrive on the stream (a
# stream that lags more, or forwards nothing, then no longer holds the rest back).
TEXT_WAIT_S = 3.0
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
    attach: bool = False,
    shown_before: int = 0,
) -> RunResult:
    """Show the run's progress on `display` until it ends; return its result.

    With `output` (a client), the run's forwarded text is printed as it streams; with
    `attach` too (a run started elsewhere), what it did so far is first printed from its
    transcript, and only the turn in flight is streamed. `display.answer_shown` then
    says whether the final answer was printed. The first `shown_before` messages of
    the transcript are not printed (a resumed run's conversation so far).
    """
    reader = TranscriptReader(streamed=output is not None, shown=display.showed)
    reader.skip(shown_before)
    lock = asyncio.Lock()
    held_since: float | None = None  # when the reader began waiting for streamed text

    async def catch_up() -> None:
        """Print what the run did since the last look: transcript first, then the events
        (every answer the transcript holds has its replay event recorded by then)."""
        nonlocal held_since
        async with lock:
            transcript = await _transcript(handle)
            if transcript is None:
                return
            events = await _timeline(handle, reader.last_event)
            now = asyncio.get_running_loop().time()
            force = held_since is not None and now - held_since > TEXT_WAIT_S
            for line in reader.new_lines(transcript, events, force=force):
                display.event(line)
            if not reader.holding:
                held_since = None
            elif held_since is None:
                held_since = now

    result = asyncio.ensure_future(handle.result())
    tokens = None
    if output is not None and attach:
        await _attach(handle, reader, display, catch_up)
    if output is not None:
        tokens = asyncio.ensure_future(_print_output(output, handle, display, catch_up, reader))
    last: RunProgress | None = None
    announced: set[str] = set()  # calls already shown as waiting for approval
    ambiguous: set[str] = set()  # keys of ambiguous calls already shown
    late: set[str] = set()  # keys whose late result was shown
    try:
        while not result.done():
            progress = await _progress(handle)
            if progress is not None and (progress != last or reader.holding):
                await catch_up()
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
                        if waiting.late_result is not None and waiting.key not in late:
                            late.add(waiting.key)  # it finished after its timeout
                            for line in late_lines(handle.id, waiting):
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
        async with lock:
            lines = reader.new_lines(outcome.transcript, [], force=True)
            for line in [*lines, *reader.flush()]:
                display.event(line)
        display.answer_shown = reader.answer_printed or display.showed(outcome.final_answer or "")
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


async def _attach(
    handle: RunHandle,
    reader: TranscriptReader,
    display: ProgressDisplay,
    catch_up: Callable[[], Awaitable[None]],
) -> None:
    """A run already under way: what it did so far is printed from its transcript (text
    included), so the output host's replay of earlier turns is not printed out of order."""
    progress = await _progress(handle)
    if progress is None or progress.turn == 0:
        return
    reader.streamed = False
    await catch_up()
    reader.streamed = True
    display.live_from_turn = progress.turn if progress.phase == "model" else progress.turn + 1


async def _print_output(
    client: Client,
    handle: RunHandle,
    display: ProgressDisplay,
    catch_up: Callable[[], Awaitable[None]],
    reader: TranscriptReader,
) -> None:
    """Print the run's forwarded text as it arrives, each attempt's after everything that
    came before it; a broken live view never ends following."""
    attempt: tuple[int, int] | None = None
    try:
        async for delta in follow_output(client, handle.id, await first_run_id(handle)):
            if not display.wants(delta):
                continue
            if (delta.turn, delta.attempt) != attempt:
                attempt = (delta.turn, delta.attempt)
                await catch_up()
            display.text(delta)
    except RPCError:
        display.event("(live output unavailable; the answer follows when the run ends)")
        reader.streamed = False  # the text is printed from the transcript instead


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


async def _timeline(handle: RunHandle, after: int) -> list[RunEvent]:
    try:
        events: list[RunEvent] = await handle.query(
            "timeline", after, result_type=list[RunEvent], rpc_timeout=QUERY_TIMEOUT
        )
        return events
    except _QUERY_ERRORS:
        return []


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


class TranscriptReader:
    """Turns a growing transcript, and the run's timeline, into event lines in the run's order.

    The command line's merger before the event log, kept here with the follower it
    served (the command line now prints the log: `steadyloop._cli.progress.EventPrinter`).

    Each message is reported once. A timeline event is placed where it happened: a
    `model` event (a retry, a stall, a breaker, healing) before the assistant message of
    its turn, or, for the turn in flight, as soon as it is known; a replay on the answer
    of the call it explains (`<- add (replayed, not run: ...): 5`), so a replayed answer
    never reads as a call that ran. Events may arrive before or after the messages they
    belong with; they are held until their place is reached (`flush` prints what never
    found one).

    `streamed`: the model's text is shown as it streams, so an assistant message's text
    is not repeated (its tool calls still are). Its text travels on another channel and
    may come after the transcript already holds the message, so the reader waits at such
    a message until `shown(text)` says its text was printed (`holding` says it waits;
    `force` goes on regardless, for a stream that lags or lost it). Without `streamed`
    the final answer is printed whole, as the turn's text (`answer_printed` says so).
    """

    def __init__(
        self, *, streamed: bool = False, shown: Callable[[str], bool] | None = None
    ) -> None:
        self.streamed = streamed
        self.holding = False
        self._shown = shown
        self.answer_printed = False
        self._seen = 0
        self._turn = 0
        self._names: dict[str, str] = {}
        self._skip = 0
        self._events: dict[int, RunEvent] = {}  # not yet printed, by seq
        self._last_seq = 0

    def skip(self, messages: int) -> None:
        """Leave out the first `messages` messages: a person saw them before this run
        (a resumed run starts with its predecessor's conversation). Turns count on from
        this run's first, as the run numbers them."""
        self._skip = messages
        self._seen = max(self._seen, messages)

    @property
    def last_event(self) -> int:
        """The highest event number read: ask the run only for events after it."""
        return self._last_seq

    def new_lines(
        self,
        transcript: Sequence[ChatMessage],
        events: Sequence[RunEvent] = (),
        *,
        force: bool = False,
    ) -> list[str]:
        if len(transcript) < self._seen:  # a shorter transcript: a new run; start over
            if len(transcript) <= self._skip:
                return []  # not this run's transcript yet
            self._seen = self._skip
            self._turn = 0
        for event in events:
            if event.seq > self._last_seq:
                self._events[event.seq] = event
                self._last_seq = event.seq
        lines: list[str] = []
        self.holding = False
        for index in range(self._seen, len(transcript)):
            message = transcript[index]
            if not force and self._text_to_come(message):
                self.holding = True
                return lines
            lines.extend(self._lines(index, message))
            self._seen = index + 1
        self._seen = len(transcript)
        lines.extend(self._model_events(self._seen))  # the turn in flight
        return lines

    def _text_to_come(self, message: ChatMessage) -> bool:
        """A streamed assistant text not printed yet: what follows it must wait for it."""
        if not self.streamed or self._shown is None or message.role != "assistant":
            return False
        text = (message.content or "").strip()
        return bool(text) and not self._shown(text)

    def flush(self) -> list[str]:
        """Events whose place never came (a call's answer compacted away), in order."""
        lines = [self._event_line(e, self._turn) for _, e in sorted(self._events.items())]
        self._events.clear()
        return lines

    def _model_events(self, position: int) -> list[str]:
        """`model` events of the turn whose assistant message is (or will be) at `position`."""
        due = [
            seq
            for seq, event in sorted(self._events.items())
            if event.phase == "model" and event.at <= position
        ]
        return [self._event_line(self._events.pop(seq), self._turn + 1) for seq in due]

    def _lines(self, index: int, message: ChatMessage) -> list[str]:
        if message.role == "assistant":
            lines = self._model_events(index)
            self._turn += 1
            prefix = f"turn {self._turn}"
            if not message.tool_calls:
                if message.content and not self.streamed:
                    lines.append(f"{prefix}  model: {message.content.strip()}")
                    self.answer_printed = True
                return lines
            said = message.content and not self.streamed
            if said:
                lines.append(f"{prefix}  model: {one_line(message.content or '')}")
            for call in message.tool_calls:
                self._names[call.id] = call.name
                arguments = call.arguments if call.arguments.strip() else '""'
                lines.append(one_line(f"{prefix}  -> {call.name} {arguments}"))
            return lines
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            name = self._names.get(call_id, "?")
            told = [
                self._events.pop(seq)
                for seq, event in sorted(self._events.items())
                if event.phase == "tools" and event.call_id == call_id and call_id
            ]
            # What a person decided goes first: a long timeout note must not cut it off.
            notes = [e.text for e in sorted(told, key=lambda e: e.kind != "decision")]
            how = f" ({'; '.join(notes)})" if notes else ""
            return [one_line(f"turn {self._turn}  <- {name}{how}: {message.content or ''}")]
        return []

    @staticmethod
    def _event_line(event: RunEvent, turn: int) -> str:
        return one_line(f"turn {turn}  ! {event.text}", EVENT_WIDTH + 60)
