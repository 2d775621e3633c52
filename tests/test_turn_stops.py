"""How a model turn without a usable answer ends, decided without a server: a cut answer
is continued or stops `max_tokens` with its text kept; a defect is retried within its
budget unless its output was shown; a route that produced no turn stops with the reason
it gives, keeping what people saw."""

from __future__ import annotations

import asyncio

import pytest

from steadyloop._output.forwarding import ForwardedOutput, ForwardTarget
from steadyloop._routing.route_plan import RoutePlan
from steadyloop._run.models import ContinuationOptions, RunInput
from steadyloop._stream.completion import AssembledTurn, CompletionRequest, StreamStats
from steadyloop._stream.defects import CompletionDefect
from steadyloop._workflows.routed_turn import RouteAttempt, RoutedTurn, RouteStop
from steadyloop._workflows.run_state import RunState, Stop
from steadyloop._workflows.turn_continuation import TurnContinuation
from steadyloop._workflows.turn_stops import (
    after_defect,
    after_length_cut,
    continue_after_failure,
    stop_routed,
)
from steadyloop.events import TimelineEntryEvent


def noted_timeline(state: RunState) -> list[TimelineEntryEvent]:
    """The timeline entries the parts noted on the run's event log, not yet published."""
    return [e for e in state.events._pending if isinstance(e, TimelineEntryEvent)]


def _run(**continuation: int) -> RunInput:
    return RunInput(
        endpoint="e", model="m", prompt="go", continuation=ContinuationOptions(**continuation)
    )


def _state() -> RunState:
    state = RunState()
    state.turn = 2
    return state


def _request(forwarded: bool = False) -> CompletionRequest:
    forward = ForwardTarget(stream_id="s", turn=2, attempt=1) if forwarded else None
    return CompletionRequest(endpoint="e", model="m", messages=[], forward=forward)


def _routed(stop: RouteStop, *sent: RouteAttempt) -> RoutedTurn:
    return RoutedTurn(plan=RoutePlan(), attempts=list(sent), stop=stop)


def _failed(sequence: int) -> RouteAttempt:
    return RouteAttempt(
        endpoint="e", model="m", outcome="failed", sequence=sequence, error_type="Stalled"
    )


def test_an_answer_the_token_limit_cut_is_never_a_final_answer() -> None:
    state, run = _state(), _run()
    cut = AssembledTurn(text="half an ans", finish_reason="length")
    going_on = TurnContinuation(run.continuation, run.provider_profile)
    with pytest.raises(Stop) as stopped:
        after_length_cut(state, run, cut, 3, going_on)
    assert stopped.value.reason == "max_tokens"
    assert state.partial is not None and state.partial.text == "half an ans"
    assert (state.partial.turn, state.partial.attempt) == (2, 3)


def test_a_cut_answer_is_continued_when_the_run_asks_and_counted() -> None:
    state, run = _state(), _run(after_max_tokens=1)
    going_on = TurnContinuation(run.continuation, run.provider_profile)
    after_length_cut(state, run, AssembledTurn(text="half", finish_reason="length"), 1, going_on)
    assert going_on.active and going_on.used["max_tokens"] == 1
    assert state.stats.continuations == {"max_tokens": 1}
    with pytest.raises(Stop) as stopped:  # the one continuation is spent
        after_length_cut(
            state, run, AssembledTurn(text=" more", finish_reason="length"), 2, going_on
        )
    assert (
        stopped.value.reason == "max_tokens" and "after 1 continuation(s)" in stopped.value.detail
    )


def test_a_defect_is_retried_within_its_budget_then_fails_the_run() -> None:
    state, run = _state(), _run()
    turn = AssembledTurn(
        defects=[CompletionDefect(kind="empty_completion", detail="nothing", retry_budget=1)]
    )
    spent: dict[str, int] = {}
    after_defect(state, run, turn, 1, spent)
    assert spent == {"empty_completion": 1}
    assert state.stats.defect_retries == {"empty_completion": 1}
    assert [e.kind for e in noted_timeline(state)] == ["defect_retry"]
    with pytest.raises(Stop) as stopped:
        after_defect(state, run, turn, 2, spent)
    assert stopped.value.reason == "failed" and state.partial is None


