"""A route's endpoint health is read only when it can have changed.

Each read is a local activity: a marker in history (about 700 bytes) and 1-3 ms of
worker CPU, before every model turn. What decides the outcome downstream is what the
run recorded: how many reads its history holds for how many model turns. A route of one
healthy endpoint reads once per execution; a route of two endpoints, or a turn after a
failure, reads again, so a breaker another run opened is still seen. A history whose
reads carry no TTL (a read per turn) must still replay: `tests/test_replay.py` replays
`multi_turn_parallel_calls.json`, one such, and
`one_healthy_endpoint_reads_health_once.json`, one with TTLs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from loop_harness import ENDPOINT, MODEL, run_input, running_loop
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from steadyloop._routing.circuit_breaker import BreakerState
from steadyloop._routing.endpoint_health import READ_ENDPOINT_HEALTH_ACTIVITY, EndpointHealth
from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._workflows.routed_turn import HealthView
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    error_response,
    text_response,
    tool_calls_response,
)

HISTORIES = Path(__file__).parent / "histories"
NOW = datetime(2026, 12, 2, tzinfo=UTC)
BACKUP = "backup"


def _call(turn: int) -> ScriptedResponse:
    call = ScriptedCall("add", {"a": turn, "b": 1}, id=f"t{turn}")
    return tool_calls_response(call)


def _counts(events: list[HistoryEvent]) -> tuple[int, int, int]:
    """(health reads, patch markers, model activities) recorded in a history."""
    reads = patches = models = 0
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attrs = event.marker_recorded_event_attributes
            if attrs.marker_name == "core_patch":
                patches += 1
            for payload in attrs.details["data"].payloads if "data" in attrs.details else []:
                if json.loads(payload.data).get("activity_type") == READ_ENDPOINT_HEALTH_ACTIVITY:
                    reads += 1
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            models += name == "steadyloop.stream_completion"
    return reads, patches, models


async def _history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    return list((await client.get_workflow_handle(workflow_id).fetch_history()).events)


# -- the view, without a server ---------------------------------------------------------


def _health(endpoint: str = ENDPOINT, **update: Any) -> EndpointHealth:
    """A copy as the read activity returns it: stamped with its worker's cache TTL."""
    return EndpointHealth(endpoint=endpoint, view_ttl_s=2.0).model_copy(update=update)


def test_a_fresh_view_of_one_healthy_endpoint_answers() -> None:
    view = HealthView()
    assert view.fresh([ENDPOINT], NOW) is None  # nothing read yet
    view.keep({ENDPOINT: _health()}, NOW)
    assert view.fresh([ENDPOINT], NOW + timedelta(seconds=1.9)) == {ENDPOINT: _health()}


@pytest.mark.parametrize(
    ("endpoints", "health", "after_s"),
    [
        ([ENDPOINT], _health(), 2.0),  # older than its TTL in workflow time
        ([ENDPOINT], _health(view_ttl_s=None), 0.1),  # a read with no TTL stamped
        ([ENDPOINT], _health(view_ttl_s=0.0), 0.1),  # a worker that caches nothing
        ([ENDPOINT, BACKUP], _health(), 0.1),  # more than one endpoint to order
        ([ENDPOINT], _health(known=False), 0.1),  # the entity could not be read
        (
            [ENDPOINT],
            _health(breaker=BreakerState(recent_failures=[NOW], failures_total=1)),
            0.1,
        ),  # a failure in its window: one more may open it
        ([ENDPOINT], _health(breaker=BreakerState(open_until=NOW + timedelta(1))), 0.1),
    ],
    ids=[
        "stale",
        "recorded_before",
        "no_cache",
        "two_endpoints",
        "unknown",
        "recent_failure",
        "open",
    ],
)
def test_a_read_is_due(endpoints: list[str], health: EndpointHealth, after_s: float) -> None:
    view = HealthView()
    view.keep({health.endpoint: health}, NOW)
    assert view.fresh(endpoints, NOW + timedelta(seconds=after_s)) is None


def test_a_read_taken_ahead_serves_the_first_turn_only_and_only_moments_later() -> None:
    """The read beside the tools' description plans the first turn, whatever it says (an
    unknown endpoint too: no second read in the same task), once; a turn that plans
    later than 2 s after it, or for other endpoints, reads again."""
    unknown = {ENDPOINT: _health(known=False)}
    view = HealthView()
    view.keep_ahead(unknown, NOW)
    assert view.take_ahead([ENDPOINT], NOW) == unknown
    assert view.take_ahead([ENDPOINT], NOW) is None  # once
    view.keep_ahead(unknown, NOW)
    assert view.take_ahead([ENDPOINT], NOW + timedelta(seconds=2.1)) is None  # paused first
    view.keep_ahead({BACKUP: _health(BACKUP)}, NOW)
    assert view.take_ahead([ENDPOINT], NOW) is None  # another route's endpoints


def test_forget_makes_the_next_turn_read() -> None:
    view = HealthView()
    view.keep({ENDPOINT: _health()}, NOW)
    view.forget()
    assert view.fresh([ENDPOINT], NOW) is None


# -- recorded histories -------------------------------------------------------------------


def _recorded(name: str) -> list[HistoryEvent]:
    from temporalio.client import WorkflowHistory

    path = HISTORIES / f"{name}.json"
    return list(WorkflowHistory.from_json(name, path.read_text()).events)


def test_the_recorded_one_endpoint_run_read_health_once_for_four_turns() -> None:
    """No patch marker either: the gate is the TTL recorded with the read."""
    assert _counts(_recorded("one_healthy_endpoint_reads_health_once")) == (1, 0, 4)


# -- live runs on the time-skipping server -------------------------------------------------


@pytest.mark.slow
async def test_a_route_of_one_healthy_endpoint_schedules_no_health_read_per_turn() -> None:
    script = [_call(1), _call(2), _call(3), _call(4), text_response("done")]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input("add things"))
        result = await handle.result()
        assert result.stop_reason == "final_answer"
        reads, patches, models = _counts(await _history(loop.client, handle.id))
    assert (reads, patches, models) == (1, 0, 5)


@pytest.mark.slow
async def test_two_endpoints_or_a_failure_read_again() -> None:
    """A route of two endpoints reads before every turn; one endpoint reads again on
    the turn after a failed attempt (its own failure changed the breaker)."""
    two = RouteConfig(
        candidates=[
            RouteCandidate(endpoint=ENDPOINT, model=MODEL),
            RouteCandidate(endpoint=BACKUP, model=MODEL),
        ]
    )
    script = [_call(1), _call(2), text_response("done")]
    async with running_loop(script, more_endpoints={BACKUP: []}) as loop:
        handle = await loop.start(run_input("add").model_copy(update={"route": two}))
        assert (await handle.result()).stop_reason == "final_answer"
        assert _counts(await _history(loop.client, handle.id)) == (3, 0, 3)

    failing = [
        _call(1),
        error_response(500, "boom", type="server_error"),
        _call(2),
        text_response("done"),
    ]
    async with running_loop(failing) as loop:
        handle = await loop.start(run_input("add", model_retry_initial_s=0.1))
        assert (await handle.result()).stop_reason == "final_answer"
        reads, patches, models = _counts(await _history(loop.client, handle.id))
    # Turn 1 reads; turn 2 skips, fails once and is retried within the route; turn 3
    # (the final answer) reads again after that failure.
    assert (reads, patches, models) == (2, 0, 4)
