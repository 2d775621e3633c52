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
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered
from real_servers import (
    WEATHER_RUN_FLAGS,
    assert_weather_answered,
    loop_on_dev_server,
    worker_and_run,
)
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

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._chat import ChatMessage, ToolCall, ToolSpec
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits, Sampling
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.tools import ToolRegistry, tool

pytestmark = [pytest.mark.realserver, pytest.mark.slow]


@pytest.mark.parametrize("case", LLAMACPP_CASES, ids=[case.name for case in LLAMACPP_CASES])
async def test_the_model_activity_reads_llamacpp(case: Case, llamacpp_url: str) -> None:
    transport = RecordingTransport(SOURCES[LLAMACPP])
    outcome = await run_case(case, transport, llamacpp_url + "/v1")
    case.check(outcome, transport.last)
    keep_as_fixture(case, transport.last)


# -- one whole run -----------------------------------------------------------------


# What SmolLM2-135M needs to call a tool deterministically, as run settings a user has
# (`RunInput.tool_choice`, `prefill`, `Sampling.stop`; `steadyloop run --tool-choice
# required --prefill '<tool_call>\\n' --stop '</tool_call>'`): the call forced on the turn
# that answers the user, its opening tag already written, and the reply stopped after
# one whole call (it would otherwise repeat the call until `max_tokens` cut one). After
# the tool's answer neither applies, so the model may answer.
SMOLLM2_STOP = ["</tool_call>"]


async def test_a_whole_run_answers_every_call_and_stops_with_a_named_reason(
    llamacpp_url: str,
) -> None:
    asked: Counter[str] = Counter()

    @tool(effect="pure")
    async def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        asked[city] += 1
        return f"Sunny and 21 C in {city}."

    endpoint = EndpointConfig(name=LLAMACPP, base_url=llamacpp_url + "/v1")
    async with (
        ModelActivities(EndpointRegistry([endpoint]), environ={}) as model,
        loop_on_dev_server(model, ToolRegistry([get_weather])) as (client, task_queue),
    ):
        result = await client.execute_workflow(
            ToolLoopWorkflow.run,
            RunInput(
                endpoint=LLAMACPP,
                model=MODELS[LLAMACPP],
                prompt="What is the weather in Paris?",
                tools=["get_weather"],
                tool_choice="required",
                prefill="<tool_call>\n",
                sampling=Sampling(temperature=0, max_tokens=96, stop=SMOLLM2_STOP),
                # At temperature 0 a second attempt would say the same: fail fast.
                limits=RunLimits(max_turns=3, model_attempts=1),
            ),
            id=f"llamacpp-run-{uuid.uuid4()}",
            task_queue=task_queue,
        )

    # The answer after the tool's result may run past 96 tokens: llama.cpp's output at
    # temperature 0 varies with what its prompt cache holds. The call decides this test.
    assert result.stop_reason in ("final_answer", "max_turns", "max_tokens"), result.detail
    transcript = result.transcript
    assert_every_call_answered(transcript)
    calls = [c for m in transcript if m.role == "assistant" for c in m.tool_calls]
    assert calls
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


# -- the same, as a user runs it: two commands and documented flags -----------------


async def test_worker_and_run_commands_get_real_tool_calls_from_smollm2(
    llamacpp_url: str, tmp_path: Path
) -> None:
    """`steadyloop worker` with the model on its endpoint and the user's tools, then
    `steadyloop run` naming neither, with only flags the README documents: llama.cpp's
    own server makes the calls, the worker runs them, every call is answered."""
    ran = await worker_and_run(
        tmp_path,
        f"default={llamacpp_url}/v1,model={MODELS[LLAMACPP]}",
        WEATHER_RUN_FLAGS,
    )
    assert_weather_answered(ran)
