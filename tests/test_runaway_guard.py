"""The runaway-argument guard, over real HTTP against the scripted server, and alone.

The fault-injection tests assert what decides the outcome downstream: the turn the
activity returns (no dispatchable call and the guard's code first among the defects
when enforcing; the cut call kept, unparseable, and no defect when observing), that
the upstream connection was closed at once (the server saw the client go mid-body),
and that the activity returned a value (no Temporal retry of the attempt).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities import ModelActivities
from steadyloop._chat import ChatMessage
from steadyloop._routing.endpoints import EndpointConfig, EndpointConfigError, EndpointRegistry
from steadyloop._stream.argument_limits import DEFAULT_MAX_ARGS_BYTES, ArgumentLimits
from steadyloop._stream.arguments import parse_tool_call_arguments
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.defects import DEFECT_RETRY_BUDGETS
from steadyloop._stream.runaway_guard import (
    TOOL_CALL_ARGUMENTS_TOO_LARGE,
    TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS,
    TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE,
    RunawayGuard,
)
from steadyloop.testing import (
    Exchange,
    Pause,
    ScriptedCall,
    ScriptedServer,
    finish_chunk,
    sse_response,
    tool_call_chunks,
    tool_call_delta,
    tool_calls_chunk,
    tool_calls_response,
)

GUARD_CODES = (
    TOOL_CALL_ARGUMENTS_TOO_LARGE,
    TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS,
    TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE,
)


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


def request(limits: ArgumentLimits | None = None) -> CompletionRequest:
    return CompletionRequest(
        endpoint="guarded",
        model="scripted-model",
        messages=[ChatMessage(role="user", content="Write the file.")],
        argument_limits=limits,
    )


async def run(endpoint: EndpointConfig, req: CompletionRequest | None = None) -> AssembledTurn:
    async with ModelActivities(EndpointRegistry([endpoint])) as model:
        return await ActivityEnvironment().run(model.stream_completion, req or request())


async def the_exchange(server: ScriptedServer) -> Exchange:
    [exchange] = server.exchanges
    await asyncio.wait_for(exchange.ended.wait(), 2.0)
    return exchange


def guarded(server: ScriptedServer, **limits: Any) -> EndpointConfig:
    return server.endpoint("guarded", argument_limits=ArgumentLimits(**limits))


def endless_call(fragment: str = "a" * 100, fragments: int = 20_000) -> list[Any]:
    """A write_file call whose arguments never end: 2 MB in 100-byte fragments, with a
    pause every 50 fragments (where the server notices a client that hung up)."""
    out: list[Any] = [
        tool_calls_chunk(
            [
                tool_call_delta(
                    index=0, id="call_w", type="function", name="write_file", arguments='{"c":"'
                )
            ]
        )
    ]
    for n in range(fragments):
        out.append(tool_calls_chunk([tool_call_delta(index=0, arguments=fragment)]))
        if n % 50 == 49:
            out.append(Pause(0.01))
    return out


def assert_enforced(turn: AssembledTurn, code: str) -> None:
    assert turn.tool_calls == []  # nothing to dispatch, whoever reads the turn
    assert turn.defects, "a guard cut must be a defect"
    first = turn.defects[0]
    assert first.kind == code
    assert first.detail.startswith(code)
    assert first.retry_budget == DEFECT_RETRY_BUDGETS[code]
    assert turn.stats.cut_by_guard == code


# -- over HTTP ---------------------------------------------------------------------------


async def test_an_endless_tool_argument_stream_is_cut_at_the_default_byte_limit(
    server: ScriptedServer,
) -> None:
    server.enqueue(sse_response(endless_call()))

    turn = await run(server.endpoint("guarded"))  # default limits

    assert_enforced(turn, TOOL_CALL_ARGUMENTS_TOO_LARGE)
    assert f"more than {DEFAULT_MAX_ARGS_BYTES} bytes" in turn.defects[0].detail
    assert "write_file" in turn.defects[0].detail
    assert turn.stats.bytes < 200_000  # far less than the 2 MB+ body: reading stopped
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished
    assert len(server.exchanges) == 1  # a value, not a failure: no attempt retried


async def test_the_limit_is_utf8_bytes_not_characters(server: ScriptedServer) -> None:
    # 3,000 characters of "é" are 6,000 bytes: over 4,096 bytes, under 4,096 characters.
    text = "é" * 3000
    ascii_text = "e" * 3000
    for arguments in (ascii_text, text):
        server.enqueue(
            sse_response(
                [
                    *tool_call_chunks(
                        # Raw text: `json.dumps` would escape "é" as 6 ASCII bytes.
                        [ScriptedCall("echo", '{"text":"' + arguments + '"}', id="e")],
                        fragment_size=7,
                    ),
                    Pause(0.3),
                    finish_chunk("tool_calls"),
                ]
            )
        )
    endpoint = guarded(server, max_args_bytes=4096)

    ascii_turn = await run(endpoint)
    turn = await run(endpoint)

    assert [json.loads(c.arguments) for c in ascii_turn.tool_calls] == [{"text": ascii_text}]
    assert ascii_turn.defects == [] and ascii_turn.stats.cut_by_guard is None
    assert_enforced(turn, TOOL_CALL_ARGUMENTS_TOO_LARGE)
    await asyncio.wait_for(server.exchanges[1].ended.wait(), 2.0)
    assert server.exchanges[1].client_disconnected


async def test_calls_are_counted_per_resolved_call_not_per_wire_index(
    server: ScriptedServer,
) -> None:
    # Ollama labels every call `index: 0`: three 3 KB calls must not count as one 9 KB call.
    calls = [ScriptedCall("write", {"path": f"f{n}", "text": "x" * 3000}) for n in range(3)]
    server.enqueue(tool_calls_response(*calls, index="zero", fragment_size=50))

    turn = await run(guarded(server, max_args_bytes=4096))

    assert [json.loads(c.arguments)["path"] for c in turn.tool_calls] == ["f0", "f1", "f2"]
    assert turn.defects == [] and turn.stats.cut_by_guard is None


async def test_the_turn_total_limit(server: ScriptedServer) -> None:
    calls = [
        ScriptedCall("write", {"path": f"f{n}", "text": "x" * 3000}, id=f"c{n}") for n in range(3)
    ]
    server.enqueue(
        sse_response(
            [
                *tool_call_chunks(calls, index="zero", fragment_size=50),
                Pause(0.3),
                finish_chunk("tool_calls"),
            ]
        )
    )

    turn = await run(guarded(server, max_args_bytes=4096, max_total_args_bytes=8000))

    assert_enforced(turn, TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE)
    assert "tool call #3" in turn.defects[0].detail and "'c2'" in turn.defects[0].detail
    assert (await the_exchange(server)).client_disconnected


def recorded_fragments() -> list[str]:
    """The recorded runaway's shape: 4,074 fragments, 4,658 bytes: 3,492 of 1 byte,
    581 of 2 bytes (one "é" each) and 1 of 4 bytes (one emoji); JSON that parses."""
    head, tail = list('{"t":"'), list('"}')
    body = ["a"] * (3492 - len(head) - len(tail)) + ["é"] * 581 + ["😀"]
    body = [body[(n * 7) % len(body)] for n in range(len(body))]  # spread them out
    fragments = head + body + tail
    sizes = [len(f.encode("utf-8")) for f in fragments]
    assert len(fragments) == 4074 and sum(sizes) == 4658
    assert (sizes.count(1), sizes.count(2), sizes.count(4)) == (3492, 581, 1)
    return fragments


def recorded_stream(fragments: list[str]) -> list[Any]:
    out: list[Any] = [
        tool_calls_chunk(
            [tool_call_delta(index=0, id="call_r", type="function", name="note", arguments="")]
        )
    ]
    for n, fragment in enumerate(fragments):
        out.append(tool_calls_chunk([tool_call_delta(index=0, arguments=fragment)]))
        if n % 512 == 511:
            out.append(Pause(0.05))
    return [*out, finish_chunk("tool_calls")]


async def test_recorded_fragment_runaway_passes_the_byte_guard_unchanged(
    server: ScriptedServer,
) -> None:
    fragments = recorded_fragments()
    server.enqueue(sse_response(recorded_stream(fragments)))
    server.enqueue(sse_response(recorded_stream(fragments)))

    guarded_turn = await run(server.endpoint("guarded"))  # the default byte guard
    unguarded = await run(guarded(server, max_args_bytes=None))

    assert guarded_turn == unguarded.model_copy(
        update={"stats": guarded_turn.stats}
    )  # unchanged, timings aside
    [call] = guarded_turn.tool_calls
    assert call.arguments == "".join(fragments)
    assert len(call.arguments.encode("utf-8")) == 4658
    assert guarded_turn.defects == [] and guarded_turn.stats.cut_by_guard is None
    assert server.exchanges[0].finished


async def test_recorded_fragment_runaway_is_caught_by_the_fragment_guard(
    server: ScriptedServer,
) -> None:
    server.enqueue(sse_response(recorded_stream(recorded_fragments())))

    turn = await run(guarded(server, max_args_fragments=1024))

    assert_enforced(turn, TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS)
    assert "more than 1024 argument fragments" in turn.defects[0].detail
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished


async def test_observe_only_cuts_the_stream_and_finishes_normally(
    server: ScriptedServer,
) -> None:
    server.enqueue(sse_response(endless_call()))

    turn = await run(guarded(server, max_args_bytes=4096, mode="observe"))

    [call] = turn.tool_calls
    assert (call.id, call.name) == ("call_w", "write_file")
    assert len(call.arguments.encode()) > 4096
    assert turn.finish_reason == "tool_calls"
    assert turn.defects == []  # the cut is not a defect: the call is answered instead
    assert turn.stats.cut_by_guard == TOOL_CALL_ARGUMENTS_TOO_LARGE
    # The loop answers it with an invalid-arguments tool message.
    assert parse_tool_call_arguments(call).kind != "parsed"
    exchange = await the_exchange(server)
    assert exchange.client_disconnected and not exchange.finished


async def test_a_request_can_override_the_endpoints_limits(server: ScriptedServer) -> None:
    server.enqueue(sse_response(endless_call(fragments=200)))  # 20 KB: under the default

    turn = await run(server.endpoint("guarded"), request(ArgumentLimits(max_args_fragments=100)))

    assert_enforced(turn, TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS)


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["max_args_bytes", "max_args_fragments", "max_total_args_bytes"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "many", True])
def test_a_limit_must_be_a_positive_integer(name: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=name):
        ArgumentLimits(**{name: value})


def test_defaults_and_off() -> None:
    limits = ArgumentLimits()
    assert (limits.max_args_bytes, limits.max_args_fragments, limits.max_total_args_bytes) == (
        24576,
        None,
        None,
    )
    assert limits.mode == "enforce" and limits.active
    off = ArgumentLimits(max_args_bytes=None)
    assert not off.active
    assert ArgumentLimits(max_args_bytes=False) == off  # TOML has no null
    with pytest.raises(ValidationError):
        ArgumentLimits(mode="ignore")


def test_limits_from_json_configuration() -> None:
    registry = EndpointRegistry.from_json(
        '{"a": {"base_url": "http://x/v1", "argument_limits": {"max_args_fragments": 1024}}}'
    )
    assert registry.get("a").argument_limits.max_args_fragments == 1024
    assert registry.get("a").argument_limits.max_args_bytes == 24576
    with pytest.raises(EndpointConfigError, match="max_args_bytes"):
        EndpointRegistry.from_json(
            '{"a": {"base_url": "http://x/v1", "argument_limits": {"max_args_bytes": 0}}}'
        )


def test_each_code_has_a_retry_budget() -> None:
    for code in GUARD_CODES:
        assert DEFECT_RETRY_BUDGETS[code] >= 1


# -- the counting alone ------------------------------------------------------------------


@dataclass
class Call:
    name: str = "f"
    wire_id: str | None = None
    parts: list[str] = field(default_factory=list)


def test_exactly_at_the_byte_limit_passes_one_more_byte_breaches() -> None:
    guard = RunawayGuard(ArgumentLimits(max_args_bytes=12))
    call = Call(parts=["€€€", "€"])  # 4 characters, 12 bytes
    assert guard.check([call]) is None
    call.parts.append("x")
    breach = guard.check([call])
    assert breach is not None
    assert (breach.code, breach.limit, breach.measured) == (TOOL_CALL_ARGUMENTS_TOO_LARGE, 12, 13)


def test_four_byte_characters_are_counted_as_four_bytes() -> None:
    guard = RunawayGuard(ArgumentLimits(max_args_bytes=8))
    call = Call(parts=["😀", "😀"])
    assert guard.check([call]) is None
    call.parts.append("😀")
    breach = guard.check([call])
    assert breach is not None and breach.measured == 12


def test_exactly_at_the_fragment_limit_passes() -> None:
    guard = RunawayGuard(ArgumentLimits(max_args_bytes=None, max_args_fragments=3))
    call = Call(parts=["a", "b", "c"])
    assert guard.check([call]) is None
    call.parts.append("d")
    breach = guard.check([call])
    assert breach is not None
    assert (breach.code, breach.limit, breach.measured) == (
        TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS,
        3,
        4,
    )


def test_the_total_counts_every_call_and_names_the_one_that_grew() -> None:
    guard = RunawayGuard(ArgumentLimits(max_args_bytes=10, max_total_args_bytes=15))
    first, second = Call(name="a", parts=["x" * 8]), Call(name="b", wire_id="w", parts=["y" * 7])
    assert guard.check([first, second]) is None  # 15 bytes in all: at the limit
    second.parts.append("é")
    breach = guard.check([first, second])
    assert breach is not None
    assert (breach.code, breach.measured, breach.call_position, breach.call_name) == (
        TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE,
        17,
        1,
        "b",
    )
    assert breach.call_wire_id == "w"


def test_counting_is_incremental_across_checks() -> None:
    guard = RunawayGuard(ArgumentLimits(max_args_bytes=1000))
    call = Call()
    for _ in range(100):
        call.parts.append("é" * 5)  # 10 bytes a fragment
        assert guard.check([call]) is None
    call.parts.append("é")
    breach = guard.check([call])
    assert breach is not None and breach.measured == 1002
