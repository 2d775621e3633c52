"""Determinism: histories recorded from earlier runs must replay on the current workflows.

A change to `ToolLoopWorkflow`, `EndpointHealthWorkflow` or the route executor
(`routed_completion`, replayed through its test workflow) that reorders commands (a new
activity before an old one, a timer added, a different activity name) fails here
instead of in a running cluster. Fixtures are written by `tests/record_histories.py`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from record_histories import (
    BATCH_SCENARIOS,
    CHAIN_SCENARIOS,
    ENTITY_SCENARIOS,
    RELEASES,
    ROUTING_SCENARIOS,
    SCENARIOS,
    freeze,
    record,
    record_chain,
    record_routing,
)
from routed_turn_workflow import RoutedTurnWorkflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.events._publishing import PUBLISH_RUN_EVENTS_ACTIVITY
from steadyloop.tools._payloads import LATE_TOOL_RESULT_SIGNAL

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def release_histories(releases: Path = RELEASES) -> list[Path]:
    """Every kept history of every release (`releases/<version>/<scenario>.json`)."""
    return sorted(releases.glob("*/*.json"))


def replayer(blob_dir: Path | None = None) -> Replayer:
    """A replayer with steadyloop's data converter: payloads a history keeps in a blob
    directory are read from `blob_dir` (none of the recorded fixtures needs one)."""
    return Replayer(
        workflows=[
            ToolLoopWorkflow,
            EndpointHealthWorkflow,
            RoutedTurnWorkflow,
            ChainAdmissionWorkflow,
        ],
        data_converter=steadyloop_data_converter(
            blob_dir or Path(tempfile.gettempdir()) / "steadyloop-replay-blobs"
        ),
    )


def test_every_scenario_has_a_recorded_history() -> None:
    assert {path.stem for path in HISTORIES} == (
        set(SCENARIOS)
        | set(CHAIN_SCENARIOS)
        | set(ROUTING_SCENARIOS)
        | set(ENTITY_SCENARIOS)
        | set(BATCH_SCENARIOS)
    )


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


@pytest.mark.parametrize("path", release_histories(), ids=lambda p: f"{p.parent.name}-{p.stem}")
async def test_release_history_replays(path: Path) -> None:
    """A run started on an earlier release finishes on this code (docs/versioning.md)."""
    await test_recorded_history_replays(path)


async def test_a_frozen_release_is_replayed_by_later_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "current"
    source.mkdir()
    kept = ("multi_turn_parallel_calls", "endpoint_health_cycle")
    for name in kept:
        (source / f"{name}.json").write_text(
            (Path(__file__).parent / "histories" / f"{name}.json").read_text()
        )
    monkeypatch.setattr("importlib.metadata.version", lambda _: "9.9.9")
    folder = freeze("9.9.9", source=source, releases=tmp_path / "releases")
    assert [p.stem for p in release_histories(tmp_path / "releases")] == sorted(kept)
    for path in release_histories(tmp_path / "releases"):
        await test_recorded_history_replays(path)
    with pytest.raises(SystemExit, match="kept as recorded"):
        freeze("9.9.9", source=source, releases=tmp_path / "releases")
    with pytest.raises(SystemExit, match=r"installed steadyloop is 9\.9\.9"):
        freeze("1.0.0", source=source, releases=tmp_path / "releases")
    assert folder.name == "9.9.9"


@pytest.mark.slow
async def test_a_fresh_run_replays(tmp_path: Path) -> None:
    name = "multi_turn_parallel_calls"
    path = await record(name, SCENARIOS[name], directory=tmp_path)
    history = WorkflowHistory.from_json("fresh", path.read_text())
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


@pytest.mark.slow
async def test_a_fresh_delegating_run_replays(tmp_path: Path) -> None:
    name = "delegation_fan_out_budget_and_replay"
    path = await record_chain(name, directory=tmp_path)
    # The workflow id must be the recorded one: child ids are derived from it.
    history = WorkflowHistory.from_json(f"replay-{name}", path.read_text())
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


def _activities(history: WorkflowHistory) -> list[str]:
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def _load(name: str) -> WorkflowHistory:
    path = Path(__file__).parent / "histories" / f"{name}.json"
    return WorkflowHistory.from_json(f"replay-{name}", path.read_text())


def test_the_recorded_admission_histories_take_the_paths_they_stand_for() -> None:
    """A delegating run registers its root and asks the tenant's entity for each child;
    the entity's own history asked which runs had closed."""
    for name in (
        "delegation_fan_out_budget_and_replay",
        "delegation_admitted_by_the_tenant_entity",
    ):
        asked = _activities(_load(name))
        assert asked.count("steadyloop.admit_chain_run") >= 2  # registration + a child
    assert "steadyloop.closed_chain_runs" in _activities(_load("chain_admission_entity"))


def _updates(history: WorkflowHistory) -> list[str]:
    return [
        event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]


