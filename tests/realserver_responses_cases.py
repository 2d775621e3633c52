"""The requests sent to llama.cpp's `/v1/responses`, and what steadyloop must make of each.

As `realserver_cases.py` does for Chat Completions: one `Case` per behaviour, a check
over the outcome *and* the bytes that arrived, run live (`test_realserver_responses.py`)
and on the recorded bytes (`test_responses_realserver_replays.py`,
`tests/fixtures/realservers/llamacpp_responses/`). Checks hold the turn to the wire's
own `output_item.done` items, never to the model's words.

What llama.cpp (xllamacpp 2026.10.11549) sent, pinned by `check_llamacpp_shape`: no
`output_index` and no `sequence_number` on any event, every item with an `id`, the
argument deltas' `item_id` equal to the item's `id` (`fc_...`, not the `call_id`
`call_...`), `response.completed` repeating the output; and a turn cut by
`max_output_tokens` still ends `response.completed` with status `completed`, never
`response.incomplete`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from realserver_cases import FIXTURES, MODELS, PREFILL, WEATHER, Case, Outcome, turn_of
from wire_capture import Exchange

from steadyloop._chat import ChatMessage
from steadyloop._stream.completion import CompletionRequest

SERVER = "llamacpp"
FIXTURE_DIR = FIXTURES / "llamacpp_responses"
ENDPOINT: dict[str, Any] = {"api": "responses"}
# The Responses API has no `stop`; llama.cpp takes one in the body (SmolLM2 would
# otherwise repeat the call until the token limit cut one).
STOPPED: dict[str, Any] = {"api": "responses", "extra_body": {"stop": ["</tool_call>"]}}


def events_of(body: bytes) -> list[dict[str, Any]]:
    """Every `data:` payload of an SSE body, parsed (the reference reading)."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            out.append(json.loads(b"\n".join(data)))
    return out


def done_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["item"]
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]


def check_llamacpp_shape(events: list[dict[str, Any]]) -> None:
    assert events[-1]["type"] == "response.completed"
    assert not any("output_index" in e or "sequence_number" in e for e in events)
    for e in events:
        if e["type"] == "response.function_call_arguments.delta":
            assert e["item_id"].startswith("fc_")


def check_one_call(outcome: Outcome, exchange: Exchange) -> None:
    assert exchange.status == 200
    events = events_of(exchange.body)
    check_llamacpp_shape(events)
    turn = turn_of(outcome)
    wire = done_calls(events)
    assert len(wire) == 1
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        (w["call_id"], w["name"], w["arguments"]) for w in wire
    ]
    assert isinstance(json.loads(turn.tool_calls[0].arguments), dict)
    assert turn.finish_reason == "tool_calls" and turn.defects == []
    usage = events[-1]["response"]["usage"]
    assert turn.usage is not None
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (
        usage["input_tokens"],
        usage["output_tokens"],
    )


def check_text_cut_by_the_limit(outcome: Outcome, exchange: Exchange) -> None:
    events = events_of(exchange.body)
    check_llamacpp_shape(events)
    completed = events[-1]["response"]
    # Observed: llama.cpp reports a cut by max_output_tokens as `completed`.
    assert completed["status"] == "completed"
    assert completed["usage"]["output_tokens"] == 6
    turn = turn_of(outcome)
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert turn.text == deltas and turn.text
    assert turn.finish_reason == "stop"


def _case(name: str, check: Any, endpoint: dict[str, Any], **fields: Any) -> Case:
    prefill = fields.pop("prefill", True)
    messages = [ChatMessage(role="user", content="What is the weather in Paris?")]
    request = CompletionRequest(
        endpoint=SERVER,
        model=MODELS[SERVER],
        messages=messages + ([PREFILL] if prefill else []),
        temperature=0,
        **fields,
    )
    return replace(Case(name, SERVER, request, check), endpoint=endpoint)


RESPONSES_CASES = [
    _case(
        "one_call", check_one_call, STOPPED, tools=[WEATHER], tool_choice="required", max_tokens=96
    ),
    _case(
        "text_cut_by_the_limit", check_text_cut_by_the_limit, ENDPOINT, prefill=False, max_tokens=6
    ),
]
