"""With telemetry on, every recorded history still replays, and replaying exports no
span and counts nothing: the workflow-side spans and metrics are replay-safe."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from routed_turn_workflow import RoutedTurnWorkflow
from telemetry_fixtures import Recorded, recorded
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.telemetry import _attributes as a
from steadyloop.telemetry import worker_plugins

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


@pytest.fixture
def telemetry() -> Iterator[Recorded]:
    yield from recorded()


async def test_histories_replay_with_telemetry_on_and_export_nothing(telemetry: Recorded) -> None:
    assert HISTORIES
    replayer = Replayer(
        workflows=[
            ToolLoopWorkflow,
            EndpointHealthWorkflow,
            RoutedTurnWorkflow,
            ChainAdmissionWorkflow,
        ],
        data_converter=steadyloop_data_converter(
            Path(tempfile.gettempdir()) / "steadyloop-replay-blobs"
        ),
        plugins=worker_plugins(),
    )
    for path in HISTORIES:
        history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (path.stem, result.replay_failure)
    assert telemetry.finished() == []
    for name in (a.METRIC_RETRIES, a.METRIC_RECEIPTS, a.METRIC_REPLAYS, a.METRIC_COST):
        assert telemetry.metric_points(name) == [], name
