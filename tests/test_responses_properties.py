"""Property: whatever a Responses server does to a valid stream's labels, the assembled
calls are the intended calls, or the turn is a named defect. A wrong call is never
dispatched.

The generator writes OpenAI's shape (reasoning items, text, calls with `output_index`,
`item_id`, `call_id`, deltas, `.done` events, `response.completed`); the quirks are the
transformations servers are known to apply, applied in any combination: labels rotated or missing
on deltas, arguments only at `.done`, the first fragment repeated as a delta beside the
same text in `output_item.added` (vLLM), `output_index` with gaps, frames for an item
never announced, `event:` lines stripped, ciphertext deltas under a plaintext `.done`
(GitHub Copilot), `response.completed` with `output: []` (Codex). Every stream is fed
in reads cut at generated places.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.contrib.pydantic import pydantic_data_converter

from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.responses_assembly import ResponsesAssembler
from steadyloop._stream.sse import SSEDecoder

QUIRKS = (
    "rotate_item_ids",
    "drop_delta_labels",
    "arguments_only_at_done",
    "first_fragment_repeated",
    "index_gaps",
    "never_announced",
    "strip_event_lines",
    "ciphertext_deltas",
    "empty_terminal_output",
    "no_arguments_done",
)


@dataclass(frozen=True)
class Intended:
    call_id: str
    name: str
    arguments: str


names = st.sampled_from(["get_weather", "read_file", "send_email", "now"])
argument_values = st.dictionaries(
    st.sampled_from(["city", "path", "to", "n", "deep"]),
    st.one_of(st.text(max_size=12), st.integers(-5, 5), st.lists(st.booleans(), max_size=3)),
    max_size=3,
)


@st.composite
def intended_calls(draw: st.DrawFn) -> list[Intended]:
    count = draw(st.integers(1, 4))
    calls = []
    for n in range(count):
        value = draw(argument_values)
        arguments = "" if draw(st.booleans()) and not value else json.dumps(value)
        calls.append(Intended(f"call_{n}_{draw(st.integers(0, 999))}", draw(names), arguments))
    return calls


def pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if text[a:b]]


def stream(
    calls: list[Intended], quirks: frozenset[str], cuts: list[int], reasoning: bool
) -> bytes:
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "r"}}]
    position = 0
    step = 3 if "index_gaps" in quirks else 1
    if reasoning:
        item = {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": "enc"}
        events += [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "encrypted_content": None},
            },
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ]
        position += step
    for n, call in enumerate(calls):
        item_id = f"fc_{n}"
        item = {"type": "function_call", "id": item_id, "call_id": call.call_id, "name": call.name}
        fragments = pieces(call.arguments, cuts)
        added_args = ""
        if "first_fragment_repeated" in quirks and fragments:
            added_args = fragments[0]
        if "never_announced" not in quirks or n == 0:
            events.append(
                {"type": "response.output_item.added", "output_index": position,
                 "item": {**item, "arguments": added_args}}
            )  # fmt: skip
        if "arguments_only_at_done" not in quirks:
            for k, fragment in enumerate(fragments):
                delta: dict[str, Any] = {
                    "type": "response.function_call_arguments.delta",
                    "output_index": position,
                    "item_id": item_id,
                    "delta": f"ZmFrZQ{k}==" if "ciphertext_deltas" in quirks else fragment,
                }
                if "drop_delta_labels" in quirks:
                    del delta["output_index"]
                    if k % 2:
                        del delta["item_id"]
                if "rotate_item_ids" in quirks and "item_id" in delta:
                    delta["item_id"] = f"rot_{n}_{k}"
                events.append(delta)
        if "no_arguments_done" not in quirks:
            events.append(
                {"type": "response.function_call_arguments.done", "output_index": position,
                 "item_id": item_id, "arguments": call.arguments}
            )  # fmt: skip
        events.append(
            {"type": "response.output_item.done", "output_index": position,
             "item": {**item, "arguments": call.arguments}}
        )  # fmt: skip
        position += step
    output = [] if "empty_terminal_output" in quirks else [
        {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
        for c in calls
    ]  # fmt: skip
    events.append({"type": "response.completed", "response": {"id": "r", "output": output}})
    body = b""
    for event in events:
        line = f"event: {event['type']}\n" if "strip_event_lines" not in quirks else ""
        body += f"{line}data: {json.dumps(event)}\n\n".encode()
    return body


def assemble(body: bytes, reads: list[int]) -> AssembledTurn:
    assembler = ResponsesAssembler(endpoint="gpt", mint_prefix="call_sl_t1a1")
    decoder = SSEDecoder()
    points = sorted({r % (len(body) + 1) for r in reads} | {0, len(body)})
    for a, b in itertools.pairwise(points):
        events = decoder.feed_data(body[a:b])
        if events and assembler.feed_events(events):
            break
    assert assembler.saw_terminal
    return assembler.finish()


@settings(max_examples=300, deadline=None)
@given(
    calls=intended_calls(),
    quirks=st.frozensets(st.sampled_from(QUIRKS)),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    reads=st.lists(st.integers(0, 5000), max_size=8),
    reasoning=st.booleans(),
)
def test_the_intended_calls_or_a_named_defect_never_a_wrong_call(
    calls: list[Intended],
    quirks: frozenset[str],
    cuts: list[int],
    reads: list[int],
    reasoning: bool,
) -> None:
    turn = assemble(stream(calls, quirks, cuts, reasoning), reads)
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([turn])
    assert payload.data  # it serializes, whatever arrived
    got = [(c.id, c.name, c.arguments) for c in turn.tool_calls]
    want = [(c.call_id, c.name, c.arguments) for c in calls]
    if not turn.defects:
        assert got == want, quirks
    else:
        assert all(d.kind for d in turn.defects)
    if reasoning:
        [item] = turn.passback
        assert json.loads(item.raw)["encrypted_content"] == "enc"
        assert item.before_call == (turn.tool_calls[0].id if turn.tool_calls else None)


@settings(max_examples=100, deadline=None)
@given(calls=intended_calls(), reads=st.lists(st.integers(0, 5000), max_size=8))
def test_quirks_the_final_arguments_repair_assemble_exactly(
    calls: list[Intended], reads: list[int]
) -> None:
    """The quirks a `.done` repairs on its own must not even cost a defect."""
    for quirk in ("rotate_item_ids", "arguments_only_at_done", "first_fragment_repeated",
                  "index_gaps", "strip_event_lines", "ciphertext_deltas",
                  "empty_terminal_output", "drop_delta_labels"):  # fmt: skip
        turn = assemble(stream(calls, frozenset({quirk}), [3, 9], False), reads)
        assert turn.defects == [], quirk
        assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
            (c.call_id, c.name, c.arguments) for c in calls
        ], quirk
