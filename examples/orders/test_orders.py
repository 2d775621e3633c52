"""The order workflow tested as it runs in production: the app's own workflow and
`charge_card` activity beside the agent on one task queue, a scripted model, Temporal's
time-skipping server. The production workflow is unchanged."""

from __future__ import annotations

import pytest

from examples.orders.models import Order, RefundDecision
from examples.orders.payments import LEDGER_ENV, charge_card, charges
from examples.orders.workflows import OrderWorkflow, refund_agent
from steadyloop.testing import AgentEnv, ScriptedModel
from steadyloop.tools import activity_as_tool

ORDER = Order(id="A-1", customer="ada", amount_cents=1500, complaint="arrived broken")
REFUNDED = RefundDecision(refund=True, amount_cents=1500, reason="damaged in transit")


@pytest.fixture(autouse=True)
def ledger(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger"))  # type: ignore[operator]


def orders_env() -> AgentEnv:
    tools = [activity_as_tool(charge_card, approval=True)]
    return AgentEnv(tools, workflows=[OrderWorkflow], activities=[charge_card])


async def test_the_agent_refunds_through_charge_card_once_a_person_approves() -> None:
    async with orders_env() as env:
        env.script(
            ScriptedModel()
            .calls("charge_card", order_id="A-1", amount_cents=-1500)
            .says(REFUNDED.model_dump_json())
        )
        order = await env.client.start_workflow(
            OrderWorkflow.run, ORDER, id="order-A-1", task_queue=env.task_queue
        )
        agent = await env.agent(refund_agent.child_id_for("order-A-1", "refund"))
        assert charges() == []  # nothing moves before a person approves
        await agent.approve("charge_card")
        async with env.skipping_time():
            assert await order.result() == "order A-1: refunded 1500 cents (damaged in transit)"
        assert charges() == [{"order": "A-1", "amount_cents": -1500}]
        # The history shows the app's own activity, not a stand-in.
        run = await agent.result()
        assert run.calls_to("charge_card")[0].result is not None


async def test_a_prose_answer_is_asked_again_and_the_typed_answer_returned() -> None:
    async with orders_env() as env:
        env.script(
            ScriptedModel()
            .says("I think no refund is due.")
            .says(RefundDecision(refund=False, amount_cents=0, reason="fine").model_dump_json())
        )
        result = await env.client.execute_workflow(
            OrderWorkflow.run, ORDER, id="order-A-2", task_queue=env.task_queue
        )
        assert result == "order A-1: no refund (fine)"
        assert charges() == []
