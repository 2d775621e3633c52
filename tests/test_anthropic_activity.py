"""The model activity on the Anthropic Messages wire, over loopback HTTP against a scripted
server: what the workflow decides from each outcome (retry, wait, traverse, stop), not
only what the assembler makes of a body.

Each test follows a failure or a cut turn to the facts the workflow reads
(`facts_from_activity_error`) and the disposition its route table takes from them, so
a wrong classification shows up as the wrong decision: an overload not retried, a
Retry-After not waited for, a bad key retried, output shown twice, a call run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Literal

import httpx
import pytest
from anthropic_streams import (
    MESSAGE_STOP,
    MINIMAX_M3_ORPHANS,
    PING,
    Event,
    delta,
    json_delta,
    message_delta,
    message_start,
    sse,
    start,
    stop,
    text_delta,
)
from temporalio.exceptions import ApplicationError
from wire_activity_harness import WireEndpoint, activity_error

from steadyloop._activities.model_stream import failure_to_application_error, stream_turn
from steadyloop._output.forwarding import ForwardedOutput, ForwardTarget, OutputDelta
from steadyloop._routing.disposition import AttemptContext, Disposition, failure_disposition
from steadyloop._routing.pricing import Price, cost_of
from steadyloop._routing.route_plan import Backoff
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._stream.runaway_guard import TOOL_CALL_ARGUMENTS_TOO_LARGE
from steadyloop._workflows.routed_turn import facts_from_activity_error
from steadyloop.testing import Pause, ScriptedResponse, ScriptedServer, json_response, raw_response

KEY_ENV = "STEADYLOOP_TEST_ANTHROPIC_KEY"
KEY = "sk-ant-api03-0123456789abcdefXYZ-QRSTuvw"
BACKOFF = Backoff(initial_s=2.0)
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


CLAUDE = WireEndpoint("claude", "anthropic", "claude-sonnet-4-5", KEY_ENV, KEY)
request, activity, failed = CLAUDE.request, CLAUDE.activity, CLAUDE.failed


def seen_by_workflow(error: ApplicationError) -> StreamFailure:
    """The facts the routed-turn workflow reads from this activity failure."""
    return facts_from_activity_error(activity_error(error))


def decided(facts: StreamFailure, *, later_candidates: bool = True) -> Disposition:
    """The route table's decision for a first attempt of three, with `BACKOFF`."""
    context = AttemptContext(
        attempt=1, attempts=3, backoff=BACKOFF, later_candidates=later_candidates
    )
    return failure_disposition(facts, context)


