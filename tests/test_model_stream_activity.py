"""The model activity over real HTTP on loopback, against the scripted server.

Each test scripts what the provider sends and asserts what decides the outcome for
the workflow: the assembled turn (text, calls, finish reason, usage), or the failure's
kind, status, provider message, excerpt and retryability; and, from the requests the
server recorded, what the activity sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from wire_shapes import CONTENT_SHAPES

from steadyloop._activities import STREAM_COMPLETION_ACTIVITY, ModelActivities, StreamProgress
from steadyloop._chat import ChatMessage, ToolSpec
from steadyloop._routing.disposition import failure_row
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._routing.provider_errors import (
    parse_retry_after,
    provider_error,
)
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop.errors import MISSING_API_KEY, UNKNOWN_ENDPOINT
from steadyloop.testing import (
    Pause,
    ScriptedCall,
    ScriptedServer,
    chunk,
    disconnect,
    error_object,
    error_response,
    finish_chunk,
    json_response,
    raw_response,
    reasoning_chunks,
    sse_event,
    sse_response,
    text_chunks,
    tool_call_chunks,
    tool_calls_response,
    usage_chunk,
)

KEY_ENV = "STEADYLOOP_TEST_API_KEY"
KEY = "sk-test-9f8e7d6c5b4a"


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


@pytest.fixture
async def model(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ModelActivities]:
    monkeypatch.setenv(KEY_ENV, KEY)
    registry = EndpointRegistry(
        [
            server.endpoint("scripted", api_key_env=KEY_ENV, headers={"X-Team": "loop"}),
            server.endpoint("keyless", include_usage=False),
            server.endpoint("fast-timeout", read_timeout_s=0.2),
        ]
    )
    async with ModelActivities(registry) as activities:
        yield activities


def request(endpoint: str = "scripted", **fields: Any) -> CompletionRequest:
    return CompletionRequest(
        endpoint=endpoint,
        model="scripted-model",
        messages=[
            ChatMessage(role="system", content="Be brief."),
            ChatMessage(role="user", content="Hello?"),
        ],
        **fields,
    )


async def complete(
    model: ModelActivities, req: CompletionRequest, heartbeats: list[Any] | None = None
) -> AssembledTurn:
    env = ActivityEnvironment()
    if heartbeats is not None:
        env.on_heartbeat = lambda *details: heartbeats.append(details)
    return await env.run(model.stream_completion, req)


async def fail(model: ModelActivities, req: CompletionRequest) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await complete(model, req)
    return info.value


def failure_of(error: ApplicationError) -> StreamFailure:
    failure = StreamFailure.model_validate(error.details[0])
    assert error.type == failure.kind
    return failure


def body(*items: Any, done: bool = True) -> bytes:
    """The SSE bytes `sse_response` would send for these chunks."""
    out = b"".join(sse_event(item) for item in items)
    return out + (b"data: [DONE]\n\n" if done else b"")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- answers ------------------------------------------------------------------------


async def test_text_answer_with_usage_and_stats(
    server: ScriptedServer, model: ModelActivities
) -> None:
    chunks = [*text_chunks("Hello there, friend."), finish_chunk("stop"), usage_chunk(12, 4)]
    server.enqueue(sse_response(chunks))

    turn = await complete(model, request())

    assert turn.text == "Hello there, friend."
    assert turn.tool_calls == []
    assert turn.finish_reason == "stop"
    assert turn.usage is not None
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (12, 4)
    assert turn.defects == []
    assert turn.stats.saw_done is True
    assert turn.stats.bytes == len(body(*chunks))
    assert turn.stats.events == len(chunks) + 1  # every chunk plus [DONE]
    assert turn.stats.chunks == len(chunks)
    assert turn.stats.time_to_first_token_s is not None
    assert 0 <= turn.stats.time_to_first_token_s <= turn.stats.duration_s


async def test_the_request_body_streams_and_asks_for_usage(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()]))

    await complete(model, request())

    [sent] = server.requests
    assert sent.method == "POST" and sent.path == "/v1/chat/completions"
    assert sent.json == {
        "model": "scripted-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert sent.header("accept") == "text/event-stream"
    assert sent.header("content-type") == "application/json"
    assert sent.header("x-team") == "loop"


async def test_optional_fields_are_sent_only_when_set(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([*text_chunks("{}"), finish_chunk()]))
    tool = ToolSpec(name="add", parameters={"type": "object", "properties": {}})

    await complete(
        model,
        request(
            "keyless",
            tools=[tool],
            tool_choice="required",
            parallel_tool_calls=False,
            response_format={"type": "json_object"},
            temperature=0.0,
            top_p=0.5,
            max_tokens=64,
            seed=7,
            stop=["END"],
        ),
    )

    sent = server.requests[0].json
    assert "stream_options" not in sent  # the endpoint opted out of include_usage
    assert sent["tools"] == [tool.to_wire()]
    assert sent["tool_choice"] == "required"
    assert sent["parallel_tool_calls"] is False
    assert sent["response_format"] == {"type": "json_object"}
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["seed"]) == (
        0.0,
        0.5,
        64,
        7,
    )
    assert sent["stop"] == ["END"]


async def test_tool_choice_is_not_sent_without_tools(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()]))

    await complete(model, request(tool_choice="auto", parallel_tool_calls=True))

    sent = server.requests[0].json
    assert "tool_choice" not in sent and "parallel_tool_calls" not in sent
    assert "tools" not in sent


async def test_max_tokens_uses_the_endpoints_field_name(server: ScriptedServer) -> None:
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()]))
    registry = EndpointRegistry([server.endpoint("o", max_tokens_field="max_completion_tokens")])
    async with ModelActivities(registry) as model:
        await complete(model, request("o", max_tokens=10))

    sent = server.requests[0].json
    assert sent["max_completion_tokens"] == 10 and "max_tokens" not in sent


async def test_the_key_comes_from_the_environment_as_a_bearer_header_only(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()]))
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()]))
    req = request()

    await complete(model, req)
    await complete(model, request("keyless"))

    with_key, without_key = server.requests
    assert with_key.header("authorization") == f"Bearer {KEY}"
    assert KEY.encode() not in with_key.body
    assert KEY not in req.model_dump_json()
    assert without_key.header("authorization") is None


async def test_a_rotated_key_is_read_at_call_time(
    server: ScriptedServer, model: ModelActivities, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()]))
    monkeypatch.setenv(KEY_ENV, "sk-rotated")

    await complete(model, request())

    assert server.requests[0].header("authorization") == "Bearer sk-rotated"


async def test_parallel_tool_calls_are_assembled(
    server: ScriptedServer, model: ModelActivities
) -> None:
    calls = [
        ScriptedCall("read_file", {"path": "notes/a.txt"}, id="call_a"),
        ScriptedCall("add", {"a": 2, "b": 40}, id="call_b"),
    ]
    server.enqueue(tool_calls_response(*calls, fragment_size=4, parallel=True))

    turn = await complete(model, request())

    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_a", "read_file", {"path": "notes/a.txt"}),
        ("call_b", "add", {"a": 2, "b": 40}),
    ]
    assert turn.finish_reason == "tool_calls"
    assert turn.defects == []


async def test_ollama_labels_every_call_index_zero(
    server: ScriptedServer, model: ModelActivities
) -> None:
    calls = [
        ScriptedCall("read", {"path": "a"}),
        ScriptedCall("write", {"path": "b", "text": "x"}),
        ScriptedCall("read", {"path": "c"}),
    ]
    server.enqueue(tool_calls_response(*calls, index="zero", fragment_size=5))

    turn = await complete(model, request())

    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("read", {"path": "a"}),
        ("write", {"path": "b", "text": "x"}),
        ("read", {"path": "c"}),
    ]
    ids = [c.id for c in turn.tool_calls]
    assert all(i.strip() for i in ids) and len(set(ids)) == 3


async def test_a_zero_argument_call_sent_as_empty_string(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(tool_calls_response(ScriptedCall("now", "")))

    turn = await complete(model, request())

    [call] = turn.tool_calls
    assert (call.name, call.arguments) == ("now", "")
    assert turn.defects == []


async def test_reasoning_content_is_kept_apart_from_the_answer(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        sse_response(
            [
                *reasoning_chunks("Think about it."),
                *reasoning_chunks(" Then answer.", field="reasoning"),
                *text_chunks("42", role=False),
                finish_chunk(),
                usage_chunk(5, 9, reasoning_tokens=6),
            ]
        )
    )

    turn = await complete(model, request())

    assert turn.reasoning == "Think about it. Then answer."
    assert turn.text == "42"
    assert turn.usage is not None and turn.usage.reasoning_tokens == 6


async def test_a_magistral_stream_is_read_through_the_activity(
    server: ScriptedServer, model: ModelActivities
) -> None:
    """Mistral's reasoning models stream their thinking as `delta.content` given as typed
    parts, then plain string content (`wire_shapes.CONTENT_SHAPES`, the recorded chunk
    from braintrustdata/braintrust-proxy): one attempt, the thinking as reasoning, the
    answer as text, nothing refused; the raw bytes learned and read as the worker does."""
    [shape] = [s for s in CONTENT_SHAPES if s.case == "magistral_thinking_then_string_content"]
    chunks = [chunk(dict(d), model="magistral-medium-latest") for d in shape.deltas]
    server.enqueue(sse_response([*chunks, finish_chunk("stop"), usage_chunk(20, 30)]))

    turn = await complete(model, request())

    assert (turn.text, turn.reasoning) == (shape.text, shape.reasoning)
    assert (turn.finish_reason, turn.defects, turn.stats.notes) == ("stop", [], [])
    assert turn.model == "magistral-medium-latest"
    assert len(server.requests) == 1


async def test_usage_chunk_with_empty_choices_and_finish_in_its_own_chunk(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        sse_response(
            [
                chunk({"role": "assistant", "content": "Done"}),
                chunk({}, finish_reason="length"),
                chunk(choices=[], usage={"prompt_tokens": 3, "completion_tokens": 1}),
            ]
        )
    )

    turn = await complete(model, request())

    assert (turn.text, turn.finish_reason) == ("Done", "length")
    assert turn.usage is not None and turn.usage.prompt_tokens == 3


async def test_every_byte_in_its_own_write_with_multibyte_text(
    server: ScriptedServer, model: ModelActivities
) -> None:
    text = ["Grüße ", "🌍 ", "日本語", " done"]
    calls = [ScriptedCall("echo", {"text": "é😀"})]
    chunks = [*text_chunks(text), *tool_call_chunks(calls, role=False), finish_chunk()]
    server.enqueue(sse_response(chunks, split_every=1))

    turn = await complete(model, request())

    assert turn.text == "Grüße 🌍 日本語 done"
    assert json.loads(turn.tool_calls[0].arguments) == {"text": "é😀"}
    assert turn.stats.bytes == len(body(*chunks))


async def test_sse_comments_and_crlf_line_ends(
    server: ScriptedServer, model: ModelActivities
) -> None:
    # A comment, an empty `data:` keep-alive, then the answer with CRLF line ends.
    answer = body(*text_chunks("Hi"), finish_chunk()).replace(b"\n", b"\r\n")
    raw = b": OPENROUTER PROCESSING\r\n\r\ndata:\r\n\r\n" + answer
    server.enqueue(raw_response(raw))

    turn = await complete(model, request())

    assert turn.text == "Hi" and turn.stats.saw_done


async def test_a_stream_without_done_is_accepted_after_a_finish_reason(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([*text_chunks("bye"), finish_chunk()], done=False))

    turn = await complete(model, request())

    assert turn.text == "bye" and turn.finish_reason == "stop"
    assert turn.stats.saw_done is False


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", None])
async def test_sse_with_a_wrong_or_missing_content_type_is_read_as_sse(
    server: ScriptedServer, model: ModelActivities, content_type: str | None
) -> None:
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk()], content_type=content_type))

    turn = await complete(model, request())

    assert turn.text == "ok"


async def test_the_sniff_reads_past_a_leading_blank_write(
    server: ScriptedServer, model: ModelActivities
) -> None:
    answer = body(*text_chunks("ok"), finish_chunk())
    server.enqueue(raw_response([b"\n", answer], content_type="application/json"))

    turn = await complete(model, request())

    assert turn.text == "ok"


async def test_a_short_turn_sends_no_heartbeat(
    server: ScriptedServer, model: ModelActivities
) -> None:
    # A heartbeat that reaches Temporal is a billed action; a tool round whose
    # model turn is short needs none (a lost worker is still found by the timeout).
    calls = [ScriptedCall("add", {"a": 1})]
    server.enqueue(tool_calls_response(*calls))
    heartbeats: list[Any] = []

    turn = await complete(model, request(), heartbeats)

    assert turn.tool_calls and heartbeats == []


async def test_a_long_stream_heartbeats_its_progress_once_per_interval(
    server: ScriptedServer,
) -> None:
    chunks: list[Any] = [*text_chunks("one two"), Pause(0.3), *text_chunks(" three", role=False)]
    registry = EndpointRegistry([server.endpoint("scripted")])
    counts = []
    for interval in (3600.0, 0.2, 0.0):
        server.enqueue(sse_response([*chunks, finish_chunk()], split_every=16))
        heartbeats: list[Any] = []
        async with ModelActivities(registry, long_stream_heartbeat_s=interval) as model:
            await complete(model, request(), heartbeats)
        counts.append(len(heartbeats))
        if interval == 0.2:
            # Due once the stream is older than the interval: the read after the pause.
            progress = StreamProgress.model_validate(heartbeats[0][0])
            assert progress.chunks > 1 and progress.produced_output is False

    # An hour-long interval: none; one shorter than the pause: the read after it (a loaded
    # machine may space the last reads out too); none: every read.
    assert counts[0] == 0
    assert 1 <= counts[1] < counts[2]


async def test_the_heartbeat_gap_stays_within_a_share_of_the_heartbeat_timeout(
    server: ScriptedServer,
) -> None:
    # A run with a short heartbeat timeout must not be declared lost between heartbeats.
    registry = EndpointRegistry([server.endpoint("scripted")])
    server.enqueue(
        sse_response([*text_chunks("a"), Pause(0.5), *text_chunks("b", role=False), finish_chunk()])
    )
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=1))
    heartbeats: list[Any] = []
    env.on_heartbeat = lambda *details: heartbeats.append(details)
    async with ModelActivities(registry) as model:  # 30 s, but a fifth of 1 s here
        await env.run(model.stream_completion, request())

    assert heartbeats  # the read after the pause was due (with 30 s, none would be)


# -- failures -------------------------------------------------------------------------


async def test_http_400_carries_the_provider_message_and_is_not_retried(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        error_response(
            400,
            "This model's maximum context length is 8192 tokens.",
            type="invalid_request_error",
            code="context_length_exceeded",
        )
    )

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.kind == "http_status" and failure.status == 400
    assert failure.message == "This model's maximum context length is 8192 tokens."
    assert failure.provider_code == "context_length_exceeded"
    assert failure.provider_type == "invalid_request_error"
    assert "maximum context length" in failure.body_excerpt
    assert error.non_retryable


@pytest.mark.parametrize("status", [401, 403, 404, 422])
async def test_client_fault_statuses_are_not_retried(
    server: ScriptedServer, model: ModelActivities, status: int
) -> None:
    server.enqueue(error_response(status, f"status {status}"))

    error = await fail(model, request())

    assert failure_of(error).status == status
    assert error.non_retryable


async def test_http_429_is_retried_after_retry_after(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        error_response(
            429, "Rate limit reached", type="requests", code="rate_limit_exceeded", retry_after=7
        )
    )

    error = await fail(model, request())

    failure = failure_of(error)
    assert (failure.kind, failure.status, failure.retry_after_s) == ("http_status", 429, 7.0)
    assert error.non_retryable and error.next_retry_delay is None
    assert failure_row(failure) == "rate_limit"


async def test_http_429_for_an_exhausted_quota_is_not_retried(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        error_response(
            429,
            "You exceeded your current quota",
            type="insufficient_quota",
            code="insufficient_quota",
        )
    )

    error = await fail(model, request())

    assert failure_of(error).status == 429
    assert error.non_retryable


async def test_http_503_with_an_html_body_is_retried(
    server: ScriptedServer, model: ModelActivities
) -> None:
    page = b"<html><body><h1>503 Service Unavailable</h1></body></html>"
    server.enqueue(raw_response(page, status=503, content_type="text/html", framing="length"))

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.message == "HTTP 503 Service Unavailable"
    assert failure.provider_code is None
    assert "<h1>503 Service Unavailable</h1>" in failure.body_excerpt
    assert error.non_retryable  # every failure: the route table decides


async def test_ollama_and_gemini_error_shapes(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(error_response(404, body={"error": "model 'llama9' not found"}))
    gemini = [
        {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}
    ]
    server.enqueue(error_response(400, body=gemini))

    ollama = failure_of(await fail(model, request()))
    google = failure_of(await fail(model, request()))

    # A 404 names the address asked, so a wrong base_url is visible.
    assert ollama.message.startswith("model 'llama9' not found (POST http://127.0.0.1:")
    assert ollama.message.endswith(
        "/v1/chat/completions: check the endpoint's base_url and the model name)"
    )
    assert (google.message, google.provider_code, google.provider_type) == (
        "API key not valid.",
        "400",
        "INVALID_ARGUMENT",
    )


async def test_a_redirect_is_a_configuration_error(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        raw_response(
            b"",
            status=301,
            content_type=None,
            headers={"Location": "https://api.example.com/v1/chat/completions"},
            framing="length",
        )
    )

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.status == 301 and "https://api.example.com/v1" in failure.message
    assert error.non_retryable


async def test_the_key_is_redacted_from_an_echoed_error(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(error_response(401, f"Incorrect API key provided: {KEY}."))

    error = await fail(model, request())

    assert KEY not in str(error)
    assert KEY not in json.dumps(error.details[0])
    assert "[redacted]" in failure_of(error).message


async def test_a_non_streamed_json_body_is_not_sse(
    server: ScriptedServer, model: ModelActivities
) -> None:
    completion = {"id": "x", "object": "chat.completion", "choices": []}
    server.enqueue(json_response(completion))

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.kind == "not_sse" and failure.status == 200
    assert "application/json" in failure.message
    assert '"chat.completion"' in failure.body_excerpt
    assert error.non_retryable


async def test_an_html_page_is_not_sse(server: ScriptedServer, model: ModelActivities) -> None:
    server.enqueue(raw_response(b"<!doctype html><title>Login</title>", content_type="text/html"))

    failure = failure_of(await fail(model, request()))

    assert failure.kind == "not_sse" and "<title>Login</title>" in failure.body_excerpt


async def test_a_json_error_labelled_event_stream_is_not_sse_and_keeps_its_message(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(raw_response(json.dumps(error_object("upstream overloaded")).encode()))

    failure = failure_of(await fail(model, request()))

    assert failure.kind == "not_sse"
    assert failure.message.endswith(": upstream overloaded")


async def test_an_empty_body_without_event_stream_type_is_not_sse(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(raw_response(b"", content_type=None, framing="length"))

    failure = failure_of(await fail(model, request()))

    assert failure.kind == "not_sse" and "empty body" in failure.message


async def test_an_error_object_inside_the_stream(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        sse_response(
            [
                *text_chunks("Partial answ"),
                error_object("The server had an error while processing your request."),
            ],
            done=False,
        )
    )

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.kind == "stream_error"
    assert failure.message == "The server had an error while processing your request."
    assert failure.provider_type == "server_error"
    assert error.non_retryable  # every failure: the route table decides


async def test_an_in_stream_error_that_blames_the_request_is_not_retried(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(
        sse_response(
            [error_object("Invalid schema for function 'x'", type="invalid_request_error")],
            done=False,
        )
    )

    error = await fail(model, request())

    assert failure_of(error).kind == "stream_error"
    assert error.non_retryable


async def test_an_error_event(server: ScriptedServer, model: ModelActivities) -> None:
    server.enqueue(
        raw_response(
            body(*text_chunks("a"), done=False)
            + sse_event(error_object("overloaded", type="overloaded_error"), event="error")
        )
    )
    server.enqueue(raw_response(b"event: error\ndata: upstream went away\n\n"))

    structured = failure_of(await fail(model, request()))
    plain = failure_of(await fail(model, request()))

    assert (structured.kind, structured.message) == ("stream_error", "overloaded")
    assert (plain.kind, plain.message) == ("stream_error", "upstream went away")


async def test_a_chunk_that_is_not_json(server: ScriptedServer, model: ModelActivities) -> None:
    server.enqueue(sse_response([*text_chunks("a"), '{"choices": [ {"delta": '], done=True))

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.kind == "invalid_chunk"
    assert '{"choices": [ {"delta": ' in failure.body_excerpt
    assert error.non_retryable


async def test_a_body_that_ends_early_is_truncated(
    server: ScriptedServer, model: ModelActivities
) -> None:
    # Close framing: the connection closing ends the body cleanly, mid-answer.
    server.enqueue(sse_response(text_chunks("The answer is"), done=False, framing="close"))

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.kind == "truncated_stream"
    assert "without [DONE] or a finish_reason" in failure.message
    assert error.non_retryable  # every failure: the route table decides


async def test_a_body_cut_inside_an_event_is_truncated(
    server: ScriptedServer, model: ModelActivities
) -> None:
    chunks = text_chunks("The answer is")
    cut = len(body(*chunks, done=False)) - 10
    server.enqueue(sse_response(chunks, done=False, framing="close", cut_after_bytes=cut))

    failure = failure_of(await fail(model, request()))

    assert failure.kind == "truncated_stream"
    assert "last event was cut off" in failure.message


async def test_a_connection_cut_mid_stream_is_a_network_failure(
    server: ScriptedServer, model: ModelActivities
) -> None:
    chunks = [*text_chunks("one two three four"), finish_chunk()]
    server.enqueue(sse_response(chunks, cut_after_bytes=len(body(*chunks)) // 2))

    error = await fail(model, request())

    failure = failure_of(error)
    assert failure.kind == "network" and "RemoteProtocolError" in failure.message
    assert error.non_retryable  # every failure: the route table decides


async def test_a_connection_reset_mid_stream_is_a_network_failure(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response(text_chunks("one two"), done=False, ending="reset"))

    error = await fail(model, request())

    assert failure_of(error).kind == "network"
    assert error.non_retryable  # every failure: the route table decides


async def test_a_server_that_hangs_up_without_answering(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(disconnect())

    failure = failure_of(await fail(model, request()))

    assert failure.kind == "network" and failure.status is None


async def test_connection_refused_is_a_network_failure() -> None:
    port = closed_port()
    registry = EndpointRegistry(
        [EndpointConfig(name="gone", base_url=f"http://127.0.0.1:{port}/v1")]
    )
    async with ModelActivities(registry) as model:
        error = await fail(model, request("gone"))

    failure = failure_of(error)
    assert failure.kind == "network" and "ConnectError" in failure.message
    assert error.non_retryable  # every failure: the route table decides


async def test_a_silent_server_hits_the_read_timeout(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([*text_chunks("a"), Pause(30), finish_chunk()]))

    failure = failure_of(await fail(model, request("fast-timeout")))

    assert failure.kind == "network" and "read timeout" in failure.message
    # The connection was released, not left open behind the failure.
    exchange = server.exchanges[0]
    await asyncio.wait_for(exchange.ended.wait(), 10)
    assert exchange.client_disconnected and not exchange.finished


async def test_a_body_that_cannot_be_decoded_is_an_invalid_chunk(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(raw_response(b"this is not gzip", headers={"Content-Encoding": "gzip"}))

    error = await fail(model, request())

    assert failure_of(error).kind == "invalid_chunk"
    assert error.non_retryable


async def test_cancellation_propagates_and_is_not_a_failure(server: ScriptedServer) -> None:
    server.enqueue(sse_response([*text_chunks("a"), Pause(30), finish_chunk()]))
    # Reports every read, so the first chunk's heartbeat says the stream is under way.
    registry = EndpointRegistry([server.endpoint("scripted")])
    model = ModelActivities(registry, long_stream_heartbeat_s=0)
    env = ActivityEnvironment()
    cancelled = asyncio.Event()

    def on_heartbeat(*details: Any) -> None:
        env.cancel()  # the first chunk has arrived; cancel mid-stream
        cancelled.set()

    env.on_heartbeat = on_heartbeat
    async with model:
        with pytest.raises(asyncio.CancelledError):
            await env.run(model.stream_completion, request())
    assert cancelled.is_set()
    exchange = server.exchanges[0]
    await asyncio.wait_for(exchange.ended.wait(), 10)
    assert exchange.client_disconnected and not exchange.finished


async def test_an_unknown_endpoint_is_named_and_not_retried(
    server: ScriptedServer, model: ModelActivities
) -> None:
    error = await fail(model, request("nowhere"))

    assert error.type == UNKNOWN_ENDPOINT
    assert error.non_retryable
    assert "'nowhere'" in str(error) and "'scripted'" in str(error)
    assert error.details[0] == {
        "endpoint": "nowhere",
        "known": ["fast-timeout", "keyless", "scripted"],
    }
    assert server.requests == []


async def test_a_missing_key_is_named_and_nothing_is_sent(
    server: ScriptedServer, model: ModelActivities, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)

    error = await fail(model, request())

    assert error.type == MISSING_API_KEY
    assert error.non_retryable
    assert KEY_ENV in str(error)
    assert server.requests == []


async def test_the_activity_name_is_stable() -> None:
    from temporalio.activity import _Definition

    definition = _Definition.must_from_callable(
        ModelActivities(EndpointRegistry()).stream_completion
    )
    assert definition.name == STREAM_COMPLETION_ACTIVITY == "steadyloop.stream_completion"


# -- pure helpers -------------------------------------------------------------------


def test_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, now=now) == 30.0
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-5"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None


def test_provider_error_shapes() -> None:
    assert provider_error(b'{"error": {"message": "m", "type": "t", "code": "c"}}') == (
        "m",
        "c",
        "t",
    )
    assert provider_error(b'{"error": "plain"}') == ("plain", None, None)
    assert provider_error(
        b'{"object": "error", "message": "vllm says", "type": "BadRequestError", "code": 400}'
    ) == ("vllm says", "400", "BadRequestError")
    assert provider_error(b'{"detail": "Not Found"}') == ("Not Found", None, None)
    assert provider_error(b"<html>") == (None, None, None)
    assert provider_error(b"[1, 2]") == (None, None, None)


@pytest.mark.parametrize(
    ("failure", "row"),
    [
        (StreamFailure(kind="http_status", message="", status=500), "server_error"),
        (StreamFailure(kind="http_status", message="", status=408), "transient"),
        (StreamFailure(kind="http_status", message="", status=400), "request_rejected"),
        (StreamFailure(kind="http_status", message="", status=413), "request_rejected"),
        (StreamFailure(kind="stream_error", message=""), "server_error"),
        (StreamFailure(kind="stream_error", message="", provider_code="502"), "server_error"),
        (StreamFailure(kind="stream_error", message="", provider_code="400"), "request_rejected"),
        (StreamFailure(kind="stream_error", message="", provider_code="429"), "rate_limit"),
        (StreamFailure(kind="stream_error", message="", provider_code="invalid_api_key"), "auth"),
        (StreamFailure(kind="not_sse", message=""), "protocol"),
        (StreamFailure(kind="invalid_chunk", message=""), "protocol"),
        (StreamFailure(kind="truncated_stream", message=""), "interrupted"),
        (StreamFailure(kind="network", message=""), "interrupted"),
    ],
)
def test_the_route_table_row_each_failure_selects(failure: StreamFailure, row: str) -> None:
    assert failure_row(failure) == row
