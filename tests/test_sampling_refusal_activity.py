"""The model activity holds each request's sampling to its endpoint's wire, before sending.

A run's `Sampling` is held to the widest range any wire takes (temperature 0..2): the run
does not know which wire its endpoints speak. Anthropic Messages takes 0..1, and a
provider answers an out-of-range knob with a 400 on every attempt. So the activity, which
knows the endpoint, refuses the request itself (`sampling_out_of_range`, not retryable,
naming the knob, the value and the range) without a request, and a route goes on to an
endpoint whose wire takes it. What decides the outcome downstream, asserted here on what
the scripted providers received:

- temperature 1.5 (or top_p 1.5) to an anthropic endpoint, 2.5 to a chat one: refused,
  and that endpoint received nothing (its script holds a valid answer, so a request sent
  would have succeeded);
- the same 1.5 to a chat or responses endpoint, and 1.0 (the bound) to an anthropic one:
  sent as asked;
- a run routed [anthropic, chat] at 1.5: finishes on the chat endpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from wire_loop_harness import Provider, text_answer, wire_loop

from steadyloop._activities import ModelActivities
from steadyloop._chat import ChatMessage
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._run.bounds import WireApi
from steadyloop._run.models import RunInput, Sampling
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop.client import RunHandle
from steadyloop.errors import SAMPLING_OUT_OF_RANGE
from steadyloop.testing import ScriptedServer


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


async def stream(server: ScriptedServer, api: WireApi, **sampling: float) -> AssembledTurn:
    """One model activity call to an endpoint `m` of `api` on `server`, with `sampling`."""
    registry = EndpointRegistry([server.endpoint("m", api=api)])
    request = CompletionRequest(
        endpoint="m",
        model="some-model",
        messages=[ChatMessage(role="user", content="hi")],
        **sampling,
    )
    async with ModelActivities(registry, environ={}) as model:
        turn: AssembledTurn = await ActivityEnvironment().run(model.stream_completion, request)
    return turn


@pytest.mark.parametrize(
    ("api", "knob", "value", "bounds"),
    [
        ("anthropic", "temperature", 1.5, "from 0 to 1"),
        ("anthropic", "top_p", 1.5, "from 0 to 1"),
        ("chat", "temperature", 2.5, "from 0 to 2"),
    ],
)
async def test_a_knob_the_endpoints_wire_refuses_is_refused_before_any_request(
    server: ScriptedServer, api: WireApi, knob: str, value: float, bounds: str
) -> None:
    """Refused by the activity, not by the provider: nothing is sent, and no retry helps."""
    server.enqueue(text_answer(api, "would have answered"))
    with pytest.raises(ApplicationError) as info:
        await stream(server, api, **{knob: value})
    error = info.value
    assert server.requests == []
    assert error.type == SAMPLING_OUT_OF_RANGE
    assert error.non_retryable
    # The knob, the value, the range, and which endpoint of which wire.
    assert f"{knob} must be a number {bounds}" in error.message
    assert f"got {value:g}" in error.message
    assert "'m'" in error.message and f"api={api!r}" in error.message
    [details] = error.details
    assert details["endpoint"] == "m" and details["api"] == api
    assert len(details["problems"]) == 1 and knob in details["problems"][0]


@pytest.mark.parametrize(
    ("api", "temperature"), [("chat", 1.5), ("responses", 1.5), ("anthropic", 1.0)]
)
async def test_a_temperature_the_wire_takes_is_sent_as_asked(
    server: ScriptedServer, api: WireApi, temperature: float
) -> None:
    """1.5 is a chat or responses temperature; 1.0 is Anthropic's bound, itself allowed."""
    server.enqueue(text_answer(api, "sampled"))
    turn = await stream(server, api, temperature=temperature)
    [sent] = server.requests
    assert sent.json["temperature"] == temperature
    assert turn.text == "sampled"


@pytest.mark.slow
async def test_a_route_goes_past_the_endpoint_that_refuses_the_knob_and_finishes() -> None:
    """[anthropic, chat] at temperature 1.5: the chat endpoint answers the run.

    The anthropic endpoint's script holds a valid answer: had the request been sent, the
    run would have finished there."""
    providers = {
        "claude": Provider("anthropic", [text_answer("anthropic", "answered by claude")]),
        "gpt": Provider("chat", [text_answer("chat", "answered by gpt")]),
    }
    route = RouteConfig(
        candidates=[
            RouteCandidate(endpoint="claude", model="claude-model"),
            RouteCandidate(endpoint="gpt", model="gpt-model"),
        ]
    )
    run = RunInput(route=route, prompt="hi", sampling=Sampling(temperature=1.5))
    async with wire_loop(providers) as loop:
        handle = await loop.start(run)
        result = await handle.result()
        timeline = await RunHandle(loop.client, handle.id).timeline()
    assert result.stop_reason == "final_answer", result.detail
    assert result.final_answer == "answered by gpt"
    assert loop.servers["claude"].requests == []
    [sent] = loop.servers["gpt"].requests
    assert sent.json["model"] == "gpt-model" and sent.json["temperature"] == 1.5
    # One refusal, not retried on claude (a retry would be refused the same way).
    assert result.stats.model_attempts == 2
    [refused] = [e for e in timeline if e.kind == "model_retry"]
    assert "configuration" in refused.text and "'claude'" in refused.text
    assert "next endpoint" in refused.text
