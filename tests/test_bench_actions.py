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


def upsert(*names: str) -> HistoryEvent:
    found = HistoryEvent(event_type=EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
    fields = found.upsert_workflow_search_attributes_event_attributes.search_attributes
    for name in names:
        fields.indexed_fields[name].data = b'"x"'
    return found


def marker(name: str, task: int) -> HistoryEvent:
    return event(
        EventType.EVENT_TYPE_MARKER_RECORDED,
        marker_recorded_event_attributes__marker_name=name,
        marker_recorded_event_attributes__workflow_task_completed_event_id=task,
    )


def test_a_history_counts_what_temporal_cloud_bills() -> None:
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
        # Three markers recorded by two workflow tasks: Cloud bills one action a task.
        marker("core_local_activity", task=4),
        marker("core_patch", task=4),
        marker("core_local_activity", task=9),
        # The SDK's upsert for a patch is exempt; one of the run's own is billed.
        upsert("TemporalChangeVersion"),
        upsert("SteadyloopTenant"),
    ]
    kinds = bench_actions.history_kinds(events)
    assert kinds == Counter(
        {
            "start": 1,
            "activity": 3,
            "signal": 1,
            "timer": 1,
            "markers": 2,
            "upsert": 1,
            "local activity": 2,
            "patch": 1,
            "change version": 1,
        }
    )
    count = bench_actions.Count(Counter(), kinds + Counter({"heartbeat": 2}), 1.0)
    assert count.billed == 1 + 3 + 1 + 1 + 2 + 1 + 2  # + marker tasks, the run's upsert


def counted(server: dict[str, int], history: dict[str, int]) -> bench_actions.Count:
    return bench_actions.Count(Counter(server), Counter(history), 1.0)


def test_the_two_counts_must_agree_kind_by_kind() -> None:
    server = {
        "grpc_StartWorkflowExecution": 1,
        "command_ContinueAsNewWorkflowExecution": 1,  # a start, by Cloud's rules
        "command_ScheduleActivityTask": 2,
        "grpc_RecordActivityTaskHeartbeat": 1,
        "grpc_SignalWorkflowExecution": 1,
        "command_SignalExternalWorkflowExecution": 1,
        "command_StartTimer": 1,
        "command_UpsertWorkflowSearchAttributes": 1,
        "command_BatchMarkers": 3,
    }
    history = {
        "start": 2,
        "activity": 2,
        "heartbeat": 1,
        "signal": 2,
        "timer": 1,
        "markers": 3,
        "change version": 1,  # the server counts it, Cloud does not bill it
    }
    assert bench_actions.disagreements(counted(server, history)) == []
    # A retry is in the history only: more there is fine, fewer is not.
    assert bench_actions.disagreements(counted(server, {**history, "activity": 3})) == []
    assert bench_actions.disagreements(counted(server, {**history, "activity": 1})) != []
    # A heartbeat the requests missed, a signal counted twice: each is named.
    problems = bench_actions.disagreements(
        counted(server, {**history, "heartbeat": 0, "signal": 3, "markers": 1, "upsert": 1})
    )
    assert [p.split(":")[0] for p in problems] == ["heartbeat", "signal", "markers", "upsert"]


@pytest.mark.slow
async def test_the_quick_run_counts_every_run_the_same_both_ways(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = await bench_actions.main(["--quick", "--rounds", "4"])
    out = capsys.readouterr().out
    assert "PROBLEM" not in out and status == 0, out
    assert "per tool round (4-round runs)" in out
