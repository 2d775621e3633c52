"""What a provider sends back never leaks the key, never breaks
serialization, and never feeds an absurd number into arithmetic.

The key is read from the worker's environment, as users set it. The property asserted
is the one that decides whether a key leaked: no fragment of 8 or more characters of it
appears in the `ApplicationError`'s message, in its details (as JSON), or in any log
record (httpx and httpcore at DEBUG included). Each exact repro from the issue is here:
the key in `error.code`, `error.type` and `error.param` of a 401; a key straddling the
500-character excerpt cut; `Retry-After: 1e300`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities import ModelActivities
from steadyloop._activities.model_stream import failure_to_application_error, stream_turn
from steadyloop._chat import ChatMessage
from steadyloop._redaction import MIN_FRAGMENT, Secrets, safe_text
from steadyloop._routing.disposition import AttemptContext, failure_disposition
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._routing.pricing import Price, cost_of
from steadyloop._routing.provider_errors import RETRY_AFTER_CEILING_S, parse_retry_after
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure, redact_failure
from steadyloop._routing.transport_errors import classify_http_error, classify_transport_error
from steadyloop._stream.completion import AssembledTurn, CompletionRequest, Usage
from steadyloop._stream.failures import BODY_EXCERPT_CHARS, MESSAGE_CHARS, TEXT_FIELDS
from steadyloop.testing import (
    ScriptedServer,
    error_object,
    error_response,
    finish_chunk,
    raw_response,
    sse_event,
    sse_response,
    text_chunks,
)

KEY_ENV = "STEADYLOOP_SECRET_TEST_KEY"
# 47 characters, the length of the key the issue leaked 40 characters of.
KEY = "sk-proj-Q7vLm2Xc9RtBw4Zn8KdHf3Jy6PsEa1UoGiTqVxW"
assert len(KEY) == 47


def leaked(text: str, key: str = KEY) -> list[str]:
    """Every 8-character piece of `key` in `text` (any longer fragment contains one)."""
    return [key[i : i + MIN_FRAGMENT] for i in range(len(key) - 7) if key[i : i + 8] in text]


def everything_said(error: ApplicationError, caplog: pytest.LogCaptureFixture) -> str:
    """All an error and the logs expose: message, details as JSON, every log line."""
    details = json.dumps([d for d in error.details], ensure_ascii=False)
    logs = "\n".join(r.getMessage() for r in caplog.records)
    return f"{error}\n{error.message}\n{details}\n{logs}"


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


@pytest.fixture
async def model(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[ModelActivities]:
    # The worker's environment, as `export KEY=...` sets it; no `environ` override.
    monkeypatch.setenv(KEY_ENV, KEY)
    caplog.set_level(logging.DEBUG)
    registry = EndpointRegistry([server.endpoint("scripted", api_key_env=KEY_ENV)])
    async with ModelActivities(registry) as activities:
        yield activities


def request(endpoint: str = "scripted") -> CompletionRequest:
    return CompletionRequest(
        endpoint=endpoint, model="m", messages=[ChatMessage(role="user", content="hi")]
    )


async def fail(model: ModelActivities, req: CompletionRequest | None = None) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(model.stream_completion, req or request())
    return info.value


def failure_of(error: ApplicationError) -> StreamFailure:
    return StreamFailure.model_validate(error.details[0])


def serializes(error: ApplicationError) -> None:
    """The error's message and details encode as UTF-8 JSON (what Temporal does)."""
    json.dumps([error.message, *error.details], ensure_ascii=False).encode("utf-8")


# -- item 6: the key in every field of a provider error --------------------------------


