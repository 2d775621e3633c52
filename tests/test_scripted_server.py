"""The scripted server and chunk builders: what tests and the demo rely on them to send."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    error_response,
    refused_base_url,
    sse_response,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)


def payloads(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def test_a_responder_function_sees_the_recorded_request() -> None:
    def answer(request: RecordedRequest) -> ScriptedResponse:
        question = request.messages[-1]["content"]
        return sse_response(text_chunks(f"You said {question}"))

    async with ScriptedServer(answer) as server, httpx.AsyncClient() as client:
        response = await client.post(
            server.base_url + "/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": "Bearer k"},
        )

    chunks = payloads(response.content)
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks[:-1]) == "You said hi"
    assert chunks[-1] == "[DONE]"
    assert response.headers["content-type"] == "text/event-stream"
    [recorded] = server.requests
    assert recorded.header("AUTHORIZATION") == "Bearer k"
    assert server.exchanges[0].finished


def test_a_request_that_sent_no_messages_has_no_transcript_to_assert_on() -> None:
    chat = RecordedRequest("POST", "/chat/completions", (), b'{"messages": []}')
    assert chat.messages == []
    for body in (b"not json", b"[]", b'{"input": "hi"}', b'{"messages": "hi"}'):
        with pytest.raises(ValueError, match="not a chat request"):
            RecordedRequest("POST", "/chat/completions", (), body).messages  # noqa: B018


async def test_an_async_responder_and_keep_alive_connections() -> None:
    async def answer(request: RecordedRequest) -> ScriptedResponse:
        return sse_response(text_chunks(str(len(server.requests))))

    async with ScriptedServer(answer) as server, httpx.AsyncClient() as client:
        for _ in range(3):
            await client.post(server.base_url + "/chat/completions", json={})

    assert len(server.requests) == 3


async def test_unscripted_requests_and_unknown_paths_fail_loudly() -> None:
    script = [error_response(418, "teapot")]
    async with ScriptedServer(script) as server, httpx.AsyncClient() as client:
        teapot = await client.post(server.base_url + "/chat/completions", json={})
        exhausted = await client.post(server.base_url + "/chat/completions", json={})
        wrong_path = await client.get(server.base_url + "/models")

    assert teapot.status_code == 418 and teapot.json()["error"]["message"] == "teapot"
    assert exhausted.status_code == 500 and "request #2" in exhausted.text
    assert wrong_path.status_code == 404
    assert server.pending == 0


async def test_the_responses_path_is_served_only_when_routed() -> None:
    script = [error_response(418, "teapot"), error_response(418, "teapot")]
    chat_only = ("/chat/completions",)
    async with ScriptedServer(script, routes=chat_only) as server, httpx.AsyncClient() as client:
        refused = await client.post(server.base_url + "/responses", json={})
    assert refused.status_code == 404 and server.pending == 2
    routes = ("/chat/completions", "/responses")
    async with ScriptedServer(script, routes=routes) as server, httpx.AsyncClient() as client:
        served = await client.post(server.base_url + "/responses", json={})
        chat = await client.post(server.base_url + "/chat/completions", json={})
    assert served.status_code == chat.status_code == 418 and server.pending == 0


async def test_split_and_cut_bodies_keep_their_bytes() -> None:
    chunks = text_chunks("a b c")
    whole = sse_response(chunks)
    full = b"".join(p for p in whole.parts if isinstance(p, bytes))
    split = sse_response(chunks, split_at=[1, 7, 8], split_every=50)
    cut = sse_response(chunks, cut_after_bytes=20)

    split_bytes = [p for p in split.parts if isinstance(p, bytes)]
    assert b"".join(split_bytes) == full
    assert [len(p) for p in split_bytes[:3]] == [1, 6, 1]
    assert b"".join(p for p in cut.parts if isinstance(p, bytes)) == full[:20]
    assert cut.ending == "close"


def test_tool_call_chunks_reproduce_gateway_shapes() -> None:
    calls = [ScriptedCall("read_file", {"path": "a"}, id="call_x"), ScriptedCall("now")]
    ollama = tool_call_chunks(calls, index="zero", id_on="last", name_split=4, role=False)
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in ollama]

    assert {d["index"] for d in deltas} == {0}
    assert [d["function"].get("name") for d in deltas] == ["read", "_fil", "e", "now"]
    assert [d.get("id") for d in deltas] == [None, None, "call_x", "call_1"]
    assert "".join(d["function"].get("arguments", "") for d in deltas[:3]) == '{"path":"a"}'
    assert deltas[3]["function"]["arguments"] == ""  # a zero-argument call sent as ""

    parallel = tool_call_chunks(calls, fragment_size=3, parallel=True, role=False)
    order = [c["choices"][0]["delta"]["tool_calls"][0]["index"] for c in parallel]
    assert order[:2] == [0, 1]


def test_usage_chunk_has_empty_choices() -> None:
    chunk = usage_chunk(3, 4, reasoning_tokens=2, cached_tokens=1)
    assert chunk["choices"] == []
    assert chunk["usage"]["total_tokens"] == 7
    assert chunk["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}


async def test_unsupported_parameters_are_refused_before_the_script() -> None:
    async with (
        ScriptedServer(
            [sse_response(text_chunks("ok"))], unsupported_parameters=["parallel_tool_calls"]
        ) as server,
        httpx.AsyncClient() as client,
    ):
        refused = await client.post(
            server.base_url + "/chat/completions", json={"parallel_tool_calls": False}
        )
        accepted = await client.post(server.base_url + "/chat/completions", json={"x": 1})

    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "parallel_tool_calls"
    assert refused.json()["error"]["code"] == "unsupported_parameter"
    assert accepted.status_code == 200 and server.pending == 0


async def test_the_refused_address_refuses() -> None:
    async with httpx.AsyncClient() as client:
        try:
            await client.get(refused_base_url())
        except httpx.ConnectError:
            return
    raise AssertionError("something answered on the refused address")
