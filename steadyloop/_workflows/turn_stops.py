"""How a model turn that did not give a usable answer ends: go on, or stop, and why.

Workflow state only, no command: each decision reads what the routed completion gave
and either lets the turn go on (a continuation, a fresh completion) or raises `Stop`
with the run's partial output set. What the obvious loop gets wrong here:

- an answer the token limit cut is not a final answer: the run stops `max_tokens` with
  the text as its partial output, or continues it when the run asks
  (`after_length_cut`); so is an answer whose stream failed once shown
  (`continue_after_failure`), and the token budget cuts the turn in flight
  (`stop_cut_by_budget`): see `turn_continuation`;
- a defective completion (dropped deltas, truncated arguments, no text and no calls) is
  never dispatched: it is retried as a fresh completion within its kind's budget, and
  never appended, so the transcript stays valid when the budget is spent
  (`after_defect`); one whose output was shown is never repeated;
- an attempt whose output a person already saw is never repeated anywhere: the run
  stops `output_interrupted` with what was shown (`stop_routed`).
"""

from __future__ import annotations

import asyncio
from typing import NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._output.forwarding import ForwardedOutput, PartialOutput
    from steadyloop._run.models import RunInput
    from steadyloop._stream.completion import AssembledTurn, CompletionRequest
    from steadyloop._workflows.routed_turn import RoutedTurn, RouteStop

from steadyloop._workflows.run_state import RunState, Stop
from steadyloop._workflows.turn_continuation import TurnContinuation


def continue_after_failure(
    state: RunState,
    run: RunInput,
    routed: RoutedTurn,
    request: CompletionRequest,
    going_on: TurnContinuation,
) -> bool:
    """Whether to continue from what a failed attempt showed (the run asks for it,
    `ContinuationOptions.after_stream_failure`), rather than stop
    `output_interrupted`; the answer so far is then the run's partial output."""
    stop = routed.stop
    if stop is None or stop.rule != "produced_output" or stop.shown is None:
        return False
    if not stop.shown.text.strip():  # only reasoning was shown: no answer to go on from
        return False
    if not going_on.may_continue("stream_failure"):
        return False
    if not going_on.after_stream_failure(
        stop.shown, stop.shown_source, reasoning_counts=_reasoning_counts(request)
    ):
        return False
    state.stats.count_continuation("stream_failure")
    state.partial = going_on.partial(state.turn, stop.sequence or routed.sent[-1].sequence)
    state.check_bounds(run.limits, boundary=False)
    return True


def after_length_cut(
    state: RunState, run: RunInput, turn: AssembledTurn, sequence: int, going_on: TurnContinuation
) -> None:
    """An answer the token limit cut: the run's partial output, continued when the run
    asks (the caller then asks for the rest), else a `max_tokens` stop."""
    state.partial = PartialOutput(
        turn=state.turn,
        attempt=sequence,
        text=turn.text,
        source="activity",
        cause=f"finish_reason {turn.finish_reason!r}",
        shown=going_on.shown or turn.stats.produced_output,
    )
    if not going_on.may_continue("max_tokens"):
        used = going_on.used["max_tokens"]
        after = f" after {used} continuation(s)" if used else ""
        raise Stop(
            "max_tokens",
            f"the answer was cut by the output token limit (finish_reason "
            f"{turn.finish_reason!r}){after}; its text is the partial output",
        )
    going_on.after_length_cut(turn)
    state.stats.count_continuation("max_tokens")
    state.check_bounds(run.limits, boundary=False)


def after_defect(
    state: RunState, run: RunInput, turn: AssembledTurn, sequence: int, spent: dict[str, int]
) -> None:
    """A defective completion: stopped when its output was shown or its kind's budget of
    fresh completions is spent; else counted, and the caller asks for a fresh one."""
    defect = turn.defects[0]
    if turn.stats.produced_output:
        state.partial = PartialOutput(
            turn=state.turn,
            attempt=sequence,
            text=turn.text,
            reasoning=turn.reasoning if run.forwarding.reasoning_is_output else "",
            source="activity",
            cause=f"completion defect {defect.kind!r}: {defect.detail}",
        )
        raise Stop(
            "output_interrupted",
            f"the turn's output was already shown, so its completion defect "
            f"{defect.kind!r} is not retried: {defect.detail}",
        )
    used = spent.get(defect.kind, 0)
    if used >= defect.retry_budget:
        raise Stop(
            "failed",
            f"completion defect {defect.kind!r} persisted after {used} fresh "
            f"completion(s): {defect.detail}",
        )
    spent[defect.kind] = used + 1
    state.event(
        "model",
        "defect_retry",
        f"completion defect {defect.kind!r} ({defect.detail}); asking for a fresh "
        f"completion ({used + 1} of {defect.retry_budget})",
    )
    state.stats.count_retry(defect.kind)
    state.stats.defect_retries[defect.kind] = state.stats.defect_retries.get(defect.kind, 0) + 1
    state.check_bounds(run.limits)


