"""What each stop reason says to a person: a header, how its partial output is
introduced, the next step, and the message a resumed run begins with.

One table, so the command line (`steadyloop run`, `show`, `resume`) and
`steadyloop._run.resume` cannot drift apart, and every stop says what happened rather
than what happened to another one: a `deadline` stop with text on screen offers to
resume like an interrupt; a finished answer is never called cut off.
"""

from __future__ import annotations

from dataclasses import dataclass

from steadyloop._run.models import RunResult, StopReason


@dataclass(frozen=True)
class StopWords:
    """`summary`: the stop in a few words; `partial`: how its partial output came to be;
    `resume`: the user message a resumed run sends (None: nothing to go on from, a
    person must say what they want); `hint`: what to do next (None: nothing to do)."""

    summary: str
    partial: str
    resume: str | None
    hint: str | None


_GO_ON = "Continue exactly where it stopped, without repeating what you already wrote."

STOP_WORDS: dict[StopReason, StopWords] = {
    "final_answer": StopWords(
        summary="the model answered",
        partial="",
        resume=None,
        hint=None,
    ),
    "max_tokens": StopWords(
        summary="the answer was cut by the output token limit",
        partial="cut at the output token limit",
        resume="The previous answer was cut by the output token limit. Carry on with the task.",
        hint="continue the answer: {resume} (or start runs with --continue-cut N, "
        "or a larger --max-tokens)",
    ),
    "token_budget": StopWords(
        summary="the run's token budget is spent",
        partial="streamed until the token budget ran out",
        resume="The previous run stopped when its token budget ran out. Carry on with the task.",
        hint="resume the run with a fresh budget: {resume}",
    ),
    "deadline": StopWords(
        summary="the run's deadline passed",
        partial="shown when the deadline passed",
        resume="The previous run stopped at its deadline. Carry on with the task.",
        hint="resume the run: {resume}",
    ),
    "interrupted": StopWords(
        summary="a person interrupted the run",
        partial="shown before the interrupt",
        resume="The run was interrupted. Carry on with the task.",
        hint="resume the run: {resume}",
    ),
    "output_interrupted": StopWords(
        summary="the stream failed after its output was shown",
        partial="shown before the stream failed",
        resume="The previous answer was cut off when the connection failed. Carry on with "
        "the task.",
        hint="resume the run: {resume} (or start runs with --continue-stalled N "
        "to go on by themselves)",
    ),
    "max_turns": StopWords(
        summary="the run took its maximum number of turns",
        partial="",
        resume="The previous run stopped after its maximum number of turns. Carry on with "
        "the task.",
        hint="resume the run with fresh turns: {resume}",
    ),
    "failed": StopWords(
        summary="the run failed",
        partial="shown before the run failed",
        resume="The previous run stopped because a model call failed. Carry on with the task.",
        hint="resume the run once the cause is fixed: {resume}",
    ),
    "state_too_large": StopWords(
        summary="the run's state no longer fits one payload",
        partial="",
        resume=None,
        hint=None,
    ),
    "invalid_output": StopWords(
        summary="the answer did not match the run's output schema",
        partial="",
        resume="Your previous answer did not match the required JSON schema. Answer again "
        "with only a JSON value that matches it.",
        hint="ask again: {resume} (the last answer's text is the result's raw_output)",
    ),
}


# Why an answer in progress stopped, for a resumed run whose stop left text behind.
_CUT_BY: dict[StopReason, str] = {
    "max_tokens": "by the output token limit",
    "token_budget": "when the run's token budget ran out",
    "deadline": "at the run's deadline",
    "interrupted": "by a person's interrupt",
    "output_interrupted": "when the connection failed",
    "failed": "when a model call failed",
}


def resume_prompt(result: RunResult) -> str | None:
    """The message a run resuming `result` sends, saying what is true of how it stopped:
    an answer cut off (its text is sent back before this) is asked to go on from where it
    stopped; a run stopped between turns is asked to carry on with the task. None when
    there is nothing to go on from (a final answer): a person must say what they want."""
    words = STOP_WORDS[result.stop_reason]
    if words.resume is None:
        return None
    cut = result.partial is not None and bool(result.partial.text.strip())
    if cut and result.stop_reason in _CUT_BY:
        return f"Your previous answer was cut off {_CUT_BY[result.stop_reason]}. {_GO_ON}"
    return words.resume


def partial_intro(result: RunResult) -> str:
    """The line above a stop's partial output: which turn, and how it came to be."""
    partial = result.partial
    assert partial is not None
    words = STOP_WORDS[result.stop_reason].partial or "left when the run stopped"
    if not partial.shown:
        words += " (not shown: the run forwarded nothing)"
    if not partial.complete:
        words += " (its beginning was no longer retained)"
    return f"partial output of turn {partial.turn}, {words}:"


def next_step(result: RunResult, workflow_id: str, resume: str | None = None) -> str | None:
    """What a person can do next, with the command; None when the run is simply done.
    `resume`: the resume command as the person can type it (the command line spells it
    with the program and connection flags it was started with)."""
    hint = STOP_WORDS[result.stop_reason].hint
    if hint is None:
        return None
    return hint.format(resume=resume or f"steadyloop resume {workflow_id}")


def stop_reason_text(result: RunResult) -> str:
    """`final_answer (the model answered without tool calls)`: the reason and its detail.

    A detail that has parentheses of its own (an interrupt's: `enough (the model turn was
    cancelled)`) follows a colon instead, so brackets never nest: `interrupted (enough
    (the model turn was cancelled))` reads as one thing inside another.
    """
    detail = (result.detail or "").strip()
    if not detail:
        return result.stop_reason
    if "(" in detail or ")" in detail:
        return f"{result.stop_reason}: {detail}"
    return f"{result.stop_reason} ({detail})"


def status_header(result: RunResult | None, status: str) -> str:
    """The state in `show`'s header: Temporal's status for a run going on or that did not
    complete, else the stop reason (a run that stopped interrupted is not "completed")."""
    if result is None:
        return status
    if result.stop_reason == "final_answer":
        return "completed: final_answer"
    return f"stopped: {result.stop_reason}"
