"""The admission activities: ask a tenant's admission entity, and tell it which runs closed.

- `admit_chain_run`: an update-with-start on the tenant's `ChainAdmissionWorkflow`
  (created on first use, like the endpoint-health entities), its `admit_many` update
  carrying every request this process queued for the tenant meanwhile
  (`steadyloop._activities.update_batches`: one update in flight per tenant and process,
  refusals sent again with backoff). Workflow code reaches the
  entity only through this activity, so the answer is recorded in the asking run's
  history and a replay reads the same decision. A retry after a lost answer is safe:
  the entity admits a child id once (`steadyloop._chains.admission`).
- `closed_chain_runs`: which of the runs the entity counts as active have closed, by
  describing each (a describe reads the run itself, not the lagging visibility store).
  A run not found is reported apart (it may be a child its parent has not started yet;
  the entity decides by its age); a run that could not be described is reported
  running, so the ceiling errs toward refusing, never toward admitting.

Register both on the worker that runs the entities (`ChainAdmissionActivities(...)
.activities()`, on the same task queue).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Literal

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._activities.update_batches import UpdateBatcher
from steadyloop._chains.admission import (
    ADMISSION_WORKFLOW,
    ADMISSION_WORKFLOW_ID_PREFIX,
    ADMIT_CHAIN_RUN_ACTIVITY,
    CLOSED_CHAIN_RUNS_ACTIVITY,
    DEFAULT_MAX_LEDGER_BYTES,
    AdmissionAnswer,
    AdmissionAnswers,
    AdmissionBatch,
    AdmissionEntityInput,
    AdmissionRequest,
    ClosedRuns,
    ClosedRunsInput,
    admission_workflow_id,
)

__all__ = ["ChainAdmissionActivities"]


class ChainAdmissionActivities:
    """The admission activities, bound to a client and the entities' task queue."""

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        id_prefix: str = ADMISSION_WORKFLOW_ID_PREFIX,
        continue_as_new_after: int = 500,
        max_ledger_bytes: int = DEFAULT_MAX_LEDGER_BYTES,
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.id_prefix = id_prefix
        self.continue_as_new_after = continue_as_new_after
        self.max_ledger_bytes = max_ledger_bytes
        self.batches: UpdateBatcher[AdmissionRequest, AdmissionAnswer] = UpdateBatcher(
            self._send, size=lambda request: len(request.model_dump_json())
        )

    def activities(self) -> Sequence[Callable[..., Any]]:
        return [self.admit_chain_run, self.closed_chain_runs]

    @activity.defn(name=ADMIT_CHAIN_RUN_ACTIVITY)
    async def admit_chain_run(self, request: AdmissionRequest) -> AdmissionAnswer:
        return await self.admit(request)

    async def admit(self, request: AdmissionRequest) -> AdmissionAnswer:
        """The entity's answer (also callable outside an activity: benchmarks, tests),
        sent with whatever else this process asks the same tenant meanwhile."""
        return await self.batches.call(request.tenant, request)

    async def _send(self, tenant: str, requests: list[AdmissionRequest]) -> list[AdmissionAnswer]:
        """One `admit_many` update. A plain update first (the entity usually runs: it is
        one per tenant); only when there is none running, an update-with-start, which
        costs more per call."""
        workflow_id = admission_workflow_id(tenant, self.id_prefix)
        batch = AdmissionBatch(requests=requests)
        try:
            known: AdmissionAnswers = await self.client.get_workflow_handle(
                workflow_id
            ).execute_update("admit_many", batch, result_type=AdmissionAnswers)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            return known.answers
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            ADMISSION_WORKFLOW,
            AdmissionEntityInput(
                tenant=tenant,
                continue_as_new_after=self.continue_as_new_after,
                max_ledger_bytes=self.max_ledger_bytes,
            ),
            id=workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        answered: AdmissionAnswers = await self.client.execute_update_with_start_workflow(
            "admit_many", batch, start_workflow_operation=start, result_type=AdmissionAnswers
        )
        return answered.answers

    @activity.defn(name=CLOSED_CHAIN_RUNS_ACTIVITY)
    async def closed_chain_runs(self, request: ClosedRunsInput) -> ClosedRuns:
        states = await asyncio.gather(*(self._state(w) for w in request.workflow_ids))
        pairs = list(zip(request.workflow_ids, states, strict=True))
        return ClosedRuns(
            closed=[w for w, state in pairs if state == "closed"],
            missing=[w for w, state in pairs if state == "missing"],
        )

    async def _state(self, workflow_id: str) -> Literal["running", "closed", "missing"]:
        try:
            described = await self.client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return "missing"  # gone, or a child its parent has not started yet
            activity.logger.warning("could not describe run %r: %s", workflow_id, error)
            return "running"
        return "running" if described.status == WorkflowExecutionStatus.RUNNING else "closed"
