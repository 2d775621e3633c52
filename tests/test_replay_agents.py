"""A user's workflow that runs an agent as a child replays, and so does the child.

The fixtures (tests/histories/agents/, written by tests/record_agent_histories.py) are
the orders example's order workflow and its agent's run: a prose answer corrected by the
output check, an approved `charge_card` scheduled as the app's own activity, the typed
decision. They replay with what a user's replayer gets from the plugin
(`Replayer(workflows=[OrderWorkflow], plugins=[SteadyloopPlugin(...)])`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from examples.orders.workflows import OrderWorkflow
from steadyloop.plugin import SteadyloopPlugin

HISTORIES = sorted((Path(__file__).parent / "histories" / "agents").glob("*.json"))
# The workflow ids the recorder used (a replay checks the child's id the parent computes).
IDS = {"order_parent": "order-R-7", "order_agent_child": "order-R-7.refund.refund/1"}


def test_both_sides_are_recorded() -> None:
    assert {p.stem for p in HISTORIES} == {"order_parent", "order_agent_child"}


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_it_replays_with_the_plugins_workflows(path: Path) -> None:
    replayer = Replayer(
        workflows=[OrderWorkflow], plugins=[SteadyloopPlugin(endpoints=[], blobs="off")]
    )
    history = WorkflowHistory.from_json(IDS[path.stem], path.read_text())
    await replayer.replay_workflow(history)


def test_the_child_scheduled_the_apps_own_activity() -> None:
    child = (Path(__file__).parent / "histories" / "agents" / "order_agent_child.json").read_text()
    assert '"charge_card"' in child and "steadyloop.run_tool" not in child
