"""The classifier: real provider error bodies and real httpx failures become the right facts.

Every body goes through the path a model call really takes: the scripted server answers
over loopback, and the model activity's reader classifies it (`StreamFailure`, the one
model the workflow's route table reads as it is; `route_kind` names it in the route's
words). Network failures are
produced for real (a closed port, an unresolvable name, TLS spoken to a plain socket, a
reset, a body cut mid-chunk), not constructed.
"""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from steadyloop._activities.model_stream import stream_turn
from steadyloop._chat import ChatMessage
from steadyloop._routing.disposition import failure_row
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._routing.taxonomy import (
    StreamFailed,
    StreamFailure,
    degradable_parameter,
    http_category,
    network_reason_from_message,
)
from steadyloop._routing.transport_errors import (
    classify_http_error,
    classify_transport_error,
    network_reason,
)
from steadyloop._stream.completion import CompletionRequest
from steadyloop.testing import (
    Pause,
    ScriptedResponse,
    ScriptedServer,
    disconnect,
    json_response,
    raw_response,
    refused_base_url,
    sse_response,
    text_chunks,
)


def _request() -> CompletionRequest:
    return CompletionRequest(
        endpoint="scripted", model="m", messages=[ChatMessage(role="user", content="hi")]
    )


async def _facts(endpoint: EndpointConfig) -> StreamFailure:
    """Send one request to `endpoint` and classify the failure."""
    async with httpx.AsyncClient() as client:
        try:
            await stream_turn(client, endpoint, _request(), api_key=None)
        except StreamFailed as failed:
            return failed.failure
    raise AssertionError("the request did not fail")


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as running:
        yield running


async def _answer(server: ScriptedServer, response: ScriptedResponse) -> StreamFailure:
    server.enqueue(response)
    return await _facts(server.endpoint("scripted", first_token_s=0.3))


def _error(status: int, body: Any, headers: dict[str, str] | None = None) -> ScriptedResponse:
    return json_response(body, status=status, headers=headers)


