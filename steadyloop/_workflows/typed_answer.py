"""A typed run's final answer: the validated value, another turn, or `invalid_output`.

Workflow state only, no command. A turn with no tool calls is the run's answer; on a
run with an `output_type` it must also be JSON the schema accepts
(`steadyloop._output.typed.check_answer`, which never raises, whatever the model sent).
An invalid answer stays in the transcript (the model reads what it said), is answered
by a user message saying what failed and giving the schema, and the model is asked
again: at most `OutputType.retries` extra turns per run, counted in
`RunStats.retries["invalid_output"]`, which is carried across continue-as-new, so a run
that hands over between an invalid answer and the next keeps its count. Then the run
stops `invalid_output` with the last answer's text as `RunResult.raw_output`.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._output.typed import OutputType, check_answer, correction
    from steadyloop._stream.completion import AssembledTurn
    from steadyloop._stream.defects import CompletionDefect

from steadyloop._workflows.run_state import RunState, Stop

# The retry reason (`RunStats.retries`) an extra turn for an invalid answer counts under.
OUTPUT_RETRY = "invalid_output"


def settle_answer(state: RunState, output: OutputType | None, text: str) -> None:
    """Stop `final_answer` with the validated value, or ask again (returns, with the
    correction appended), or stop `invalid_output` when the extra turns are spent."""
    if output is None:
        raise Stop("final_answer", "the model answered without tool calls", answer=text)
    checked = check_answer(output, text)
    if checked.valid:
        raise Stop(
            "final_answer",
            f"the model answered with valid {output.name} output",
            answer=text,
            output=checked.value,
        )
    problem = checked.problem or "invalid"
    used = state.stats.retries.get(OUTPUT_RETRY, 0)
    if used >= output.retries:
        raise Stop(
            "invalid_output",
            f"the answer is not valid {output.name} output after {used} extra turn(s) "
            f"asking again: {problem}",
            raw_output=text,
        )
    state.stats.count_retry(OUTPUT_RETRY)
    state.event(
        "model",
        "output_retry",
        f"the answer {_quoted(text)} is not valid {output.name} output ({problem}); asking "
        f"again ({used + 1} of {output.retries})",
    )
    state.transcript.append(ChatMessage(role="user", content=correction(output, problem)))


def _quoted(text: str, limit: int = 60) -> str:
    """The answer's opening, for people following the run (its text is not forwarded
    while JSON is asked for, so this note is where they read it)."""
    one_line = " ".join(text.split())
    return repr(one_line if len(one_line) <= limit else one_line[: limit - 3] + "...")


def told_by_the_run(output: OutputType | None, turn: AssembledTurn) -> AssembledTurn:
    """`turn` without the unparseable-JSON defect on a typed run: its answer is checked
    by the run, which tells the model what is wrong (a fresh sample is no more likely to
    be valid than the model once told), instead of spending fresh completions on it."""
    if output is None or not turn.defects:
        return turn
    kept: list[CompletionDefect] = [
        defect for defect in turn.defects if defect.kind != "structured_output_unparseable"
    ]
    if len(kept) == len(turn.defects):
        return turn
    return turn.model_copy(update={"defects": kept})
