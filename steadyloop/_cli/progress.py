"""What a person following a run sees: its event log's lines, a status line, the result.

Plain text on purpose. On a terminal the status line is redrawn in place (`\\r` and
erase-line, nothing else); when stdout is a pipe, a file or a CI log, each status is
printed once, when it changes, so the output stays readable with no control codes.
Events (a tool call asked for, a tool's answer) are printed as lines in both cases.

Everything here is pure formatting of values the run already reports (its event log,
read by `EventPrinter`; `RunProgress`, `RunResult`), so it is tested without a server.
Lines keep the run's order: `!` says what a guarantee did (a retry and its failure kind,
a stall, a breaker, healing), a replayed answer says it was not run and why, and the
answer is printed once.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import Any, TextIO

from steadyloop._cli.invocation import command
from steadyloop._output.forwarding import OutputDelta
from steadyloop._run.models import RunProgress, RunResult, RunStats
from steadyloop._run.steering import PendingApproval
from steadyloop._stops.stop_text import next_step, partial_intro, stop_reason_text
from steadyloop.events import (
    AmbiguousReceiptEvent,
    ApprovalWaitingEvent,
    DecisionEvent,
    ReasoningDeltaEvent,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    TimelineEntryEvent,
    ToolCallEvent,
    ToolResultEvent,
)

EVENT_WIDTH = 110
ARGUMENTS_WIDTH = 48
_CLEAR_LINE = "\r\x1b[K"


@dataclass(frozen=True)
class ActivityState:
    """The run's activity in flight, as the server describes it (shown when retrying)."""

    name: str
    attempt: int
    last_failure: str | None = None
    # The model stream's last heartbeat (`StreamProgress` as a dict), when it sent one.
    stream: dict[str, object] | None = None


def one_line(text: str, width: int = EVENT_WIDTH) -> str:
    """`text` on one line (line breaks shown as ` | `), cut to `width` with `...`."""
    flat = " | ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return flat if len(flat) <= width else flat[: max(width - 3, 0)] + "..."


def status_line(
    progress: RunProgress | None,
    activity: ActivityState | None = None,
    *,
    task_queue: str | None = None,
    workflow_id: str | None = None,
) -> str:
    """`turn 2 | model | 3 tool calls | 412 tokens`, or why there is nothing to show yet.

    With `workflow_id`, calls waiting for a person name the command that decides them.
    """
    if progress is None:
        where = f" on task queue {task_queue!r}" if task_queue else ""
        return f"waiting for a worker{where} to answer (is `steadyloop worker` running?)"
    parts = [
        f"turn {progress.turn}",
        progress.phase,
        _count(progress.tool_calls, "tool call")
        + (f" ({progress.tool_replays} replayed)" if progress.tool_replays else ""),
        f"{progress.tokens} tokens",
    ]
    if progress.cost_usd > 0:
        parts.append(_dollars(progress.cost_usd))
    if progress.paused and progress.phase != "paused":
        parts.append("pausing at the next turn boundary")
    if progress.pending_approvals:
        parts.append(f"{progress.pending_approvals} awaiting approval")
    if progress.ambiguous:
        waiting = _count(progress.ambiguous, "ambiguous call")
        where = f": {command('receipts', workflow_id)}" if workflow_id else ""
        parts.append(f"{waiting} awaiting a person{where}")
    if progress.pending_messages:
        parts.append(_count(progress.pending_messages, "message") + " to send")
    if progress.active_plugins:
        parts.append("plugins: " + ", ".join(progress.active_plugins))
    if activity is not None and activity.stream:
        parts.append(_stream_part(activity.stream))
    if activity is not None and activity.attempt > 1:
        retry = f"{activity.name} attempt {activity.attempt}"
        if activity.last_failure:
            retry += f" after: {one_line(activity.last_failure, 60)}"
        parts.append(retry)
    return " | ".join(parts)


