"""What each stop says, and what a resumed run tells the model (no server).

What decides the outcome: a run that ended with a final answer is never told it was cut
off (resuming it is refused unless a person asks a follow-up); an answer that was cut
is asked to go on from where it stopped, saying why; every stop a person can go on from
prints the command, and a partial output is introduced as what happened to it.
"""

from __future__ import annotations

import typing

import pytest

from steadyloop._chat import ChatMessage
from steadyloop._cli.outcome import EXIT_CODES, EXIT_OK, EXIT_STOPPED
from steadyloop._cli.progress import partial_lines
from steadyloop._output.forwarding import PartialOutput
from steadyloop._run.models import RunInput, RunResult, RunStats, StopReason
from steadyloop._run.resume import NothingToResume, resume_input
from steadyloop._stops.budget import StreamMeter, estimate_tokens, streamed_tokens
from steadyloop._stops.stop_text import STOP_WORDS, resume_prompt, status_header, stop_reason_text

ORIGINAL = RunInput(endpoint="e", model="m", prompt="Tell me.")


def stopped(reason: StopReason, partial: str | None = None, **fields: object) -> RunResult:
    said = [ChatMessage(role="assistant", content="All of it.")] if reason == "final_answer" else []
    return RunResult(
        final_answer="All of it." if reason == "final_answer" else None,
        stop_reason=reason,
        transcript=[ChatMessage(role="user", content="Tell me."), *said],
        stats=RunStats(),
        partial=None
        if partial is None
        else PartialOutput(turn=1, attempt=1, text=partial, source="activity", **fields),
    )


def test_every_stop_reason_has_words_and_an_exit_code() -> None:
    reasons = set(typing.get_args(StopReason))
    assert set(STOP_WORDS) == reasons
    assert set(EXIT_CODES) == reasons
    assert EXIT_CODES["max_tokens"] == EXIT_STOPPED and EXIT_CODES["final_answer"] == EXIT_OK


def test_resuming_a_final_answer_is_refused_unless_a_follow_up_is_asked() -> None:
    with pytest.raises(NothingToResume, match="nothing to continue"):
        resume_input(ORIGINAL, stopped("final_answer"))
    with pytest.raises(NothingToResume):
        resume_input(ORIGINAL, stopped("final_answer"), prompt=None)
    follow_up = resume_input(ORIGINAL, stopped("final_answer"), prompt="And then?")
    assert [(m.role, m.content) for m in follow_up.messages] == [
        ("user", "Tell me."),
        ("assistant", "All of it."),
        ("user", "And then?"),
    ]


def test_a_follow_up_may_be_messages_appended_after_the_prompt() -> None:
    # The client API's follow-up given as messages: they go after the conversation (and
    # after the prompt when there is one), and count as the follow-up a final answer needs.
    then = [
        ChatMessage(role="user", content="Look at this:"),
        ChatMessage(role="user", content="x"),
    ]
    follow_up = resume_input(ORIGINAL, stopped("final_answer"), prompt=None, then=then)
    assert [m.content for m in follow_up.messages] == [
        "Tell me.",
        "All of it.",
        "Look at this:",
        "x",
    ]
    both = resume_input(ORIGINAL, stopped("final_answer"), prompt="First:", then=then[1:])
    assert [m.content for m in both.messages][-2:] == ["First:", "x"]


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("max_tokens", "cut off by the output token limit"),
        ("output_interrupted", "cut off when the connection failed"),
        ("interrupted", "cut off by a person's interrupt"),
        ("deadline", "cut off at the run's deadline"),
        ("token_budget", "cut off when the run's token budget ran out"),
    ],
)
def test_a_cut_answer_is_asked_to_go_on_saying_why(reason: StopReason, says: str) -> None:
    resumed = resume_input(ORIGINAL, stopped(reason, "The first half"))
    cut, ask = resumed.messages[-2:]
    assert (cut.role, cut.content) == ("assistant", "The first half")
    assert ask.role == "user" and ask.content is not None
    assert says in ask.content and "without repeating" in ask.content


@pytest.mark.parametrize("reason", ["interrupted", "deadline", "token_budget", "max_turns"])
def test_a_run_stopped_between_turns_is_not_told_it_was_cut_off(reason: StopReason) -> None:
    prompt = resume_prompt(stopped(reason))
    assert prompt is not None and "cut off" not in prompt and "Carry on" in prompt


@pytest.mark.parametrize(
    ("reason", "intro"),
    [
        ("max_tokens", "partial output of turn 1, cut at the output token limit"),
        ("deadline", "partial output of turn 1, shown when the deadline passed:"),
        ("interrupted", "partial output of turn 1, shown before the interrupt:"),
        ("output_interrupted", "partial output of turn 1, shown before the stream failed:"),
        ("token_budget", "partial output of turn 1, streamed until the token budget ran out"),
    ],
)
def test_each_stop_introduces_its_partial_as_what_happened(reason: StopReason, intro: str) -> None:
    lines = partial_lines(stopped(reason, "The first half"), "run-7")
    assert lines[0].startswith(intro)
    assert lines[1] == "  The first half"
    assert "steadyloop resume run-7" in lines[-1]


def test_a_partial_nobody_saw_says_so() -> None:
    lines = partial_lines(stopped("max_tokens", "cut", shown=False), "run-7")
    assert lines[0] == (
        "partial output of turn 1, cut at the output token limit (not shown: the run "
        "forwarded nothing):"
    )
    assert lines[-1].startswith("continue the answer: steadyloop resume run-7")


def test_a_deadline_without_partial_still_says_how_to_go_on() -> None:
    assert partial_lines(stopped("deadline"), "run-7") == [
        "resume the run: steadyloop resume run-7"
    ]
    assert partial_lines(stopped("final_answer"), "run-7") == []


def test_show_s_header_says_how_a_completed_workflow_stopped() -> None:
    assert status_header(stopped("interrupted"), "completed") == "stopped: interrupted"
    assert status_header(stopped("final_answer"), "completed") == "completed: final_answer"
    assert status_header(None, "running") == "running"


def test_the_budget_meter_counts_usage_where_sent_else_estimates() -> None:
    assert estimate_tokens(0) == 0 and estimate_tokens(3) == 1 and estimate_tokens(400) == 100
    assert streamed_tokens(None, 400) == (100, False)
    assert streamed_tokens(250, 400) == (250, True)

    class Call:
        def __init__(self) -> None:
            self.parts: list[str] = []

    meter = StreamMeter(10)
    call = Call()
    assert meter.spent(8, [call], None) is None  # 2 tokens
    call.parts.extend(["x" * 16, "y" * 12])  # 28 argument characters: 36 in all, 9 tokens
    assert meter.spent(8, [call], None) is None
    call.parts.append("z" * 4)  # counted once each: 40 characters, 10 tokens
    assert meter.spent(8, [call], None) == (10, False)
    assert meter.spent(0, [], 12) == (12, True)


def test_a_stop_reason_and_its_detail_never_nest_brackets() -> None:
    interrupted = stopped("interrupted").model_copy(
        update={"detail": "enough (the model turn was cancelled)"}
    )
    assert stop_reason_text(interrupted) == "interrupted: enough (the model turn was cancelled)"
    answered = stopped("final_answer").model_copy(update={"detail": "the model answered"})
    assert stop_reason_text(answered) == "final_answer (the model answered)"
    assert stop_reason_text(stopped("max_turns")) == "max_turns"
