"""Routed model turns end to end: a workflow runs `routed_completion` on the time-skipping
server, the model activity talks to fault-injecting providers over real HTTP, and the
breakers live in their entity workflows. Each test asserts what the providers received
(who was asked, how often, with which parameters) and what the breaker recorded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from routing_harness import FIRST_TOKEN_S, Routing, candidate, route, routing
from temporalio.api.enums.v1 import EventType

from steadyloop._routing.endpoint_health import EndpointOutcome
from steadyloop._routing.route_plan import Backoff
from steadyloop._workflows.routed_turn import RoutedTurn
from steadyloop.testing import (
    Pause,
    error_response,
    finish_chunk,
    sse_response,
    text_chunks,
    text_response,
)

pytestmark = pytest.mark.slow


@pytest.fixture
async def env() -> AsyncIterator[Routing]:
    async with routing() as running:
        yield running


def steps(result: RoutedTurn) -> list[tuple[str, str, str]]:
    return [(a.endpoint, a.outcome, a.rule) for a in result.attempts]


async def test_a_429_is_retried_on_the_same_endpoint_after_its_retry_after(env: Routing) -> None:
    env.a.enqueue(error_response(429, "slow down", code="rate_limit_exceeded", retry_after=7))
    env.a.enqueue(text_response("4"))

    handle = await env.start(route("a", "b"))
    result = await handle.result()

    assert result.turn is not None and result.turn.text == "4"
    assert (result.endpoint, result.model) == ("a", "model-a")
    assert steps(result) == [("a", "failed", "rate_limit"), ("a", "ok", "")]
    assert result.attempts[0].delay_s == 7.0
    assert len(env.a.requests) == 2 and env.b.requests == []
    # The wait is a durable timer of exactly the Retry-After (the backoff was 1 s).
    history = await handle.fetch_history()
    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToSeconds()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    assert timers == [7]
    health = await env.endpoint_health("a")
    assert health is not None and len(health.breaker.recent_failures) == 1


async def test_a_500_at_the_header_is_retried_then_traversed(env: Routing) -> None:
    env.a.enqueue(error_response(500, "boom", type="server_error"))
    env.a.enqueue(error_response(500, "boom again", type="server_error"))
    env.b.enqueue(text_response("from b"))

    result = await env.run(route(candidate("a", attempts=2), "b"))

    assert result.endpoint == "b" and result.turn is not None and result.turn.text == "from b"
    assert steps(result) == [
        ("a", "failed", "server_error"),
        ("a", "failed", "server_error_attempts_spent"),
        ("b", "ok", ""),
    ]
    assert [a.breaker_recorded for a in result.attempts] == [True, True, False]
    health = await env.endpoint_health("a")
    assert health is not None and len(health.breaker.recent_failures) == 2
    assert health.breaker.open_until is None  # 2 of 3: still closed


async def test_a_refused_connection_goes_straight_to_the_next(env: Routing) -> None:
    env.b.enqueue(text_response("4"))

    result = await env.run(route("down", "b"))

    assert result.endpoint == "b"
    assert steps(result) == [("down", "failed", "unreachable"), ("b", "ok", "")]
    failure = result.attempts[0].failure
    assert failure is not None and failure.network_reason == "refused"
    health = await env.endpoint_health("down")
    assert health is not None and health.breaker.failures_total == 1


async def test_a_stall_before_the_first_token_traverses(env: Routing) -> None:
    env.a.enqueue(sse_response([Pause(FIRST_TOKEN_S * 8), *text_chunks("too late")]))
    env.b.enqueue(text_response("from b"))

    result = await env.run(route("a", "b"))

    assert result.endpoint == "b"
    assert steps(result) == [("a", "failed", "stall_before_first_token"), ("b", "ok", "")]
    await env.a.exchanges[0].ended.wait()
    assert env.a.exchanges[0].client_disconnected  # the stalled connection was released
    health = await env.endpoint_health("a")
    assert health is not None and health.breaker.failures_total == 1


async def test_a_400_traverses_and_the_breaker_records_nothing(env: Routing) -> None:
    env.a.enqueue(error_response(400, "Invalid 'messages[0].content'", code="invalid_value"))
    env.b.enqueue(text_response("4"))

    result = await env.run(route("a", "b"))

    assert result.endpoint == "b"
    assert steps(result) == [("a", "failed", "request_rejected"), ("b", "ok", "")]
    assert result.attempts[0].breaker_recorded is False
    # Nothing was recorded for `a`: its entity was never even started.
    assert await env.endpoint_health("a") is None


async def test_an_unsupported_parameter_is_dropped_remembered_and_not_sent_again(
    env: Routing, caplog: pytest.LogCaptureFixture
) -> None:
    env.a.unsupported_parameters.add("parallel_tool_calls")
    env.a.enqueue(text_response("first"), text_response("second"))

    with caplog.at_level(logging.WARNING):
        first = await env.run(route("a", "b"))

    assert first.endpoint == "a" and first.turn is not None and first.turn.text == "first"
    assert steps(first) == [("a", "failed", "unsupported_parameter"), ("a", "ok", "")]
    sent = [r.json for r in env.a.requests]
    assert sent[0]["parallel_tool_calls"] is False
    assert "parallel_tool_calls" not in sent[1]
    assert sent[1]["tools"] == sent[0]["tools"]  # nothing else was dropped
    # Remembered per endpoint, visible in a query and in the worker's log.
    health = await env.endpoint_health("a")
    assert health is not None and health.omitted == ["parallel_tool_calls"]
    assert any(
        "does not support the request parameter 'parallel_tool_calls'" in r.getMessage()
        for r in caplog.records
    )
    assert await env.endpoint_health("b") is None

    second = await env.run(route("a", "b"))

    assert steps(second) == [("a", "ok", "")]
    assert second.plan.candidates[0].omit_parameters == ["parallel_tool_calls"]
    assert "parallel_tool_calls" not in env.a.requests[2].json
    assert len(env.a.requests) == 3


async def test_an_open_breaker_is_skipped_then_a_half_open_one_admits_one_probe(
    env: Routing,
) -> None:
    quick = candidate("a", backoff=Backoff(initial_s=0.05, max_s=0.1))  # real-time sleeps
    # Three server errors on `a` within the window open its breaker.
    env.a.enqueue(*[error_response(503, "overloaded", type="server_error")] * 3)
    env.b.enqueue(text_response("b1"), text_response("b2"))
    opened = await env.run(route(quick, "b"), skip_time=False)
    assert [s[2] for s in steps(opened)] == [
        "server_error",
        "server_error",
        "server_error_attempts_spent",
        "",
    ]
    health = await env.endpoint_health("a")
    assert health is not None and health.breaker.open_until is not None

    # Open: `a` is skipped without a request.
    skipped = await env.run(route(quick, "b"), skip_time=False)
    assert skipped.endpoint == "b"
    assert [s.candidate.endpoint for s in skipped.plan.skipped] == ["a"]
    assert steps(skipped) == [("b", "ok", "")]
    assert len(env.a.requests) == 3

    # After the cool-off the breaker is half-open: of two runs at once, exactly one
    # probes `a` (slow to answer, so the other asks while the probe is out).
    await env.env.sleep(timedelta(seconds=31))
    env.a.enqueue(
        sse_response([*text_chunks("pro"), Pause(1.0), *text_chunks("be"), finish_chunk("stop")])
    )
    env.b.enqueue(text_response("b3"))
    runs = [await env.start(route(quick, "b")) for _ in range(2)]
    results = await asyncio.gather(*(env.result(run, skip_time=False) for run in runs))

    assert sorted(r.endpoint or "" for r in results) == ["a", "b"]
    probe = next(r for r in results if r.endpoint == "a")
    other = next(r for r in results if r.endpoint == "b")
    assert probe.plan.candidates[0].probe and steps(probe) == [("a", "ok", "")]
    assert steps(other) == [("a", "skipped", "probe_taken"), ("b", "ok", "")]
    assert len(env.a.requests) == 4
    # The probe succeeded: closed again.
    health = await env.endpoint_health("a")
    assert health is not None and health.breaker.open_until is None
    assert health.breaker.opened_count == 1


async def test_every_breaker_open_leaves_no_candidate(env: Routing) -> None:
    for endpoint in ("a", "b"):
        for _ in range(3):
            await env.health.record_endpoint_outcome(
                EndpointOutcome(endpoint=endpoint, outcome="failure", detail="HTTP 500")
            )

    result = await env.run(route("a", "b"), skip_time=False)

    assert result.turn is None and result.stop is not None
    assert result.stop.reason == "no_candidate"
    assert result.stop.next_open_at is not None
    assert env.a.requests == [] and env.b.requests == []


async def test_a_context_length_error_stops_instead_of_trying_everyone(env: Routing) -> None:
    env.a.enqueue(
        error_response(
            400,
            "This model's maximum context length is 8192 tokens.",
            code="context_length_exceeded",
        )
    )

    result = await env.run(route("a", "b"))

    assert result.turn is None and result.stop is not None
    assert (result.stop.reason, result.stop.rule) == ("rule", "context_length")
    assert env.b.requests == []
    assert await env.endpoint_health("a") is None


async def test_a_context_length_error_goes_on_to_a_larger_window(env: Routing) -> None:
    env.a.enqueue(error_response(400, "prompt is too long: 9000 tokens > 8192 maximum"))
    env.b.enqueue(text_response("4"))

    config = route(candidate("a", context_tokens=8192), candidate("b", context_tokens=200_000))
    result = await env.run(config)

    assert result.endpoint == "b"
    assert steps(result)[0] == ("a", "failed", "context_length_larger_window")


async def test_every_candidate_failing_ends_exhausted_with_the_last_failure(env: Routing) -> None:
    env.a.enqueue(error_response(400, "bad request"))
    env.b.enqueue(error_response(401, "bad key", type="authentication_error"))

    result = await env.run(route("a", "b"))

    assert result.turn is None and result.stop is not None
    assert (result.stop.reason, result.stop.rule) == ("exhausted", "auth")
    assert result.stop.failure is not None and result.stop.failure.status == 401


async def test_a_backoff_past_the_deadline_stops_there_and_never_retries(env: Routing) -> None:
    env.a.enqueue(error_response(429, "slow down", retry_after=30))

    result = await env.run(route(candidate("a", max_retry_after_s=60), "b"), deadline_s=10)

    assert result.stop is not None and result.stop.reason == "deadline"
    assert env.b.requests == []


async def test_health_reads_are_served_from_the_worker_cache() -> None:
    async with routing(cache_ttl_s=60.0) as env:
        env.a.enqueue(text_response("4"), text_response("4"), text_response("4"))
        for _ in range(3):
            assert (await env.run(route("a", "b"))).endpoint == "a"
        # One query per endpoint for three turns; the rest came from the cache.
        assert env.health.queries == 2
