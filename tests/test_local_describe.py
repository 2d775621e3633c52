"""A run's tools are described by a local activity, in its first workflow task.

What decides the bill: Temporal Cloud counts the markers of one workflow task as one
action, so the describe, the first endpoint-health read and the patches cost one action
together only if they land in the same task, the one that schedules the first model
call. The describe activity that did this before was an action of its own on every run.
The worker that runs the loop must register the tool activities too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered, run_input, running_loop
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)
from steadyloop.tools._payloads import DESCRIBE_TOOLS_ACTIVITY

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_actions import history_kinds


def script() -> list[ScriptedResponse]:
    return [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="d1")),
        text_response("three"),
    ]


def scheduled(events: list[HistoryEvent], name: str) -> list[HistoryEvent]:
    return [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == name
    ]


def local_markers(events: list[HistoryEvent], name: str) -> list[HistoryEvent]:
    return [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and any(
            name.encode() in p.data
            for p in e.marker_recorded_event_attributes.details["data"].payloads
        )
    ]


async def test_the_describe_and_health_share_the_task_that_calls_the_model() -> None:
    async with running_loop(script()) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        events = list((await handle.fetch_history()).events)
    assert result.final_answer == "three"
    assert_every_call_answered(result.transcript)
    assert scheduled(events, DESCRIBE_TOOLS_ACTIVITY) == []
    assert len(local_markers(events, DESCRIBE_TOOLS_ACTIVITY)) == 1
    markers = [e for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    tasks = {e.marker_recorded_event_attributes.workflow_task_completed_event_id for e in markers}
    first_model = scheduled(events, STREAM_COMPLETION_ACTIVITY)[0]
    assert tasks == {
        first_model.activity_task_scheduled_event_attributes.workflow_task_completed_event_id
    }
    # Cloud's bill for the run: the start, one task of markers, two model calls, one tool.
    kinds = history_kinds(events)
    assert (kinds["start"], kinds["markers"], kinds["activity"]) == (1, 1, 3)


async def test_a_workflow_worker_without_the_tool_activities_fails_the_run_saying_so() -> None:
    """The worker that runs the loop registers the tool activities, as it registers the
    endpoint-health ones: both are local activities of the run. Without them a run with
    tools fails at its start, naming the missing activity (before anything was called),
    rather than fail its workflow task again and again."""
    async with running_loop(script(), tools_apart=True) as loop:
        handle = await loop.start(run_input())
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    assert loop.server.requests == []
    assert isinstance(failed.value.cause, ApplicationError)
    assert f"{DESCRIBE_TOOLS_ACTIVITY} is not registered on this worker" in str(failed.value.cause)
