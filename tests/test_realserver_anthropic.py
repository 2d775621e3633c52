"""The Anthropic Messages wire against llama.cpp's real `/v1/messages`.

The live tests (marked `realserver`, `slow`) run the model activity against the same
xllamacpp + SmolLM2 server the chat tests use, and one whole `ToolLoopWorkflow` run
with a tool call answered; `STEADYLOOP_CAPTURE_FIXTURES=1` saves each exchange under
`tests/fixtures/realservers/llamacpp_messages/`. The replay tests feed those recorded
bytes to the same activity (fast, no server) and hold the turn to an independent
reading of the bytes: json.loads of each `data:` line, nothing of the assembler.

What llama.cpp sent (recorded): the `tool_use` start has no `input` member; a cut by
`max_tokens` still closes the open block before `message_delta`; its error inside a
200 stream is `event: error` with its chat shape (`{"code": 500, "message": ...,
"type": "server_error"}`), not Anthropic's `{"type": "error", "error": {...}}`, and no
`message_stop` follows.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from http_fault_proxy import FaultProxy
from loop_harness import assert_every_call_answered
from real_servers import (
    WEATHER_RUN_FLAGS,
    assert_weather_answered,
    loop_on_dev_server,
    worker_and_run,
)
from realserver_cases import Case, Outcome, run_case
from temporalio.exceptions import ApplicationError
from wire_capture import Exchange, RecordingTransport, ReplayTransport

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._chat import ChatMessage, ToolSpec
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._run.models import RunInput, RunLimits, Sampling
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.tools import ToolRegistry, tool

FIXTURES = Path(__file__).parent / "fixtures" / "realservers" / "llamacpp_messages"
SOURCE = "llama.cpp server (xllamacpp 2026.10.11549), SmolLM2-135M-Instruct Q4_1, /v1/messages"
NAME = "llamacpp"
WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def _request(prefill: str, max_tokens: int, **more: Any) -> CompletionRequest:
    return CompletionRequest(
        endpoint=NAME,
        model="smollm2",
        messages=[
            ChatMessage(role="user", content="What is the weather in Paris?"),
            ChatMessage(role="assistant", content=prefill),
        ],
        tools=[WEATHER],
        temperature=0.0,
        max_tokens=max_tokens,
        **more,
    )


def events_of(body: bytes) -> list[dict[str, Any]]:
    """The independent reading: every `data:` line as JSON, the `event:` lines ignored."""
    return [
        json.loads(line[5:])
        for line in body.decode().splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


def calls_on_the_wire(body: bytes) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of each tool_use block, fragments joined by index."""
    calls: dict[int, list[str]] = {}
    for event in events_of(body):
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            block = event["content_block"]
            calls[event["index"]] = [block["id"], block["name"], ""]
        elif (
            event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta"
        ):
            calls[event["index"]][2] += event["delta"]["partial_json"]
    return [(c[0], c[1], c[2]) for c in calls.values()]


def check_one_call(outcome: Outcome, exchange: Exchange) -> None:
    assert isinstance(outcome, AssembledTurn), outcome
    wire = calls_on_the_wire(exchange.body)
    assert wire and [(c.id, c.name, c.arguments) for c in outcome.tool_calls] == wire
    assert json.loads(outcome.tool_calls[0].arguments).get("city")
    assert outcome.finish_reason == "tool_calls" and outcome.defects == []
    starts = [e for e in events_of(exchange.body) if e["type"] == "content_block_start"]
    assert all("input" not in e["content_block"] for e in starts)  # llama.cpp's shape
    usage = events_of(exchange.body)[0]["message"]["usage"]
    assert outcome.usage is not None
    assert outcome.usage.cached_tokens == usage["cache_read_input_tokens"]


def check_cut_call(outcome: Outcome, exchange: Exchange) -> None:
    assert isinstance(outcome, AssembledTurn), outcome
    events = events_of(exchange.body)
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == [
        "max_tokens"
    ]
    assert [d.kind for d in outcome.defects] == ["truncated_tool_call"]
    assert outcome.tool_calls and outcome.defects[0].tool_call_id == outcome.tool_calls[0].id


def check_stream_error(outcome: Outcome, exchange: Exchange) -> None:
    assert isinstance(outcome, ApplicationError), outcome
    failure = StreamFailure.model_validate(outcome.details[0])
    last = events_of(exchange.body)[-1]
    assert exchange.status == 200 and "type" in last and last["type"] == "server_error"
    assert (failure.kind, failure.provider_type) == ("stream_error", "server_error")
    assert failure.message == last["message"]
    assert failure.category == "server_error" and outcome.non_retryable  # the route retries