def spaced(event: Event) -> bytes:
    """An event written with spaces (not Anthropic's compact bytes): the parsed reading."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def text_turn(*pieces: str) -> list[Event]:
    return [
        message_start(),
        start(0, {"type": "text", "text": ""}),
        *[text_delta(0, piece) for piece in pieces],
        stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]


def tool_use(index: int, call_id: str, fragments: Sequence[str]) -> list[Event]:
    block = {"type": "tool_use", "id": call_id, "name": "f", "input": {}}
    return [start(index, block), *[json_delta(index, f) for f in fragments], stop(index)]


# -- (1) the stall watchdog: pings and empty deltas are not progress ---------------------


@pytest.mark.parametrize(
    ("lead", "budgets", "phase", "budget"),
    [
        ([], {"first_token_s": 0.4, "inter_chunk_s": 10.0}, "before_first_token", "first_token_s"),
        (["Hi"], {"first_token_s": 10.0, "inter_chunk_s": 0.4}, "between_chunks", "inter_chunk_s"),
    ],
    ids=["before the first token", "after text"],
)
async def test_pings_and_empty_deltas_do_not_keep_a_silent_stream_alive(
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    lead: list[str],
    budgets: dict[str, float],
    phase: str,
    budget: str,
) -> None:
    """A server that only pings (and sends empty text deltas, compact and spaced, so both
    readings of a delta are held to it) for longer than the budget is a stall, not a
    live stream: the turn would otherwise hang until `total_s`."""
    opening = [message_start(), start(0, {"type": "text", "text": ""})]
    opening += [text_delta(0, piece) for piece in lead]
    parts: list[bytes | Pause] = [sse(opening)]
    for _ in range(24):  # about 1.2 s of keep-alives, each kind every 0.05 s
        parts += [Pause(0.05), sse([PING, text_delta(0, "")]) + spaced(text_delta(0, ""))]
    parts.append(sse([text_delta(0, " late"), stop(0), message_delta("end_turn"), MESSAGE_STOP]))
    server.enqueue(raw_response(parts))

    error = await failed(server, monkeypatch, **budgets)

    failure = StreamFailure.model_validate(error.details[0])
    assert (error.type, failure.stall_phase, failure.budget) == ("stall", phase, budget)
    assert error.non_retryable  # the route table decides, not Temporal
    facts = seen_by_workflow(error)
    assert (facts.kind, facts.stall_phase) == ("stall", phase)
    # Silent from the start: go elsewhere; silent mid-answer: the same endpoint again.
    assert decided(facts).action == ("traverse" if phase == "before_first_token" else "retry")
    # The watchdog dropped the connection instead of reading the rest of the body.
    exchange = server.exchanges[0]
    await asyncio.wait_for(exchange.ended.wait(), timeout=10)
    assert exchange.client_disconnected and not exchange.finished


# -- (2) the runaway-argument guard, per call ---------------------------------------------


async def test_each_call_is_held_to_the_bound_on_its_own(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two calls of 700 bytes and 3 fragments each, under bounds of 1000 bytes and 4
    fragments per call: together they pass both bounds, alone neither, so neither is
    cut. Empty `partial_json` fragments (llama.cpp, Anthropic's first delta) add nothing."""
    fragments = ["", '{"q":"', "", "x" * 692, "", '"}']
    events = [
        message_start(),
        *tool_use(0, "toolu_1", fragments),
        *tool_use(1, "toolu_2", fragments),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    server.enqueue(raw_response([sse(events[:4]), Pause(0.02), sse(events[4:])]))
    limits = ArgumentLimits(max_args_bytes=1000, max_args_fragments=4)

    turn = await activity(server, monkeypatch, argument_limits=limits)

    arguments = '{"q":"' + "x" * 692 + '"}'
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [
        ("toolu_1", arguments),
        ("toolu_2", arguments),
    ]
    assert turn.defects == [] and turn.stats.cut_by_guard is None


@pytest.mark.parametrize("mode", ["enforce", "observe"])
async def test_the_call_that_runs_away_is_cut_and_the_stream_is_not_read_on(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, mode: Literal["enforce", "observe"]
) -> None:
    """The second call streams 2400 bytes past a bound of 1000: reading stops at that
    read (the error event the server sends later is never seen), the breach names that
    call, and enforce drops every call while observe keeps the first one intact."""
    honest = tool_use(0, "toolu_1", ['{"q":"ok"}'])
    runaway = tool_use(1, "toolu_2", ['{"q":"', *["x" * 600] * 4])[:-1]  # still open
    server.enqueue(
        raw_response(
            [
                sse([message_start(), *honest]),
                Pause(0.02),
                sse(runaway),
                Pause(0.3),
                sse([OVERLOADED]),
            ]
        )
    )
    limits = ArgumentLimits(max_args_bytes=1000, mode=mode)

    turn = await activity(server, monkeypatch, argument_limits=limits)

    assert turn.stats.cut_by_guard == TOOL_CALL_ARGUMENTS_TOO_LARGE
    if mode == "enforce":
        assert turn.tool_calls == []
        [defect] = turn.defects
        assert (defect.kind, defect.tool_call_id) == (TOOL_CALL_ARGUMENTS_TOO_LARGE, "toolu_2")
        assert "tool call #2" in defect.detail
    else:
        first, cut = turn.tool_calls
        assert (first.id, first.arguments) == ("toolu_1", '{"q":"ok"}')
        assert cut.id == "toolu_2"
        with pytest.raises(json.JSONDecodeError):
            json.loads(cut.arguments)
        assert turn.finish_reason == "tool_calls"


# -- (3) produced_output -------------------------------------------------------------------


async def forwarding(
    server: ScriptedServer, forward: ForwardTarget
) -> tuple[StreamFailed, list[OutputDelta]]:
    """The stream read as the activity reads one that forwards (the sink is the host)."""
    shown: list[OutputDelta] = []
    async with httpx.AsyncClient() as client:
        with pytest.raises(StreamFailed) as info:
            await stream_turn(
                client,
                server.endpoint("claude", api="anthropic"),
                request(forward=forward),
                api_key=KEY,
                sink=lambda piece, first: shown.append(piece),
            )
    return info.value, shown


def raised(failed: StreamFailed) -> ApplicationError:
    """What the activity raises for it (`ModelActivities.stream_completion`)."""
    shown = ForwardedOutput(text=failed.shown_text, reasoning=failed.shown_reasoning)
    return failure_to_application_error(failed.failure, secret=KEY, shown=shown)


async def test_an_overload_after_forwarded_text_is_a_stop_not_a_retry(
    server: ScriptedServer,
) -> None:
    """An overload is retried, except once a person saw text: a retry would show a second
    answer after the first, so the attempt stops and reports what was shown."""
    head = [message_start(), start(0, {"type": "text", "text": ""}), text_delta(0, "Hello")]
    server.enqueue(raw_response([sse(head), Pause(0.05), sse([OVERLOADED])]))

    failed, shown = await forwarding(server, ForwardTarget(stream_id="s", turn=1, attempt=1))

    assert [piece.text for piece in shown] == ["Hello"]
    assert failed.failure.produced_output and failed.shown_text == "Hello"
    error = raised(failed)
    assert error.non_retryable
    assert ForwardedOutput.model_validate(error.details[1]).text == "Hello"
    facts = seen_by_workflow(error)
    assert (facts.category, facts.produced_output) == ("server_error", True)
    assert decided(facts).action == "stop" and decided(facts).rule == "produced_output"


@pytest.mark.parametrize("reasoning_is_output", [True, False])
async def test_forwarded_thinking_is_output_only_where_reasoning_counts(
    server: ScriptedServer, reasoning_is_output: bool
) -> None:
    """Thinking deltas are forwarded as reasoning either way; they make the attempt's
    output seen (so a cut stream after them is not repeated) only where the run shows
    reasoning as output."""
    thinking = start(0, {"type": "thinking", "thinking": "", "signature": ""})
    head = [message_start(), thinking, delta(0, type="thinking_delta", thinking="Let me see")]
    server.enqueue(raw_response([sse(head), Pause(0.05)]))  # ends without message_stop
    forward = ForwardTarget(
        stream_id="s", turn=1, attempt=1, reasoning_is_output=reasoning_is_output
    )

    failed, shown = await forwarding(server, forward)

    assert [(piece.kind, piece.text) for piece in shown] == [("reasoning", "Let me see")]
    assert failed.failure.kind == "truncated_stream"
    assert failed.failure.produced_output is reasoning_is_output
    assert failed.shown_reasoning == ("Let me see" if reasoning_is_output else "")
    error = raised(failed)
    assert error.non_retryable
    assert decided(seen_by_workflow(error)).action == ("stop" if reasoning_is_output else "retry")


# -- (4) classification: overload, rate limit, key and quota --------------------------------


OVERLOAD_ANSWERS: dict[str, ScriptedResponse] = {
    "HTTP 529": json_response(OVERLOADED, status=529),
    "overloaded_error mid-stream": raw_response(
        [sse([message_start(), start(0, {"type": "text", "text": ""})]), sse([OVERLOADED])]
    ),
}


@pytest.mark.parametrize("answer", OVERLOAD_ANSWERS.values(), ids=OVERLOAD_ANSWERS.keys())
async def test_an_overload_is_a_server_error_retried_after_the_backoff(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, answer: ScriptedResponse
) -> None:
    """Anthropic's 529 and its in-stream `overloaded_error` mean the provider is busy for
    everyone: retried, after the backoff (no Retry-After came), the breaker told."""
    server.enqueue(answer)

    error = await failed(server, monkeypatch)

    assert error.non_retryable and error.next_retry_delay is None
    facts = seen_by_workflow(error)
    assert (facts.category, facts.provider_type) == ("server_error", "overloaded_error")
    assert facts.kind == ("http_status" if error.type == "http_status" else "stream_error")
    disposition = decided(facts)
    assert (disposition.action, disposition.rule) == ("retry", "server_error")
    assert disposition.delay_s == BACKOFF.delay(1) and disposition.record_failure


async def test_a_rate_limit_waits_as_long_as_retry_after_says(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 `rate_limit_error` is retried no sooner than its `retry-after` (here longer
    than the backoff): the route table's wait."""
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your per-minute rate limit",
        },
    }
    headers = {"retry-after": "17", "anthropic-ratelimit-tokens-remaining": "0"}
    server.enqueue(json_response(body, status=429, headers=headers))

    error = await failed(server, monkeypatch)

    assert error.non_retryable and error.next_retry_delay is None
    facts = seen_by_workflow(error)
    assert (facts.category, facts.retry_after_s) == ("rate_limit", 17.0)
    disposition = decided(facts)
    assert (disposition.action, disposition.delay_s) == ("retry", 17.0)