def stop_cut_by_budget(
    state: RunState, run: RunInput, turn: AssembledTurn, sequence: int, going_on: TurnContinuation
) -> NoReturn:
    """The model activity cut the turn in flight when the run's token budget ran out:
    stop `token_budget`, keeping what streamed (nothing it asked for is run)."""
    budget = run.limits.token_budget
    assert budget is not None and turn.stats.cut_by_budget is not None
    counted = "reported by the provider" if turn.stats.budget_count_reported else "estimated"
    if turn.text or turn.reasoning:
        state.partial = PartialOutput(
            turn=state.turn,
            attempt=sequence,
            text=turn.text,
            reasoning=turn.reasoning if run.forwarding.reasoning_is_output else "",
            source="activity",
            cause="the run's token budget ran out while the turn streamed",
            shown=going_on.shown or turn.stats.produced_output,
        )
    raise Stop(
        "token_budget",
        f"the turn in flight was cut after {turn.stats.cut_by_budget} output tokens "
        f"({counted}); {state.stats.budget_use(budget)}",
    )


def stop_routed(
    state: RunState, routed: RoutedTurn, request: CompletionRequest, going_on: TurnContinuation
) -> NoReturn:
    """End the run for a route that produced no turn, with the reason it gives."""
    stop = routed.stop
    assert stop is not None  # a routed turn without a turn always says why
    if stop.reason == "deadline":
        raise Stop("deadline", f"the run's deadline: {stop.detail}")
    if stop.rule == "aborted":
        raise asyncio.CancelledError  # the run was cancelled: not a model failure
    cause = stop.failure.describe() if stop.failure is not None else stop.detail
    if stop.rule == "produced_output":
        _stop_shown(state, routed, stop, cause, request, going_on)
    if stop.reason == "rule":  # context_length: compacting is the caller's decision
        raise Stop("failed", f"the model call stopped ({stop.rule}): {cause}")
    if not routed.sent:  # no_candidate: every breaker open, or the probe taken
        reopens = stop.next_open_at
        when = "" if reopens is None else f" (a probe is admitted at {reopens.isoformat()})"
        raise Stop("failed", f"no endpoint of the route was tried: {stop.detail}{when}")
    last = routed.sent[-1]
    raise Stop(
        "failed",
        f"the model call failed after {len(routed.sent)} attempt(s) "
        f"({last.error_type}): {stop.detail}",
    )


def _stop_shown(
    state: RunState,
    routed: RoutedTurn,
    stop: RouteStop,
    cause: str,
    request: CompletionRequest,
    going_on: TurnContinuation,
) -> NoReturn:
    """An attempt failed after its output was shown: it is not repeated, and what it
    showed is the run's partial output."""
    shown = stop.shown or ForwardedOutput(complete=False)
    source = stop.shown_source or "activity"
    state.partial = PartialOutput(
        turn=state.turn,
        attempt=stop.sequence or routed.sent[-1].sequence,
        # The host's copy holds every attempt of the turn; an attempt's own copy,
        # its piece only (a continued answer's earlier pieces go before it).
        text=shown.text if source == "stream" else going_on.whole_text(shown.text),
        reasoning=shown.reasoning if _reasoning_counts(request) else "",
        source=source,
        complete=shown.complete,
        cause=cause,
    )
    if state.deadline.passed:
        # The attempt's timeout is cut to the deadline, so it can end first: the
        # run stopped because its deadline passed, not because the stream broke.
        raise Stop("deadline", f"the run's deadline passed during a model turn ({cause})")
    raise Stop(
        "output_interrupted",
        f"the model call failed after its output was shown, so it is not repeated: {cause}",
    )


def _reasoning_counts(request: CompletionRequest) -> bool:
    """Whether shown reasoning counts as output: the run forwards it as output."""
    return request.forward is not None and request.forward.reasoning_is_output
