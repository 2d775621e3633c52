"""What a person following a run sees: each event of its log once, status lines without
control codes when output is not a terminal, and an exit code for every stop reason."""

from __future__ import annotations

import io
import typing
from typing import cast

import pytest
from follow_fakes import printed

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._cli.outcome import EXIT_CODES, EXIT_OK
from steadyloop._cli.progress import (
    ActivityState,
    EventPrinter,
    ProgressDisplay,
    one_line,
    result_lines,
    status_line,
)
from steadyloop._run.models import RunProgress, RunResult, RunStats, StopReason
from steadyloop.events import RunEventItem, StopEvent, ToolCallEvent, ToolResultEvent


def transcript() -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content="what is in the order?"),
        ChatMessage(
            role="assistant",
            content="Let me look.",
            tool_calls=[
                ToolCall(id="c1", name="read_file", arguments='{"path":"a.txt"}'),
                ToolCall(id="c2", name="current_time", arguments=""),
            ],
        ),
        ChatMessage(role="tool", tool_call_id="c1", content="line one\nline two"),
        ChatMessage(role="tool", tool_call_id="c2", content="2026-01-01T00:00:00Z"),
        ChatMessage(role="assistant", content="Two lines."),
    ]


async def test_every_event_is_printed_once_and_answers_carry_their_call_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[RunEventItem] = [
        ToolCallEvent(turn=1, call_id="c1", name="read_file", arguments='{"path":"a.txt"}'),
        ToolCallEvent(turn=1, call_id="c2", name="current_time", arguments=""),
        ToolResultEvent(turn=1, call_id="c1", name="read_file", text="line one\nline two"),
        ToolResultEvent(turn=1, call_id="c2", name="current_time", text="2026-01-01T00:00:00Z"),
        StopEvent(turn=2, reason="final_answer", final_answer="Two lines."),
    ]
    # No text was forwarded (`--no-stream`): a turn's text comes from the transcript.
    assert await printed(monkeypatch, events, transcript()) == [
        "turn 1  model: Let me look.",
        'turn 1  -> read_file {"path":"a.txt"}',
        'turn 1  -> current_time ""',
        "turn 1  <- read_file: line one | line two",
        "turn 1  <- current_time: 2026-01-01T00:00:00Z",
        # The final answer is the last turn's text, printed whole, once.
        "turn 2  model: Two lines.",
    ]
    # The zero-argument call is shown as the wire sent it, and the answer's line names
    # its call even when nothing else on it does.
    printer = EventPrinter("run-1")
    assert printer.lines(events[1]) == ['turn 1  -> current_time ""']
    assert printer.answer_line(cast(StopEvent, events[-1])) == ["turn 2  model: Two lines."]
    assert printer.answer_printed


def test_status_without_a_terminal_is_printed_once_per_change_with_no_control_codes() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, live=False)
    progress = RunProgress(turn=1, tool_calls=0, tokens=0, phase="model")
    display.status(status_line(progress))
    display.status(status_line(progress))
    display.event("turn 1  -> add {}")
    display.status(status_line(progress.model_copy(update={"tool_calls": 1, "tokens": 42})))
    display.close()
    assert out.getvalue().splitlines() == [
        "  [turn 1 | model | 0 tool calls | 0 tokens]",
        "turn 1  -> add {}",
        "  [turn 1 | model | 1 tool call | 42 tokens]",
    ]
    assert "\r" not in out.getvalue()
    assert "\x1b" not in out.getvalue()


def test_status_on_a_terminal_is_redrawn_in_place_and_cleared_at_the_end() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, live=True)
    display.status("turn 1 | model")
    display.event("an event")
    display.close()
    text = out.getvalue()
    # The event line starts on a cleared line, the status is redrawn under it, and
    # closing leaves the cursor on an empty line.
    assert "\r\x1b[Kan event\n" in text
    assert text.endswith("\r\x1b[K")
    assert text.count("turn 1 | model") == 2


def test_status_says_why_there_is_no_progress_yet_and_shows_retries() -> None:
    assert "task queue 'agents'" in status_line(None, task_queue="agents")
    progress = RunProgress(turn=2, tool_calls=3, tokens=10, phase="model")
    retrying = ActivityState("steadyloop.stream_completion", attempt=2, last_failure="HTTP 429")
    assert status_line(progress, retrying).endswith(
        "steadyloop.stream_completion attempt 2 after: HTTP 429"
    )
    first_attempt = ActivityState("steadyloop.stream_completion", attempt=1)
    assert "attempt" not in status_line(progress, first_attempt)


def test_one_line_cuts_and_folds() -> None:
    assert one_line("a\n\n b \n") == "a | b"
    assert one_line("x" * 50, 10) == "xxxxxxx..."


def test_result_lines_name_the_answer_the_reason_and_the_numbers() -> None:
    result = RunResult(
        final_answer="Forty-two.",
        stop_reason="final_answer",
        detail="the model answered without tool calls",
        transcript=[],
        stats=RunStats(turns=1, tool_calls=0, prompt_tokens=5, completion_tokens=2),
    )
    assert result_lines(result) == [
        "answer:",
        "  Forty-two.",
        "stop reason: final_answer (the model answered without tool calls)",
        "1 turn, 0 tool calls, 7 tokens (5 prompt, 2 completion)",
    ]
    stopped = result.model_copy(update={"final_answer": None, "stop_reason": "max_turns"})
    assert result_lines(stopped)[0] == "answer: (none)"


def test_result_lines_show_cost_retries_healing_and_compaction_only_when_they_happened() -> None:
    stats = RunStats(
        turns=3,
        prompt_tokens=900,
        completion_tokens=100,
        cached_tokens=300,
        cost_usd=0.01234,
        priced_calls=3,
        unpriced_calls=1,
        retries={"truncated_arguments": 1, "tool_lost": 2},
        healed={"missing_answer_added": 1},
        compactions={"elided": 2},
        elided_results=5,
    )
    result = RunResult(final_answer="ok", stop_reason="final_answer", transcript=[], stats=stats)
    assert result_lines(result)[-4:] == [
        "cost: $0.0123 for 3 model calls, 300 cached input tokens; 1 call not priced "
        "(no usage reported or no price)",
        "retries: tool_lost 2, truncated_arguments 1",
        "transcript healed: missing_answer_added 1",
        "compacted: elided 2 (5 tool results elided)",
    ]
    quiet = result.model_copy(update={"stats": RunStats(turns=1, unpriced_calls=1)})
    assert len(result_lines(quiet)) == 4  # no cost line without a single priced call
    progress = RunProgress(turn=2, tool_calls=1, tokens=10, phase="tools", cost_usd=1234.5)
    assert status_line(progress).endswith("10 tokens | $1,234.50")


def test_every_stop_reason_has_an_exit_code_and_only_an_answer_exits_zero() -> None:
    reasons = set(typing.get_args(StopReason))
    assert set(EXIT_CODES) == reasons
    assert {reason for reason, code in EXIT_CODES.items() if code == EXIT_OK} == {"final_answer"}
