"""llama.cpp's recorded `/v1/responses` bytes, read again without the server.

Each fixture (`tests/fixtures/realservers/llamacpp_responses/`, saved by
`test_realserver_responses.py` with `STEADYLOOP_CAPTURE_FIXTURES=1`) is served back
through the model activity and held to the live check, whole and split at every few
bytes; and the shape llama.cpp sent is pinned, as the README's providers table says it.
"""

from __future__ import annotations

import pytest
from realserver_cases import Case, run_case, turn_of
from realserver_responses_cases import (
    FIXTURE_DIR,
    RESPONSES_CASES,
    check_llamacpp_shape,
    events_of,
)
from wire_capture import Exchange, ReplayTransport

REPLAY_URL = "http://recorded.invalid/v1"
cases = pytest.mark.parametrize("case", RESPONSES_CASES, ids=[c.name for c in RESPONSES_CASES])


def recorded(case: Case) -> Exchange:
    return Exchange.load(FIXTURE_DIR, case.name)


@cases
async def test_the_recorded_exchange_passes_its_live_check(case: Case) -> None:
    exchange = recorded(case)
    transport = ReplayTransport(exchange)
    outcome = await run_case(case, transport, REPLAY_URL)
    (sent,) = transport.requests
    assert sent == exchange.request, "the fixture was recorded from another request"
    case.check(outcome, exchange)


@cases
@pytest.mark.parametrize("size", [1, 7, 4096])
async def test_where_the_network_split_the_bytes_changes_nothing(case: Case, size: int) -> None:
    exchange = recorded(case)
    ends = [*range(size, len(exchange.body), size), len(exchange.body)]
    split = exchange.model_copy(update={"reads": [(0.0, end) for end in ends]})
    whole = turn_of(await run_case(case, ReplayTransport(exchange), REPLAY_URL))
    parts = turn_of(await run_case(case, ReplayTransport(split), REPLAY_URL))
    drop = {"stats": {"bytes", "duration_s", "time_to_first_token_s"}}
    assert parts.model_dump(exclude=drop) == whole.model_dump(exclude=drop)


def test_llamacpp_sends_no_output_index_and_labels_deltas_with_the_item_id() -> None:
    events = events_of(Exchange.load(FIXTURE_DIR, "one_call").body)
    check_llamacpp_shape(events)
    added = next(e["item"] for e in events if e["type"] == "response.output_item.added")
    assert added["id"] != added["call_id"]  # fc_... and call_...: two labels for one call
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert {e["item_id"] for e in deltas} == {added["id"]}
