"""The wire an endpoint speaks: configured per endpoint, chosen by the model activity,
and pass-back items that go back only to the endpoint that issued them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop.activities import ModelActivities
from steadyloop.chat import ChatMessage, PassbackItem, ToolCall
from steadyloop.routing.endpoints import (
    UNSUPPORTED_WIRE_ERROR_TYPE,
    EndpointConfig,
    EndpointConfigError,
    EndpointRegistry,
)
from steadyloop.stream.completion import AssembledTurn, CompletionRequest
from steadyloop.stream.passback import foreign_passback, passback_for
from steadyloop.stream.wire import CHAT_WIRE, WIRES, wire_for
from steadyloop.testing import ScriptedServer, sse_response, text_chunks
from steadyloop.worker.config import ConfigError, LoadedConfig, endpoint_settings
from steadyloop.workflows.run_timeline import passback_dropped_text


def item(
    endpoint: str, raw: str = '{"type":"reasoning","id":"rs_1"}', **fields: str
) -> PassbackItem:
    return PassbackItem(endpoint=endpoint, wire="responses", kind="reasoning", raw=raw, **fields)


# -- configuration ------------------------------------------------------------------


def test_api_defaults_to_chat_and_names_the_url_each_wire_posts_to() -> None:
    base = "http://127.0.0.1:8080/v1"
    assert EndpointConfig(name="a", base_url=base).api == "chat"
    urls = {
        api: EndpointConfig(name="a", base_url=base, api=api).url
        for api in ("chat", "responses", "anthropic")
    }
    assert urls == {
        "chat": f"{base}/chat/completions",
        "responses": f"{base}/responses",
        "anthropic": f"{base}/messages",
    }
    assert EndpointConfig(name="a", base_url=base).anthropic_version == "2023-06-01"


def test_an_unknown_api_is_refused_naming_the_endpoint_and_the_three_choices() -> None:
    with pytest.raises(EndpointConfigError) as info:
        EndpointRegistry.from_data({"gpt": {"base_url": "http://h/v1", "api": "respones"}})
    message = str(info.value)
    assert "'gpt'" in message
    for choice in ('"chat"', '"responses"', '"anthropic"', "respones"):
        assert choice in message


def test_a_base_url_ending_with_its_wires_path_is_refused() -> None:
    with pytest.raises(ValueError, match="already ends with /responses"):
        EndpointConfig(name="a", base_url="http://h/v1/responses", api="responses")
    # Another wire's path is only a path.
    assert EndpointConfig(name="a", base_url="http://h/responses").api == "chat"


def test_api_comes_from_the_file_the_variable_and_the_flag() -> None:
    environ = {
        "STEADYLOOP_ENDPOINTS": json.dumps(
            {"env": {"base_url": "http://env/v1", "api": "anthropic"}}
        )
    }
    settings = endpoint_settings(
        flags=["flag=http://flag/v1,api=responses"], config=LoadedConfig(), environ=environ
    )
    assert settings.registry.get("flag").api == "responses"
    assert settings.registry.get("env").api == "anthropic"
    with pytest.raises(ConfigError, match=r"flag.*api must be one of"):
        endpoint_settings(flags=["flag=http://flag/v1,api=soap"], config=LoadedConfig(), environ={})


def test_the_responses_transcript_field_is_not_settable_from_extra_body() -> None:
    with pytest.raises(ValueError, match="extra_body may not set input"):
        EndpointConfig(name="a", base_url="http://h/v1", api="responses", extra_body={"input": []})


# -- the wire -------------------------------------------------------------------------


def test_the_chat_wire_is_todays_request_unchanged() -> None:
    endpoint = EndpointConfig(name="a", base_url="http://h/v1")
    assert wire_for(endpoint) is CHAT_WIRE
    assert CHAT_WIRE.url(endpoint) == "http://h/v1/chat/completions"
    request = CompletionRequest(
        endpoint="a",
        model="m",
        messages=[
            ChatMessage(role="user", content="hi"),
            ChatMessage(role="assistant", content="ok", passback=[item("a")]),
        ],
    )
    body = CHAT_WIRE.body(request, endpoint)
    # No pass-back item is ever sent on the chat wire.
    assert body["messages"][1] == {"role": "assistant", "content": "ok"}


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


@pytest.mark.skipif("anthropic" in WIRES, reason="every wire is built in")
async def test_a_wire_this_version_does_not_speak_is_refused_before_any_request(
    server: ScriptedServer,
) -> None:
    server.enqueue(sse_response(text_chunks("hi")))
    registry = EndpointRegistry([server.endpoint("claude", api="anthropic")])
    async with ModelActivities(registry) as model:
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(
                model.stream_completion,
                CompletionRequest(
                    endpoint="claude", model="m", messages=[ChatMessage(role="user", content="x")]
                ),
            )
    assert info.value.type == UNSUPPORTED_WIRE_ERROR_TYPE
    assert info.value.non_retryable
    assert "'claude'" in str(info.value) and "api='anthropic'" in str(info.value)
    assert server.requests == []


# -- pass-back items ------------------------------------------------------------------


def test_passback_goes_only_to_the_endpoint_and_wire_that_issued_it() -> None:
    mine, theirs = item("a", before_call="call_1"), item("b")
    other_wire = PassbackItem(endpoint="a", wire="anthropic", kind="thinking", raw="{}")
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="call_1", name="f", arguments="{}")],
            passback=[theirs, mine, other_wire],
        ),
    ]
    kept = passback_for(messages, "a", "responses")
    assert kept[1].passback == [mine]
    assert messages[1].passback == [theirs, mine, other_wire]  # the transcript keeps all
    assert kept[0] is messages[0]
    assert foreign_passback(messages, "a", "responses") == 2
    assert foreign_passback(messages, "a", None) == 1
    assert foreign_passback(messages, "b", None) == 2


def test_passback_rides_from_the_turn_into_the_transcript_byte_exact() -> None:
    raw = '{"type": "reasoning","id":"rs_1", "encrypted_content":"gAAA\\u00e9=","summary":[]}'
    turn = AssembledTurn(text="", passback=[item("a", raw)])
    message = turn.to_message()
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([message])
    back = converter.from_payloads([payload], [ChatMessage])[0]
    assert back.passback[0].raw == raw


def test_an_empty_passback_costs_no_history_bytes() -> None:
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([ChatMessage(role="assistant", content="x")])
    assert b"passback" not in payload.data
    (turn,) = converter.to_payloads([AssembledTurn()])
    assert b"passback" not in turn.data and b"notes" not in turn.data


def test_a_fallback_says_how_many_passback_items_it_left_out() -> None:
    transcript = [
        ChatMessage(role="user", content="q"),
        ChatMessage(role="assistant", content="a", passback=[item("gpt"), item("gpt")]),
    ]
    line = passback_dropped_text(transcript, "backup")
    assert line is not None
    assert line.startswith("2 reasoning item(s) issued by endpoint 'gpt'")
    assert "'backup'" in line
    assert passback_dropped_text(transcript, "gpt") is None