def test_a_defect_whose_output_was_shown_is_never_retried() -> None:
    state, run = _state(), _run()
    turn = AssembledTurn(
        text="shown",
        defects=[CompletionDefect(kind="empty_completion", detail="x", retry_budget=5)],
        stats=StreamStats(produced_output=True),
    )
    with pytest.raises(Stop) as stopped:
        after_defect(state, run, turn, 1, {})
    assert stopped.value.reason == "output_interrupted"
    assert state.partial is not None and state.partial.text == "shown"


def test_a_route_that_failed_after_showing_output_keeps_what_people_saw() -> None:
    state = _state()
    stop = RouteStop(
        reason="rule",
        rule="produced_output",
        detail="stalled",
        sequence=4,
        shown=ForwardedOutput(text="I was say", reasoning="hm"),
        shown_source="activity",
    )
    going_on = TurnContinuation(ContinuationOptions(), "")
    with pytest.raises(Stop) as stopped:
        stop_routed(state, _routed(stop, _failed(4)), _request(forwarded=True), going_on)
    assert stopped.value.reason == "output_interrupted"
    assert state.partial is not None
    assert (state.partial.text, state.partial.attempt, state.partial.reasoning) == (
        "I was say",
        4,
        "",  # the request did not forward reasoning as output
    )


def test_a_stream_failure_after_shown_text_is_continued_when_the_run_asks() -> None:
    state, run = _state(), _run(after_stream_failure=1)
    stop = RouteStop(
        reason="rule",
        rule="produced_output",
        sequence=2,
        shown=ForwardedOutput(text="I was say"),
        shown_source="activity",
    )
    going_on = TurnContinuation(run.continuation, run.provider_profile)
    routed = _routed(stop, _failed(2))
    assert continue_after_failure(state, run, routed, _request(forwarded=True), going_on)
    assert state.partial is not None and state.partial.text == "I was say"
    assert state.stats.continuations == {"stream_failure": 1}
    only_reasoning = stop.model_copy(update={"shown": ForwardedOutput(reasoning="hm")})
    assert not continue_after_failure(
        _state(), run, _routed(only_reasoning, _failed(2)), _request(), going_on
    )


@pytest.mark.parametrize(
    ("stop", "sent", "reason", "said"),
    [
        (RouteStop(reason="deadline", detail="late"), [], "deadline", "deadline: late"),
        (
            RouteStop(reason="no_candidate", detail="all open"),
            [],
            "failed",
            "no endpoint of the route was tried: all open",
        ),
        (
            RouteStop(reason="exhausted", detail="boom"),
            [_failed(1), _failed(2)],
            "failed",
            "after 2 attempt(s) (Stalled): boom",
        ),
        (
            RouteStop(reason="rule", rule="context_length", detail="too long"),
            [_failed(1)],
            "failed",
            "stopped (context_length): too long",
        ),
    ],
)
def test_a_route_without_a_turn_stops_with_the_reason_it_gives(
    stop: RouteStop, sent: list[RouteAttempt], reason: str, said: str
) -> None:
    with pytest.raises(Stop) as stopped:
        stop_routed(
            _state(), _routed(stop, *sent), _request(), TurnContinuation(ContinuationOptions(), "")
        )
    assert stopped.value.reason == reason and said in stopped.value.detail


def test_a_route_its_caller_aborted_is_a_cancellation_not_a_model_failure() -> None:
    stop = RouteStop(reason="rule", rule="aborted")
    with pytest.raises(asyncio.CancelledError):
        stop_routed(
            _state(),
            _routed(stop, _failed(1)),
            _request(),
            TurnContinuation(ContinuationOptions(), ""),
        )
