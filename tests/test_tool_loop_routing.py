"""Routed runs end to end: `ToolLoopWorkflow` with a route of two endpoints on the
time-skipping server, each a scripted provider over real HTTP, the breakers in their
entity workflows (the worker runs what `steadyloop worker` runs).

What decides the outcome downstream, asserted on what the providers received: a
failing endpoint is left for the next one and the run completes there (priced as the
one that answered); an attempt whose output a person saw is sent nowhere else (one
request in total) and the run stops `output_interrupted` with the text that was shown;
a rejected request moves on without counting against the endpoint that rejected it; a
context-length error is not sent to every provider in turn; a route whose breakers are
all open sends nothing and says when a probe will be admitted.
"""

from __future__ import annotations

import asyncio

import pytest
from loop_harness import ENDPOINT, MODEL, Loop, run_input, running_loop
from routing_harness import endpoint_health

from steadyloop._output.forwarding import ForwardingOptions, OutputDelta
from steadyloop._routing.endpoint_health import EndpointOutcome
from steadyloop._routing.pricing import Price
from steadyloop._routing.route_plan import Backoff, RouteCandidate, RouteConfig
from steadyloop._run.models import RunInput, RunResult
from steadyloop.client._event_log import follow_output
from steadyloop.testing import (
    Pause,
    error_response,
    sse_response,
    text_chunks,
    text_response,
)

pytestmark = pytest.mark.slow

BACKUP = "backup"
BACKUP_MODEL = "backup-model"


def routed_run(*, attempts: int = 2, forwarding: bool = False) -> RunInput:
    route = RouteConfig(
        candidates=[
            RouteCandidate(
                endpoint=ENDPOINT, model=MODEL, attempts=attempts, backoff=Backoff(initial_s=1)
            ),
            RouteCandidate(endpoint=BACKUP, model=BACKUP_MODEL),
        ]
    )
    update: dict[str, object] = {
        "route": route,
        "prices": {
            ENDPOINT: Price(input=100.0, output=100.0),
            f"{BACKUP}/{BACKUP_MODEL}": Price(input=1.0, output=2.0),
        },
    }
    if forwarding:
        update["forwarding"] = ForwardingOptions(enabled=True, batch_interval_s=0.05)
    return run_input("say hello").model_copy(update=update)


async def run_and_watch(loop: Loop, run: RunInput) -> tuple[RunResult, list[OutputDelta]]:
    """The run's result and every piece of output a subscriber saw."""
    handle = await loop.start(run)
    seen: list[OutputDelta] = []

    async def collect() -> None:
        async for delta in follow_output(loop.client, handle.id, poll_s=0.02):
            seen.append(delta)

    watcher = asyncio.ensure_future(collect())
    result = await handle.result()
    await asyncio.wait_for(watcher, 30)
    return result, seen


def models_asked(loop: Loop, endpoint: str) -> list[str]:
    return [request.json["model"] for request in loop.servers[endpoint].requests]


async def test_a_failing_endpoint_is_left_for_the_next_and_the_run_completes_there() -> None:
    failing = error_response(500, "boom", type="server_error")
    async with running_loop(
        [failing, failing],
        more_endpoints={BACKUP: [text_response("hello from backup", usage=(1000, 10))]},
    ) as loop:
        result, seen = await run_and_watch(loop, routed_run(forwarding=True))
        health = await endpoint_health(loop.client, ENDPOINT)

    assert result.stop_reason == "final_answer"
    assert result.final_answer == "hello from backup"
    # Two attempts on the first endpoint (its budget), then the second one, asked for
    # its own model.
    assert models_asked(loop, ENDPOINT) == [MODEL, MODEL]
    assert models_asked(loop, BACKUP) == [BACKUP_MODEL]
    assert result.stats.model_attempts == 3
    assert result.stats.retries == {"model_http_status": 2}
    # Priced as the endpoint and model that answered, not the run's first choice.
    assert (result.stats.priced_calls, result.stats.unpriced_calls) == (1, 0)
    assert result.stats.cost_usd == pytest.approx((1000 * 1.0 + 10 * 2.0) / 1_000_000)
    # The turn's attempts are numbered across endpoints: the answer was attempt 3.
    assert {(d.turn, d.attempt) for d in seen} == {(1, 3)}
    assert health is not None and len(health.breaker.recent_failures) == 2


