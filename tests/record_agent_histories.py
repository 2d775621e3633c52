"""Record replay fixtures of a user's workflow that runs an agent as a child:
`python tests/record_agent_histories.py` (from tests/), into tests/histories/agents/.

The orders example (`examples/orders/`): the order workflow, and its agent's run, which
answers prose once (corrected by the output check), asks to call `charge_card`, waits
for a person's approval, runs it as the app's own activity and answers the typed
decision. `tests/test_replay_agents.py` replays both with the plugin's workflows.
Re-record only on purpose (a deliberate workflow change)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.orders.models import Order, RefundDecision  # noqa: E402
from examples.orders.payments import LEDGER_ENV, charge_card  # noqa: E402
from examples.orders.workflows import OrderWorkflow, refund_agent  # noqa: E402
from steadyloop.testing import AgentEnv, ScriptedModel  # noqa: E402
from steadyloop.tools import activity_as_tool  # noqa: E402

OUT = Path(__file__).parent / "histories" / "agents"
PARENT = "order-R-7"


async def record() -> None:
    os.environ[LEDGER_ENV] = str(Path(tempfile.mkdtemp()) / "ledger")
    decided = RefundDecision(refund=True, amount_cents=900, reason="late delivery")
    tools = [activity_as_tool(charge_card, approval=True)]
    async with AgentEnv(tools, workflows=[OrderWorkflow], activities=[charge_card]) as env:
        env.script(
            ScriptedModel()
            .says("A refund seems fair.")
            .calls("charge_card", order_id="R-7", amount_cents=-900)
            .says(decided.model_dump_json())
        )
        order = Order(id="R-7", customer="bo", amount_cents=900, complaint="two weeks late")
        handle = await env.client.start_workflow(
            OrderWorkflow.run, order, id=PARENT, task_queue=env.task_queue
        )
        child = refund_agent.child_id_for(PARENT, "refund")
        agent = await env.agent(child)
        await agent.approve("charge_card")
        async with env.skipping_time():
            print(await handle.result())
        OUT.mkdir(parents=True, exist_ok=True)
        for name, workflow_id in (("order_parent", PARENT), ("order_agent_child", child)):
            history = await env.client.get_workflow_handle(workflow_id).fetch_history()
            (OUT / f"{name}.json").write_text(history.to_json())
            print(f"wrote {OUT / name}.json ({len(history.events)} events)")


if __name__ == "__main__":
    asyncio.run(record())
