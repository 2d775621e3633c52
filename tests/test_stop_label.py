"""A turn's finish reason agrees with what the turn did, on every wire.

Gateways that translate between wires end a turn that holds a tool call with the label
of a plain end: `stop_reason: end_turn` after a closed `tool_use` block
(BerriAI/litellm#34692, maximhq/bifrost#3638), `finish_reason: stop` from Ollama's
chat stream beside a tool call (BerriAI/litellm#34718 names it as the cause). The call
is dispatched, rightly; the turn must then report `tool_calls`, wherever the label is
shown (every reader takes it from the model activity's `AssembledTurn`: the model and
attempt spans of a trace, the turn's record), with the provider's own label in
`stats.notes`. Each case runs through the model activity, as a worker runs it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from anthropic_streams import (
    MESSAGE_STOP,
    json_delta,
    message_delta,
    message_start,
    sse,
    start,
    stop,
    text_delta,
)
from wire_activity_harness import WireEndpoint

from steadyloop._stream.completion import reported_finish_reason
from steadyloop.testing import (
    ScriptedCall,
    ScriptedServer,
    chunk,
    finish_chunk,
    raw_response,
    sse_response,
    text_chunks,
    tool_call_chunks,
)

CHAT = WireEndpoint("chat", "chat", "qwen3.5:4b", "STEADYLOOP_TEST_CHAT_KEY", "sk-chat-0123")
CLAUDE = WireEndpoint(
    "claude", "anthropic", "claude-sonnet-4-5", "STEADYLOOP_TEST_ANTHROPIC_KEY", "sk-ant-0123"
)
GPT = WireEndpoint("gpt", "responses", "gpt-5", "STEADYLOOP_TEST_RESPONSES_KEY", "sk-resp-0123")

WRITE_ARGS = '{"file_path": "test.txt", "content": "hello"}'


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


def litellm_34692(*, closed: bool, empty_text_first: bool) -> bytes:
    """The recorded framing of BerriAI/litellm#34692 (`ollama_chat/qwen3.5:4b` behind
    LiteLLM's `/v1/messages`): the `tool_use` block and its whole `input_json_delta`,
    then `message_delta` with `stop_reason: end_turn`. The report's reproduction sends no
    `content_block_stop`; its title names a spurious empty leading text block."""
    index = 1 if empty_text_first else 0
    events: list[dict[str, Any]] = [message_start()]
    if empty_text_first:
        events += [start(0, {"type": "text", "text": ""}), stop(0)]
    block = {"type": "tool_use", "id": "8a359e89-0000", "name": "Write", "input": {}}
    events += [start(index, block), json_delta(index, WRITE_ARGS)]
    if closed:
        events.append(stop(index))
    events += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, MESSAGE_STOP]
    return sse(events)


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "as_recorded"])
@pytest.mark.parametrize("empty_text_first", [False, True], ids=["tool_use", "empty_text_then"])
async def test_anthropic_end_turn_with_a_tool_use_block_reports_tool_calls(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, closed: bool, empty_text_first: bool
) -> None:
    server.enqueue(raw_response(litellm_34692(closed=closed, empty_text_first=empty_text_first)))
    turn = await CLAUDE.activity(server, monkeypatch)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("8a359e89-0000", "Write", WRITE_ARGS)
    ]
    assert turn.defects == []  # dispatched
    assert turn.finish_reason == "tool_calls"
    assert any("'end_turn'" in note for note in turn.stats.notes), turn.stats.notes


async def test_chat_stop_beside_a_tool_call_reports_tool_calls(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama's chat stream: the tool call, then `finish_reason: stop`."""
    write = ScriptedCall("Write", json.loads(WRITE_ARGS), id="call_1")
    chunks = [*tool_call_chunks([write], index="zero"), finish_chunk("stop")]
    server.enqueue(sse_response(chunks))
    turn = await CHAT.activity(server, monkeypatch)
    assert [(c.id, c.name) for c in turn.tool_calls] == [("call_1", "Write")]
    assert turn.defects == []
    assert turn.finish_reason == "tool_calls"
    assert any("'stop'" in note for note in turn.stats.notes), turn.stats.notes


async def test_responses_with_a_call_reports_tool_calls(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Responses says no finish reason: its label comes from the calls (`tool_calls`)."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f"}
    events = [
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "item": {**item, "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"},
        {"type": "response.output_item.done", "item": {**item, "arguments": "{}"}},
        {"type": "response.completed", "response": {"id": "r", "output": []}},
    ]
    server.enqueue(raw_response(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)))
    turn = await GPT.activity(server, monkeypatch)
    assert [c.id for c in turn.tool_calls] == ["c1"]
    assert turn.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("stop_reason", "want"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "max_tokens")],
)
async def test_anthropic_labels_without_calls_or_that_say_more_are_kept(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, stop_reason: str, want: str
) -> None:
    events = [
        message_start(),
        start(0, {"type": "text", "text": ""}),
        text_delta(0, "done"),
        stop(0),
        message_delta(stop_reason),
        MESSAGE_STOP,
    ]
    server.enqueue(raw_response(sse(events)))
    turn = await CLAUDE.activity(server, monkeypatch)
    assert (turn.text, turn.finish_reason, turn.stats.notes) == ("done", want, [])


async def test_chat_labels_without_calls_or_that_say_more_are_kept(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(sse_response([*text_chunks("done"), finish_chunk("stop")]))
    turn = await CHAT.activity(server, monkeypatch)
    assert (turn.finish_reason, turn.stats.notes) == ("stop", [])
    # A call whose arguments parse, cut by the limit: the label says the cut, as sent.
    cut = [chunk({"tool_calls": [_call("call_2", "{}")]}), finish_chunk("length")]
    server.enqueue(sse_response(cut))
    turn = await CHAT.activity(server, monkeypatch)
    assert (len(turn.tool_calls), turn.finish_reason) == (1, "length")


def _call(call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "f", "arguments": arguments},
    }


@pytest.mark.parametrize(
    ("label", "calls", "want", "noted"),
    [
        ("stop", True, "tool_calls", True),
        ("end_turn", True, "tool_calls", True),
        ("stop_sequence", True, "tool_calls", True),
        ("tool_calls", True, "tool_calls", False),
        ("length", True, "length", False),
        ("content_filter", True, "content_filter", False),
        (None, True, None, False),
        ("stop", False, "stop", False),
        ("end_turn", False, "end_turn", False),
    ],
)
def test_the_rule_relabels_only_a_plain_end_with_calls(
    label: str | None, calls: bool, want: str | None, noted: bool
) -> None:
    notes: list[str] = []
    assert reported_finish_reason(label, calls, notes) == want
    assert bool(notes) is noted