@pytest.mark.parametrize(
    "error",
    [
        {"message": "Unauthorized", "type": "invalid_request_error", "code": KEY},
        {"message": "Unauthorized", "type": KEY, "code": "invalid_api_key"},
        {"message": "Unauthorized", "type": "invalid_request_error", "param": KEY},
        {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"},
        {"message": "no", "code": {"key": KEY, "nested": [KEY]}, "type": [KEY]},
        {"message": {"detail": [{"loc": ["body", KEY], "msg": KEY, "type": KEY}]}},
    ],
    ids=["code", "type", "param", "message", "nested", "detail"],
)
async def test_a_401_echoing_the_key_in_any_field_never_shows_it(
    server: ScriptedServer,
    model: ModelActivities,
    caplog: pytest.LogCaptureFixture,
    error: dict[str, Any],
) -> None:
    server.enqueue(error_response(401, body={"error": error}))

    raised = await fail(model)

    failure = failure_of(raised)
    assert (failure.kind, failure.status) == ("http_status", 401)
    assert leaked(everything_said(raised, caplog)) == []
    assert "[redacted]" in everything_said(raised, caplog)
    serializes(raised)


async def test_a_key_straddling_the_excerpt_cut_leaks_no_fragment(
    server: ScriptedServer, model: ModelActivities, caplog: pytest.LogCaptureFixture
) -> None:
    # The repro: the key starts 40 characters before the 500-character cut, in a body
    # that is not JSON (so the excerpt is all a person gets).
    start = BODY_EXCERPT_CHARS - 40
    page = ("x" * start + KEY + "y" * 200).encode()
    server.enqueue(raw_response(page, status=401, content_type="text/plain", framing="length"))
    # And the same inside a JSON message whose excerpt is cut there.
    padded = {"error": {"message": "m" * (start - len('{"error": {"message": "')) + KEY}}
    server.enqueue(error_response(401, body=padded))

    for _ in range(2):
        raised = await fail(model)
        said = everything_said(raised, caplog)
        assert leaked(said) == []
        assert len(failure_of(raised).body_excerpt) <= BODY_EXCERPT_CHARS + 40


async def test_a_key_straddling_the_message_bound_leaks_no_fragment(
    server: ScriptedServer, model: ModelActivities, caplog: pytest.LogCaptureFixture
) -> None:
    message = "m" * (MESSAGE_CHARS - 20) + KEY + "tail"
    server.enqueue(sse_response([*text_chunks("a"), error_object(message, code=KEY)], done=False))

    raised = await fail(model)

    failure = failure_of(raised)
    assert failure.kind == "stream_error"
    assert len(failure.message) <= MESSAGE_CHARS + 40
    assert leaked(everything_said(raised, caplog)) == []


async def test_an_error_event_echoing_the_key_never_shows_it(
    server: ScriptedServer, model: ModelActivities, caplog: pytest.LogCaptureFixture
) -> None:
    structured = {"error": {"message": KEY, "type": KEY, "code": KEY, "param": KEY}}
    server.enqueue(raw_response(sse_event(structured, event="error")))
    server.enqueue(raw_response(f"event: error\ndata: bad key {KEY}\n\n".encode()))

    for _ in range(2):
        raised = await fail(model)
        assert failure_of(raised).kind == "stream_error"
        assert leaked(everything_said(raised, caplog)) == []


async def test_a_redirect_echoing_the_key_in_its_location_never_shows_it(
    server: ScriptedServer, model: ModelActivities, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(
        raw_response(
            b"",
            status=302,
            content_type=None,
            headers={"Location": f"https://elsewhere.example/v1?key={KEY}", "X-Echo": KEY},
            framing="length",
        )
    )

    raised = await fail(model)

    assert failure_of(raised).status == 302
    assert "elsewhere.example" in raised.message
    assert leaked(everything_said(raised, caplog)) == []


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[bytes], str]]:
    """A server that answers every request with the given raw bytes (status line and
    headers included): the scripted server cannot send a reason phrase of its choice."""
    answers: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answers[0])
        await writer.drain()
        writer.close()

    tcp = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = tcp.sockets[0].getsockname()[1]

    def answer(raw: bytes) -> str:
        answers[:] = [raw]
        return f"http://127.0.0.1:{port}/v1"

    async with tcp:
        yield answer


