"""Route plans: pure, deterministic, skipping open breakers and leaving out what an
endpoint refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from steadyloop._routing.circuit_breaker import BreakerState
from steadyloop._routing.endpoint_health import DegradedParameter, EndpointHealth
from steadyloop._routing.route_plan import (
    Backoff,
    PlannedCandidate,
    RouteCandidate,
    RouteConfig,
    RouteRequest,
    plan_route,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
CONFIG = RouteConfig(
    candidates=[
        RouteCandidate(endpoint="a", model="m1"),
        RouteCandidate(endpoint="b", model="m2", attempts=1),
        RouteCandidate(endpoint="c", model="m3"),
    ]
)


def health(
    endpoint: str, open_until: float | None = None, degraded: list[DegradedParameter] | None = None
) -> EndpointHealth:
    breaker = BreakerState(
        open_until=None if open_until is None else NOW + timedelta(seconds=open_until),
        last_failure="HTTP 500",
    )
    return EndpointHealth(endpoint=endpoint, breaker=breaker, as_of=NOW, degraded=degraded or [])


def endpoints(plan_candidates: list[PlannedCandidate]) -> list[str]:
    return [p.candidate.endpoint for p in plan_candidates]


def test_no_health_keeps_the_configured_order() -> None:
    plan = plan_route(CONFIG, RouteRequest(now=NOW))
    assert endpoints(plan.candidates) == ["a", "b", "c"]
    assert plan.skipped == [] and not any(p.probe for p in plan.candidates)


def test_an_open_breaker_is_skipped_and_says_until_when() -> None:
    plan = plan_route(CONFIG, RouteRequest(now=NOW, health=[health("a", open_until=30)]))
    assert endpoints(plan.candidates) == ["b", "c"]
    assert [s.candidate.endpoint for s in plan.skipped] == ["a"]
    assert plan.skipped[0].open_until == NOW + timedelta(seconds=30)
    assert "HTTP 500" in plan.skipped[0].reason


def test_a_half_open_breaker_stays_in_place_as_a_probe() -> None:
    plan = plan_route(CONFIG, RouteRequest(now=NOW, health=[health("b", open_until=0)]))
    assert endpoints(plan.candidates) == ["a", "b", "c"]
    assert [p.probe for p in plan.candidates] == [False, True, False]


def test_every_breaker_open_leaves_no_candidate_and_the_first_reopening() -> None:
    request = RouteRequest(now=NOW, health=[health("a", 30), health("b", 10), health("c", 20)])
    plan = plan_route(CONFIG, request)
    assert plan.candidates == []
    assert plan.next_open_at == NOW + timedelta(seconds=10)


def test_degraded_parameters_are_left_out_for_that_endpoint_only() -> None:
    degraded = [
        DegradedParameter(parameter="stream_options", since=NOW),
        DegradedParameter(parameter="parallel_tool_calls", since=NOW),
    ]
    plan = plan_route(CONFIG, RouteRequest(now=NOW, health=[health("b", degraded=degraded)]))
    assert [p.omit_parameters for p in plan.candidates] == [
        [],
        ["parallel_tool_calls", "stream_options"],
        [],
    ]


def test_the_time_decides_between_open_and_half_open() -> None:
    request = [health("a", open_until=30)]
    assert plan_route(CONFIG, RouteRequest(now=NOW, health=request)).skipped
    later = RouteRequest(now=NOW + timedelta(seconds=30), health=request)
    assert plan_route(CONFIG, later).candidates[0].probe


_states = st.sampled_from([None, -5.0, 0.0, 30.0])
_degraded = st.lists(
    st.sampled_from(["stream_options", "parallel_tool_calls", "reasoning_effort"]), unique=True
)


@given(
    st.lists(st.tuples(st.sampled_from("abcd"), _states, _degraded), max_size=6),
    st.floats(min_value=-60, max_value=60, allow_nan=False),
)
def test_identical_inputs_give_identical_plans(
    entries: list[tuple[str, float | None, list[str]]], offset: float
) -> None:
    snapshots = [
        health(
            name,
            open_until=state,
            degraded=[
                DegradedParameter.model_validate({"parameter": p, "since": NOW}) for p in params
            ],
        )
        for name, state, params in entries
    ]
    request = RouteRequest(now=NOW + timedelta(seconds=offset), health=snapshots)
    first = plan_route(CONFIG, request)
    # Rebuilt from its serialized form (as a replay would read it from history).
    again = plan_route(
        RouteConfig.model_validate_json(CONFIG.model_dump_json()),
        RouteRequest.model_validate_json(request.model_dump_json()),
    )
    assert again == first
    # Every candidate is either planned or skipped, once, in the configured order.
    seen = [p.candidate for p in first.candidates] + [s.candidate for s in first.skipped]
    assert sorted(seen, key=CONFIG.candidates.index) == CONFIG.candidates
    assert endpoints(first.candidates) == [
        c.endpoint for c in CONFIG.candidates if c in [p.candidate for p in first.candidates]
    ]


def test_a_candidate_listed_twice_is_refused() -> None:
    with pytest.raises(ValidationError, match="listed twice"):
        RouteConfig(
            candidates=[
                RouteCandidate(endpoint="a", model="m"),
                RouteCandidate(endpoint="a", model="m"),
            ]
        )


def test_an_empty_route_is_refused() -> None:
    with pytest.raises(ValidationError):
        RouteConfig(candidates=[])


def test_single() -> None:
    config = RouteConfig.single("default", "gpt", attempts=5)
    assert config.candidates == [RouteCandidate(endpoint="default", model="gpt", attempts=5)]


def test_backoff_delays() -> None:
    backoff = Backoff(initial_s=0.5, multiplier=2, max_s=3)
    assert [backoff.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.delay(10_000) == 3.0
    with pytest.raises(ValidationError):
        Backoff(initial_s=float("inf"))
