"""Hostile values in every position of an Anthropic Messages stream.

The model activity's reader (`stream_turn`, over httpx, the key redacted as the activity
does) gets generated streams whose every provider-controlled string is hostile: lone
surrogates (as JSON escapes, which orjson refuses), NUL, the API key echoed, empty, a
large string; numbers are 1e300, NaN-ish, negative or fractional; block indices are not
integers. Whatever arrives, the outcome is a turn that survives Temporal's payload
converter or a classified `StreamFailed` with no fragment of the key in any field,
never another exception; and no tool call is dispatched from a stream the assembler
had to veto.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hostile_harness import KEY, KEY_FRAGMENT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.contrib.pydantic import pydantic_data_converter

from steadyloop._activities.model_stream import stream_turn
from steadyloop._chat import ChatMessage
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._routing.taxonomy import StreamFailed
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.failures import TEXT_FIELDS

HOSTILE_TEXT = st.sampled_from(
    [
        "",
        "\ud800",
        "a\udfffb",
        "\x00",
        "nul\x00inside",
        KEY,
        f"your key is {KEY}!",
        "\U0001f600",
        "x" * 200_000,
        "{",
        '{"a": NaN}',
        "[1,2]",
    ]
)
HOSTILE_NUMBER = st.sampled_from([0, 5, -1, 1.5, 1e300, 10**30, "7", None, True])
INDEX = st.sampled_from([0, 1, 2, -1, 1.0, "0", None, True])


@st.composite
def hostile_stream(draw: st.DrawFn) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": draw(HOSTILE_TEXT),
                "model": draw(HOSTILE_TEXT),
                "usage": {
                    "input_tokens": draw(HOSTILE_NUMBER),
                    "cache_read_input_tokens": draw(HOSTILE_NUMBER),
                    "cache_creation_input_tokens": draw(HOSTILE_NUMBER),
                },
            },
        }
    ]
    for _ in range(draw(st.integers(0, 3))):
        index = draw(INDEX)
        kind = draw(st.sampled_from(["text", "thinking", "tool_use", "server_tool_use", "odd"]))
        block: dict[str, Any] = {"type": kind}
        if kind in ("tool_use", "server_tool_use"):
            block |= {"id": draw(HOSTILE_TEXT), "name": draw(HOSTILE_TEXT), "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        for _ in range(draw(st.integers(0, 3))):
            delta = draw(
                st.sampled_from(
                    [
                        {"type": "text_delta", "text": draw(HOSTILE_TEXT)},
                        {"type": "input_json_delta", "partial_json": draw(HOSTILE_TEXT)},
                        {"type": "thinking_delta", "thinking": draw(HOSTILE_TEXT)},
                        {"type": "signature_delta", "signature": draw(HOSTILE_TEXT)},
                        {"type": "text_delta", "text": draw(HOSTILE_NUMBER)},
                    ]
                )
            )
            events.append({"type": "content_block_delta", "index": draw(INDEX), "delta": delta})
        if draw(st.booleans()):
            events.append({"type": "content_block_stop", "index": index})
    if draw(st.booleans()):
        events.append(
            {
                "type": "error",
                "error": {"type": draw(HOSTILE_TEXT), "message": draw(HOSTILE_TEXT)},
            }
        )
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": draw(
                    st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal", None, 7])
                )
            },
            "usage": {"output_tokens": draw(HOSTILE_NUMBER)},
        }
    )
    if draw(st.booleans()):
        events.append({"type": "message_stop"})
    return events


def body_of(events: list[dict[str, Any]]) -> bytes:
    # ensure_ascii: lone surrogates travel as JSON escapes, as providers send them.
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


async def read(body: bytes) -> AssembledTurn:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["x-api-key"] == KEY
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    endpoint = EndpointConfig(name="claude", base_url="http://claude.invalid/v1", api="anthropic")
    request = CompletionRequest(
        endpoint="claude", model="m", messages=[ChatMessage(role="user", content="hi")]
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        return await stream_turn(client, endpoint, request, api_key=KEY)


def leaks(text: str) -> bool:
    return any(KEY[i : i + KEY_FRAGMENT] in text for i in range(len(KEY) - KEY_FRAGMENT + 1))


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(hostile_stream())
def test_any_hostile_stream_is_a_turn_that_serializes_or_a_redacted_failure(
    events: list[dict[str, Any]],
) -> None:
    try:
        turn = asyncio.run(read(body_of(events)))
    except StreamFailed as failed:
        failure = failed.failure
        for name in TEXT_FIELDS:
            value = getattr(failure, name)
            assert value is None or not leaks(value), (name, value[:200])
        pydantic_data_converter.payload_converter.to_payloads([failure])
        return
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([turn])
    back = pydantic_data_converter.payload_converter.from_payloads([payload], [AssembledTurn])
    assert back == [turn]
    for item in turn.passback:
        json.loads(item.raw)  # every kept block is JSON text that parses again
    if turn.usage is not None:
        assert 0 <= turn.usage.total_tokens <= 4 * 10**12
    stops = [e for e in events if e["type"] == "message_stop"]
    assert stops, "a body without message_stop was accepted"