def _case(
    name: str, request: CompletionRequest, check: Callable[[Outcome, Exchange], None]
) -> Case:
    return Case(name, NAME, request, check, endpoint={"api": "anthropic"})


CASES = [
    _case(
        "one_call",
        _request("<tool_call>\n", 128, tool_choice="required", stop=["</tool_call>"]),
        check_one_call,
    ),
    _case(
        "cut_by_max_tokens", _request("<tool_call>\n", 12, tool_choice="required"), check_cut_call
    ),
    _case("in_stream_error", _request("Sure.<tool_call>\n", 160), check_stream_error),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_the_recorded_exchange_passes_its_check(case: Case) -> None:
    exchange = Exchange.load(FIXTURES, case.name)
    assert exchange.request["max_tokens"] == case.request.max_tokens  # recorded from this request
    outcome = await run_case(case, ReplayTransport(exchange), "http://replay.invalid/v1")
    case.check(outcome, exchange)


@pytest.mark.realserver
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_the_model_activity_reads_llamacpps_messages(case: Case, llamacpp_url: str) -> None:
    transport = RecordingTransport(SOURCE)
    outcome = await run_case(case, transport, llamacpp_url + "/v1")
    case.check(outcome, transport.last)
    assert transport.last.request["max_tokens"] == case.request.max_tokens
    assert "system" not in transport.last.request and transport.last.request["stream"] is True
    if os.environ.get("STEADYLOOP_CAPTURE_FIXTURES"):
        transport.last.save(FIXTURES, case.name)


@pytest.mark.realserver
@pytest.mark.slow
async def test_a_whole_run_over_messages_answers_its_tool_call(llamacpp_url: str) -> None:
    asked: list[str] = []

    @tool(effect="pure")
    async def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        asked.append(city)
        return f"Sunny and 21 C in {city}."

    endpoint = EndpointConfig(name=NAME, base_url=llamacpp_url + "/v1", api="anthropic")
    async with (
        ModelActivities(EndpointRegistry([endpoint]), environ={}) as model,
        loop_on_dev_server(model, ToolRegistry([get_weather])) as (client, task_queue),
    ):
        result = await client.execute_workflow(
            ToolLoopWorkflow.run,
            RunInput(
                endpoint=NAME,
                model="smollm2",
                prompt="What is the weather in Paris?",
                tools=["get_weather"],
                tool_choice="required",
                prefill="<tool_call>\n",
                sampling=Sampling(temperature=0, max_tokens=96, stop=["</tool_call>"]),
                limits=RunLimits(max_turns=3, model_attempts=1),
            ),
            id=f"llamacpp-messages-run-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    # The answer after the tool's result may run past 96 tokens: llama.cpp's output at
    # temperature 0 still varies with what its prompt cache holds (a CI run stopped
    # max_tokens there). What decides this test is the call before it, checked below.
    assert result.stop_reason in ("final_answer", "max_turns", "max_tokens"), result.detail
    assert_every_call_answered(result.transcript)
    calls = [c for m in result.transcript if m.role == "assistant" for c in m.tool_calls]
    answers = {m.tool_call_id: m.content for m in result.transcript if m.role == "tool"}
    assert calls and {c.name for c in calls} == {"get_weather"}
    for call in calls:
        assert answers[call.id] == f"Sunny and 21 C in {json.loads(call.arguments)['city']}."
    assert asked and result.stats.prompt_tokens > 0


async def test_worker_and_run_over_the_messages_wire(llamacpp_url: str, tmp_path: Path) -> None:
    """`steadyloop worker --endpoint default=URL,api=anthropic,...` and `steadyloop run`,
    as a user types them: llama.cpp's Messages server makes the call, it is answered."""
    # Through a proxy that keeps each request's path: llama.cpp serves every wire, so only
    # the path shows the worker spoke Messages.
    upstream = urlsplit(llamacpp_url)
    assert upstream.hostname is not None and upstream.port is not None
    proxy = FaultProxy(upstream.hostname, upstream.port)
    await proxy.start()
    try:
        ran = await worker_and_run(
            tmp_path,
            f"default={proxy.endpoint}/v1,model=smollm2,api=anthropic",
            WEATHER_RUN_FLAGS,
        )
    finally:
        await proxy.stop()
    assert proxy.paths and set(proxy.paths) == {"/v1/messages"}, proxy.paths
    assert_weather_answered(ran)