async def test_a_reason_phrase_and_headers_echoing_the_key_are_not_logged(
    raw_server: Callable[[bytes], str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # httpx logs the status line (reason phrase included) at INFO, httpcore the response
    # headers at DEBUG: a worker at the default log level printed both to stderr.
    monkeypatch.setenv(KEY_ENV, KEY)
    caplog.set_level(logging.DEBUG)
    base_url = raw_server(
        f"HTTP/1.1 401 {KEY}\r\nX-Echo: {KEY}\r\nWWW-Authenticate: Bearer {KEY}\r\n"
        "Content-Length: 0\r\n\r\n".encode()
    )
    endpoint = EndpointConfig(name="raw", base_url=base_url, api_key_env=KEY_ENV)
    async with ModelActivities(EndpointRegistry([endpoint])) as model:
        raised = await fail(model, request("raw"))

    assert failure_of(raised).status == 401
    assert any(r.name == "httpx" for r in caplog.records)  # the line is still logged
    assert leaked(everything_said(raised, caplog)) == []


async def test_an_unclassified_exception_is_raised_redacted(
    server: ScriptedServer,
    model: ModelActivities,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Something the reader did not foresee, whose text holds the key: Temporal would
    # have logged it and recorded it as the failure's message.
    async def explode(*args: Any, **kwargs: Any) -> AssembledTurn:
        raise RuntimeError(f"unforeseen, while holding {KEY}")

    monkeypatch.setattr("steadyloop._activities.model_stream.stream_turn", explode)

    raised = await fail(model)

    assert raised.type == "RuntimeError" and "unforeseen" in raised.message
    assert leaked(everything_said(raised, caplog)) == []


# -- item 6: hostile bodies always serialize and stay bounded ---------------------------


@pytest.mark.parametrize(
    "payload",
    [
        b'{"error": {"message": "half \\ud83d", "code": "\\udead", "type": "x\\u0000y"}}',
        b'{"error": {"message": "\xff\xfe bad utf-8 \xc3", "code": "c"}}',
        b"\x00\x00 NUL body \xed\xa0\xbd",  # an encoded lone surrogate, invalid UTF-8
    ],
    ids=["surrogates", "invalid-utf8", "nul-and-encoded-surrogate"],
)
async def test_hostile_error_bodies_serialize(
    server: ScriptedServer, model: ModelActivities, payload: bytes
) -> None:
    server.enqueue(raw_response(payload, status=500, content_type="application/json"))
    server.enqueue(raw_response(b"data: " + payload + b"\n\n"))

    for _ in range(2):
        raised = await fail(model)
        serializes(raised)
        assert "\x00" not in json.dumps(raised.details, ensure_ascii=False)


async def test_an_in_stream_error_with_lone_surrogates_serializes(
    server: ScriptedServer, model: ModelActivities
) -> None:
    data = '{"error": {"message": "half \\ud83d", "code": "\\udead", "type": "\\ud83d"}}'
    server.enqueue(raw_response(sse_event(data)))

    raised = await fail(model)

    assert failure_of(raised).kind == "stream_error"
    serializes(raised)


async def test_a_50_mb_error_body_gives_a_bounded_failure(
    server: ScriptedServer, model: ModelActivities, caplog: pytest.LogCaptureFixture
) -> None:
    huge = json.dumps({"error": {"message": "x" * (50 * 1024 * 1024), "code": KEY}}).encode()
    server.enqueue(raw_response(huge, status=500, content_type="application/json"))

    raised = await fail(model)

    serializes(raised)
    assert len(json.dumps(raised.details)) < 8 * 1024
    assert leaked(everything_said(raised, caplog)) == []


async def test_a_megabyte_in_stream_error_message_is_bounded(
    server: ScriptedServer, model: ModelActivities
) -> None:
    server.enqueue(sse_response([error_object("y" * 1_000_000, type="z" * 100_000)], done=False))

    raised = await fail(model)

    failure = failure_of(raised)
    assert len(failure.message) <= MESSAGE_CHARS + 40
    assert failure.provider_type is not None and len(failure.provider_type) <= 240
    assert len(raised.message) < MESSAGE_CHARS + 500


# -- the one redaction rule ---------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(max_size=600),
    after=st.text(max_size=600),
    cut_head=st.integers(0, len(KEY)),
    cut_tail=st.integers(0, len(KEY)),
    limit=st.integers(0, 1200),
)
def test_no_fragment_of_the_key_survives_any_cut(
    before: str, after: str, cut_head: int, cut_tail: int, limit: int
) -> None:
    # Any piece of the key (its head or tail lost to some earlier cut), anywhere, then
    # any final bound: no 8-character piece of the key is left.
    piece = KEY[cut_head : len(KEY) - cut_tail]
    text = before + piece + after + KEY
    out = safe_text(text, Secrets([KEY]), limit)
    assert leaked(out) == []
    out.encode("utf-8")


def test_redaction_keeps_what_is_not_the_key() -> None:
    secrets = Secrets([KEY])
    assert secrets.redact(f"code={KEY}; retry") == "code=[redacted]; retry"
    assert secrets.redact("nothing to hide") == "nothing to hide"
    # A key shorter than a fragment is still redacted where it occurs whole.
    assert Secrets(["abc1"]).redact("key abc1 here") == "key [redacted] here"
    assert not Secrets([None, ""])


def test_json_escaped_spellings_of_a_key_are_redacted() -> None:
    # Keys with `/` (base64 alphabets): PHP-style JSON writes it `\/`, and a raw body
    # excerpt shows the body as sent.
    key = "AbC/dEf+GhI/jKl=MnO/pQr"
    body = json.dumps({"error": {"message": key}}).replace("/", "\\/")
    assert "\\/" in body
    assert leaked(safe_text(body, Secrets([key]), 500), key) == []
    assert leaked(safe_text('"' + key + '"', Secrets([key]), 500), key) == []


async def test_stream_turn_raises_failures_already_redacted(server: ScriptedServer) -> None:
    # Callers of `stream_turn` without Temporal (benchmarks, their own client) log the
    # StreamFailed they get: it is redacted where it is raised, not only in the activity.
    server.enqueue(error_response(401, body={"error": {"code": KEY, "param": KEY}}))
    endpoint = server.endpoint("scripted")
    async with httpx.AsyncClient() as client:
        with pytest.raises(StreamFailed) as info:
            await stream_turn(client, endpoint, request(), api_key=KEY)
    assert leaked(str(info.value)) == []
    assert leaked(info.value.failure.model_dump_json()) == []


def test_failure_to_application_error_redacts_what_it_is_given() -> None:
    failure = StreamFailure(
        kind="http_status",
        status=401,
        message=KEY,
        provider_code=KEY,
        parameter=KEY,
        body_excerpt="x" * 480 + KEY,
    )
    error = failure_to_application_error(failure, secret=KEY)
    assert leaked(f"{error}{json.dumps(error.details)}") == []


def test_redact_failure_covers_every_text_field() -> None:
    # A field added to StreamFailure that holds free text must be bounded and redacted.
    text_fields = {
        name
        for name, field in StreamFailure.model_fields.items()
        if field.annotation in (str, str | None)
    }
    assert text_fields == set(TEXT_FIELDS)
    failure = StreamFailure(
        kind="http_status",
        **{name: f"{name} {KEY} \ud83d\x00" + "z" * 5000 for name in TEXT_FIELDS},
    )
    safe = redact_failure(failure, Secrets([KEY]))
    for name, limit in TEXT_FIELDS.items():
        value = getattr(safe, name)
        assert leaked(value) == [] and len(value) <= limit + 40
        value.encode("utf-8")
        assert "\x00" not in value


def test_transport_classifiers_redact_the_callers_secrets() -> None:
    body = json.dumps({"error": {"message": KEY, "code": KEY, "type": KEY, "param": KEY}})
    facts = classify_http_error(401, {}, body.encode(), secrets=[KEY])
    assert facts.category == "auth"
    assert leaked(facts.model_dump_json()) == []

    response = httpx.Response(401, content=body.encode(), request=httpx.Request("GET", "http://x"))
    status_error = httpx.HTTPStatusError("401", request=response.request, response=response)
    assert leaked(classify_transport_error(status_error, secrets=[KEY]).model_dump_json()) == []
    network = httpx.ConnectError(f"refused while sending {KEY}")
    assert leaked(classify_transport_error(network, secrets=[KEY]).model_dump_json()) == []


# -- item 7: absurd Retry-After values ---------------------------------------------------


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "1e300"}, RETRY_AFTER_CEILING_S),
        ({"retry-after": "inf"}, RETRY_AFTER_CEILING_S),
        ({"retry-after": "Infinity"}, RETRY_AFTER_CEILING_S),
        ({"retry-after": "9" * 10_000}, RETRY_AFTER_CEILING_S),  # 10 KB of digits
        ({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}, RETRY_AFTER_CEILING_S),
        ({"retry-after-ms": "1e300"}, RETRY_AFTER_CEILING_S),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "-inf"}, None),
        ({"retry-after": "x" * 10_000}, None),  # 10 KB of garbage
        ({"retry-after": "Mon, 01 Jan 99999 00:00:00 GMT"}, None),  # no such date
        ({"retry-after": "Mon, 01 Jan 0001 00:00:00 +2359"}, 0.0),  # far past: no wait
        ({"retry-after": "Thu, 01 Jan 2026 00:00:30 GMT"}, 30.0),
        ({"retry-after-ms": "nan", "retry-after": "4"}, 4.0),
    ],
)
def test_retry_after_is_bounded_or_ignored(headers: dict[str, str], expected: float | None) -> None:
    seconds = parse_retry_after(headers, now=NOW)
    assert seconds == expected
    if seconds is not None:
        timedelta(seconds=seconds)  # what the activity and the workflow compute with


