"""The request knobs a real model needs, below the command line: an endpoint's default
model, `extra_body` and `${VARIABLE}` headers; a run's `tool_choice`, `prefill` and stop
sequences; and what each turn's request carries because of them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.model_stream import ModelActivities, build_request_body
from steadyloop._chat import ChatMessage, ToolCall, ToolSpec
from steadyloop._redaction import MIN_FRAGMENT
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry, MissingApiKeyError
from steadyloop._run.models import RunInput, Sampling
from steadyloop._stream.completion import CompletionRequest
from steadyloop._worker.config import (
    ConfigError,
    LoadedConfig,
    endpoint_settings,
    parse_endpoint_flag,
)
from steadyloop.errors import MISSING_API_KEY
from steadyloop.testing import (
    ScriptedServer,
    error_response,
    text_response,
)

URL = "http://127.0.0.1:9/v1"
USER = ChatMessage(role="user", content="weather in Paris?")
CALLED = ChatMessage(
    role="assistant", tool_calls=[ToolCall(id="c1", name="get_weather", arguments="{}")]
)
ANSWERED = ChatMessage(role="tool", tool_call_id="c1", content="sunny")
WEATHER = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {}})


def body_for(endpoint: EndpointConfig, **request: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"endpoint": endpoint.name, "model": "m", "messages": [USER]}
    return build_request_body(CompletionRequest(**(fields | request)), endpoint)


# -- the endpoint: default model, extra_body, headers -------------------------------------


def test_an_endpoint_flag_carries_model_headers_and_extra_body() -> None:
    entry = parse_endpoint_flag(
        "local=http://127.0.0.1:8080/v1,model=smollm2,header.X-Title=demo,"
        "header.X-Key=${GW_KEY},extra_body.cache_prompt=true,extra_body.slot=3,"
        "extra_body.note=plain text"
    )
    endpoint = EndpointConfig.model_validate(entry)
    assert endpoint.model == "smollm2"
    assert endpoint.headers == {"X-Title": "demo", "X-Key": "${GW_KEY}"}
    assert endpoint.extra_body == {"cache_prompt": True, "slot": 3, "note": "plain text"}
    assert endpoint.header_variables == ["GW_KEY"]


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("local=http://h/v1,modle=x", "unknown option 'modle'"),
        ("local=http://h/v1,header.=x", "names no header field"),
        ("local=http://h/v1,headers=x", "header.NAME=VALUE"),
        ("local=http://h/v1,extra_body.model=x", "extra_body may not set model"),
        ("local=http://h/v1,header.X-Key=${not a name}", "not an environment variable name"),
        ("local=http://h/v1,model=", "model must not be blank"),
    ],
)
def test_an_endpoint_flag_that_cannot_work_is_refused_by_name(flag: str, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        endpoint_settings(flags=[flag], config=LoadedConfig(), environ={})
    assert named in str(info.value)
    assert "pydantic" not in str(info.value)


def test_extra_body_goes_under_the_fields_the_run_sets() -> None:
    endpoint = EndpointConfig(
        name="e", base_url=URL, extra_body={"cache_prompt": True, "temperature": 0.9}
    )
    assert body_for(endpoint)["cache_prompt"] is True
    assert body_for(endpoint)["temperature"] == 0.9  # the endpoint's default
    assert body_for(endpoint, temperature=0.1)["temperature"] == 0.1  # the run's wins


def test_a_parameter_the_endpoint_refuses_is_left_out_even_from_extra_body() -> None:
    endpoint = EndpointConfig(name="e", base_url=URL, extra_body={"tool_choice": "auto"})
    body = body_for(
        endpoint, tools=[WEATHER], tool_choice="required", omit_parameters=["tool_choice"]
    )
    assert "tool_choice" not in body


def test_header_variables_are_read_at_call_time_and_named_when_unset() -> None:
    endpoint = EndpointConfig(name="e", base_url=URL, headers={"X-Key": "Bearer ${GW_KEY}"})
    assert endpoint.resolved_headers({"GW_KEY": "abc"}) == {"X-Key": "Bearer abc"}
    assert endpoint.resolved_headers({"GW_KEY": "xyz"}) == {"X-Key": "Bearer xyz"}
    with pytest.raises(MissingApiKeyError) as info:
        endpoint.resolved_headers({})
    assert "'GW_KEY'" in str(info.value) and "a header value" in str(info.value)


SECRET = "gw-Q7vLm2Xc9RtBw4Zn8KdHf3Jy6PsEa1Uo"


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


async def test_the_activity_sends_header_secrets_from_the_environment_and_never_echoes_them(
    scripted: ScriptedServer,
) -> None:
    endpoint = scripted.endpoint(
        "e", headers={"X-Gateway-Key": "${GW_KEY}"}, extra_body={"cache_prompt": True}
    )
    environ = {"GW_KEY": SECRET}
    scripted.enqueue(
        text_response("ok"),
        error_response(401, f"bad gateway key {SECRET}", code=SECRET),
    )
    request = CompletionRequest(endpoint="e", model="m", messages=[USER])
    async with ModelActivities(EndpointRegistry([endpoint]), environ=environ) as model:
        await ActivityEnvironment().run(model.stream_completion, request)
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(model.stream_completion, request)
    sent = scripted.requests[0]
    assert sent.header("X-Gateway-Key") == SECRET
    assert sent.json["cache_prompt"] is True
    said = json.dumps([info.value.message, *info.value.details])
    pieces = [SECRET[i : i + MIN_FRAGMENT] for i in range(len(SECRET) - MIN_FRAGMENT + 1)]
    assert [piece for piece in pieces if piece in said] == []


async def test_an_unset_header_variable_fails_the_call_without_a_request(
    scripted: ScriptedServer,
) -> None:
    endpoint = scripted.endpoint("e", headers={"X-Gateway-Key": "${GW_KEY_UNSET_HERE}"})
    request = CompletionRequest(endpoint="e", model="m", messages=[USER])
    async with ModelActivities(EndpointRegistry([endpoint]), environ={}) as model:
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(model.stream_completion, request)
    assert info.value.type == MISSING_API_KEY and info.value.non_retryable
    assert "GW_KEY_UNSET_HERE" in info.value.message
    assert scripted.requests == []


# -- the run: tool_choice, prefill, stop -------------------------------------------------


def run(**fields: Any) -> RunInput:
    return RunInput(endpoint="e", model="m", prompt="hi", tools=["get_weather"], **fields)


def test_a_forcing_tool_choice_applies_to_turns_that_answer_the_user_only() -> None:
    required = run(tool_choice="required")
    assert required.turn_tool_choice([USER]) == "required"
    assert required.turn_tool_choice([USER, CALLED, ANSWERED]) is None  # may answer now
    named = run(tool_choice="get_weather")
    assert named.turn_tool_choice([USER]) == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    assert named.turn_tool_choice([USER, CALLED, ANSWERED]) is None
    kept = run(tool_choice="required", reset_tool_choice=False)
    assert kept.turn_tool_choice([USER, CALLED, ANSWERED]) == "required"
    for choice in ("auto", "none"):  # not forcing: every turn
        assert run(tool_choice=choice).turn_tool_choice([USER, CALLED, ANSWERED]) == choice
    assert run().turn_tool_choice([USER]) is None


def test_a_prefill_opens_the_reply_to_the_user_and_nothing_else() -> None:
    prefilled = run(prefill="<tool_call>\n")
    opening = ChatMessage(role="assistant", content="<tool_call>\n")
    assert prefilled.turn_prefill([USER]) == opening
    assert prefilled.turn_prefill([USER, CALLED, ANSWERED]) is None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"tool_choice": "get_wether"}, "tool_choice names 'get_wether'"),
        ({"prefill": ""}, "prefill"),
        ({"sampling": {"stop": [""]}}, "stop"),
    ],
)
def test_a_knob_no_request_could_carry_is_refused(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError) as info:
        RunInput.model_validate(
            {"endpoint": "e", "model": "m", "prompt": "hi", "tools": ["get_weather"]} | fields
        )
    assert named in str(info.value)


@pytest.mark.parametrize(
    "sampling",
    [{"temperature": -0.1}, {"top_p": 1.5}, {"top_p": -1}, {"max_tokens": 0}, {"stop": [""]}],
)
def test_sampling_a_provider_would_refuse_is_refused_here(sampling: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Sampling.model_validate(sampling)


def test_an_agent_profile_names_only_a_tool_it_has_and_its_child_is_forced_by_it() -> None:
    from steadyloop._chains.delegation_tool import DelegateRequest, child_run_input
    from steadyloop._run.models import AgentProfile, Delegation

    with pytest.raises(ValueError, match="not one of the profile's tools"):
        AgentProfile(description="w", tools=["note"], tool_choice="nte")
    writer = AgentProfile(description="w", tools=["note"], tool_choice="note")
    parent = RunInput(
        endpoint="e",
        model="m",
        prompt="hi",
        prefill="<tool_call>\n",
        delegation=Delegation(to=["writer"], agents={"writer": writer}),
    )
    child = child_run_input(
        parent,
        parent_id="parent-id",
        request=DelegateRequest(agent="writer", task="write"),
        remaining_s=None,
    )
    assert child.tool_choice == "note"
    assert child.prefill == "<tool_call>\n"  # the parent's model, the parent's nudge
