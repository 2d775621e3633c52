"""The helpdesk agent's tools, and the registry a worker serves.

The tools act on a `Desk` (orders, refunds made, emails sent). In production the desk
would wrap your order system and mail service; tests build a fresh one per test and
count what the tools did to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from steadyloop.tools import ToolRegistry, tool

SYSTEM_PROMPT = "You are a helpdesk agent. Look orders up before acting on them."


@dataclass
class Desk:
    orders: dict[str, dict[str, object]] = field(
        default_factory=lambda: {
            "A-17": {"item": "kettle", "cents": 3450, "status": "delivered"},
            "B-02": {"item": "toaster", "cents": 2999, "status": "shipped"},
        }
    )
    refunds: list[tuple[str, int]] = field(default_factory=list)
    outbox: list[dict[str, str]] = field(default_factory=list)


def build_registry(desk: Desk) -> ToolRegistry:
    """The agent's tools, acting on `desk`."""

    @tool(effect="pure")
    async def lookup_order(order_id: str) -> dict[str, object]:
        """An order's item, price in cents and status."""
        order = desk.orders.get(order_id)
        if order is None:
            raise LookupError(f"no order {order_id}")
        return {"order_id": order_id, **order}

    @tool(effect="opaque", approval=True)
    async def refund(order_id: str, cents: int) -> str:
        """Refund an order (money moves: a person approves each call)."""
        desk.refunds.append((order_id, cents))
        return f"refunded {cents} cents on {order_id}"

    @tool(effect="opaque")
    async def send_email(to: str, subject: str, body: str) -> str:
        """Email a customer."""
        desk.outbox.append({"to": to, "subject": subject, "body": body})
        return f"sent to {to}"

    return ToolRegistry([lookup_order, refund, send_email])


# What `steadyloop worker --tools examples.helpdesk.agent:registry` serves.
registry = build_registry(Desk())
