"""Many runs hit an outage at once, the provider comes back, every run
completes, and the endpoint's health entity is neither wedged nor past its history
limits. A real dev server (its 10-updates-in-flight ceiling wedges the entity
when each run sends its own update), `RUN_WORKFLOWS` on one worker, a scripted provider.

The provider holds every run's first request until all `RUNS` have asked (so every run
planned its turn on a closed breaker), answers each with a 503 (the outage), then
answers everything after (the provider is back). Each run records one failure and
retries on the same endpoint after its backoff. The entity continues as new every
`HANDOVER` messages, so reports also arrive while it hands over (an update in flight
then is aborted and must be sent again, not lost).

What decides the outcome: every run's final answer; the entity counted exactly one
failure per run (none lost to a refusal, none counted twice); each of its executions
stayed within its continue-as-new budget; and it still answers an update afterwards.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid

import pytest
from loop_harness import ENDPOINT, MODEL, Effects, build_tools, run_input
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoint_health import EndpointHealth, EndpointOutcome, health_workflow_id
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunResult
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.process import RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    error_response,
    text_response,
)

pytestmark = pytest.mark.slow

RUNS = 20
HANDOVER = 8  # the entity continues as new after this many messages
# A breaker that opens during the outage (it is meant to) and whose cool-off outlasts
# the test, so no probe is involved: the runs retry on the endpoint they planned.
POLICY = BreakerPolicy(failure_threshold=5, window_s=60, cool_off_s=600)


class Outage:
    """The provider: every first request held until `RUNS` have arrived, answered 503;
    every later one answered."""

    def __init__(self) -> None:
        self.first_requests = 0
        self.all_down = asyncio.Event()

    async def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        if self.first_requests < RUNS:
            self.first_requests += 1
            if self.first_requests == RUNS:
                self.all_down.set()
            await asyncio.wait_for(self.all_down.wait(), 60)
            return error_response(503, "overloaded", type="server_error")
        return text_response("back")


async def test_runs_hit_by_one_outage_all_complete_and_the_entity_stays_within_its_limits() -> None:
    outage = Outage()
    async with ScriptedServer(outage) as server:
        endpoints = EndpointRegistry([server.endpoint(ENDPOINT)])
        async with ModelActivities(endpoints, environ={}) as model:
            env = await WorkflowEnvironment.start_local(
                data_converter=steadyloop_data_converter(
                    tempfile.mkdtemp(prefix="steadyloop-outage-")
                ),
                dev_server_existing_path=dev_server_path(),
                dev_server_extra_args=dev_server_args(),
            )
            async with env:
                task_queue = f"outage-{uuid.uuid4().hex[:8]}"
                health = EndpointHealthActivities(
                    env.client, task_queue=task_queue, policy=POLICY, continue_as_new_after=HANDOVER
                )
                async with Worker(
                    env.client,
                    task_queue=task_queue,
                    workflows=RUN_WORKFLOWS,
                    activities=[
                        *model.activities(),
                        *ToolActivities(build_tools(Effects())).activities(),
                        *health.activities(),
                    ],
                ):
                    handles = [
                        await env.client.start_workflow(
                            ToolLoopWorkflow.run,
                            run_input("say back", max_turns=2),
                            id=f"outage-run-{i}-{uuid.uuid4().hex[:6]}",
                            task_queue=task_queue,
                        )
                        for i in range(RUNS)
                    ]
                    import time

                    t0 = time.monotonic()
                    await outage.all_down.wait()
                    print("DOWN", time.monotonic() - t0)
                    results: list[RunResult] = await asyncio.wait_for(
                        asyncio.gather(*(h.result() for h in handles)), 240
                    )
                    print("DONE", time.monotonic() - t0, health.records.updates_sent)
                    entity = env.client.get_workflow_handle(health_workflow_id(ENDPOINT))
                    after: EndpointHealth = await entity.query("health", result_type=EndpointHealth)
                    # Not wedged: a report now is answered, and lands on the state above.
                    later = await health.record_endpoint_outcome(
                        EndpointOutcome(endpoint=ENDPOINT, outcome="success")
                    )
                    executions = await _executions(env, health_workflow_id(ENDPOINT))

    assert [r.stop_reason for r in results] == ["final_answer"] * RUNS
    assert {r.final_answer for r in results} == {"back"}
    assert all(r.stats.model_attempts == 2 for r in results)  # one 503, then the answer
    assert all(request.json["model"] == MODEL for request in server.requests)
    # One failure per run, each counted once, across the entity's hand-overs.
    assert after.breaker.failures_total == RUNS
    assert after.breaker.opened_count == 1
    assert later.breaker.failures_total == RUNS
    # It continued as new (each execution handled at most HANDOVER messages, plus those
    # admitted while it handed over) and no execution came near Temporal's limits.
    assert len(executions) >= 2
    assert max(executions) < 10 * HANDOVER, executions
    assert health.records.updates_sent < RUNS  # batched: fewer updates than reports


async def _executions(env: WorkflowEnvironment, workflow_id: str) -> list[int]:
    """The event count of each execution of `workflow_id`, first to last (walked back from
    the running one through each start's `continued_execution_run_id`); none of them
    failed a workflow task."""
    described = await env.client.get_workflow_handle(workflow_id).describe()
    assert described.status == WorkflowExecutionStatus.RUNNING
    counts: list[int] = []
    run_id = described.run_id
    while run_id:
        history = await env.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        counts.append(len(history.events))
        failed = [
            e.workflow_task_failed_event_attributes.failure.message
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        ]
        assert not failed, failed
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id
    return counts[::-1]