async def test_an_attempt_that_showed_output_then_stalled_is_sent_nowhere_else() -> None:
    shown_then_stalls = sse_response([*text_chunks("The answer is"), Pause(3.0)], done=False)
    async with running_loop(
        [shown_then_stalls],
        more_endpoints={BACKUP: [text_response("a second answer", usage=(1000, 10))]},
        inter_chunk_s=0.3,
    ) as loop:
        result, seen = await run_and_watch(loop, routed_run(forwarding=True))
        health = await endpoint_health(loop.client, ENDPOINT)

    assert result.stop_reason == "output_interrupted"
    assert len(loop.servers[ENDPOINT].requests) == 1
    assert loop.servers[BACKUP].requests == []  # never a second answer under the first
    assert result.partial is not None
    assert result.partial.text == "The answer is" == "".join(d.text for d in seen)
    assert (result.partial.turn, result.partial.attempt) == (1, 1)
    assert "stall" in result.partial.cause
    assert [m.role for m in result.transcript] == ["system", "user"]
    # The endpoint did fail: its breaker records it even though nothing was retried.
    assert health is not None and len(health.breaker.recent_failures) == 1


async def test_a_rejected_request_moves_on_without_counting_against_the_endpoint() -> None:
    rejected = error_response(400, "messages[1]: unexpected field 'x'", code="invalid_value")
    async with running_loop(
        [rejected], more_endpoints={BACKUP: [text_response("fine", usage=(1000, 10))]}
    ) as loop:
        result = await loop.run(routed_run())
        health = await endpoint_health(loop.client, ENDPOINT)

    assert result.stop_reason == "final_answer" and result.final_answer == "fine"
    assert len(loop.servers[ENDPOINT].requests) == 1  # a 400 is not retried
    assert models_asked(loop, BACKUP) == [BACKUP_MODEL]
    assert result.stats.retries == {"model_http_status": 1}
    # One caller's malformed request does not open a healthy endpoint for everyone.
    assert health is None or health.breaker.recent_failures == []


async def test_a_context_length_error_stops_instead_of_trying_every_endpoint() -> None:
    too_long = error_response(
        400, "This model's maximum context length is 8192 tokens", code="context_length_exceeded"
    )
    async with running_loop(
        [too_long], more_endpoints={BACKUP: [text_response("x", usage=(1000, 10))]}
    ) as loop:
        result = await loop.run(routed_run())

    assert result.stop_reason == "failed"
    assert "context_length" in result.detail
    assert len(loop.servers[ENDPOINT].requests) == 1 and loop.servers[BACKUP].requests == []


async def test_a_route_whose_breakers_are_all_open_stops_without_a_request() -> None:
    async with running_loop(
        [text_response("x", usage=(1000, 10))],
        more_endpoints={BACKUP: [text_response("y", usage=(1000, 10))]},
    ) as loop:
        assert loop.health is not None
        for endpoint in (ENDPOINT, BACKUP):  # other runs saw five failures within a minute
            for _ in range(5):
                await loop.health.record_endpoint_outcome(
                    EndpointOutcome(endpoint=endpoint, outcome="failure", detail="HTTP 503")
                )
        result = await loop.run(routed_run())

    assert result.stop_reason == "failed"
    assert result.detail.startswith("no endpoint of the route was tried")
    assert "breaker open" in result.detail and "a probe is admitted at" in result.detail
    assert loop.servers[ENDPOINT].requests == [] and loop.servers[BACKUP].requests == []
    assert result.stats.model_attempts == 0
