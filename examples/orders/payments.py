"""The app's activity: it moves money, so it must run once per decision.

A stand-in for a payment provider: each charge is a line appended to a ledger file
(`ORDERS_LEDGER`), so a test can count charges across a worker that was killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path

from temporalio import activity

from examples.orders.models import ChargeReceipt

LEDGER_ENV = "ORDERS_LEDGER"
# A test holds a charge here, after it is written, to kill the worker mid-activity.
HOLD_ENV = "ORDERS_HOLD_AFTER_CHARGE_S"


def ledger() -> Path:
    return Path(os.environ.get(LEDGER_ENV) or Path(tempfile.gettempdir()) / "orders-ledger")


def charges() -> list[dict[str, object]]:
    """Every charge the ledger holds, oldest first."""
    path = ledger()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@activity.defn
async def charge_card(order_id: str, amount_cents: int) -> ChargeReceipt:
    """Charge the card of an order; a negative amount refunds it."""
    charge_id = f"ch_{order_id}_{len(charges()) + 1}"
    with ledger().open("a") as file:
        file.write(json.dumps({"order": order_id, "amount_cents": amount_cents}) + "\n")
    await asyncio.sleep(float(os.environ.get(HOLD_ENV) or 0))
    return ChargeReceipt(order_id=order_id, amount_cents=amount_cents, charge_id=charge_id)
