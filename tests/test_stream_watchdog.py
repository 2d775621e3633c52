"""The stall watchdog, over real HTTP against the scripted server, and its rules alone.

Each fault-injection test asserts what decides the outcome downstream: the failure's
kind, phase and budget (or the turn, when nothing stalled), that the connection was
closed (the server saw the client go), and whether Temporal may retry the attempt.
Budgets are a few tenths of a second so every test is fast.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities import ModelActivities
from steadyloop._chat import ChatMessage
from steadyloop._routing.disposition import failure_row
from steadyloop._routing.endpoints import EndpointConfig, EndpointConfigError, EndpointRegistry
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.watchdog import (
    DEFAULT_FIRST_TOKEN_S,
    DEFAULT_INTER_CHUNK_S,
    DEFAULT_REASONING_GAP_S,
    DEFAULT_TOTAL_S,
    GAP_SLACK,
    StreamWatchdog,
)
from steadyloop.testing import (
    Exchange,
    Pause,
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    chunk,
    finish_chunk,
    reasoning_chunks,
    sse_response,
    text_chunks,
)

BUDGETS = ("first_token_s", "reasoning_gap_s", "inter_chunk_s", "total_s")


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


def request(endpoint: str = "watched") -> CompletionRequest:
    return CompletionRequest(
        endpoint=endpoint,
        model="scripted-model",
        messages=[ChatMessage(role="user", content="Hello?")],
    )


async def run(endpoint: EndpointConfig, env: ActivityEnvironment | None = None) -> AssembledTurn:
    # Every read reports: a test that waits for the stream to start watches heartbeats.
    async with ModelActivities(EndpointRegistry([endpoint]), long_stream_heartbeat_s=0) as model:
        return await (env or ActivityEnvironment()).run(
            model.stream_completion, request(endpoint.name)
        )


async def stall_of(endpoint: EndpointConfig) -> tuple[StreamFailure, ApplicationError, float]:
    started = time.monotonic()
    with pytest.raises(ApplicationError) as info:
        await run(endpoint)
    elapsed = time.monotonic() - started
    error = info.value
    failure = StreamFailure.model_validate(error.details[0])
    assert error.type == failure.kind
    return failure, error, elapsed


async def the_exchange(server: ScriptedServer) -> Exchange:
    [exchange] = server.exchanges
    await asyncio.wait_for(exchange.ended.wait(), 2.0)
    return exchange


def watched(server: ScriptedServer, **budgets: Any) -> EndpointConfig:
    return server.endpoint("watched", **budgets)


# -- stalls ----------------------------------------------------------------------------


async def test_a_stall_before_the_first_token(server: ScriptedServer) -> None:
    # A role chunk arrives at once, then nothing: the role chunk is not a token.
    server.enqueue(sse_response([chunk({"role": "assistant"}), Pause(5.0), *text_chunks("late")]))

    failure, error, elapsed = await stall_of(watched(server, first_token_s=0.3))

    assert failure.kind == "stall"
    assert failure.stall_phase == "before_first_token"
    assert (failure.budget, failure.budget_s) == ("first_token_s", 0.3)
    assert "first_token_s=0.3" in failure.message
    assert 0.3 <= elapsed < 2.0
    assert error.non_retryable  # the workflow's route table decides, not Temporal
    assert failure_row(failure) == "stall_before_first_token"
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished
    assert len(server.exchanges) == 1  # the activity itself does not retry


async def test_a_stall_before_the_response_headers(server: ScriptedServer) -> None:
    async def slow(_: RecordedRequest) -> ScriptedResponse:
        await asyncio.sleep(0.6)
        return sse_response([Pause(5.0), *text_chunks("late")])

    server_slow = ScriptedServer(slow)
    async with server_slow:
        failure, error, elapsed = await stall_of(server_slow.endpoint("watched", first_token_s=0.3))
        exchange = await the_exchange(server_slow)

    assert (failure.kind, failure.stall_phase, failure.budget) == (
        "stall",
        "before_first_token",
        "first_token_s",
    )
    assert elapsed < 0.6 + 0.5
    assert error.non_retryable  # every failure: the route table decides
    assert exchange.client_disconnected


async def test_keep_alive_comments_do_not_extend_the_first_token_budget(
    server: ScriptedServer,
) -> None:
    pings: list[Any] = []
    for _ in range(50):
        pings += [b": OPENROUTER PROCESSING\n\n", Pause(0.05)]
    server.enqueue(sse_response([*pings, *text_chunks("late")]))

    failure, _, elapsed = await stall_of(watched(server, first_token_s=0.3))

    assert (failure.stall_phase, failure.budget) == ("before_first_token", "first_token_s")
    assert elapsed < 1.5
    assert (await the_exchange(server)).client_disconnected


async def test_a_stall_between_chunks(server: ScriptedServer) -> None:
    server.enqueue(
        sse_response([*text_chunks("Hello there,"), Pause(5.0), *text_chunks(" friend.")])
    )

    failure, error, elapsed = await stall_of(watched(server, first_token_s=2.0, inter_chunk_s=0.3))

    assert failure.kind == "stall"
    assert (failure.stall_phase, failure.budget, failure.budget_s) == (
        "between_chunks",
        "inter_chunk_s",
        0.3,
    )
    assert elapsed < 1.5
    assert error.non_retryable  # every failure: the route table decides
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished


async def test_a_slow_but_steady_stream_is_not_a_stall(server: ScriptedServer) -> None:
    # Every gap is under the inter-chunk budget; the whole stream outlasts the first-token
    # budget and three gaps together: the budget is re-armed by each chunk.
    parts: list[Any] = []
    for word in ["one", " two", " three", " four", " five", " six"]:
        parts += [chunk({"content": word}), Pause(0.15)]
    server.enqueue(sse_response([*parts, finish_chunk()]))

    turn = await run(watched(server, first_token_s=0.5, inter_chunk_s=0.4, total_s=5.0))

    assert turn.text == "one two three four five six"
    assert turn.finish_reason == "stop"
    exchange = await the_exchange(server)
    assert exchange.finished


async def test_an_endless_stream_hits_the_total_cap(server: ScriptedServer) -> None:
    parts: list[Any] = []
    for n in range(400):
        parts += [chunk({"content": f" {n}"}), Pause(0.05)]
    server.enqueue(sse_response(parts))

    failure, error, elapsed = await stall_of(
        watched(server, first_token_s=0.3, inter_chunk_s=0.3, total_s=0.6)
    )

    assert (failure.kind, failure.stall_phase, failure.budget, failure.budget_s) == (
        "stall",
        "total_cap",
        "total_s",
        0.6,
    )
    assert 0.6 <= elapsed < 2.0
    assert error.non_retryable  # every failure: the route table decides
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished


# -- reasoning ---------------------------------------------------------------------------


async def test_a_reasoning_model_thinking_past_the_inter_chunk_budget_is_not_killed(
    server: ScriptedServer,
) -> None:
    parts: list[Any] = []
    for thought in reasoning_chunks(["Let", " me", " think", " hard."]):
        parts += [thought, Pause(0.4)]  # twice the inter-chunk budget, each time
    server.enqueue(sse_response([*parts, *text_chunks("42", role=False), finish_chunk()]))

    turn = await run(
        watched(server, first_token_s=1.0, reasoning_gap_s=1.0, inter_chunk_s=0.2, total_s=5.0)
    )

    assert turn.reasoning == "Let me think hard."
    assert turn.text == "42"
    assert turn.finish_reason == "stop"


async def test_reasoning_that_goes_silent_past_the_reasoning_gap_stalls(
    server: ScriptedServer,
) -> None:
    server.enqueue(
        sse_response([*reasoning_chunks("Let me think"), Pause(5.0), *text_chunks("42")])
    )

    failure, error, elapsed = await stall_of(
        watched(server, first_token_s=1.0, reasoning_gap_s=0.4, inter_chunk_s=0.2)
    )

    assert (failure.stall_phase, failure.budget, failure.budget_s) == (
        "between_chunks",
        "reasoning_gap_s",
        0.4,
    )
    assert 0.4 <= elapsed < 1.5
    assert error.non_retryable  # every failure: the route table decides
    assert (await the_exchange(server)).client_disconnected


# Keep-alives a server may send while it hangs: none is content.
KEEP_ALIVES: dict[str, bytes | dict[str, Any]] = {
    "comment": b": ping\n\n",
    "empty data": b"data:\n\n",
    "choices []": chunk(choices=[]),
    "empty delta": chunk({}),
    "role and empty content": chunk({"role": "assistant", "content": ""}),
    "empty tool_calls": chunk({"tool_calls": []}),
    "ping event": b'event: ping\ndata: {"type":"ping"}\n\n',
}


def pinging(kind: str, seconds: float = 3.0, every: float = 0.05) -> list[Any]:
    ping = KEEP_ALIVES[kind]
    return [part for _ in range(int(seconds / every)) for part in (ping, Pause(every))]


@pytest.mark.parametrize("kind", list(KEEP_ALIVES))
async def test_keep_alives_after_the_first_token_do_not_hold_a_hung_stream(
    server: ScriptedServer, kind: str
) -> None:
    server.enqueue(sse_response([*text_chunks("Hello"), *pinging(kind), *text_chunks(" never")]))

    failure, error, elapsed = await stall_of(
        watched(server, first_token_s=2.0, inter_chunk_s=0.3, total_s=30.0)
    )

    assert (failure.stall_phase, failure.budget) == ("between_chunks", "inter_chunk_s")
    assert elapsed < 1.5  # not held until the pings stop, nor until total_s
    assert error.non_retryable  # every failure: the route table decides
    assert (await the_exchange(server)).client_disconnected


async def test_keep_alives_while_reasoning_do_not_hold_a_hung_stream(
    server: ScriptedServer,
) -> None:
    server.enqueue(
        sse_response(
            [*reasoning_chunks("Let me think"), *pinging("empty delta"), *text_chunks("42")]
        )
    )

    failure, _, elapsed = await stall_of(
        watched(server, first_token_s=2.0, reasoning_gap_s=0.4, inter_chunk_s=0.2)
    )

    assert (failure.stall_phase, failure.budget) == ("between_chunks", "reasoning_gap_s")
    assert elapsed < 1.5


async def test_keep_alives_before_the_first_token_neither_extend_nor_shorten_its_budget(
    server: ScriptedServer,
) -> None:
    """Before the first token only a token counts: keep-alives change nothing, whatever
    their kind (the budget is a deadline from the request)."""
    server.enqueue(sse_response([*pinging("choices []", seconds=0.6), *text_chunks("late")]))
    turn = await run(watched(server, first_token_s=1.0, inter_chunk_s=0.2))
    assert turn.text == "late"  # 0.6 s of pings under a 1 s budget: no stall
    server.enqueue(sse_response([*pinging("empty data"), *text_chunks("never")]))
    failure, _, elapsed = await stall_of(watched(server, first_token_s=0.3))
    assert (failure.stall_phase, failure.budget) == ("before_first_token", "first_token_s")
    assert elapsed < 1.5


async def test_slow_tool_call_fragments_usage_and_finish_are_progress(
    server: ScriptedServer,
) -> None:
    """Content that is not text keeps a stream alive: tool-call fragments, a finish
    reason and usage each arrive just inside the inter-chunk budget."""
    fragments = ['{"q', '":', ' "x', '"}']
    parts: list[Any] = [
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "search"}}]}),
        Pause(0.2),
    ]
    for fragment in fragments:
        parts += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})]
        parts += [Pause(0.2)]
    parts += [finish_chunk("tool_calls"), Pause(0.2)]
    parts += [chunk(choices=[], usage={"prompt_tokens": 1, "completion_tokens": 2}), Pause(0.2)]
    server.enqueue(sse_response(parts))

    turn = await run(watched(server, first_token_s=1.0, inter_chunk_s=0.35, total_s=10.0))

    [call] = turn.tool_calls
    assert (call.name, call.arguments) == ("search", '{"q": "x"}')
    assert turn.usage is not None and turn.usage.completion_tokens == 2


def test_a_keep_alive_does_not_re_arm_the_gap() -> None:
    dog = StreamWatchdog(started=0.0, first_token_s=10, inter_chunk_s=1.6, total_s=1000)
    assert dog.progress(1.0, first_token=True, answer_token=True) is True
    armed = dog.deadline
    for now in (2.0, 2.5, 2.9):
        assert dog.progress(now, first_token=True, answer_token=True, content=False) is False
        assert dog.deadline == armed
    assert dog.stall(armed or 0).budget == "inter_chunk_s"
    # Content is measured only once the slack is used up: before that nothing re-arms.
    dog = StreamWatchdog(started=0.0, first_token_s=10, inter_chunk_s=1.6, total_s=1000)
    assert not dog.wants_content(0.5)  # still waiting for the first token
    assert dog.progress(1.0, first_token=True, answer_token=True, content=None) is True
    assert not dog.wants_content(1.1) and dog.wants_content(1.11)
    assert dog.progress(1.05, first_token=True, answer_token=True, content=None) is False
    assert dog.progress(1.2, first_token=True, answer_token=True, content=True) is True
    # A keep-alive on the read that changes the phase still switches the budget.
    dog = StreamWatchdog(started=0.0, first_token_s=10, inter_chunk_s=1.6, total_s=1000)
    assert dog.progress(1.0, first_token=True, answer_token=True, content=False) is True


async def test_the_tight_budget_starts_at_the_first_answer_token(
    server: ScriptedServer,
) -> None:
    server.enqueue(
        sse_response(
            [
                *reasoning_chunks("Thinking."),
                Pause(0.1),
                *text_chunks("The answer", role=False),
                Pause(0.6),  # within the reasoning gap, past the inter-chunk budget
                *text_chunks(" is 42.", role=False),
            ]
        )
    )

    failure, _, _ = await stall_of(
        watched(server, first_token_s=1.0, reasoning_gap_s=1.0, inter_chunk_s=0.3)
    )

    assert (failure.stall_phase, failure.budget) == ("between_chunks", "inter_chunk_s")
    assert (await the_exchange(server)).client_disconnected


# -- not stalls ------------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["close", "reset"])
async def test_a_disconnect_mid_stream_is_a_network_failure_not_a_stall(
    server: ScriptedServer, ending: str
) -> None:
    chunks = [*text_chunks("Hello there, friend."), finish_chunk()]
    server.enqueue(sse_response(chunks, cut_after_bytes=200, ending=ending))  # type: ignore[arg-type]

    failure, error, _ = await stall_of(
        watched(server, first_token_s=0.5, inter_chunk_s=0.5, total_s=1.0)
    )

    assert failure.kind == "network"
    assert failure.stall_phase is None and failure.budget is None
    assert error.non_retryable  # every failure: the route table decides
    exchange = await the_exchange(server)
    assert exchange.finished  # the server closed it, as scripted


async def test_a_cancelled_activity_raises_cancellation_not_a_stall(
    server: ScriptedServer,
) -> None:
    server.enqueue(sse_response([*text_chunks("Hello there,"), Pause(10.0), *text_chunks("x")]))
    env = ActivityEnvironment()
    heartbeats: list[Any] = []
    env.on_heartbeat = lambda *details: heartbeats.append(details)
    endpoint = watched(server, first_token_s=5.0, inter_chunk_s=5.0, total_s=10.0)

    task = asyncio.ensure_future(run(endpoint, env))
    deadline = time.monotonic() + 3.0
    while not heartbeats and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert heartbeats, "the stream never started"
    started = time.monotonic()
    env.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.0
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished


async def test_a_stream_within_every_budget_is_untouched(server: ScriptedServer) -> None:
    server.enqueue(sse_response([*text_chunks("All good."), finish_chunk()]))

    turn = await run(watched(server, first_token_s=0.5, inter_chunk_s=0.5, total_s=1.0))

    assert (turn.text, turn.finish_reason) == ("All good.", "stop")


async def test_disabled_budgets_never_fire(server: ScriptedServer) -> None:
    server.enqueue(sse_response([Pause(0.3), *text_chunks("late"), Pause(0.3), finish_chunk()]))

    turn = await run(
        watched(server, first_token_s=None, inter_chunk_s=None, reasoning_gap_s=None, total_s=None)
    )

    assert turn.text == "late"


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("field", BUDGETS)
@pytest.mark.parametrize("value", [0, 0.0, -1.0, math.nan, math.inf, -math.inf])
def test_a_non_finite_zero_or_negative_budget_is_refused(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as info:
        EndpointConfig(name="e", base_url="http://127.0.0.1:1/v1", **{field: value})
    assert field in str(info.value)
    with pytest.raises(ValueError, match=field):
        StreamWatchdog(started=0.0, **{field: value})


@pytest.mark.parametrize("field", BUDGETS)
@pytest.mark.parametrize("off", [None, False])
def test_none_disables_a_budget(field: str, off: bool | None) -> None:
    endpoint = EndpointConfig(name="e", base_url="http://127.0.0.1:1/v1", **{field: off})
    assert getattr(endpoint, field) is None


def test_true_is_not_a_budget() -> None:
    with pytest.raises(ValidationError):
        EndpointConfig(name="e", base_url="http://127.0.0.1:1/v1", total_s=True)


def test_a_bad_budget_in_json_configuration_names_the_field() -> None:
    with pytest.raises(EndpointConfigError, match="inter_chunk_s"):
        EndpointRegistry.from_json('{"a": {"base_url": "http://x/v1", "inter_chunk_s": 0}}')


def test_documented_defaults() -> None:
    endpoint = EndpointConfig(name="e", base_url="http://127.0.0.1:1/v1")
    assert (endpoint.first_token_s, endpoint.reasoning_gap_s) == (120.0, 120.0)
    assert (endpoint.inter_chunk_s, endpoint.total_s) == (30.0, 600.0)
    assert (DEFAULT_FIRST_TOKEN_S, DEFAULT_REASONING_GAP_S) == (120.0, 120.0)
    assert (DEFAULT_INTER_CHUNK_S, DEFAULT_TOTAL_S) == (30.0, 600.0)


# -- the rules alone -------------------------------------------------------------------


def test_the_first_token_budget_is_a_deadline_from_the_request() -> None:
    dog = StreamWatchdog(started=100.0, first_token_s=10, inter_chunk_s=2, total_s=60)
    assert dog.deadline == 110.0
    # Events without a token (a role chunk) do not move it.
    assert dog.progress(105.0, first_token=False, answer_token=False) is False
    assert dog.deadline == 110.0
    failure = dog.stall(110.0)
    assert (failure.stall_phase, failure.budget, failure.budget_s) == (
        "before_first_token",
        "first_token_s",
        10.0,
    )


def armed_after(dog: StreamWatchdog, now: float, *, answer: bool = True) -> float:
    """The deadline in force after progress at `now` (re-armed or not)."""
    dog.progress(now, first_token=True, answer_token=answer)
    assert dog.deadline is not None
    return dog.deadline


def test_a_gap_deadline_is_never_early_and_at_most_a_sixteenth_late() -> None:
    dog = StreamWatchdog(started=0.0, first_token_s=10, inter_chunk_s=1.6, total_s=1000)
    now = 1.0
    while now < 50.0:
        deadline = armed_after(dog, now)
        assert now + 1.6 <= deadline <= now + 1.6 * (1 + GAP_SLACK) + 1e-9
        now += 0.013
    assert dog.stall(now).budget == "inter_chunk_s"


def test_progress_re_arms_only_when_the_slack_is_used_up() -> None:
    dog = StreamWatchdog(started=0.0, first_token_s=10, inter_chunk_s=1.6, total_s=1000)
    assert dog.progress(1.0, first_token=True, answer_token=True) is True  # phase change
    assert dog.progress(1.05, first_token=True, answer_token=True) is False
    assert dog.progress(1.11, first_token=True, answer_token=True) is True  # past 1 + 0.1


def test_phases_switch_budgets_at_once() -> None:
    dog = StreamWatchdog(
        started=0.0, first_token_s=10, reasoning_gap_s=8, inter_chunk_s=2, total_s=60
    )
    assert dog.progress(3.0, first_token=True, answer_token=False) is True  # reasoning
    assert 11.0 <= (dog.deadline or 0) <= 11.5
    assert dog.stall(11.5).budget == "reasoning_gap_s"
    assert dog.progress(4.0, first_token=True, answer_token=True) is True  # answering
    assert 6.0 <= (dog.deadline or 0) <= 6.125
    failure = dog.stall(6.125)
    assert (failure.stall_phase, failure.budget) == ("between_chunks", "inter_chunk_s")


def test_the_total_cap_bounds_every_phase() -> None:
    dog = StreamWatchdog(started=0.0, first_token_s=10, inter_chunk_s=2, total_s=6)
    assert dog.deadline == 6.0
    assert armed_after(dog, 5.0) == 6.0
    failure = dog.stall(6.0)
    assert (failure.stall_phase, failure.budget, failure.budget_s) == (
        "total_cap",
        "total_s",
        6.0,
    )


def test_no_budgets_no_deadline() -> None:
    dog = StreamWatchdog(
        started=0.0, first_token_s=None, inter_chunk_s=None, reasoning_gap_s=None, total_s=None
    )
    assert dog.deadline is None
    dog.progress(1.0, first_token=True, answer_token=True)
    assert dog.deadline is None


def test_a_stall_selects_a_stall_row() -> None:
    failure = StreamWatchdog(started=0.0).stall(120.0)
    assert failure.kind == "stall"
    assert failure_row(failure) in ("stall_before_first_token", "stall_mid_stream")
