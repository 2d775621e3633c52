"""Determinism: histories recorded from earlier runs must replay on the current workflows.

A change to `ToolLoopWorkflow`, `EndpointHealthWorkflow` or the route executor
(`routed_completion`, replayed through its test workflow) that reorders commands (a new
activity before an old one, a timer added, a different activity name) fails here
instead of in a running cluster. Fixtures are written by `tests/record_histories.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from record_histories import (
    CHAIN_SCENARIOS,
    ROUTING_SCENARIOS,
    SCENARIOS,
    record,
    record_chain,
    record_routing,
)
from routed_turn_workflow import RoutedTurnWorkflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from steadyloop.workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def replayer() -> Replayer:
    return Replayer(
        workflows=[ToolLoopWorkflow, EndpointHealthWorkflow, RoutedTurnWorkflow],
        data_converter=pydantic_data_converter,
    )


def test_every_scenario_has_a_recorded_history() -> None:
    assert {path.stem for path in HISTORIES} == (
        set(SCENARIOS) | set(CHAIN_SCENARIOS) | set(ROUTING_SCENARIOS)
    )


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


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


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ROUTING_SCENARIOS))
async def test_a_fresh_routing_run_replays(tmp_path: Path, name: str) -> None:
    path = await record_routing(name, directory=tmp_path)
    history = WorkflowHistory.from_json("fresh", path.read_text())
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
