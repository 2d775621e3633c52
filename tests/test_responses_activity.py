"""The model activity on the Responses wire, over loopback HTTP against a scripted server:
where it posts, what it vetoes, and that the watchdog, the runaway guard, forwarding and
redaction hold as they do on the chat wire."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from wire_activity_harness import WireEndpoint

from steadyloop._activities.model_stream import stream_turn
from steadyloop._output.forwarding import ForwardTarget, OutputDelta
from steadyloop._routing.disposition import failure_row
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop.testing import Pause, ScriptedServer, raw_response

KEY_ENV = "STEADYLOOP_TEST_RESPONSES_KEY"
KEY = "sk-resp-0123456789abcdefXYZ"


def event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def call_events(call_id: str = "c1", arguments: str = '{"a":1}') -> list[bytes]:
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "f"}
    return [
        event({"type": "response.created", "response": {"id": "r"}}),
        event({"type": "response.output_item.added", "item": {**item, "arguments": ""}}),
        event(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{call_id}",
                "delta": arguments,
            }
        ),
        event({"type": "response.output_item.done", "item": {**item, "arguments": arguments}}),
    ]


COMPLETED = event({"type": "response.completed", "response": {"id": "r", "output": []}})


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


GPT = WireEndpoint("gpt", "responses", "gpt-5", KEY_ENV, KEY)
request, activity, failed = GPT.request, GPT.activity, GPT.failed


async def test_it_posts_to_responses_with_the_key_and_returns_the_turn(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(raw_response([*call_events(), COMPLETED]))
    turn = await activity(server, monkeypatch)
    [sent] = server.requests
    assert sent.path == "/v1/responses"
    assert sent.header("authorization") == f"Bearer {KEY}"
    assert sent.json["input"] == [{"type": "message", "role": "user", "content": "hi"}]
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("c1", '{"a":1}')]


async def test_a_body_ending_without_its_terminal_is_a_retryable_cut(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(raw_response(call_events()))  # every call done, no response.completed
    error = await failed(server, monkeypatch)
    assert error.type == "truncated_stream" and error.non_retryable
    assert failure_row(StreamFailure.model_validate(error.details[0])) == "interrupted"
    assert "response.completed" in str(error)


async def test_an_error_event_echoing_the_key_is_classified_and_redacted(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    echoed = {
        "message": f"bad key {KEY}",
        "code": f"invalid_api_key {KEY[:12]}",
        "type": KEY,
        "param": KEY,
    }
    server.enqueue(raw_response([*call_events()[:2], event({"type": "error", "error": echoed})]))
    error = await failed(server, monkeypatch)
    failure = StreamFailure.model_validate(error.details[0])
    assert failure.kind == "stream_error"
    dumped = json.dumps(error.details) + str(error)
    assert KEY not in dumped and KEY[:12] not in dumped


async def test_pings_and_in_progress_are_not_progress(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts: list[bytes | Pause] = [event({"type": "response.created", "response": {}})]
    for _ in range(8):
        parts += [Pause(0.1), b":\n\n", event({"type": "response.in_progress", "response": {}})]
    server.enqueue(raw_response(parts))
    error = await failed(server, monkeypatch, first_token_s=0.4, inter_chunk_s=0.3)
    failure = StreamFailure.model_validate(error.details[0])
    assert (failure.kind, failure.stall_phase) == ("stall", "before_first_token")


async def test_the_runaway_guard_cuts_a_call_on_this_wire(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = call_events(arguments='{"a":"')[:3]
    more = event(
        {"type": "response.function_call_arguments.delta", "item_id": "fc_c1", "delta": "x" * 600}
    )
    server.enqueue(raw_response([*head, *[more] * 4, COMPLETED]))
    turn = await activity(server, monkeypatch, argument_limits=ArgumentLimits(max_args_bytes=1000))
    assert turn.tool_calls == []
    assert turn.defects[0].kind == "TOOL_CALL_ARGUMENTS_TOO_LARGE"


async def test_forwarded_text_makes_a_later_failure_produced_output(server: ScriptedServer) -> None:
    server.enqueue(
        raw_response(
            [
                event({"type": "response.output_text.delta", "item_id": "m", "delta": "Hello"}),
                Pause(0.05),
                event(
                    {
                        "type": "response.failed",
                        "response": {"error": {"code": "server_error", "message": "x"}},
                    }
                ),
            ]
        )
    )
    shown: list[OutputDelta] = []
    forward = ForwardTarget(stream_id="s", turn=1, attempt=1)
    async with httpx.AsyncClient() as client:
        with pytest.raises(StreamFailed) as info:
            await stream_turn(
                client,
                server.endpoint("gpt", api="responses"),
                request(forward=forward),
                api_key=None,
                sink=lambda delta, first: shown.append(delta),
            )
    assert info.value.failure.produced_output and info.value.shown_text == "Hello"
    assert [d.text for d in shown] == ["Hello"]