NOT_RETRIED: list[tuple[str, int, str, str, str]] = [
    ("bad key", 401, "authentication_error", "invalid x-api-key", "auth"),
    (
        "no permission",
        403,
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
        "auth",
    ),
    (
        "out of credit",
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits.",
        "quota",
    ),
    (
        # The monthly spend limit an organization set (anthropics/claude-code#2127, #38035).
        "spend limit",
        400,
        "invalid_request_error",
        "You have reached your specified API usage limits. You will regain access on "
        "2026-04-01 at 00:00 UTC.",
        "quota",
    ),
    (
        "billing",
        402,
        "billing_error",
        "There is an issue with your billing or payment information.",
        "quota",
    ),
]


@pytest.mark.parametrize(
    ("status", "kind", "message", "category"),
    [case[1:] for case in NOT_RETRIED],
    ids=[case[0] for case in NOT_RETRIED],
)
async def test_a_key_or_quota_the_endpoint_refuses_is_not_retried(
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    kind: str,
    message: str,
    category: str,
) -> None:
    """Another attempt with the same key or account gets the same answer: not retried by
    Temporal, and the route goes on to the next endpoint, its breaker told (the endpoint
    is unusable for every run, not only this request)."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    server.enqueue(json_response(body, status=status))

    error = await failed(server, monkeypatch)

    assert error.type == "http_status" and error.non_retryable
    facts = seen_by_workflow(error)
    assert (facts.status, facts.category) == (status, category)
    disposition = decided(facts)
    assert (disposition.action, disposition.record_failure) == ("traverse", True)
    assert decided(facts, later_candidates=False).action == "traverse"  # not even when last


# -- (4b) frames for a block never started --------------------------------------------------


async def test_minimax_orphan_frames_are_read_through_the_activity(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MiniMax-M3's stream (MadAppGang/claudish#200) is a whole turn, every attempt: the
    frames for an index 0 never started carry nothing, so no defect spends a retry."""
    events = text_turn("Hello", " there")
    server.enqueue(raw_response(sse([events[0], *MINIMAX_M3_ORPHANS, *events[1:]])))
    turn = await activity(server, monkeypatch)
    assert (turn.text, turn.finish_reason, turn.defects) == ("Hello there", "stop", [])
    assert len(server.requests) == 1
    assert any("never started" in note for note in turn.stats.notes)


