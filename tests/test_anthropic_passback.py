"""Anthropic thinking blocks go back byte-exact on the next request.

What "byte-exact" means here, precisely. A streamed block never arrives as one piece of
JSON: it is its `content_block_start` block with the strings of its deltas (`thinking`,
`signature`) joined. That is "the block as received", and the assembler keeps it as JSON
text (`PassbackItem.raw`). Then:

- the next request's body holds that text itself, byte for byte (the request builder
  splices it in, `orjson.Fragment`; it is never parsed and dumped again);
- read back, the block has the keys of the start, in the start's order, and every
  string equal, code point for code point, to what was streamed (the signature too);
- blob storage changes nothing: the transcript's history items, offloaded to blobs and
  read back by the workflow and the activity, carry the same text.

The blocks: a thinking block whose text needs JSON escapes (quote, backslash, tab, a line
separator, non-ASCII, an emoji split across deltas) with a signature in two deltas; an
empty thinking block holding only a signature (Claude's default `display: "omitted"`); a
`redacted_thinking` block; a thinking block whose start lists its keys in another order;
and one whose text holds a lone surrogate (kept as its JSON escape; parsed and dumped
again, orjson refused the whole body).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from anthropic_streams import MESSAGE_STOP, delta, message_delta, message_start, sse, start, stop
from loop_harness import run_input, running_loop

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.anthropic_wire import ANTHROPIC_WIRE
from steadyloop._stream.completion import CompletionRequest
from steadyloop.testing import ScriptedResponse, raw_response

Block = dict[str, Any]

EMPTY_THINKING: Block = {"type": "thinking", "thinking": "", "signature": ""}
# (start block, thinking deltas, signature deltas): every pass-back block of the turn.
BLOCKS: list[tuple[Block, list[str], list[str]]] = [
    (
        EMPTY_THINKING,
        ['Say "hi" \\ then\t', "\u2028caf\u00e9 \ud83d", "\ude00 done /"],
        ["EqQB+/", "0Ka=="],
    ),
    (EMPTY_THINKING, [], ["c2lnbmF0dXJlIG9ubHk="]),  # display "omitted": a signature only
    ({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}, [], []),
    ({"signature": "", "thinking": "", "type": "thinking"}, ["keys in another order"], ["c2ln"]),
    (EMPTY_THINKING, ["half \ud83d here"], ["bG9uZQ=="]),  # a lone surrogate, escaped
]


def received(block: Block, thinking: list[str], signature: list[str]) -> Block:
    """The block as received: the start's keys in its order, the deltas' strings joined
    (read as JSON reads them: a pair split across two deltas is one character)."""
    out = dict(block)
    if block["type"] == "thinking":
        out["thinking"] = block["thinking"] + "".join(thinking)
        out["signature"] = block["signature"] + "".join(signature)
    joined: Block = json.loads(json.dumps(out))
    return joined


def first_turn() -> ScriptedResponse:
    events: list[dict[str, Any]] = [message_start()]
    for index, (block, thinking, signature) in enumerate(BLOCKS):
        events.append(start(index, block))
        events += [delta(index, type="thinking_delta", thinking=t) for t in thinking]
        events += [delta(index, type="signature_delta", signature=s) for s in signature]
        events.append(stop(index))
    call = len(BLOCKS)
    events.append(start(call, {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {}}))
    events.append(delta(call, type="input_json_delta", partial_json='{"a": 1, "b": 2}'))
    events += [stop(call), message_delta("tool_use"), MESSAGE_STOP]
    return raw_response(sse(events))  # json.dumps: lone surrogates as escapes, as sent


def answer() -> ScriptedResponse:
    events = [
        message_start(),
        start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="done"),
        stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    return raw_response(sse(events))


def assistant_blocks(body: bytes) -> list[Block]:
    messages = json.loads(body)["messages"]  # the stdlib: it reads lone-surrogate escapes
    [assistant] = [m for m in messages if m["role"] == "assistant"]
    blocks: list[Block] = assistant["content"]
    return blocks


@pytest.mark.slow
async def test_thinking_blocks_go_back_as_received_through_the_workflow_and_blob_storage(
    tmp_path: Path,
) -> None:
    async with running_loop(
        [first_turn(), answer()], blob_threshold=2_000, blob_dir=tmp_path, api="anthropic"
    ) as loop:
        result = await loop.run(run_input())
        second = loop.server.requests[1].body
    assert result.stop_reason == "final_answer", result.detail
    assert any(tmp_path.rglob("*")), "nothing went through blob storage"
    [message] = [m for m in result.transcript if m.role == "assistant" and m.tool_calls]
    expected = [received(*entry) for entry in BLOCKS]
    kept = [json.loads(item.raw) for item in message.passback]
    assert [list(b.items()) for b in kept] == [list(b.items()) for b in expected]
    # The body holds each block's text itself, in order, before the call it preceded.
    at = [second.find(item.raw.encode()) for item in message.passback]
    assert -1 not in at and at == sorted(at), at
    sent = assistant_blocks(second)
    assert [list(b.items()) for b in sent[: len(BLOCKS)]] == [list(b.items()) for b in expected]
    assert sent[len(BLOCKS)]["type"] == "tool_use"


ENDPOINT = EndpointConfig(name="claude", base_url="http://h/v1", api="anthropic")


def body_for(*raws: str) -> bytes:
    """The body of a request whose transcript holds one call preceded by `raws`."""
    passback = [
        PassbackItem(
            endpoint="claude", wire="anthropic", kind="thinking", raw=raw, before_call="toolu_a"
        )
        for raw in raws
    ]
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="toolu_a", name="f", arguments="{}")],
            passback=passback,
        ),
        ChatMessage(role="tool", tool_call_id="toolu_a", content="ok"),
    ]
    request = CompletionRequest(endpoint="claude", model="m", messages=messages)
    return orjson.dumps(ANTHROPIC_WIRE.body(request, ENDPOINT))


def test_the_body_holds_each_blocks_text_whatever_it_escapes() -> None:
    """The request builder alone: a block written by another server (spaces, escaped
    slashes, `\\u` escapes for plain letters) is sent as those bytes, not as orjson
    would write the same value."""
    raws = [
        '{"type": "thinking", "thinking": "\\u0041\\/b", "signature": "s\\/1"}',
        '{"type":"redacted_thinking","data":"\\u00e9"}',
    ]
    body = body_for(*raws)
    for raw in raws:
        assert raw.encode() in body
    kinds = [b["type"] for b in assistant_blocks(body)]
    assert kinds == ["thinking", "redacted_thinking", "tool_use"]


def test_a_block_that_is_not_one_json_object_is_left_out_not_sent_broken() -> None:
    """A transcript given by hand may hold anything in `raw`: spliced in, text that is
    not one JSON object would make the whole body invalid JSON."""
    good = '{"type":"thinking","thinking":"t","signature":"s"}'
    body = body_for("not json", "[1]", '{"no":"type"}', good, '{"type":')
    kinds = [b["type"] for b in assistant_blocks(body)]
    assert kinds == ["thinking", "tool_use"]