def test_the_recorded_batch_histories_take_the_batched_paths() -> None:
    """The entities' batched updates are replayed (above) from histories that hold them:
    reports and probes in batches, and a full ledger's ask of which runs closed."""
    health = _load("endpoint_health_batched")
    assert {"record_many", "admit_probes"} <= set(_updates(health))
    admission = _load("chain_admission_entity_batched")
    assert _updates(admission) == ["admit_many"]
    assert "steadyloop.closed_chain_runs" in _activities(admission)


def test_the_recorded_late_result_history_holds_the_workers_signal() -> None:
    """The run whose opaque call ran past its timeout was signalled what the
    tool returned late, and a person resolved the call with it (so the replay above
    covers the signal handler, the timed-out attempt and the resolution)."""
    history = _load("opaque_timeout_late_result")
    signals = [
        event.workflow_execution_signaled_event_attributes.signal_name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    assert signals == [LATE_TOOL_RESULT_SIGNAL]
    timed_out = [
        event
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
    ]
    assert len(timed_out) == 1


@pytest.mark.slow
async def test_a_fresh_run_admitted_by_the_entity_replays_with_the_entity(tmp_path: Path) -> None:
    name = "delegation_admitted_by_the_tenant_entity"
    await record_chain(name, directory=tmp_path)
    for recorded in (name, *ENTITY_SCENARIOS):
        path = tmp_path / f"{recorded}.json"
        history = WorkflowHistory.from_json(f"replay-{name}", path.read_text())
        result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (recorded, result.replay_failure)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ROUTING_SCENARIOS))
async def test_a_fresh_routing_run_replays(tmp_path: Path, name: str) -> None:
    path = await record_routing(name, directory=tmp_path)
    history = WorkflowHistory.from_json("fresh", path.read_text())
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


def _external_references(history: WorkflowHistory) -> int:
    """Payloads of the history's activity inputs kept in a blob directory, not inline."""
    return sum(
        1
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        for payload in event.activity_task_scheduled_event_attributes.input.payloads
        if payload.external_payloads
    )


