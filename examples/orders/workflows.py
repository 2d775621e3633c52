"""The app's workflow: an order whose refund an agent decides and carries out."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from examples.orders.models import Order, RefundDecision
    from steadyloop.workflow import Agent

RULES = """Decide whether the order gets a refund. To refund, call charge_card with
the negative amount, then answer with your decision."""

refund_agent = Agent(
    "refund", model="gpt-4.1", instructions=RULES, tools=["charge_card"], output_type=RefundDecision
)


@workflow.defn
class OrderWorkflow:
    @workflow.run
    async def run(self, order: Order) -> str:
        prompt = f"Order {order.id} ({order.amount_cents} cents): {order.complaint}"
        decision = await refund_agent.run(prompt, key="refund")
        if not decision.refund:
            return f"order {order.id}: no refund ({decision.reason})"
        return f"order {order.id}: refunded {decision.amount_cents} cents ({decision.reason})"
