"""Pass-back items follow a call id the workflow qualified.

A server that numbers every response's calls from `call_0` gets its reused id qualified
in the transcript (`call_0` -> `call_0_t2`, `steadyloop._history.call_ids`). A reasoning
item or thinking block names the call it preceded (`PassbackItem.before_call`); left at
the old id it names no call of its message, and the wires send it before the text, away
from its call: OpenAI answers 400 "function_call was provided without its required
'reasoning' item", and an interleaved thinking block lands in front of the wrong call.

The interleaved shape (reasoning, call, reasoning, call) is what makes the place visible:
with one block before one call, "before the text" and "before the call" are the same.

What the next request carries for the call is the qualified id, on the call and on its
answer, as on the chat wire (`test_call_ids_across_turns`): on a stateless request the
id is a label pairing a call with its answer, and the provider issued `call_0` twice, so
its own id would pair two answers with one call (Anthropic refuses "tool_use ids must be
unique"). The items themselves go back as the bytes the provider sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_streams import MESSAGE_STOP, message_delta, message_start, sse, start, stop
from anthropic_streams import delta as block_delta
from loop_harness import assert_every_call_answered, run_input, running_loop, tool_messages

from steadyloop.testing import ScriptedResponse, raw_response

pytestmark = pytest.mark.slow


def reasoning_raw(n: int) -> str:
    return f'{{"id":"rs_{n}","type":"reasoning","summary":[],"encrypted_content":"gAAA{n}\\/="}}'


def responses_turn(*parts: tuple[str, Any]) -> ScriptedResponse:
    """A Responses stream of `("reasoning", n)` and `("call", (call_id, a, b))` items."""
    events: list[str] = [json.dumps({"type": "response.created", "response": {"id": "r"}})]
    for position, (kind, value) in enumerate(parts):
        if kind == "reasoning":
            added = {"id": f"rs_{value}", "type": "reasoning", "summary": []}
            events.append(
                json.dumps(
                    {"type": "response.output_item.added", "output_index": position, "item": added}
                )
            )
            events.append(
                f'{{"type":"response.output_item.done","output_index":{position},'
                f'"item":{reasoning_raw(value)}}}'
            )
            continue
        call_id, a, b = value
        arguments = json.dumps({"a": a, "b": b})
        item = {"type": "function_call", "id": f"fc_{position}_{a}", "call_id": call_id}
        item["name"] = "add"
        for payload in (
            {"type": "response.output_item.added", "item": {**item, "arguments": ""}},
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "delta": arguments,
            },
            {"type": "response.output_item.done", "item": {**item, "arguments": arguments}},
        ):
            events.append(json.dumps({**payload, "output_index": position}))
    events.append(json.dumps({"type": "response.completed", "response": {"id": "r", "output": []}}))
    return raw_response(b"".join(f"data: {e}\n\n".encode() for e in events))


def responses_answer() -> ScriptedResponse:
    text = {"type": "message", "id": "m", "role": "assistant", "content": []}
    events = [
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "output_index": 0, "item": text},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "m", "delta": "done"},
        {"type": "response.completed", "response": {"id": "r", "output": []}},
    ]
    return raw_response(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events))


async def test_a_reasoning_item_stays_before_its_call_when_the_call_id_is_qualified() -> None:
    script = [
        responses_turn(("reasoning", 1), ("call", ("call_0", 1, 2))),
        responses_turn(
            ("reasoning", 2),
            ("call", ("call_1", 3, 4)),
            ("reasoning", 3),
            ("call", ("call_0", 5, 6)),
        ),
        responses_answer(),
    ]
    async with running_loop(script, api="responses") as loop:
        result = await loop.run(run_input())
        last = loop.server.requests[-1].json["input"]
    assert result.stop_reason == "final_answer", result.detail
    assert_every_call_answered(result.transcript)
    assert [m.tool_call_id for m in tool_messages(result.transcript)] == [
        "call_0",
        "call_1",
        "call_0_t2",
    ]
    seen = [
        item.get("call_id") or item.get("id") or item["role"]
        for item in last
        if item["type"] != "function_call_output"
    ]
    # Each reasoning item right in front of the call it preceded, under the id it now has.
    assert seen[2:] == ["rs_1", "call_0", "rs_2", "call_1", "rs_3", "call_0_t2"], seen
    reasoning = [item for item in last if item["type"] == "reasoning"]
    assert reasoning == [json.loads(reasoning_raw(n)) for n in (1, 2, 3)]
    answers = [item["call_id"] for item in last if item["type"] == "function_call_output"]
    assert answers == ["call_0", "call_1", "call_0_t2"]  # each answer pairs with its call


def thinking(index: int, text: str) -> list[dict[str, Any]]:
    return [
        start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(index, type="thinking_delta", thinking=text),
        block_delta(index, type="signature_delta", signature=f"sig-{text}"),
        stop(index),
    ]


def tool_use(index: int, call_id: str, a: int, b: int) -> list[dict[str, Any]]:
    return [
        start(index, {"type": "tool_use", "id": call_id, "name": "add", "input": {}}),
        block_delta(index, type="input_json_delta", partial_json=json.dumps({"a": a, "b": b})),
        stop(index),
    ]


def anthropic_turn(*blocks: list[dict[str, Any]], reason: str = "tool_use") -> ScriptedResponse:
    events = [message_start(), *(e for block in blocks for e in block)]
    events += [message_delta(reason), MESSAGE_STOP]
    return raw_response(sse(events))


async def test_an_interleaved_thinking_block_stays_before_its_call_when_qualified() -> None:
    text = [
        start(0, {"type": "text", "text": ""}),
        block_delta(0, type="text_delta", text="done"),
        stop(0),
    ]
    script = [
        anthropic_turn(thinking(0, "one"), tool_use(1, "call_0", 1, 2)),
        anthropic_turn(
            thinking(0, "two"),
            tool_use(1, "call_1", 3, 4),
            thinking(2, "three"),
            tool_use(3, "call_0", 5, 6),
        ),
        anthropic_turn(text, reason="end_turn"),
    ]
    async with running_loop(script, api="anthropic") as loop:
        result = await loop.run(run_input())
        last = loop.server.requests[-1].messages
    assert result.stop_reason == "final_answer", result.detail
    assert_every_call_answered(result.transcript)
    second = [m for m in last if m["role"] == "assistant"][1]["content"]
    assert [b.get("thinking") or b.get("id") for b in second] == [
        "two",
        "call_1",
        "three",
        "call_0_t2",
    ], second
    assert second[2] == {"type": "thinking", "thinking": "three", "signature": "sig-three"}
    results = [
        b["tool_use_id"]
        for m in last
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert results == ["call_0", "call_1", "call_0_t2"]