@pytest.mark.slow
async def test_a_run_whose_payloads_left_history_replays_from_its_blobs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Continue-as-new and payloads in the blob directory replay from the same directory;
    from a directory without them, replay fails naming the missing blob, not silently."""
    name = "continue_as_new_at_events"
    blobs = tmp_path / "blobs"
    path = await record(
        name, SCENARIOS[name], directory=tmp_path, blob_dir=blobs, blob_threshold=256
    )
    history = WorkflowHistory.from_json(f"replay-{name}", path.read_text())
    last = history.events[-1].event_type
    assert last == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert _external_references(history) >= 2  # the model request and the tool input

    result = await replayer(blobs).replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure

    empty = tmp_path / "empty"
    result = await replayer(empty).replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
    logged = "\n".join(
        str(record.exc_info[1]) for record in caplog.records if record.exc_info is not None
    )
    assert "PayloadBlobMissing" in logged and str(empty) in logged


def _markers(history: WorkflowHistory) -> list[tuple[str, bytes]]:
    """(marker name, its details' bytes) of every marker of `history`, in order."""
    return [
        (
            event.marker_recorded_event_attributes.marker_name,
            b"".join(
                p.data
                for d in event.marker_recorded_event_attributes.details.values()
                for p in d.payloads
            ),
        )
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]


def test_no_recorded_run_asks_a_patch() -> None:
    """The 0.x baseline: workflow code asks no patch (one asked after a local activity
    can land in another task on replay; where a run keeps its log is a rule of its
    input, written in its memo by its starter)."""
    for path in HISTORIES:
        names = [name for name, _ in _markers(_load(path.stem))]
        assert "core_patch" not in names, path.stem


def test_the_event_log_history_publishes_per_step() -> None:
    """A forwarded run publishes its log with one local activity per step (a few per
    turn, not one per event)."""
    publishes = sum(
        PUBLISH_RUN_EVENTS_ACTIVITY.encode() in data
        for name, data in _markers(_load("event_log_approval_and_replay"))
        if name == "core_local_activity"
    )
    assert 3 <= publishes <= 3 * 3  # three turns, at most three steps each


def test_a_late_result_is_published_while_its_call_waits() -> None:
    """The worker's late result is published between its signal and the person's
    resolution (the follower prints it from the log before anyone resolves the call)."""

    said: list[str] = []
    for event in _load("opaque_late_result_on_the_log").events:
        attributes = event.marker_recorded_event_attributes
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            said.append("signal")
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            said.append("resolution")
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            data = b"".join(p.data for d in attributes.details.values() for p in d.payloads)
            if PUBLISH_RUN_EVENTS_ACTIVITY.encode() in data:
                said.append("publish")
    between = said[said.index("signal") + 1 : said.index("resolution")]
    assert "publish" in between, said


def test_a_retry_is_published_before_the_attempt_it_runs() -> None:
    """A failed model attempt's timeline events are published before the next attempt
    is scheduled (the follower reads the retry before that attempt's text)."""
    said: list[str] = []
    for event in _load("retry_published_first").events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            said.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attributes = event.marker_recorded_event_attributes
            data = b"".join(p.data for d in attributes.details.values() for p in d.payloads)
            if PUBLISH_RUN_EVENTS_ACTIVITY.encode() in data:
                said.append("publish")
    model = [n for n, name in enumerate(said) if name == STREAM_COMPLETION_ACTIVITY]
    assert len(model) >= 2, said
    assert "publish" in said[model[0] + 1 : model[1]], said


def test_the_recorded_local_pure_tools_history_ran_only_the_opaque_call_as_an_activity() -> None:
    """With `local_pure_tools_s`, the pure calls (`add`, `current_time`) ran as local
    activities and only the opaque `note` was dispatched; a run without the option
    dispatches its pure calls."""
    local = _load("pure_tools_as_local_activities")
    assert _activities(local).count("steadyloop.run_tool") == 1
    regular = _load("multi_turn_parallel_calls")
    assert _activities(regular).count("steadyloop.run_tool") >= 4


@pytest.mark.parametrize("name", ["event_log_in_history", "event_log_rides_apart"])
def test_a_run_not_forwarded_keeps_its_log_in_its_history_and_pays_no_publish(name: str) -> None:
    """Recorded with the log in history, the run's events ride on its model and tool
    activities' inputs (and one marker where it waits for a person), in run order, with
    no publish, no host and no signal; the forwarded run keeps the host. In the older
    fixtures they are a field of the input, in the newer its second payload: both read
    alike."""
    from steadyloop.client._history_log import _carrier, _events
    from steadyloop.events._models import (
        ApprovalWaitingEvent,
        DecisionEvent,
        StopEvent,
        ToolCallEvent,
        ToolResultEvent,
    )
    from steadyloop.events._publishing import log_mode_of_input

    def read(history: WorkflowHistory) -> tuple[list[object], int]:
        events: list[object] = []
        riding = 0
        for event in history.events:
            payload, field = _carrier(event)
            if payload is not None:
                found = _events(payload, field)
                riding += bool(found) and field != "events"
                events += found
        return events, riding

    def mode_of_input(history: WorkflowHistory) -> bool:
        started = history.events[0].workflow_execution_started_event_attributes
        return log_mode_of_input(json.loads(started.input.payloads[0].data))

    history = _load(name)
    kinds = {e.event_type for e in history.events}
    # What a follower of a run started without the memo reads: the loop's own rule.
    assert mode_of_input(history) and not mode_of_input(_load("event_log_approval_and_replay"))
    assert EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED not in kinds
    assert not any(
        PUBLISH_RUN_EVENTS_ACTIVITY.encode() in p.data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        for d in e.marker_recorded_event_attributes.details.values()
        for p in d.payloads
    )
    events, riding = read(history)
    assert riding >= 2  # the second turn's call and the first batch's results, at least
    ids = [(type(e).__name__, getattr(e, "call_id", None)) for e in events]
    for call in ("x1", "a1", "a2"):
        assert ids.index(("ToolCallEvent", call)) < ids.index(("ToolResultEvent", call))
    assert ids.count(("ToolCallEvent", "x1")) == 1 and ids.count(("ToolResultEvent", "a2")) == 1
    waiting = ids.index(("ApprovalWaitingEvent", "x1"))
    assert waiting < ids.index(("DecisionEvent", "x1")) < ids.index(("ToolResultEvent", "x1"))
    assert isinstance(events[-1], StopEvent) and events[-1].reason == "final_answer"
    assert all(
        isinstance(e, ToolCallEvent | ToolResultEvent | ApprovalWaitingEvent | DecisionEvent)
        for e in events[:-1]
        if type(e).__name__ != "TimelineEntryEvent"
    )


def test_the_events_ride_apart_so_a_follower_never_reads_the_request() -> None:
    """Every model and tool input of the run recorded since carries its events as a
    second payload, which is what the follower reads; the request (with blob storage,
    a reference to the whole transcript) is never the payload read, nor holds events."""
    from steadyloop.client._history_log import _carrier
    from steadyloop.events._publishing import LOG_EVENTS_FIELD

    inputs = [
        e.activity_task_scheduled_event_attributes.input.payloads
        for e in _load("event_log_rides_apart").events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    read = [
        _carrier(e)[0]
        for e in _load("event_log_rides_apart").events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert len(inputs) >= 4 and all(len(payloads) == 2 for payloads in inputs)
    assert read == [payloads[1] for payloads in inputs]
    assert not any(f'"{LOG_EVENTS_FIELD}":[{{'.encode() in p[0].data for p in inputs)
    assert sum(b'"type":' in p[1].data for p in inputs) >= 3  # batches that held events