def arguments_text(arguments: dict[str, Any], width: int = ARGUMENTS_WIDTH) -> str:
    """A call's arguments as compact JSON on one line, cut to `width`."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):  # not JSON after all: show something rather than fail
        text = repr(arguments)
    return one_line(text, width)


def approval_line(workflow_id: str, call: PendingApproval) -> str:
    """One call waiting for a person, with the command that decides it."""
    return waiting_line(workflow_id, call.turn, call.tool, call.arguments, call.call_id)


class EventPrinter:
    """Turns a run's events (`steadyloop.events`), read in run order, into event lines.

    The log is already in the run's order, so nothing is merged or held for another
    source; only a call's notes wait for its answer: what a guarantee or a person did
    about a call (`replayed, not run: ...`, `approved by a person`, a timeout) is said on
    the answer's line (`<- add (replayed, not run: ...): 5`), so a replayed answer never
    reads as a call that ran, and a person's decision comes first among the notes.
    `flush` prints notes whose answer never came. Text deltas are the display's
    (`ProgressDisplay.text`); `answer_line` is for a run whose text was not forwarded.
    """

    def __init__(self, workflow_id: str, *, steering: bool = True) -> None:
        self.workflow_id = workflow_id
        # Whether to print the commands that decide a waiting call (not for an ended run).
        self.steering = steering
        self.answer_printed = False
        self.turn = 0
        self.phase = ""
        self._calls: dict[str, ToolCallEvent] = {}
        self._notes: dict[str, list[tuple[bool, str]]] = {}  # call id -> (decided, text)
        self._receipt_calls: dict[str, list[str]] = {}  # ambiguous receipt key -> call ids
        self._waiting: set[str] = set()  # calls waiting for approval, not answered yet
        self._ambiguous: set[str] = set()  # receipt keys waiting for a person
        self.tool_calls = 0
        self.replays = 0

    def lines(self, event: RunEventItem) -> list[str]:
        """The lines `event` prints now (none for text: the display prints it)."""
        self.turn = max(self.turn, event.turn)
        if isinstance(event, (TextDeltaEvent, ReasoningDeltaEvent)):
            self.phase = "model"
            return []
        if isinstance(event, TimelineEntryEvent):
            if event.phase == "tools" and event.call_id:
                self._notes.setdefault(event.call_id, []).append((False, event.text))
                return []
            return [_timeline_line(event.turn, event.text)]
        if isinstance(event, ToolCallEvent):
            self.phase = "tools"
            self.tool_calls += 1
            self._calls[event.call_id] = event
            arguments = event.arguments if event.arguments.strip() else '""'
            return [one_line(f"turn {event.turn}  -> {event.name} {arguments}")]
        if isinstance(event, ToolResultEvent):
            self._waiting.discard(event.call_id)
            self.replays += event.replayed
            notes = self._notes.pop(event.call_id, [])
            told = [text for _, text in sorted(notes, key=lambda note: not note[0])]
            how = f" ({'; '.join(told)})" if told else ""
            return [one_line(f"turn {event.turn}  <- {event.name}{how}: {event.text}")]
        if isinstance(event, ApprovalWaitingEvent):
            self._waiting.add(event.call_id)
            if not self.steering:
                return []
            call = self._calls.get(event.call_id)
            read = _arguments(call.arguments) if call is not None else {}
            line = waiting_line(self.workflow_id, event.turn, event.tool, read, event.call_id)
            return [line]
        if isinstance(event, AmbiguousReceiptEvent):
            self._receipt_calls[event.key] = list(event.call_ids)
            self._ambiguous.add(event.key)
            return []  # the follower prints the receipt's lines (`receipts.waiting_lines`)
        if isinstance(event, DecisionEvent):
            return self._decided(event)
        self.phase = "done"
        return []

    def _decided(self, event: DecisionEvent) -> list[str]:
        if event.decision in ("approved", "rejected") and event.call_id:
            approved = event.decision == "approved"
            said = "approved by a person" if approved else "rejected by a person"
            if not approved and event.detail:
                said += f": {event.detail}"
            self._notes.setdefault(event.call_id, []).append((True, said))
            self._waiting.discard(event.call_id)
        elif event.decision == "resolved" and event.key:
            self._ambiguous.discard(event.key)
            for call_id in self._receipt_calls.get(event.key, []):
                if event.detail not in _RESOLUTION_KINDS:  # a kind alone: nothing to say
                    self._notes.setdefault(call_id, []).append((True, event.detail))
        return []

    def answer_line(self, event: StopEvent) -> list[str]:
        """The final answer as the turn's text, for a run whose text was not forwarded."""
        if not event.final_answer:
            return []
        self.answer_printed = True
        return [f"turn {event.turn}  model: {event.final_answer.strip()}"]

    def flush(self) -> list[str]:
        """Notes whose call's answer never came (compacted away), in order."""
        lines = [
            _timeline_line(self.turn, text) for notes in self._notes.values() for _, text in notes
        ]
        self._notes.clear()
        return lines

    def status(self) -> str:
        """`turn 2 | tools | 3 tool calls | 1 awaiting approval`: what the log has said."""
        parts = [
            f"turn {self.turn}",
            self.phase or "model",
            _count(self.tool_calls, "tool call")
            + (f" ({self.replays} replayed)" if self.replays else ""),
        ]
        if self._waiting:
            parts.append(f"{len(self._waiting)} awaiting approval")
        if self._ambiguous:
            waiting = _count(len(self._ambiguous), "ambiguous call")
            parts.append(f"{waiting} awaiting a person: {command('receipts', self.workflow_id)}")
        return " | ".join(parts)