async def test_retry_after_1e300_is_a_too_long_retry_after_not_a_lost_attempt(
    server: ScriptedServer, model: ModelActivities
) -> None:
    # The repro: a classified 429 that became `lost: OverflowError` and was retried 3
    # times, ignoring the header.
    server.enqueue(
        error_response(
            429, "slow down", type="requests", code="rate_limit_exceeded", retry_after="1e300"
        )
    )

    raised = await fail(model)

    failure = failure_of(raised)
    assert (raised.type, failure.status) == ("http_status", 429)
    assert failure.retry_after_s == RETRY_AFTER_CEILING_S
    facts = failure
    # Even a candidate that would wait a day (a run without a route) traverses, as for
    # any Retry-After longer than it waits; so does one with absurd patience.
    for patience in (86_400.0, 1e12):
        disposition = failure_disposition(facts, AttemptContext(max_retry_after_s=patience))
        assert (disposition.action, disposition.rule) == (
            "traverse",
            "rate_limit_retry_after_too_long",
        )


@pytest.mark.parametrize("value", [math.nan, -5.0, math.inf, 1e300])
def test_failure_facts_bound_any_retry_after(value: float) -> None:
    facts = StreamFailure(
        kind="http_status", category="rate_limit", status=429, retry_after_s=value
    )
    assert facts.retry_after_s is None or facts.retry_after_s <= RETRY_AFTER_CEILING_S
    disposition = failure_disposition(facts, AttemptContext())
    timedelta(seconds=disposition.delay_s)
    json.dumps(facts.model_dump(mode="json"), allow_nan=False)


