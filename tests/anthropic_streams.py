"""Anthropic Messages streams for the tests: events as dicts, encoded as SSE, and the
intended content they carry (for the property tests' oracle)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from steadyloop._stream.anthropic_assembly import AnthropicAssembler
from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.sse import SSEDecoder

Event = dict[str, Any]


def sse(events: Sequence[Event], *, event_lines: bool = True) -> bytes:
    """The events as an SSE body, with `event:` lines as Anthropic sends them (or none,
    as a proxy that strips them)."""
    out: list[str] = []
    for event in events:
        head = f"event: {event.get('type', 'message')}\n" if event_lines else ""
        out.append(f"{head}data: {json.dumps(event, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def assemble(body: bytes, *, reads: int = 1) -> tuple[AnthropicAssembler, AssembledTurn]:
    """`body` decoded and folded in `reads` pieces; the assembler and its turn."""
    decoder = SSEDecoder()
    assembler = AnthropicAssembler()
    size = max(1, len(body) // reads)
    for start in range(0, len(body), size):
        events = decoder.feed_data(body[start : start + size])
        if events and assembler.feed_events(events):
            break
    return assembler, assembler.finish()


def message_start(**usage: int) -> Event:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-test",
            "stop_reason": None,
            "usage": usage or {"input_tokens": 10, "output_tokens": 1},
        },
    }


def start(index: int, block: dict[str, Any]) -> Event:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **body: Any) -> Event:
    return {"type": "content_block_delta", "index": index, "delta": body}


def text_delta(index: int, text: str) -> Event:
    return delta(index, type="text_delta", text=text)


def json_delta(index: int, fragment: str) -> Event:
    return delta(index, type="input_json_delta", partial_json=fragment)


def stop(index: int) -> Event:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str | None, output_tokens: int = 5, **more: Any) -> Event:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None, **more},
        "usage": {"output_tokens": output_tokens},
    }


MESSAGE_STOP: Event = {"type": "message_stop"}
PING: Event = {"type": "ping"}

# MiniMax-M3 behind an Anthropic-compatible endpoint (MadAppGang/claudish#200, two
# production captures; the shape as that report gives it): a `signature_delta` and a
# `content_block_stop` for an index 0 no block was started at, then a normal block.
MINIMAX_M3_ORPHANS: list[Event] = [
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJlLW9mLW5vLWJsb2Nr"},
    },
    {"type": "content_block_stop", "index": 0},
]


@dataclass
class IntendedCall:
    id: str
    name: str
    arguments: str
    fragments: list[str] = field(default_factory=list)


def tool_use_events(index: int, call: IntendedCall) -> list[Event]:
    events = [start(index, {"type": "tool_use", "id": call.id, "name": call.name, "input": {}})]
    events += [json_delta(index, fragment) for fragment in call.fragments]
    events.append(stop(index))
    return events
