"""Reasoning pass-back across a route's fallback, end to end.

A Responses reasoning item or an Anthropic thinking block is valid only at the endpoint
that issued it: another endpoint refuses it ("Invalid signature in thinking block") or,
worse, reads someone else's reasoning. What decides the outcome downstream is what each
provider *received*, so these tests run the workflow on a route of two endpoints of the
same wire (`a`, then `b`: the wire alone would not tell them apart) and read the bodies
the scripted providers recorded:

- turn 1 on `a` hands out pass-back items with a tool call; turn 2 fails on `a` and falls
  back to `b`: `b`'s body holds no item of `a` (but does hold the call they preceded),
  and the timeline says how many were left out and which endpoints were involved;
- turn 2 answered on `a`: the items go back to `a` as the bytes `a` sent, and the
  timeline says nothing was dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from anthropic_streams import MESSAGE_STOP, delta, message_delta, message_start, sse, start, stop
from wire_loop_harness import Provider, WireLoop, text_answer, wire_loop

from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._run.bounds import WireApi
from steadyloop._run.models import RunInput, RunResult
from steadyloop.client import RunHandle
from steadyloop.events import TimelineEntryEvent
from steadyloop.testing import ScriptedResponse, error_response, raw_response

pytestmark = pytest.mark.slow

ISSUER = "a"
FALLBACK = "b"
CALL_ID = "call_add_1"
ARGUMENTS = '{"a": 1, "b": 2}'
ANSWER = "3, said {endpoint}"

# A reasoning item as a server may write it: escaped slashes, a non-ASCII escape, a
# space after a colon. Parsed and dumped again it reads differently (a signed item would
# no longer match), so finding these bytes in a body proves they went back untouched.
RESPONSES_REASONING = (
    '{"id":"rs_1","type":"reasoning","summary": [],'
    '"encrypted_content":"gAAAA\\u00e9Bk+\\/=","status":null}'
)
# Anthropic's blocks arrive as a start and deltas; the assembler keeps them as JSON text.
# The thinking text needs escapes (a quote, non-ASCII, an emoji split across two deltas,
# whose halves stay JSON escapes), the signature comes in two pieces: dumped again by
# orjson, the block would be refused outright; by anything else, read differently.
THINKING = {"type": "thinking", "thinking": "", "signature": ""}
THINKING_DELTAS = ['Add "a" and "b": caf\u00e9 \ud83d', "\ude00 arithmetic."]
SIGNATURE_DELTAS = ["EqQBCkYIBRgCKkD+/", "sig=="]
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}


# -- the providers' streams -------------------------------------------------------------


def responses_event(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def responses_call_turn() -> ScriptedResponse:
    """A reasoning item, then a call of `add` it preceded (OpenAI's shape)."""
    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": CALL_ID,
        "name": "add",
        "arguments": ARGUMENTS,
    }
    events: list[dict[str, Any] | str] = [
        {"type": "response.created", "response": {"id": "resp_1", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "summary": []},
        },
        # The item as the server sent it: the assembler cuts it out byte for byte.
        '{"type":"response.output_item.done","output_index":0,"item":' + RESPONSES_REASONING + "}",
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**call, "arguments": "", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc_1",
            "delta": ARGUMENTS,
        },
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {
            "type": "response.completed",
            "response": {"id": "resp_1", "status": "completed", "output": []},
        },
    ]
    return raw_response(b"".join(responses_event(e) for e in events))


def anthropic_call_turn() -> ScriptedResponse:
    """A signed thinking block and a redacted one, then a call of `add` they preceded."""
    events: list[dict[str, Any]] = [message_start(), start(0, THINKING)]
    events += [delta(0, type="thinking_delta", thinking=t) for t in THINKING_DELTAS]
    events += [delta(0, type="signature_delta", signature=s) for s in SIGNATURE_DELTAS]
    events += [stop(0), start(1, REDACTED), stop(1)]
    events.append(start(2, {"type": "tool_use", "id": CALL_ID, "name": "add", "input": {}}))
    events.append(delta(2, type="input_json_delta", partial_json=ARGUMENTS))
    events += [stop(2), message_delta("tool_use"), MESSAGE_STOP]
    return raw_response(sse(events))


