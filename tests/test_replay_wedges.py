"""A run waiting for a person, queried while it waits, on a worker that replays every
activation, never wedges: no failed workflow task, and its history replays.

The failure this guards: a run waiting on an ambiguous call, replayed by a new worker or
by any worker answering a query, failed its workflow task forever with "Non-deprecated
patch marker encountered ... but there is no corresponding change command" (a patch
asked after a local activity), or with a timer started live and not on replay (a lease
decided by comparing `workflow.now()` with its expiry). Its queries failed the same way,
so nobody could resolve the call and the run could never end. On a dev server with the
worker's workflow cache off (`max_cached_workflows=0`) every activation is a replay, so
any such divergence shows in the run's history at once, not after a kill.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from busy_worker import slowed_event_log
from loop_harness import ENDPOINT, Effects, assert_every_call_answered, build_tools, run_input
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._receipts.ledger import Happened
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import (
    AmbiguousCall,
    ResolveReceipt,
    RunInput,
    RunProgress,
    RunResult,
)
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop.testing import (
    ScriptedCall,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

# Queries while the call waits (the reproduction asked every few hundred ms);
# the event log's local activities are slowed so that queries land while one runs.
QUERY_EVERY_S = 0.05
QUERYING_FOR_S = 3.0
SLOW_LOG_S = 1.0


@dataclass
class Uncached:
    client: Client
    task_queue: str
    effects: Effects


@asynccontextmanager
async def uncached_worker(script: list[Any]) -> AsyncIterator[Uncached]:
    """A dev server and one worker with no workflow cache, serving the loop's tools."""
    effects = Effects()
    async with ScriptedServer(script) as server:
        endpoints = EndpointRegistry([server.endpoint(ENDPOINT)])
        async with ModelActivities(endpoints, environ={}) as model:
            with tempfile.TemporaryDirectory(prefix="steadyloop-blobs-") as blobs:
                env = await WorkflowEnvironment.start_local(
                    data_converter=steadyloop_data_converter(blobs),
                    dev_server_existing_path=dev_server_path(),
                    dev_server_extra_args=dev_server_args(),
                )
                async with env:
                    task_queue = f"uncached-{uuid.uuid4()}"
                    health = EndpointHealthActivities(env.client, task_queue=task_queue)
                    async with Worker(
                        env.client,
                        task_queue=task_queue,
                        workflows=RUN_WORKFLOWS,
                        activities=slowed_event_log(
                            [
                                *model.activities(),
                                *ToolActivities(build_tools(effects)).activities(),
                                *health.activities(),
                            ],
                            SLOW_LOG_S,
                        ),
                        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
                        max_cached_workflows=0,
                    ):
                        yield Uncached(env.client, task_queue, effects)


async def _queried_until_ambiguous(handle: WorkflowHandle[Any, Any]) -> AmbiguousCall:
    """Query the waiting run as a person's tools would, then keep querying a while."""
    found: AmbiguousCall | None = None
    loop = asyncio.get_running_loop()
    until = None
    for _ in range(600):
        open_calls = await handle.query("ambiguous_receipts", result_type=list[AmbiguousCall])
        await handle.query("progress", result_type=RunProgress)
        if open_calls and found is None:
            found, until = open_calls[0], loop.time() + QUERYING_FOR_S
        if until is not None and loop.time() >= until:
            break
        await asyncio.sleep(QUERY_EVERY_S)
    assert found is not None, "no call became ambiguous"
    return found


def _failed_tasks(events: list[Any]) -> list[str]:
    return [
        e.workflow_task_failed_event_attributes.failure.message
        for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


def _runs() -> list[RunInput]:
    base = run_input("note it", deadline_s=600)
    forwarded = base.model_copy(
        update={"forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05)}
    )
    return [base, forwarded]


@pytest.mark.parametrize("run", _runs(), ids=["log_in_history", "forwarded"])
async def test_a_run_waiting_on_an_ambiguous_call_answers_queries_and_is_resolved(
    run: RunInput,
) -> None:
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "pay"}, id="p1")),
        text_response("paid once"),
    ]
    async with uncached_worker(script) as worker:
        handle = await worker.client.start_workflow(
            "ToolLoopWorkflow",
            run,
            id=f"wedge-{uuid.uuid4()}",
            task_queue=worker.task_queue,
            result_type=RunResult,
        )
        call = await _queried_until_ambiguous(handle)
        resolution = Happened(result="paid: ref 7")
        await handle.execute_update(
            "resolve_receipt", ResolveReceipt(key=call.key, resolution=resolution), result_type=str
        )
        result = await handle.result()
        history = await handle.fetch_history()
        started = worker.effects.started["slow_note"]
        replayed = await Replayer(
            workflows=RUN_WORKFLOWS, data_converter=worker.client.data_converter
        ).replay_workflow(history, raise_on_replay_failure=False)
    assert _failed_tasks(list(history.events)) == []
    assert replayed.replay_failure is None, replayed.replay_failure
    assert result.stop_reason == "final_answer" and started == 1
    assert_every_call_answered(result.transcript)
