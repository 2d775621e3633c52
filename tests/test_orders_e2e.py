"""The orders example end to end on a dev server: its own worker process (the example's
`worker.py`, unchanged) is SIGKILLed in the middle of `charge_card`, and the charge
happens once.

What decides the outcome: the app's money moves exactly once. The agent's call waits for
a person; approved, it runs as the app's own `charge_card` activity (the history names
it); the worker dies after the charge is written and before the activity returns; a new
worker does not run it again (an opaque tool gets one attempt), the call becomes
ambiguous, a person who checked the payments ledger says it happened, and the order
workflow finishes with the agent's typed decision. Every history replays."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from polling import eventually
from process_signals import kill_process, stop_process
from receipts_e2e_harness import event_line
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from examples.orders.models import Order, RefundDecision
from examples.orders.payments import HOLD_ENV, LEDGER_ENV
from examples.orders.worker import TASK_QUEUE
from examples.orders.workflows import OrderWorkflow, refund_agent
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop.client import NoWorkerAnswered, SteadyloopClient
from steadyloop.plugin import SteadyloopPlugin
from steadyloop.testing import (
    Happened,
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
ORDER = Order(id="K-9", customer="ada", amount_cents=2500, complaint="never arrived")
DECIDED = RefundDecision(refund=True, amount_cents=2500, reason="lost in the post")
START_GUARD_S = 30.0


def model(request: RecordedRequest) -> ScriptedResponse:
    answered = [m for m in request.messages if m.get("role") == "tool"]
    if not answered:
        arguments = {"order_id": "K-9", "amount_cents": -2500}
        return tool_calls_response(ScriptedCall("charge_card", arguments, id="c1"))
    return text_response(DECIDED.model_dump_json())


@asynccontextmanager
async def dev_server() -> AsyncIterator[Client]:
    plugin = SteadyloopPlugin(endpoints=[], blobs="off")
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(),
        dev_server_extra_args=dev_server_args(),
        plugins=[plugin],
    ) as env:
        yield env.client


async def start_worker(
    client: Client, provider: ScriptedServer, ledger: Path, hold_s: float, log: Path
) -> asyncio.subprocess.Process:
    """`python -m examples.orders.worker`, configured as an operator would: environment."""
    endpoint = {"default": {"base_url": provider.base_url, "model": "scripted-model"}}
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "STEADYLOOP_ENDPOINTS": json.dumps(endpoint),
        "STEADYLOOP_BLOB_DIR": "off",
        LEDGER_ENV: str(ledger),
        HOLD_ENV: str(hold_s),
    }
    with log.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "examples.orders.worker", cwd=ROOT, env=env, stderr=stderr
        )

    async def polling() -> bool | None:
        if process.returncode is not None:
            raise AssertionError(f"the worker exited: {log.read_text()[-3000:]}")
        response = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=TASK_QUEUE),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        return True if response.pollers else None

    await eventually(polling, timeout_s=START_GUARD_S, what="the worker to poll", every_s=0.2)
    return process


def charges(ledger: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []


async def test_a_worker_killed_mid_charge_card_charges_once(tmp_path: Path) -> None:
    ledger, log = tmp_path / "ledger", tmp_path / "worker.log"
    workers: list[asyncio.subprocess.Process] = []
    async with ScriptedServer(model) as provider, dev_server() as client:
        try:
            workers.append(await start_worker(client, provider, ledger, 600, log))
            parent = f"order-{uuid.uuid4().hex[:8]}"
            order = await client.start_workflow(
                OrderWorkflow.run, ORDER, id=parent, task_queue=TASK_QUEUE
            )
            agent = SteadyloopClient(client, task_queue=TASK_QUEUE).run(
                refund_agent.child_id_for(parent, "refund")
            )

            async def waiting() -> list[object] | None:
                try:
                    return list(await agent.pending_approvals()) or None
                except Exception:  # the child has not started yet
                    return None

            (call,) = await eventually(waiting, timeout_s=30, what="the approval", every_s=0.2)
            await agent.approve(call)  # type: ignore[arg-type]

            async def charged() -> bool | None:
                return True if charges(ledger) else None

            await eventually(charged, timeout_s=30, what="the charge", every_s=0.1)
            await kill_process(workers[0], 10)  # mid-activity: charged, not yet returned
            workers.append(await start_worker(client, provider, ledger, 0, log))

            async def ambiguous() -> list[object] | None:
                try:
                    snapshot = await agent.snapshot()
                except NoWorkerAnswered:  # the query went to the killed worker's sticky queue
                    return None
                return list(snapshot.ambiguous_receipts) or None

            (lost,) = await eventually(ambiguous, timeout_s=90, what="ambiguity", every_s=0.5)
            assert charges(ledger) == [{"order": "K-9", "amount_cents": -2500}]
            # The person checks the payments ledger: it happened.
            await agent.resolve_receipt(lost.key, Happened(result="refunded 2500"))  # type: ignore[attr-defined]
            result = await order.result()
            assert result == "order K-9: refunded 2500 cents (lost in the post)"
            assert charges(ledger) == [{"order": "K-9", "amount_cents": -2500}]
            child = client.get_workflow_handle(agent.workflow_id)
            lines = [event_line(event) async for event in child.fetch_history_events()]
            scheduled = [line for line in lines if "ACTIVITY_TASK_SCHEDULED" in line]
            assert sum("charge_card" in line for line in scheduled) == 1, lines
            assert not any("steadyloop.run_tool" in line for line in scheduled), lines
            replayer = Replayer(
                workflows=[OrderWorkflow], plugins=[SteadyloopPlugin(endpoints=[], blobs="off")]
            )
            for workflow_id in (parent, agent.workflow_id):
                history = await client.get_workflow_handle(workflow_id).fetch_history()
                replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
                assert replay.replay_failure is None, (workflow_id, replay.replay_failure)
        finally:
            for worker in workers:
                await stop_process(worker, 10)
