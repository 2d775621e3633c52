"""`AnthropicAssembler.feed_events` folds argument and text deltas inline, and reads the
deltas of the newest open block from their bytes when they are written as Anthropic
writes them; `feed` takes every payload through the general reading. Both must come out
the same, payload for payload and read for read, on the shapes the inline paths take and
on every hostile neighbour of them: the counters the watchdog reads (`content_mark`,
`chunks`), the turn, or the refusal."""

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

from steadyloop._routing.taxonomy import StreamFailed
from steadyloop._stream.anthropic_assembly import AnthropicAssembler
from steadyloop._stream.sse import MessageData

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


# -- the byte reading: a delta for the newest open block, as Anthropic writes it ----------

JSON_HEAD = b'{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta",'
JSON_HEAD += b'"partial_json":'
TEXT_HEAD = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'

# What may follow a head before the closing `}}`: strings, and every neighbour of one
# that the byte reading must hand to the parsed reading (which decides what it is).
HOSTILE_STRINGS: list[bytes] = [
    b'"x"',
    b'""',  # adds nothing, and is no progress
    b' "x" ',  # whitespace around the value
    b'"\\"}}"',  # the tail inside the string
    b'"\\ud83d"',  # a lone surrogate escape: only the stdlib reads it
    b'"\\ud83d\\ude00"',
    b'"\\u0000"',  # NUL, escaped
    b'"a\x00b"',  # a raw control character: not JSON
    b'"\xff"',  # invalid UTF-8
    b'"\xed\xa0\xbd"',  # a surrogate encoded as UTF-8
    b"NaN",
    b"1" + b"0" * 400,  # an int past any machine word
    b"5",
    b"null",
    b'["x"]',
    b'{"a":"x"}',
    b"[" * 2000 + b"]" * 2000,  # nesting past orjson's limit
    b'"x","partial_json":"y"',  # a repeated key: the last one counts
    b'"x","extra":1',
    b'"x"},"index":2',  # another index after the delta
    b'"x"},"type":"ping"',
    b'"x',  # cut
    b"",
]
# Payloads that start with a head and do not end the way a delta does.
HOSTILE_TAILS: list[bytes] = [b'"x"}]', b'"x"} ', b'"x"}}}', b'"x"', b'"x"ab', b"}}", b"}"]


def _payloads(events: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(e, separators=(",", ":")).encode() for e in events]


def _fold_whole(payloads: list[bytes], inline: bool, split: int = 0) -> Any:
    """The turn (or refusal) and the counters, with the payloads in two reads cut at
    `split` (inline) or each through `feed`."""
    assembler = AnthropicAssembler(endpoint="e")
    try:
        if inline:
            if not assembler.feed_events(MessageData(payloads[:split])):
                assembler.feed_events(MessageData(payloads[split:]))
        else:
            for payload in payloads:
                if assembler.feed(payload):
                    break
    except StreamFailed as failed:
        return failed.failure.message, assembler.content_mark, assembler.chunks
    return assembler.finish().model_dump(), assembler.content_mark, assembler.chunks


@pytest.mark.parametrize("head", [JSON_HEAD, TEXT_HEAD], ids=["json", "text"])
@pytest.mark.parametrize(
    "value", [v + b"}}" for v in HOSTILE_STRINGS] + HOSTILE_TAILS, ids=lambda v: repr(v[:30])
)
def test_the_byte_reading_agrees_with_the_parsed_one(head: bytes, value: bytes) -> None:
    events = _payloads([message_start(), start(1, TOOL), start(0, TEXT)])
    if head == JSON_HEAD:  # the tool block is the newest open one
        events = _payloads([message_start(), start(0, TEXT), start(1, TOOL)])
    hostile = head + value
    payloads = [*events, head + b'"{\\"a\\":"}}', hostile, head + b'"1}"}}']
    payloads += _payloads(closing()[:2] + closing()[3:])
    assert fold_each(payloads, inline=True) == fold_each(payloads, inline=False)
    general = _fold_whole(payloads, inline=False)
    for split in range(len(payloads) + 1):
        assert _fold_whole(payloads, inline=True, split=split) == general, split


def test_the_byte_reading_reads_the_strings_the_deltas_hold() -> None:
    """The case it exists for: compact deltas, as Anthropic sends them, taken whole."""
    payloads = _payloads([message_start(), start(0, TEXT), text_delta(0, "é\n"), stop(0)])
    payloads += _payloads([start(1, TOOL), json_delta(1, '{"a": "\\u00e9'), json_delta(1, '"}')])
    payloads += _payloads(closing()[1:])
    turn, mark, chunks = _fold_whole(payloads, inline=True)
    assert (turn["text"], turn["tool_calls"][0]["arguments"]) == ("é\n", '{"a": "\\u00e9"}')
    assert (mark, chunks) == (7, len(payloads))
    assert _fold_whole(payloads, inline=False) == (turn, mark, chunks)


@pytest.mark.parametrize(
    "later",
    [
        [stop(1), json_delta(1, "x")],  # a delta after its block stopped is dropped
        [stop(1), start(1, TOOL), json_delta(1, "x")],  # a second call at the same index
        [stop(1), start(1, TEXT), json_delta(1, "x"), text_delta(1, "t")],
        [start(2, TOOL), json_delta(1, "x"), json_delta(2, "y")],  # two open calls
        [start(2, THINKING), json_delta(1, "x"), delta(2, type="thinking_delta", thinking="t")],
        [start(1, TOOL), json_delta(1, "x")],  # a second start while the first is open
        [stop(0), text_delta(0, "x"), json_delta(1, "y")],
    ],
)
def test_the_byte_reading_follows_the_blocks_as_they_open_and_stop(
    later: list[dict[str, Any]],
) -> None:
    """A start or a stop in the middle of one read moves what the bytes are read as."""
    events = [message_start(), start(0, TEXT), start(1, TOOL), json_delta(1, '{"a":1}')]
    events += [*later, message_delta("tool_use"), {"type": "message_stop"}]
    payloads = _payloads(events)
    general = _fold_whole(payloads, inline=False)
    for split in range(len(payloads) + 1):
        assert _fold_whole(payloads, inline=True, split=split) == general, split
    assert fold_each(payloads, inline=True) == fold_each(payloads, inline=False)
