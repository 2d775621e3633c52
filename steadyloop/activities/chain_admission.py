"""The admission activities: ask a tenant's admission entity, and tell it which runs closed.

- `admit_chain_run`: an update-with-start on the tenant's `ChainAdmissionWorkflow`
  (created on first use, like the endpoint-health entities). Workflow code reaches the
  entity only through this activity, so the answer is recorded in the asking run's
  history and a replay reads the same decision. A retry after a lost answer is safe:
  the entity admits a child id once (`steadyloop.chain_admission`).
- `closed_chain_runs`: which of the runs the entity counts as active have closed, by
  describing each (a describe reads the run itself, not the lagging visibility store).
  A run that is gone (not found) has closed; a run that could not be described is left
  counted, so the ceiling errs toward refusing, never toward admitting.

Register both on the worker that runs the entities (`ChainAdmissionActivities(...)
.activities()`, on the same task queue).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from steadyloop.chain_admission import (
    ADMISSION_WORKFLOW,
    ADMISSION_WORKFLOW_ID_PREFIX,
    ADMIT_CHAIN_RUN_ACTIVITY,
    CLOSED_CHAIN_RUNS_ACTIVITY,
    AdmissionAnswer,
    AdmissionEntityInput,
    AdmissionRequest,
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
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.id_prefix = id_prefix
        self.continue_as_new_after = continue_as_new_after

    def activities(self) -> Sequence[Callable[..., Any]]:
        return [self.admit_chain_run, self.closed_chain_runs]

    @activity.defn(name=ADMIT_CHAIN_RUN_ACTIVITY)
    async def admit_chain_run(self, request: AdmissionRequest) -> AdmissionAnswer:
        return await self.admit(request)

    async def admit(self, request: AdmissionRequest) -> AdmissionAnswer:
        """The entity's answer (also callable outside an activity: benchmarks, tests)."""
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            ADMISSION_WORKFLOW,
            AdmissionEntityInput(
                tenant=request.tenant, continue_as_new_after=self.continue_as_new_after
            ),
            id=admission_workflow_id(request.tenant, self.id_prefix),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        answer: AdmissionAnswer = await self.client.execute_update_with_start_workflow(
            "admit", request, start_workflow_operation=start, result_type=AdmissionAnswer
        )
        return answer

    @activity.defn(name=CLOSED_CHAIN_RUNS_ACTIVITY)
    async def closed_chain_runs(self, request: ClosedRunsInput) -> list[str]:
        closed = await asyncio.gather(*(self._closed(w) for w in request.workflow_ids))
        return [w for w, gone in zip(request.workflow_ids, closed, strict=True) if gone]

    async def _closed(self, workflow_id: str) -> bool:
        try:
            described = await self.client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return True
            activity.logger.warning("could not describe run %r: %s", workflow_id, error)
            return False
        return described.status != WorkflowExecutionStatus.RUNNING
