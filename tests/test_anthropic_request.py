"""The Anthropic Messages request built from a transcript and tool specs."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall, ToolSpec
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.anthropic_request import (
    DEFAULT_MAX_TOKENS,
    anthropic_headers,
    anthropic_tool_choice,
)
from steadyloop._stream.anthropic_wire import ANTHROPIC_WIRE
from steadyloop._stream.completion import CompletionRequest

ENDPOINT = EndpointConfig(
    name="claude",
    base_url="https://api.anthropic.com/v1",
    api="anthropic",
    api_key_env="ANTHROPIC_API_KEY",
    extra_body={"metadata": {"user_id": "u1"}, "temperature": 0.9},
)
SIGNED = (
    '{"type":"thinking","thinking":"Let me see: \\u00e9 \\ud83d\\ude00","signature":"EqQB+/=="}'
)
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def item(raw: str, *, endpoint: str = "claude", before: str | None = None) -> PassbackItem:
    kind = json.loads(raw)["type"]
    return PassbackItem(endpoint=endpoint, wire="anthropic", kind=kind, raw=raw, before_call=before)


def transcript() -> list[ChatMessage]:
    calls = [
        ToolCall(id="toolu_a", name="get_weather", arguments='{"city":"Paris"}'),
        ToolCall(id="toolu_b", name="get_weather", arguments=""),
    ]
    return [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Weather in Paris and Rome?"),
        ChatMessage(
            role="assistant",
            content="Checking.",
            tool_calls=calls,
            passback=[
                item(SIGNED),
                item('{"type":"redacted_thinking","data":"abc"}', before="toolu_b"),
                item('{"type":"thinking","thinking":"x","signature":"s"}', endpoint="other"),
            ],
        ),
        ChatMessage(role="tool", tool_call_id="toolu_a", content="sunny"),
        ChatMessage(role="tool", tool_call_id="toolu_b", content="rain"),
        ChatMessage(role="developer", content="Answer in French."),
        ChatMessage(role="user", content="Thanks"),
    ]


def sent_body(request: CompletionRequest, endpoint: EndpointConfig = ENDPOINT) -> Any:
    """The body as the activity sends it (pass-back blocks are their own bytes), read back
    with the stdlib (which reads lone-surrogate escapes)."""
    return json.loads(orjson.dumps(ANTHROPIC_WIRE.body(request, endpoint)))


def body(**fields: object) -> Any:
    request = CompletionRequest(
        endpoint="claude", model="claude-x", messages=transcript(), tools=[WEATHER], **fields
    )
    return sent_body(request)


def test_the_transcript_becomes_system_and_alternating_turns_with_blocks() -> None:
    sent = body(max_tokens=300, stop=["END"], top_p=0.5)
    assert sent["system"] == "Be brief.\n\nAnswer in French."
    messages = sent["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assistant = messages[1]["content"]
    assert [b["type"] for b in assistant] == [
        "thinking",
        "text",
        "tool_use",
        "redacted_thinking",
        "tool_use",
    ]
    # Byte-exact strings: the signature and the thinking text (a surrogate pair included).
    assert assistant[0] == json.loads(SIGNED)
    assert assistant[2] == {
        "type": "tool_use",
        "id": "toolu_a",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert assistant[4]["input"] == {}  # `""`, a zero-argument call, goes as an object
    # Consecutive results in one user message, before its text, one per call.
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "rain"},
        {"type": "text", "text": "Thanks"},
    ]
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "input_schema": WEATHER.parameters,
            "description": "Weather in a city",
        }
    ]
    assert (sent["max_tokens"], sent["stop_sequences"], sent["top_p"]) == (300, ["END"], 0.5)
    assert sent["stream"] is True
    assert sent["metadata"] == {"user_id": "u1"} and sent["temperature"] == 0.9
    assert body(temperature=0.2)["temperature"] == 0.2  # the run's wins over extra_body


def test_another_endpoints_blocks_are_never_sent() -> None:
    request = CompletionRequest(endpoint="fallback", model="m", messages=transcript())
    fallback = EndpointConfig(name="fallback", base_url="http://127.0.0.1:1/v1", api="anthropic")
    assistant = sent_body(request, fallback)["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]


def test_max_tokens_is_always_sent() -> None:
    assert body()["max_tokens"] == DEFAULT_MAX_TOKENS == 4096


@pytest.mark.parametrize(
    ("choice", "parallel", "spelled"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", False, {"type": "none"}),
        ({"type": "function", "function": {"name": "f"}}, None, {"type": "tool", "name": "f"}),
        ({"type": "tool", "name": "f"}, None, {"type": "tool", "name": "f"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, None, None),
    ],
)
def test_tool_choice_in_anthropics_spelling(
    choice: object, parallel: bool | None, spelled: object
) -> None:
    assert anthropic_tool_choice(choice, parallel) == spelled  # type: ignore[arg-type]
    sent = body(tool_choice=choice, parallel_tool_calls=parallel)
    assert sent.get("tool_choice") == spelled


def test_a_prefill_is_the_final_assistant_message_without_trailing_whitespace() -> None:
    messages = [
        ChatMessage(role="user", content="Weather?"),
        ChatMessage(role="assistant", content="<tool_call>\n"),
    ]
    request = CompletionRequest(endpoint="claude", model="m", messages=messages)
    sent = sent_body(request)["messages"]
    assert sent[-1] == {"role": "assistant", "content": [{"type": "text", "text": "<tool_call>"}]}


def test_the_key_goes_in_x_api_key_with_the_version_and_never_as_a_bearer() -> None:
    headers = anthropic_headers(ENDPOINT, "sk-ant-secret")
    assert headers["x-api-key"] == "sk-ant-secret"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in headers
    assert "x-api-key" not in anthropic_headers(ENDPOINT, None)
    assert ANTHROPIC_WIRE.url(ENDPOINT) == "https://api.anthropic.com/v1/messages"


def test_arguments_nested_past_orjsons_depth_go_as_the_models_text() -> None:
    """Parsed into objects and dumped again, arguments nested 300 deep made orjson refuse
    the whole body ("Recursion limit reached"), on every attempt of the activity."""
    deep = '{"a":' * 300 + "1" + "}" * 300
    messages = [
        ChatMessage(role="user", content="go"),
        ChatMessage(
            role="assistant", tool_calls=[ToolCall(id="toolu_a", name="f", arguments=deep)]
        ),
        ChatMessage(role="tool", tool_call_id="toolu_a", content="ok"),
    ]
    request = CompletionRequest(endpoint="claude", model="m", messages=messages)
    body = orjson.dumps(ANTHROPIC_WIRE.body(request, ENDPOINT))
    assert b'"input":' + deep.encode() in body