# -- (5) usage with the prompt cache, and its cost ------------------------------------------


async def test_usage_counts_the_cache_and_prices_it_through_the_activity(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic's `input_tokens` leave the cache out; the turn's prompt puts it back (as
    OpenAI counts it), so a price with `cached_in_input` bills each token once: reads at
    the cached price, writes at the cache-write price (the input price when unset)."""
    events = text_turn("Hi")
    events[0] = message_start(
        input_tokens=12,
        cache_creation_input_tokens=1000,
        cache_read_input_tokens=3000,
        output_tokens=1,
    )
    events[-2] = message_delta("end_turn", output_tokens=50)  # restates the output only
    server.enqueue(raw_response(sse(events)))

    turn = await activity(server, monkeypatch)

    [sent] = server.requests
    assert sent.path == "/v1/messages" and sent.header("x-api-key") == KEY
    usage = turn.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (4012, 50, 4062)
    assert (usage.cached_tokens, usage.cache_creation_tokens) == (3000, 1000)
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write_input=3.75)
    # 12 x $3 + 1000 x $3.75 + 3000 x $0.30 + 50 x $15, per million tokens.
    expected = 12 * 3.0 + 1000 * 3.75 + 3000 * 0.3 + 50 * 15.0
    assert cost_of(usage, price) == pytest.approx(expected / 1e6)
    no_write_price = price.model_copy(update={"cache_write_input": None})
    assert cost_of(usage, no_write_price) == pytest.approx((expected - 1000 * 0.75) / 1e6)


# -- (6) the key, echoed in an error, is redacted from every field --------------------------


ECHOES: dict[str, ScriptedResponse] = {
    "HTTP 401 body": json_response(
        {
            "type": "error",
            "error": {
                "type": KEY,
                "message": f"invalid x-api-key: {KEY}",
                "code": f"key {KEY[:14]}",
                "param": KEY,
            },
            "request_id": KEY,
        },
        status=401,
    ),
    "error event": raw_response(
        sse(
            [
                message_start(),
                {
                    "type": "error",
                    "error": {
                        "type": f"overloaded_error for {KEY}",
                        "message": f"Overloaded ({KEY})",
                        "code": KEY[-12:],
                    },
                },
            ]
        )
    ),
    "refusal": raw_response(
        sse(
            [
                message_start(),
                message_delta(
                    "refusal",
                    stop_details={"category": KEY, "explanation": f"the key {KEY} was seen"},
                ),
            ]
        )
    ),
}


@pytest.mark.parametrize("answer", ECHOES.values(), ids=ECHOES.keys())
async def test_a_key_echoed_in_an_error_leaves_no_trace_in_any_field(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, answer: ScriptedResponse
) -> None:
    """A provider may quote the key it was sent in any string of its error; the failure
    crosses into workflow history and logs, so no field may carry the key or a piece of
    it long enough to matter (8 characters or more), and the failure is still classified."""
    server.enqueue(answer)

    error = await failed(server, monkeypatch)

    failure = StreamFailure.model_validate(error.details[0])
    fields = {
        "message": failure.message,
        "provider_code": failure.provider_code,
        "provider_type": failure.provider_type,
        "parameter": failure.parameter,
        "body_excerpt": failure.body_excerpt,
    }
    leaked = {
        name: value
        for name, value in {
            **fields,
            "error": str(error),
            "details": json.dumps(error.details),
        }.items()
        if value is not None and any(KEY[i : i + 8] in value for i in range(len(KEY) - 7))
    }
    assert leaked == {}
    assert failure.body_excerpt and "[redacted]" in failure.body_excerpt
    assert error.type in ("http_status", "stream_error")
    assert seen_by_workflow(error).category is not None
