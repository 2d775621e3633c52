"""`benchmarks/bench_actions.py`: what it counts from a history, and the check that
holds its two counts (the dev server's `action` counter, the histories) to each other;
its quick run passes that check for every run it measures."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_actions


def event(kind: EventType.ValueType, **attributes: object) -> HistoryEvent:
    found = HistoryEvent(event_type=kind)
    for name, value in attributes.items():
        field, _, member = name.partition("__")
        setattr(getattr(found, field), member, value)
    return found


def test_a_history_counts_each_activity_attempt_and_each_billed_kind() -> None:
    events = [
        event(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED),
        event(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
        # The third attempt of that activity: two retries, each billed.
        event(
            EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            activity_task_started_event_attributes__attempt=3,
        ),
        event(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
        event(EventType.EVENT_TYPE_TIMER_STARTED),
        event(
            EventType.EVENT_TYPE_MARKER_RECORDED,
            marker_recorded_event_attributes__marker_name="core_local_activity",
        ),
        event(
            EventType.EVENT_TYPE_MARKER_RECORDED,
            marker_recorded_event_attributes__marker_name="core_patch",
        ),
        event(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
    ]
    kinds = bench_actions.history_kinds(events)
    assert kinds == Counter(
        {
            "start": 1,
            "activity": 3,
            "signal": 1,
            "timer": 1,
            "local activity": 1,
            "patch": 1,
            "upsert": 1,
        }
    )
    count = bench_actions.Count(Counter(), kinds + Counter({"heartbeat": 2}), 1.0)
    assert count.billed == 1 + 3 + 1 + 1 + 2  # markers and upserts are not billed kinds


def counted(server: dict[str, int], history: dict[str, int]) -> bench_actions.Count:
    return bench_actions.Count(Counter(server), Counter(history), 1.0)


def test_the_two_counts_must_agree_kind_by_kind() -> None:
    server = {
        "grpc_StartWorkflowExecution": 2,
        "command_ScheduleActivityTask": 2,
        "grpc_RecordActivityTaskHeartbeat": 1,
        "grpc_SignalWorkflowExecution": 1,
        "command_SignalExternalWorkflowExecution": 1,
        "command_StartTimer": 1,
        "command_UpsertWorkflowSearchAttributes": 1,
        "command_BatchMarkers": 3,  # the histories count markers, not batches
    }
    history = {"start": 2, "activity": 2, "heartbeat": 1, "signal": 2, "timer": 1, "upsert": 1}
    assert bench_actions.disagreements(counted(server, history)) == []
    # A retry is in the history only: more there is fine, fewer is not.
    assert bench_actions.disagreements(counted(server, {**history, "activity": 3})) == []
    assert bench_actions.disagreements(counted(server, {**history, "activity": 1})) != []
    # A heartbeat the requests missed, a signal counted twice: each is named.
    problems = bench_actions.disagreements(
        counted(server, {**history, "heartbeat": 0, "signal": 3})
    )
    assert [p.split(":")[0] for p in problems] == ["heartbeat", "signal"]


@pytest.mark.slow
async def test_the_quick_run_counts_every_run_the_same_both_ways(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = await bench_actions.main(["--quick", "--rounds", "4"])
    out = capsys.readouterr().out
    assert "PROBLEM" not in out and status == 0, out
    assert "per tool round (4-round runs)" in out