# -- item 7: provider token counts that feed arithmetic ---------------------------------


async def test_absurd_usage_counts_are_left_out_and_cost_stays_finite(
    server: ScriptedServer, model: ModelActivities
) -> None:
    usage = (
        '{"choices": [], "usage": {"prompt_tokens": 1e300, "completion_tokens": -5, '
        '"total_tokens": "9", "prompt_tokens_details": {"cached_tokens": ' + "9" * 400 + "}}}"
    )
    server.enqueue(sse_response([*text_chunks("ok"), finish_chunk(), usage]))

    turn = await ActivityEnvironment().run(model.stream_completion, request())

    assert turn.usage == Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    assert math.isfinite(cost_of(turn.usage, Price(input=1.0, output=1.0)))


def test_cost_is_finite_for_any_reported_usage() -> None:
    price = Price(input=1_000_000.0, output=1_000_000.0, cached_input=1_000_000.0)
    huge = Usage(prompt_tokens=10**400, completion_tokens=10**400, cached_tokens=10**400)
    negative = Usage(prompt_tokens=-(10**400), completion_tokens=-1, cached_tokens=-1)
    for usage in (huge, negative):
        cost = cost_of(usage, price)
        assert math.isfinite(cost) and cost >= 0
    with pytest.raises(ValueError, match="less than or equal"):
        Price(input=1e300, output=1.0)