# A resolution's decision event names its kind alone when it has nothing to say on the
# call's answer (a `happened` answer is replayed, and its replay says so).
_RESOLUTION_KINDS = ("", "happened", "did_not_happen", "give_up")


def waiting_line(
    workflow_id: str, turn: int, tool: str, arguments: dict[str, Any], call_id: str
) -> str:
    """One call waiting for a person, with the command that decides it."""
    return (
        f"turn {turn}  ? {tool} {arguments_text(arguments)} waits for "
        f"approval: {command('approve', workflow_id, call_id)} [--reject REASON]"
    )


def _arguments(text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _timeline_line(turn: int, text: str) -> str:
    return one_line(f"turn {turn}  ! {text}", EVENT_WIDTH + 60)


class ProgressDisplay:
    """Event lines plus one status line; `live` (default: `out` is a TTY) redraws in place.

    Streamed answer text (`text`) is written as it arrives, on its own line per turn (a
    continuation of the turn's answer goes on in the same line); while it flows the
    status line is not drawn (it would cut through the text), and the text's line is
    ended before the next event or status.
    """

    def __init__(self, out: TextIO, *, live: bool | None = None) -> None:
        self._out = out
        self._live = out.isatty() if live is None else live
        self._status = ""
        self._drawn = False
        self._streaming: tuple[int, int] | None = None
        self._shown: dict[tuple[int, int], list[str]] = {}
        # Text of turns before this one was already printed from the transcript.
        self.live_from_turn = 0
        # Set by `follow` at the end: the final answer was printed (streamed or read).
        self.answer_shown = False

    def wants(self, delta: OutputDelta | TextDeltaEvent) -> bool:
        """Whether `delta` is text this display prints (answer text of a live turn)."""
        text = isinstance(delta, TextDeltaEvent) or delta.kind == "text"
        return text and bool(delta.text) and delta.turn >= self.live_from_turn

    def showed(self, text: str) -> bool:
        """Whether one attempt's streamed text was exactly `text` (so it need not be
        printed again)."""
        wanted = text.strip()
        return bool(wanted) and any("".join(p).strip() == wanted for p in self._shown.values())

    def text(self, delta: OutputDelta | TextDeltaEvent) -> None:
        """Answer text forwarded by the model, as it arrives (reasoning is not printed)."""
        if not self.wants(delta):
            return
        # By turn, not attempt: a later attempt of a turn streams only when nothing was
        # shown before it, or continues what was (`stops.continuation`), on the same line.
        key = (delta.turn, 0)
        self._shown.setdefault(key, []).append(delta.text)
        if self._streaming != key:
            self._end_text()
            if self._drawn:
                self._out.write(_CLEAR_LINE)
                self._drawn = False
            self._out.write(f"turn {delta.turn}  model: ")
            self._streaming = key
        self._out.write(delta.text)
        self._out.flush()

    def event(self, line: str) -> None:
        self._end_text()
        if self._drawn:
            self._out.write(_CLEAR_LINE)
        self._out.write(line + "\n")
        self._drawn = False
        if self._live and self._status:
            self._draw()
        self._out.flush()

    def status(self, line: str) -> None:
        if line == self._status:
            return
        self._status = line
        if self._streaming is not None:
            return  # shown once the text's line ends
        if self._live:
            self._draw()
        else:
            self._out.write(f"  [{line}]\n")
        self._out.flush()

    def close(self) -> None:
        self._end_text()
        if self._drawn:
            self._out.write(_CLEAR_LINE)
            self._out.flush()
            self._drawn = False

    def _end_text(self) -> None:
        if self._streaming is not None:
            self._out.write("\n")
            self._streaming = None
            self._out.flush()

    def _draw(self) -> None:
        width = max(shutil.get_terminal_size().columns - 1, 20)
        self._out.write(_CLEAR_LINE + "  [" + one_line(self._status, width - 4) + "]")
        self._drawn = True


def result_lines(result: RunResult, *, answer_shown: bool = False) -> list[str]:
    """The answer (unless it was `answer_shown` already, as it streamed or from the
    transcript), the stop reason with its detail, and the run's numbers."""
    lines: list[str] = []
    if result.final_answer and answer_shown:
        pass  # printed once, where it came in the run
    elif result.final_answer:
        lines.append("answer:")
        lines.extend(f"  {line}" for line in result.final_answer.strip().splitlines())
    else:
        lines.append("answer: (none)")
    lines.extend(typed_output_lines(result))
    lines.append(f"stop reason: {stop_reason_text(result)}")
    stats = result.stats
    failed = f", {stats.tool_errors} answered with an error" if stats.tool_errors else ""
    lines.append(
        f"{_count(stats.turns, 'turn')}, {_count(stats.tool_calls, 'tool call')}"
        f"{replays_part(stats.tool_replays)}{failed}, "
        f"{stats.total_tokens} tokens ({stats.prompt_tokens} prompt, "
        f"{stats.completion_tokens} completion)"
    )
    return lines + stats_lines(stats) + plugin_lines(result)


# How much of an answer that did not validate the outcome prints (all of it is in the
# result's `raw_output` and the transcript).
RAW_OUTPUT_CHARS = 2_000


def typed_output_lines(result: RunResult) -> list[str]:
    """A typed run's validated value as JSON; or the text of its last answer, which did
    not validate (`invalid_output`)."""
    if result.output is not None:
        text = json.dumps(result.output, indent=2, ensure_ascii=False)
        return ["output:", *(f"  {line}" for line in text.splitlines())]
    if result.stop_reason == "invalid_output" and result.raw_output is not None:
        raw = result.raw_output.strip()
        lines = ["raw output (not valid):"]
        lines += [f"  {line}" for line in (raw[:RAW_OUTPUT_CHARS] or "(empty)").splitlines()]
        if len(raw) > RAW_OUTPUT_CHARS:
            lines.append(f"  ... ({len(raw) - RAW_OUTPUT_CHARS} more characters)")
        return lines
    return []


def replays_part(replays: int) -> str:
    """` (4 replayed from receipts, not run again)`: answers that did not run the tool."""
    if not replays:
        return ""
    return f" ({replays} of them replayed from receipts, not run again)"


def plugin_lines(result: RunResult) -> list[str]:
    """Which plugins' tools the run ended with, and which it could have activated."""
    if not result.active_plugins and not result.activatable_plugins:
        return []
    active = ", ".join(result.active_plugins) or "none"
    line = f"plugins active: {active}"
    if result.activatable_plugins:
        line += f"; not activated: {', '.join(result.activatable_plugins)}"
    return [line]


def stats_lines(stats: RunStats) -> list[str]:
    """Cost, retries by reason, healed transcripts and compactions; only what happened."""
    lines: list[str] = []
    if stats.priced_calls:
        unpriced = (
            f"; {_count(stats.unpriced_calls, 'call')} not priced (no usage reported or no price)"
            if stats.unpriced_calls
            else ""
        )
        cached = f", {stats.cached_tokens} cached input tokens" if stats.cached_tokens else ""
        lines.append(
            f"cost: {_dollars(stats.cost_usd)} for {_count(stats.priced_calls, 'model call')}"
            f"{cached}{unpriced}"
        )
    if stats.wall_time_s:
        lines.append(f"wall time: {stats.wall_time_s:,.1f} s")
    for label, counts in (
        ("retries", stats.retries),
        ("answers continued", stats.continuations),
        ("transcript healed", stats.healed),
        ("compacted", stats.compactions),
    ):
        if counts:
            lines.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if stats.elided_results:
        lines[-1] += f" ({_count(stats.elided_results, 'tool result')} elided)"
    return lines


def _stream_part(stream: dict[str, object]) -> str:
    """`streaming: 1234 chars, 2 tool calls, shown`: the model stream's own progress."""
    chars = stream.get("output_chars", 0)
    calls = stream.get("tool_calls", 0)
    part = f"streaming: {chars} chars"
    if isinstance(calls, int) and calls:
        part += f", {_count(calls, 'tool call')}"
    if stream.get("produced_output"):
        part += ", shown"
    return part


def partial_lines(result: RunResult, workflow_id: str) -> list[str]:
    """What was left of the turn that could not finish, said as what happened to it
    (`stops.stop_text`), and how to go on from this stop."""
    lines: list[str] = []
    partial = result.partial
    if partial is not None:
        lines.append(partial_intro(result))
        lines.extend(f"  {line}" for line in (partial.text or "(none)").strip().splitlines())
    hint = next_step(result, workflow_id, command("resume", workflow_id))
    if hint is not None:
        lines.append(hint)
    return lines


def _dollars(amount: float) -> str:
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
