"""The real servers' recorded bytes, read again without the servers.

Every exchange the live tests recorded (`tests/fixtures/realservers/`, saved with
`STEADYLOOP_CAPTURE_FIXTURES=1`) is served back through the model activity and held to
the same check as live. The fixture must come from the request the case sends today,
and its meaning must not depend on where the network happened to split the bytes.
"""

from __future__ import annotations

import pytest
from realserver_cases import (
    ALL_CASES,
    FIXTURES,
    LLAMACPP,
    LLMOCK,
    Case,
    run_case,
    the_answered_fields,
    turn_of,
)
from sse_reference import read_sse
from wire_capture import Exchange, ReplayTransport

from steadyloop._routing.taxonomy import StreamFailed
from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.sse import SSEDecoder
from steadyloop._stream.turn_assembly import TurnAssembler

REPLAY_URL = "http://recorded.invalid/v1"
cases = pytest.mark.parametrize(
    "case", ALL_CASES, ids=[f"{case.server}-{case.name}" for case in ALL_CASES]
)


def recorded(case: Case) -> Exchange:
    return Exchange.load(FIXTURES / case.server, case.name)


@cases
async def test_the_recorded_exchange_passes_its_live_check(case: Case) -> None:
    exchange = recorded(case)
    transport = ReplayTransport(exchange, timed=case.timed)

    outcome = await run_case(case, transport, REPLAY_URL)

    if not case.varies:
        (sent,) = transport.requests
        assert the_answered_fields(sent) == the_answered_fields(exchange.request), (
            f"the fixture was recorded from another request: STEADYLOOP_CAPTURE_FIXTURES=1 "
            f"pytest -m realserver -k {case.name}"
        )
    case.check(outcome, exchange)


def split_every(exchange: Exchange, size: int) -> Exchange:
    ends = [*range(size, len(exchange.body), size), len(exchange.body)]
    return exchange.model_copy(update={"reads": [(0.0, end) for end in ends]})


def meaning(turn: AssembledTurn) -> object:
    """The turn without the stats that count reads or time them."""
    return turn.model_dump(exclude={"stats": {"bytes", "duration_s", "time_to_first_token_s"}})


def decided_by_bytes(case: Case) -> bool:
    """Not a case whose outcome is decided by time: a timed replay, or a reader that hung
    up on a silent server (a stall's message carries the seconds it measured)."""
    exchange = recorded(case)
    hung_up = exchange.ending == "client_closed" and not read_sse(exchange.body).done
    return not (case.timed or hung_up)


answered = [c for c in ALL_CASES if decided_by_bytes(c)]


@pytest.mark.parametrize("case", answered, ids=[f"{c.server}-{c.name}" for c in answered])
@pytest.mark.parametrize("size", [1, 7, 4096])
async def test_where_the_network_split_the_bytes_changes_nothing(case: Case, size: int) -> None:
    exchange = recorded(case)
    whole = await run_case(case, ReplayTransport(exchange), REPLAY_URL)
    split = await run_case(case, ReplayTransport(split_every(exchange, size)), REPLAY_URL)

    if isinstance(whole, AssembledTurn):
        assert meaning(turn_of(split)) == meaning(whole)
    else:
        assert type(split) is type(whole)
        assert (split.type, split.non_retryable, split.details) == (
            whole.type,
            whole.non_retryable,
            whole.details,
        )


# -- what the servers sent on the day, pinned -------------------------------------------


def test_llamacpp_streams_parallel_calls_one_after_another() -> None:
    wire = read_sse(Exchange.load(FIXTURES / LLAMACPP, "parallel_calls").body)
    assert len(wire.calls) >= 2
    assert wire.call_order == sorted(wire.call_order)


def test_llamacpp_pings_are_bare_comment_events() -> None:
    body = Exchange.load(FIXTURES / LLAMACPP, "pings").body
    assert body.startswith(b":\n\n")


def test_llmock_sends_both_retry_after_headers() -> None:
    headers = Exchange.load(FIXTURES / LLMOCK, "rate_limited_429").headers
    assert (headers["retry-after"], headers["retry-after-ms"]) == ("2", "1500")


def fold_recorded(body: bytes, *, shape_cache: bool) -> object:
    """The recorded body through the decoder and assembler, learned shapes on or off."""
    decoder, assembler = SSEDecoder(), TurnAssembler(shape_cache=shape_cache)
    try:
        for start in range(0, len(body), 4_096):
            if assembler.feed_events(decoder.feed_data(body[start : start + 4_096])):
                break
        else:
            assembler.feed_events(decoder.flush())
        return meaning(assembler.finish())
    except StreamFailed as failed:
        return failed.failure


@cases
def test_learned_chunk_shapes_read_real_servers_bytes_the_same(case: Case) -> None:
    """The real servers' own bytes (llama.cpp stamps `created` per second, for one):
    learning their chunk shapes must not change a turn or a failure."""
    body = recorded(case).body
    assert fold_recorded(body, shape_cache=True) == fold_recorded(body, shape_cache=False)
