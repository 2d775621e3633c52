"""`ResponsesAssembler.feed_events` folds the commonest argument delta inline when a read
arrives as `MessageData`; a list of payloads takes each through `_fold`, the general
reading. Both must come out the same, payload for payload, on the shape the inline path
takes and on every hostile neighbour of it: the counters the watchdog and the runaway
guard read, the turn, or the refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest

from steadyloop._routing.taxonomy import StreamFailed
from steadyloop._stream.responses_assembly import ResponsesAssembler
from steadyloop._stream.sse import MessageData

ADDED = {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                  "arguments": ""}}  # fmt: skip
OTHER: dict[str, Any] = {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "g",
                  "arguments": ""}}  # fmt: skip
DONE_2 = {"type": "response.output_item.done", "output_index": 1,
          "item": {**OTHER["item"], "arguments": "{}"}}  # fmt: skip
COMPLETED = {"type": "response.completed",
             "response": {"id": "resp_1", "status": "completed", "output": []}}  # fmt: skip


def delta(text: Any = "x", **labels: Any) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "delta": text, **labels}


HOSTILE: list[dict[str, Any] | str] = [
    delta('"a":1', item_id="fc_1", output_index=0),
    delta('"a":1', item_id="fc_1"),  # no output_index
    delta("x", item_id="call_1", output_index=0),  # the call id as item_id
    delta("", item_id="fc_1", output_index=0),
    delta(None, item_id="fc_1", output_index=0),
    delta(5, item_id="fc_1", output_index=0),
    delta("x", item_id="fc_1", output_index=1),  # another call's index
    delta("x", item_id="fc_1", output_index=True),
    delta("x", item_id="fc_1", output_index=0.0),
    delta("x", item_id="fc_9", output_index=0),  # an item never announced
    delta("x", item_id=7, output_index=0),
    delta("x", output_index=0),
    delta("x"),
    delta("x", item_id="fc_2", output_index=1),  # a call already done
    {"type": "response.output_text.delta", "delta": "hi"},
    "",
    "[DONE]",
    '{"type": "response.function_call_arguments.delta", "delta": "\\ud800", "item_id": "fc_1"}',
]


def fold_each(payloads: list[bytes], inline: bool) -> list[Any]:
    """What each payload leaves behind: the counters, or the refusal's message."""
    assembler = ResponsesAssembler(endpoint="e")
    seen: list[Any] = []
    for payload in payloads:
        try:
            if inline:
                done = assembler.feed_events(MessageData([payload]))
            else:
                done = assembler.feed_events([payload])
        except StreamFailed as failed:
            seen.append(failed.failure.message)
            return seen
        parts = [len(call.parts) for call in assembler.calls.records]
        seen.append((done, assembler.content_mark, assembler.chunks, parts))
    seen.append(assembler.finish().model_dump())
    return seen


def encoded(events: list[dict[str, Any] | str]) -> list[bytes]:
    return [(e if isinstance(e, str) else json.dumps(e)).encode() for e in events]


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda e: str(e)[40:100])
def test_inline_and_general_readings_agree_on_every_delta(hostile: dict[str, Any] | str) -> None:
    events = [ADDED, OTHER, DONE_2, delta("{", item_id="fc_1", output_index=0), hostile,
              delta("}", item_id="fc_1", output_index=0), COMPLETED]  # fmt: skip
    payloads = encoded(events)
    assert fold_each(payloads, inline=True) == fold_each(payloads, inline=False)


def test_inline_and_general_readings_agree_on_a_whole_stream() -> None:
    events = [ADDED, OTHER, DONE_2, delta("{", item_id="fc_1", output_index=0), *HOSTILE[:14],
              delta("}", item_id="fc_1"), COMPLETED]  # fmt: skip
    payloads = encoded(events)
    inline = fold_each(payloads, inline=True)
    assert inline == fold_each(payloads, inline=False)
    assert inline[-1]["tool_calls"][0]["arguments"].startswith('{"a":1"a":1x')
