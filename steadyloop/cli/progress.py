"""What a person following a run sees: events from the transcript, a status line, the result.

Plain text on purpose. On a terminal the status line is redrawn in place (`\\r` and
erase-line, nothing else); when stdout is a pipe, a file or a CI log, each status is
printed once, when it changes, so the output stays readable with no control codes.
Events (a tool call asked for, a tool's answer) are printed as lines in both cases.

Everything here is pure formatting of values the workflow already reports (the
`progress` and `transcript` queries, `RunResult`), so it is tested without a server.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from steadyloop.chat import ChatMessage
from steadyloop.output.forwarding import OutputDelta
from steadyloop.run.models import RunProgress, RunResult, RunStats
from steadyloop.run.steering import PendingApproval
from steadyloop.stops.stop_text import next_step, partial_intro

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
        _count(progress.tool_calls, "tool call"),
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
        where = f": steadyloop receipts {workflow_id}" if workflow_id else ""
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
    return (
        f"turn {call.turn}  ? {call.tool} {arguments_text(call.arguments)} waits for "
        f"approval: steadyloop approve {workflow_id} {call.call_id} [--reject REASON]"
    )


class TranscriptReader:
    """Turns a growing transcript into event lines, each message reported once.

    `streamed`: the model's text was already shown as it streamed, so an assistant
    message's text is not repeated (its tool calls still are).
    """

    def __init__(self, *, streamed: bool = False) -> None:
        self._streamed = streamed
        self._seen = 0
        self._turn = 0
        self._names: dict[str, str] = {}

    def new_lines(self, transcript: Sequence[ChatMessage]) -> list[str]:
        if len(transcript) < self._seen:  # a shorter transcript: a new run; start over
            self._seen = 0
            self._turn = 0
        lines: list[str] = []
        for message in transcript[self._seen :]:
            lines.extend(self._lines(message))
        self._seen = len(transcript)
        return lines

    def _lines(self, message: ChatMessage) -> list[str]:
        if message.role == "assistant":
            self._turn += 1
            if not message.tool_calls:
                return []  # the final answer is printed with the result
            prefix = f"turn {self._turn}"
            said = message.content and not self._streamed
            lines = [f"{prefix}  model: {one_line(message.content or '')}"] if said else []
            for call in message.tool_calls:
                self._names[call.id] = call.name
                arguments = call.arguments if call.arguments.strip() else '""'
                lines.append(one_line(f"{prefix}  -> {call.name} {arguments}"))
            return lines
        if message.role == "tool":
            name = self._names.get(message.tool_call_id or "", "?")
            return [one_line(f"turn {self._turn}  <- {name}: {message.content or ''}")]
        return []


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

    def text(self, delta: OutputDelta) -> None:
        """Answer text forwarded by the model, as it arrives (reasoning is not printed)."""
        if delta.kind != "text" or not delta.text:
            return
        # By turn, not attempt: a later attempt of a turn streams only when nothing was
        # shown before it, or continues what was (`stops.continuation`), on the same line.
        key = (delta.turn, 0)
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


def result_lines(result: RunResult) -> list[str]:
    """The answer, the stop reason with its detail, and the run's numbers."""
    lines: list[str] = []
    if result.final_answer:
        lines.append("answer:")
        lines.extend(f"  {line}" for line in result.final_answer.strip().splitlines())
    else:
        lines.append("answer: (none)")
    reason = result.stop_reason + (f" ({result.detail})" if result.detail else "")
    lines.append(f"stop reason: {reason}")
    stats = result.stats
    failed = f", {stats.tool_errors} answered with an error" if stats.tool_errors else ""
    lines.append(
        f"{_count(stats.turns, 'turn')}, {_count(stats.tool_calls, 'tool call')}{failed}, "
        f"{stats.total_tokens} tokens ({stats.prompt_tokens} prompt, "
        f"{stats.completion_tokens} completion)"
    )
    return lines + stats_lines(stats) + plugin_lines(result)


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
    hint = next_step(result, workflow_id)
    if hint is not None:
        lines.append(hint)
    return lines


def _dollars(amount: float) -> str:
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
