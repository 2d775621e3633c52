"""The tools of `steadyloop demo --scenario tour`, served by its workers.

Two side effects a person must be able to account for, each appending one line to a
file in the tour's outbox (`STEADYLOOP_OUTBOX_DIR`), so a repeat would show:

- `refund` is declared `approval=True`: every call waits for a person.
- `charge` is opaque (one indivisible effect, no trail) with a short timeout. In the
  worker process the tour starts with `STEADYLOOP_TOUR_CRASH=1`, it kills its own
  process with SIGKILL right after the effect, before it can report: the lost machine
  the receipts are for. The call is then ambiguous, and a person says what happened.

Served by `steadyloop worker --tools steadyloop._cli.demo_tour_tools:registry`, so
the worker the tour kills is the real command, not a stand-in.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

from steadyloop.tools import ToolRegistry, tool
from steadyloop.tools.examples import OUTBOX_DIR_ENV

CRASH_ENV = "STEADYLOOP_TOUR_CRASH"
REFUNDS_FILE = "refunds.txt"
CHARGES_FILE = "charges.txt"
CHARGE_TIMEOUT = timedelta(seconds=3)


def _append(name: str, line: str) -> Path:
    outbox = Path(os.environ.get(OUTBOX_DIR_ENV) or ".")
    outbox.mkdir(parents=True, exist_ok=True)
    path = outbox / name
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())
    return path


@tool(effect="opaque", approval=True)
async def refund(order_id: str, cents: int) -> str:
    """Refund an order to the customer's card (a person approves each refund)."""
    _append(REFUNDS_FILE, f"refund {cents} cents on {order_id}")
    return f"refunded {cents} cents on {order_id}"


@tool(effect="opaque", timeout=CHARGE_TIMEOUT)
async def charge(order_id: str, cents: int) -> str:
    """Charge an order to the customer's card."""
    _append(CHARGES_FILE, f"charge {cents} cents on {order_id}")
    if os.environ.get(CRASH_ENV) == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies before it can report
    return f"charged {cents} cents on {order_id}"


registry = ToolRegistry([refund, charge])