@dataclass(frozen=True)
class Wire:
    """One wire's streams and how to read the pass-back items out of a body it sent."""

    api: WireApi
    items: int  # how many pass-back items the call turn hands out

    def call_turn(self) -> ScriptedResponse:
        return responses_call_turn() if self.api == "responses" else anthropic_call_turn()

    def answer(self, endpoint: str) -> ScriptedResponse:
        return text_answer(self.api, ANSWER.format(endpoint=endpoint))

    def sent_passback(self, body: Any) -> list[dict[str, Any]]:
        """The pass-back items (reasoning items, thinking blocks) a request carried."""
        if self.api == "responses":
            return [i for i in body["input"] if i.get("type") == "reasoning"]
        return [
            block
            for message in body["messages"]
            if message["role"] == "assistant"
            for block in message["content"]
            if block["type"] in ("thinking", "redacted_thinking")
        ]

    def sent_calls(self, body: Any) -> list[str]:
        """The ids of the tool calls a request carried back (the transcript did go over)."""
        if self.api == "responses":
            return [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
        return [
            block["id"]
            for message in body["messages"]
            if message["role"] == "assistant"
            for block in message["content"]
            if block["type"] == "tool_use"
        ]


WIRES = [Wire("responses", items=1), Wire("anthropic", items=2)]


def routed_run() -> RunInput:
    """`a` then `b`, one attempt each: a failure on `a` falls back at once."""
    route = RouteConfig(
        candidates=[
            RouteCandidate(endpoint=ISSUER, model="model-a", attempts=1),
            RouteCandidate(endpoint=FALLBACK, model="model-b", attempts=1),
        ]
    )
    return RunInput(route=route, prompt="What is 1 + 2?", tools=["add"])


def issued_raws(result: RunResult) -> list[str]:
    """The pass-back items the transcript kept, as the text `a` sent (tagged `a`)."""
    [message] = [m for m in result.transcript if m.role == "assistant" and m.tool_calls]
    assert [i.endpoint for i in message.passback], "turn 1 kept no pass-back item"
    assert {i.endpoint for i in message.passback} == {ISSUER}
    return [i.raw for i in message.passback]


def dropped_notes(events: list[TimelineEntryEvent]) -> list[TimelineEntryEvent]:
    return [e for e in events if "not passed back" in e.text]


async def run_with_timeline(loop: WireLoop) -> tuple[RunResult, list[TimelineEntryEvent]]:
    """The run's result and its timeline once it ended (what a follower reads)."""
    handle = await loop.start(routed_run())
    result = await handle.result()
    return result, await RunHandle(loop.client, handle.id).timeline()


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.api)
async def test_a_fallback_sends_none_of_the_issuers_items_and_the_timeline_counts_them(
    wire: Wire,
) -> None:
    """Turn 2 fails on `a` and is answered by `b`: `b` must not receive `a`'s reasoning."""
    failing = error_response(500, "scripted outage", type="server_error")
    providers = {
        ISSUER: Provider(wire.api, [wire.call_turn(), failing]),
        FALLBACK: Provider(wire.api, [wire.answer(FALLBACK)]),
    }
    async with wire_loop(providers) as loop:
        result, timeline = await run_with_timeline(loop)
    assert result.stop_reason == "final_answer", result.detail
    assert result.final_answer == ANSWER.format(endpoint=FALLBACK)
    raws = issued_raws(result)
    assert len(raws) == wire.items

    [_, turn_two] = loop.servers[ISSUER].requests
    [fallback] = loop.servers[FALLBACK].requests
    # The issuer's own request for turn 2 (the one that failed) carried them.
    assert all(raw.encode() in turn_two.body for raw in raws)
    # The fallback: the call they preceded went over, none of the items did.
    assert wire.sent_calls(fallback.json) == [CALL_ID]
    assert wire.sent_passback(fallback.json) == []
    assert not any(raw.encode() in fallback.body for raw in raws)
    signature = "".join(SIGNATURE_DELTAS) if wire.api == "anthropic" else "gAAAA"
    assert signature.encode() not in fallback.body

    expected = (
        f"{wire.items} reasoning item(s) issued by endpoint {ISSUER!r} not passed back "
        f"to endpoint {FALLBACK!r} (they go back only to the endpoint that issued them)"
    )
    [note] = dropped_notes(timeline)
    assert note.text == expected
    assert (note.turn, note.phase, note.kind) == (2, "model", "healed")


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.api)
async def test_turn_two_on_the_issuer_gets_its_items_back_byte_exact(wire: Wire) -> None:
    """The same route, no failure: `a` answers turn 2 and reads its own reasoning back."""
    providers = {
        ISSUER: Provider(wire.api, [wire.call_turn(), wire.answer(ISSUER)]),
        FALLBACK: Provider(wire.api),
    }
    async with wire_loop(providers) as loop:
        result, timeline = await run_with_timeline(loop)
    assert result.stop_reason == "final_answer", result.detail
    assert result.final_answer == ANSWER.format(endpoint=ISSUER)
    raws = issued_raws(result)
    if wire.api == "responses":
        assert raws == [RESPONSES_REASONING]  # kept as the server wrote it

    [_, second] = loop.servers[ISSUER].requests
    assert loop.servers[FALLBACK].requests == []
    # Each item's text is in the body itself, in order, in front of the call it preceded.
    at = [second.body.find(raw.encode()) for raw in raws]
    assert -1 not in at and at == sorted(at), at
    call_at = second.body.find(CALL_ID.encode())
    assert call_at > at[-1]
    assert len(wire.sent_passback(second.json)) == wire.items
    assert wire.sent_calls(second.json) == [CALL_ID]
    assert dropped_notes(timeline) == []