# (label, status, body, headers, category, unsupported parameter, Retry-After seconds)
PROVIDER_ERRORS: list[tuple[str, int, Any, dict[str, str], str, str | None, float | None]] = [
    (
        "openai rate limit",
        429,
        {
            "error": {
                "message": "Rate limit reached for gpt-4o in organization org-x on tokens per "
                "min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 1.5s.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        {"retry-after-ms": "1500", "retry-after": "2"},
        "rate_limit",
        None,
        1.5,
    ),
    (
        "openai insufficient quota (a 429 that waiting does not fix)",
        429,
        {
            "error": {
                "message": "You exceeded your current quota, please check your plan and "
                "billing details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        },
        {},
        "quota",
        None,
        None,
    ),
    (
        "openai context length",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130512 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "openai unsupported parallel_tool_calls (o-series)",
        400,
        {
            "error": {
                "message": "Unsupported parameter: 'parallel_tool_calls' is not supported with "
                "this model.",
                "type": "invalid_request_error",
                "param": "parallel_tool_calls",
                "code": "unsupported_parameter",
            }
        },
        {},
        "request_rejected",
        "parallel_tool_calls",
        None,
    ),
    (
        "openai unsupported reasoning_effort value",
        400,
        {
            "error": {
                "message": "Unsupported value: 'reasoning_effort' does not support 'minimal' "
                "with this model. Supported values are: 'low', 'medium', and 'high'.",
                "type": "invalid_request_error",
                "param": "reasoning_effort",
                "code": "unsupported_value",
            }
        },
        {},
        "request_rejected",
        "reasoning_effort",
        None,
    ),
    (
        "openai invalid response_format schema (the caller's error, not degradable)",
        400,
        {
            "error": {
                "message": "Invalid schema for response_format 'answer': In context=(), "
                "'additionalProperties' is required to be supplied and to be false.",
                "type": "invalid_request_error",
                "param": "response_format",
                "code": None,
            }
        },
        {},
        "request_rejected",
        None,
        None,
    ),
    (
        "openai flagged prompt",
        400,
        {
            "error": {
                "message": "Invalid prompt: your prompt was flagged as potentially violating "
                "our usage policy. Please try again with a different prompt.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_prompt",
            }
        },
        {},
        "content_filter",
        None,
        None,
    ),
    (
        "azure content filter",
        400,
        {
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure "
                "OpenAI's content management policy. Please modify your prompt and retry.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
            }
        },
        {},
        "content_filter",
        None,
        None,
    ),
    (
        "azure unrecognized stream_options",
        400,
        {
            "error": {
                "message": "Unrecognized request argument supplied: stream_options",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        {},
        "request_rejected",
        "stream_options",
        None,
    ),
    (
        "openai bad key",
        401,
        {
            "error": {
                "message": "Incorrect API key provided: sk-abc***. You can find your API key "
                "at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
        {},
        "auth",
        None,
        None,
    ),
    (
        "openai unknown model",
        404,
        {
            "error": {
                "message": "The model `gpt-9` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
        {},
        "not_found",
        None,
        None,
    ),
    (
        "openai server error",
        500,
        {
            "error": {
                "message": "The server had an error while processing your request. Sorry!",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
        {},
        "server_error",
        None,
        None,
    ),
    (
        "anthropic rate limit (OpenAI-compatible endpoint)",
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed the rate limit for your organization of "
                "50 requests per minute.",
            },
        },
        {"retry-after": "12"},
        "rate_limit",
        None,
        12.0,
    ),
    (
        "anthropic overloaded",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        {},
        "server_error",
        None,
        None,
    ),
    (
        "anthropic prompt too long",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 215000 tokens > 200000 maximum",
            },
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "anthropic request too large for the window",
        413,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "Request size exceeds model context window",
            },
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "anthropic out of credit (a 400)",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "Your credit balance is too low to access the Anthropic API. Please "
                "go to Plans & Billing to upgrade or purchase credits.",
            },
        },
        {},
        "quota",
        None,
        None,
    ),
    (
        "anthropic bad key",
        401,
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
        {},
        "auth",
        None,
        None,
    ),
    (
        "gemini resource exhausted",
        429,
        [
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                }
            }
        ],
        {},
        "rate_limit",
        None,
        None,
    ),
    (
        "gemini input too long",
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200000) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        {},
        "context_length",
        None,
        None,
    ),
    (
        "gemini unknown parallel_tool_calls",
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": 'Invalid JSON payload received. Unknown name "parallel_tool_calls":'
                    " Cannot find field.",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        {},
        "request_rejected",
        "parallel_tool_calls",
        None,
    ),
    (
        "gemini unknown schema keyword (a tool schema, not a parameter)",
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": 'Invalid JSON payload received. Unknown name "additionalProperties"'
                    " at 'tools[0].function_declarations[3].parameters': Cannot find field.",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        {},
        "request_rejected",
        None,
        None,
    ),
    (
        "groq context length",
        400,
        {
            "error": {
                "message": "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "groq tokens-per-minute (a 413 that is a rate limit)",
        413,
        {
            "error": {
                "message": "Request too large for model `llama-3.3-70b-versatile` in organization "
                "`org_x` service tier `on_demand` on tokens per minute (TPM): Limit 12000, "
                "Requested 20000, please reduce your message size and try again.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        {},
        "rate_limit",
        None,
        None,
    ),
    (
        "groq rate limit with Retry-After",
        429,
        {
            "error": {
                "message": "Rate limit reached for model `llama-3.1-8b-instant` on requests per "
                "minute (RPM): Limit 30, Used 30, Requested 1. Please try again in 7s.",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        {"retry-after": "7"},
        "rate_limit",
        None,
        7.0,
    ),
    (
        "openrouter out of credits",
        402,
        {
            "error": {
                "code": 402,
                "message": "Insufficient credits. Add more using https://openrouter.ai/settings",
            }
        },
        {},
        "quota",
        None,
        None,
    ),
    (
        "openrouter moderation (a 403 that is not about the key)",
        403,
        {
            "error": {
                "code": 403,
                "message": "openai/gpt-4o requires moderation on OpenRouter. Your input was "
                'flagged for "harassment"',
                "metadata": {
                    "reasons": ["harassment"],
                    "flagged_input": "...",
                    "provider_name": "OpenAI",
                    "model_slug": "openai/gpt-4o",
                },
            }
        },
        {},
        "content_filter",
        None,
        None,
    ),
    (
        "openrouter context length",
        400,
        {
            "error": {
                "code": 400,
                "message": "This endpoint's maximum context length is 131072 tokens. However, "
                "you requested about 140000 tokens (139000 of text input, 1000 in the output). "
                'Please reduce the length of either one, or use the "middle-out" transform.',
            }
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "openrouter upstream failure",
        502,
        {"error": {"code": 502, "message": "Provider returned error"}},
        {},
        "server_error",
        None,
        None,
    ),
    (
        "vllm context length",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "vllm auto tool choice not enabled",
        400,
        {
            "object": "error",
            "message": '"auto" tool choice requires --enable-auto-tool-choice and '
            "--tool-call-parser to be set",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        {},
        "request_rejected",
        "tool_choice",
        None,
    ),
    (
        "vllm unknown model",
        404,
        {
            "object": "error",
            "message": "The model `llama9` does not exist.",
            "type": "NotFoundError",
            "param": None,
            "code": 404,
        },
        {},
        "not_found",
        None,
        None,
    ),
    (
        "llama.cpp context size (400)",
        400,
        {
            "error": {
                "code": 400,
                "message": "request (8708 tokens) exceeds the available context size (8192 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 8708,
                "n_ctx": 8192,
            }
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "llama.cpp context size (older servers answer 500)",
        500,
        {
            "error": {
                "code": 500,
                "message": "the request exceeds the available context size. try increasing "
                "the context size or enable context shift",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 1407,
                "n_ctx": 256,
            }
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "llama.cpp loading the model",
        503,
        {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
        {"retry-after": "1.5"},
        "server_error",
        None,
        1.5,
    ),
    (
        "mistral extra_forbidden stream_options",
        422,
        {
            "object": "error",
            "message": {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "stream_options"],
                        "msg": "Extra inputs are not permitted",
                        "input": {"include_usage": True},
                    }
                ]
            },
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        },
        {},
        "request_rejected",
        "stream_options",
        None,
    ),
    (
        "mistral extra field inside a message (content, not a parameter)",
        422,
        {
            "object": "error",
            "message": {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "messages", 3, "assistant", "reasoning_content"],
                        "msg": "Extra inputs are not permitted",
                        "input": "",
                    }
                ]
            },
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        },
        {},
        "request_rejected",
        None,
        None,
    ),
    (
        "mistral context length",
        400,
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model "
            "with 32768 maximum context length",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        },
        {},
        "context_length",
        None,
        None,
    ),
    (
        "ollama unknown model",
        404,
        {"error": 'model "llama9" not found, try pulling it first'},
        {},
        "not_found",
        None,
        None,
    ),
    (
        "ollama model without tools (not a degradable parameter)",
        400,
        {"error": "registry.ollama.ai/library/gemma:2b does not support tools"},
        {},
        "request_rejected",
        None,
        None,
    ),
    ("a bare 409", 409, {"error": {"message": "conflict"}}, {}, "transient", None, None),
    ("a redirect", 307, {}, {"location": "https://elsewhere/v1"}, "other", None, None),
]


@pytest.mark.parametrize(
    ("status", "body", "headers", "category", "parameter", "retry_after"),
    [case[1:] for case in PROVIDER_ERRORS],
    ids=[case[0] for case in PROVIDER_ERRORS],
)
async def test_provider_error_bodies_through_the_model_activity(
    server: ScriptedServer,
    status: int,
    body: Any,
    headers: dict[str, str],
    category: str,
    parameter: str | None,
    retry_after: float | None,
) -> None:
    facts = await _answer(server, _error(status, body, headers))

    assert facts.route_kind == "http_status"
    assert facts.status == status
    assert facts.category == category
    assert facts.unsupported_parameter == parameter
    assert facts.retry_after_s == retry_after
    assert facts.produced_output is False


@pytest.mark.parametrize(
    ("status", "body", "headers", "category", "parameter", "retry_after"),
    [case[1:] for case in PROVIDER_ERRORS],
    ids=[case[0] for case in PROVIDER_ERRORS],
)
def test_classify_http_error_agrees_with_the_activity_path(
    status: int,
    body: Any,
    headers: dict[str, str],
    category: str,
    parameter: str | None,
    retry_after: float | None,
) -> None:
    import json

    facts = classify_http_error(status, httpx.Headers(headers), json.dumps(body).encode())
    assert (facts.category, facts.unsupported_parameter, facts.retry_after_s) == (
        category,
        parameter,
        retry_after,
    )


async def test_retry_after_as_an_http_date(server: ScriptedServer) -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    date = email.utils.format_datetime(when, usegmt=True)
    facts = await _answer(
        server, _error(503, {"error": {"message": "busy"}}, {"retry-after": date})
    )
    assert facts.category == "server_error"
    assert facts.retry_after_s is not None and 25 < facts.retry_after_s <= 30


# -- errors inside a stream ------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "category"),
    [
        ({"message": "Rate limit exceeded", "code": 429}, "rate_limit"),
        ({"message": "Provider returned error", "code": 502}, "server_error"),
        ({"message": "something broke"}, "server_error"),
        ({"message": "bad tool schema", "type": "invalid_request_error"}, "request_rejected"),
        (
            {"message": "context_length_exceeded", "code": "context_length_exceeded"},
            "context_length",
        ),
        ("the model crashed", "server_error"),
    ],
)
async def test_errors_inside_the_stream(server: ScriptedServer, error: Any, category: str) -> None:
    facts = await _answer(
        server, sse_response([*text_chunks("partial "), {"error": error}], done=False)
    )
    assert (facts.route_kind, facts.category, facts.status) == ("stream_error", category, None)


async def test_a_json_error_answered_with_200_is_a_provider_error(server: ScriptedServer) -> None:
    body = {"error": {"message": "Too many requests", "type": "rate_limit_error"}}
    facts = await _answer(server, json_response(body))
    assert (facts.route_kind, facts.category) == ("stream_error", "rate_limit")


async def test_an_html_page_is_a_protocol_failure(server: ScriptedServer) -> None:
    page = raw_response(b"<html><body>Bad gateway</body></html>", content_type="text/html")
    facts = await _answer(server, page)
    assert (facts.route_kind, facts.category) == ("protocol", None)


# -- below HTTP ------------------------------------------------------------------------


async def test_a_refused_connection() -> None:
    endpoint = EndpointConfig(name="down", base_url=refused_base_url())
    facts = await _facts(endpoint)
    assert (facts.route_kind, facts.network_reason) == ("network", "refused")


async def test_a_name_that_does_not_resolve() -> None:
    endpoint = EndpointConfig(name="nowhere", base_url="http://steadyloop-test.invalid/v1")
    facts = await _facts(endpoint)
    assert (facts.route_kind, facts.network_reason) == ("network", "dns")


async def test_tls_spoken_to_a_plain_http_server() -> None:
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    tcp = await asyncio.start_server(plain, "127.0.0.1", 0)
    port = tcp.sockets[0].getsockname()[1]
    try:
        facts = await _facts(EndpointConfig(name="tls", base_url=f"https://127.0.0.1:{port}/v1"))
    finally:
        tcp.close()
    assert (facts.route_kind, facts.network_reason) == ("network", "tls")


async def test_a_reset_mid_stream(server: ScriptedServer) -> None:
    reset = raw_response([b'data: {"choices": []}\n\n', Pause(0.05), b"data: {"], ending="reset")
    facts = await _answer(server, reset)
    assert (facts.route_kind, facts.network_reason) == ("network", "reset")


async def test_a_server_that_hangs_up_without_answering(server: ScriptedServer) -> None:
    facts = await _answer(server, disconnect())
    assert (facts.route_kind, facts.network_reason) == ("network", "reset")


async def test_a_body_cut_mid_chunk(server: ScriptedServer) -> None:
    facts = await _answer(server, sse_response(text_chunks("hello there"), cut_after_bytes=40))
    assert (facts.route_kind, facts.network_reason) == ("network", "cut")


async def test_a_read_timeout(server: ScriptedServer) -> None:
    server.enqueue(raw_response([Pause(1.0), b"data: [DONE]\n\n"]))
    facts = await _facts(server.endpoint("scripted", read_timeout_s=0.2, first_token_s=None))
    assert (facts.route_kind, facts.network_reason) == ("network", "timeout")


async def test_a_stall_before_the_first_token(server: ScriptedServer) -> None:
    facts = await _answer(server, sse_response([Pause(2.0), *text_chunks("late")]))
    assert (facts.route_kind, facts.stall_phase) == ("stall", "before_first_token")


async def test_network_reason_reads_real_httpx_exceptions(server: ScriptedServer) -> None:
    """The same classification for a caller using httpx directly."""
    server.enqueue(disconnect())
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError) as refused:
            await client.get(refused_base_url())
        with pytest.raises(httpx.RemoteProtocolError) as hung_up:
            await client.post(server.base_url + "/chat/completions", json={})
    assert network_reason(refused.value) == "refused"
    assert classify_transport_error(refused.value).network_reason == "refused"
    assert network_reason(hung_up.value) == "reset"
    assert network_reason(httpx.ReadTimeout("slow")) == "timeout"


def test_classify_transport_error_reads_a_status_error() -> None:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(
        429,
        headers={"retry-after": "3"},
        json={"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
        request=request,
    )
    facts = classify_transport_error(
        httpx.HTTPStatusError("429", request=request, response=response)
    )
    assert (facts.route_kind, facts.category, facts.retry_after_s) == (
        "http_status",
        "rate_limit",
        3.0,
    )


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("ConnectError while connecting (...): [Errno 111] Connection refused", "refused"),
        ("ConnectError while connecting (...): [Errno -2] Name or service not known", "dns"),
        ("ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", "tls"),
        ("ReadError while reading the stream (...): ReadError", "reset"),
        ("RemoteProtocolError: incomplete chunked read", "cut"),
        ("ReadTimeout while reading the stream (...)", "timeout"),
        ("something else", "other"),
    ],
)
def test_network_reason_from_an_older_failure_message(message: str, reason: str) -> None:
    """A failure without the reason field (the older replay fixtures) is read by its text."""
    assert network_reason_from_message(message) == reason
    assert StreamFailure(kind="network", message=message).network_reason == reason


# -- pure rules ------------------------------------------------------------------------


def test_a_truncated_stream_is_a_cut_network_failure() -> None:
    facts = StreamFailure(kind="truncated_stream", message="ended")
    assert (facts.route_kind, facts.network_reason) == ("network", "cut")
    assert failure_row(facts) == "interrupted"


def test_a_given_classification_is_kept_and_a_missing_one_is_read() -> None:
    given = StreamFailure(kind="http_status", status=429, category="quota")
    assert given.category == "quota"  # the provider's own words, read where it was raised
    read = StreamFailure(kind="http_status", status=429, provider_code="insufficient_quota")
    assert read.category == "quota"
    again = StreamFailure.model_validate(read.model_dump(mode="json"))
    assert again == read  # what the workflow reads back is what the activity raised


@pytest.mark.parametrize(
    ("parameter", "code", "message", "expected"),
    [
        ("parallel_tool_calls", "unsupported_parameter", "", "parallel_tool_calls"),
        ("response_format.json_schema", "unsupported_value", "", "response_format"),
        ("temperature", "unsupported_value", "Unsupported value: 'temperature'", None),
        ("response_format", None, "Invalid schema for response_format", None),
        (None, None, "tool_choice and response_format are not supported together", None),
        (None, None, "Unknown parameter: 'reasoning_effort'.", "reasoning_effort"),
        (None, None, "reasoning_effort must be one of low, medium, high", None),
    ],
)
def test_degradable_parameter(
    parameter: str | None, code: str | None, message: str, expected: str | None
) -> None:
    assert degradable_parameter(parameter, code, message) == expected


def test_rate_limit_codes_win_over_context_words() -> None:
    message = "Request too large for model `m` on tokens per min (TPM): reduce the length"
    assert http_category(429, "rate_limit_exceeded", "tokens", message) == "rate_limit"
    assert http_category(400, None, None, "This model's maximum context length is 8192") == (
        "context_length"
    )
    # A 5xx that merely mentions context is still the server's failure.
    assert http_category(500, None, None, "context window cache error") == "server_error"
