"""steadyloop against a real model: SmolLM2-135M-Instruct on llama.cpp's own server.

The model activity reads what llama.cpp really streams (parallel tool calls with
32-character ids, a usage chunk with `choices: []`, pings), and the negative cases the
same server gives for free: a call cut by `max_tokens`, an error event inside a 200
stream, a 400 for a prompt over the context. Then one whole `ToolLoopWorkflow` run on
the local dev server. Checks live in `realserver_cases.py` and hold the turn to the
bytes that arrived, never to the model's exact words.

`STEADYLOOP_CAPTURE_FIXTURES=1` saves each exchange that passed its check as the
replay fixture `test_realserver_replays.py` reads.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import httpx
import pytest
from loop_harness import assert_every_call_answered
from real_servers import loop_on_dev_server
from realserver_cases import (
    LLAMACPP,
    LLAMACPP_CASES,
    MODELS,
    SOURCES,
    Case,
    keep_as_fixture,
    run_case,
)
from temporalio.testing import ActivityEnvironment
from wire_capture import RecordingTransport

from steadyloop.activities.model_stream import ModelActivities
from steadyloop.chat import ChatMessage, ToolCall, ToolSpec
from steadyloop.routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop.run.models import RunInput, RunLimits, Sampling
from steadyloop.stream.completion import AssembledTurn, CompletionRequest
from steadyloop.tools import ToolRegistry, tool
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

pytestmark = [pytest.mark.realserver, pytest.mark.slow]


@pytest.mark.parametrize("case", LLAMACPP_CASES, ids=[case.name for case in LLAMACPP_CASES])
async def test_the_model_activity_reads_llamacpp(case: Case, llamacpp_url: str) -> None:
    transport = RecordingTransport(SOURCES[LLAMACPP])
    outcome = await run_case(case, transport, llamacpp_url + "/v1")
    case.check(outcome, transport.last)
    keep_as_fixture(case, transport.last)


# -- one whole run -----------------------------------------------------------------


class ToolCallPrefill(httpx.AsyncBaseTransport):
    """Asks SmolLM2 for a tool call the only way it answers one deterministically.

    A 135M model calls a tool only with `tool_choice: "required"` and the call's opening
    tag prefilled as a final assistant message; `ToolLoopWorkflow` sends neither (it
    leaves the choice to the model). So, for a request whose last message is the user's,
    this transport adds both, and stops the model after one whole call (it would
    otherwise repeat the call until `max_tokens` cut one). Every other request goes out
    unchanged, and every answer comes back byte for byte as llama.cpp sent it.
    """

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.rewritten = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("tools") and body["messages"][-1]["role"] == "user":
            body["messages"].append({"role": "assistant", "content": "<tool_call>\n"})
            body.update(tool_choice="required", stop=["</tool_call>"])
            headers = [(k, v) for k, v in request.headers.items() if k != "content-length"]
            request = httpx.Request(
                request.method,
                request.url,
                headers=headers,
                content=json.dumps(body).encode(),
                extensions=request.extensions,
            )
            self.rewritten += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_whole_run_answers_every_call_and_stops_with_a_named_reason(
    llamacpp_url: str,
) -> None:
    asked: Counter[str] = Counter()

    @tool(effect="pure")
    async def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        asked[city] += 1
        return f"Sunny and 21 C in {city}."

    prefill = ToolCallPrefill()
    endpoint = EndpointConfig(name=LLAMACPP, base_url=llamacpp_url + "/v1")
    async with (
        httpx.AsyncClient(transport=prefill) as http,
        ModelActivities(EndpointRegistry([endpoint]), client=http, environ={}) as model,
        loop_on_dev_server(model, ToolRegistry([get_weather])) as (client, task_queue),
    ):
        result = await client.execute_workflow(
            ToolLoopWorkflow.run,
            RunInput(
                endpoint=LLAMACPP,
                model=MODELS[LLAMACPP],
                prompt="What is the weather in Paris?",
                tools=["get_weather"],
                sampling=Sampling(temperature=0, max_tokens=96),
                # At temperature 0 a second attempt would say the same: fail fast.
                limits=RunLimits(max_turns=3, model_attempts=1),
            ),
            id=f"llamacpp-run-{uuid.uuid4()}",
            task_queue=task_queue,
        )

    assert result.stop_reason in ("final_answer", "max_turns"), result.detail
    transcript = result.transcript
    assert_every_call_answered(transcript)
    calls = [c for m in transcript if m.role == "assistant" for c in m.tool_calls]
    assert calls and prefill.rewritten >= 1
    assert {c.name for c in calls} == {"get_weather"}
    # Each answer is the tool's own result for the arguments the model sent.
    answers = {m.tool_call_id: m.content for m in transcript if m.role == "tool"}
    for call in calls:
        city = json.loads(call.arguments)["city"]
        assert answers[call.id] == f"Sunny and 21 C in {city}."
    # Receipts: the tool ran once per city, however often the model asked.
    assert set(asked) == {json.loads(c.arguments)["city"] for c in calls}
    assert set(asked.values()) == {1}
    assert result.stats.prompt_tokens > 0 and result.stats.completion_tokens > 0
    if result.stop_reason == "final_answer":
        assert result.final_answer


# -- a history llama.cpp parses ----------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ["", '{"city": Paris}', '{"city": "half \\ud83d"}', "[1, 2]"],
    ids=["zero_argument_call", "malformed", "lone_surrogate", "array"],
)
async def test_a_history_with_arguments_no_tool_could_read_is_accepted(
    arguments: str, llamacpp_url: str
) -> None:
    """llama.cpp parses every call's arguments in the history and answers a 500 "Failed
    to parse tool call arguments as JSON" for `""` and malformed text: the request
    carries them as `{}`, while the call's tool message says what was received."""
    endpoint = EndpointConfig(name=LLAMACPP, base_url=llamacpp_url + "/v1")
    history = [
        ChatMessage(role="user", content="What is the weather in Paris?"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="call_0", name="weather", arguments=arguments)],
        ),
        ChatMessage(
            role="tool",
            tool_call_id="call_0",
            content=f"Invalid tool arguments. Received: {arguments}",
        ),
    ]
    request = CompletionRequest(
        endpoint=LLAMACPP,
        model=MODELS[LLAMACPP],
        messages=history,
        tools=[ToolSpec(name="weather", parameters={"type": "object", "properties": {}})],
        max_tokens=4,
    )
    async with ModelActivities(EndpointRegistry([endpoint]), environ={}) as model:
        turn = await ActivityEnvironment().run(model.stream_completion, request)
    assert isinstance(turn, AssembledTurn)
    assert turn.finish_reason in ("length", "stop", "tool_calls")
