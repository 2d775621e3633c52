"""`AnthropicAssembler.feed_events` folds argument and text deltas inline; `feed` takes
every payload through the general reading. Both must come out the same, payload for
payload, on the shapes the inline path takes and on every hostile neighbour of them:
the counters the watchdog reads (`content_mark`, `chunks`), the turn, or the refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_streams import (
    delta,
    json_delta,
    message_delta,
    message_start,
    start,
    stop,
    text_delta,
)

from steadyloop.stream.anthropic_assembly import AnthropicAssembler
from steadyloop.stream.failures import StreamFailed
from steadyloop.stream.sse import MessageData

TOOL = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
TEXT = {"type": "text", "text": ""}
THINKING = {"type": "thinking", "thinking": "", "signature": ""}

HOSTILE_DELTAS: list[dict[str, Any]] = [
    json_delta(1, '{"a":'),
    json_delta(1, ""),  # adds nothing, and is no progress
    delta(1, type="input_json_delta", partial_json=5),
    delta(1, type="input_json_delta"),
    delta(1, partial_json="x"),  # no type
    json_delta(0, "x"),  # arguments for a text block
    json_delta(2, "x"),  # for a thinking block
    json_delta(7, "x"),  # for a block never started
    json_delta(-1, "x"),
    {"type": "content_block_delta", "index": True, "delta": {"type": "text_delta", "text": "x"}},
    {"type": "content_block_delta", "index": 1.0, "delta": {"type": "text_delta", "text": "x"}},
    {"type": "content_block_delta", "index": 0, "delta": "text"},
    {"type": "content_block_delta", "index": 0},
    text_delta(0, "hi"),
    text_delta(0, ""),
    delta(0, type="text_delta", text=None),
    delta(0, type="text_delta"),
    text_delta(1, "text into the tool block"),
    delta(2, type="thinking_delta", thinking="hm"),
    json_delta(1, "1}"),
]


def fold_each(payloads: list[bytes], inline: bool) -> list[Any]:
    """What each payload leaves behind: the counters, or the refusal's message."""
    assembler = AnthropicAssembler(endpoint="e")
    seen: list[Any] = []
    for payload in payloads:
        try:
            if inline:
                assembler.feed_events(MessageData([payload]))
            else:
                assembler.feed(payload)
        except StreamFailed as failed:
            seen.append(failed.failure.message)
            return seen
        seen.append((assembler.content_mark, assembler.chunks))
    seen.append(assembler.finish().model_dump())
    return seen


def opening() -> list[dict[str, Any]]:
    return [message_start(), start(0, TEXT), start(1, TOOL), start(2, THINKING)]


def closing() -> list[dict[str, Any]]:
    return [stop(0), stop(1), stop(2), message_delta("tool_use"), {"type": "message_stop"}]


@pytest.mark.parametrize("hostile", HOSTILE_DELTAS, ids=lambda e: json.dumps(e)[40:90])
def test_inline_and_general_readings_agree_on_every_delta(hostile: dict[str, Any]) -> None:
    events = [*opening(), json_delta(1, '{"a":'), hostile, json_delta(1, "1}"), *closing()]
    payloads = [json.dumps(event).encode() for event in events]
    assert fold_each(payloads, inline=True) == fold_each(payloads, inline=False)


def test_inline_and_general_readings_agree_on_a_whole_stream() -> None:
    events = [*opening(), *HOSTILE_DELTAS[:2], *HOSTILE_DELTAS[5:8], text_delta(0, "a"), *closing()]
    payloads = [json.dumps(event).encode() for event in events]
    inline = fold_each(payloads, inline=True)
    assert inline == fold_each(payloads, inline=False)
    turn = inline[-1]
    assert turn["text"] == "a" and turn["tool_calls"][0]["arguments"] == '{"a":'
