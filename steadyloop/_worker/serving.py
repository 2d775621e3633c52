"""Asking the workers of a task queue what they serve, before `steadyloop run` starts a run.

`describe_serving_worker` starts `DescribeWorkerWorkflow` on the run's task queue and
returns the `WorkerDescription` a worker there answered with (`steadyloop._serving`).
It first asks the server whether anything polls the queue, so a run started with no
worker up is told so at once (with what to pass instead), not after a timeout.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from steadyloop._serving import WorkerDescription
from steadyloop._worker.config import ConfigError
from steadyloop._workflows.worker_description import DescribeWorkerWorkflow

# The whole exchange: one workflow task, one activity, one more workflow task.
DESCRIBE_WITHIN = timedelta(seconds=15)


async def describe_serving_worker(
    client: Client, task_queue: str, *, why: str, instead: str
) -> WorkerDescription:
    """What a worker polling `task_queue` serves; `ConfigError` naming `why` the run
    needed to ask and what to pass `instead` when no worker answers."""
    if not await _anyone_polls(client, task_queue):
        raise ConfigError(
            f"{why}, and no worker polls task queue {task_queue!r} to ask: start one "
            f"(`steadyloop worker --task-queue {task_queue}`), or {instead}"
        )
    try:
        return await client.execute_workflow(
            DescribeWorkerWorkflow.run,
            id=f"steadyloop-describe-worker-{uuid.uuid4()}",
            task_queue=task_queue,
            execution_timeout=DESCRIBE_WITHIN,
        )
    except WorkflowFailureError as exc:
        cause: BaseException = exc
        while isinstance(getattr(cause, "cause", None), BaseException):
            cause = cause.cause  # type: ignore[attr-defined]
        raise ConfigError(
            f"{why}, and the worker on task queue {task_queue!r} did not say what it serves "
            f"({cause}); upgrade it to this version of steadyloop, or {instead}"
        ) from None


async def _anyone_polls(client: Client, task_queue: str) -> bool:
    try:
        response = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except RPCError:
        return True  # the server cannot say: ask, bounded by DESCRIBE_WITHIN
    return bool(response.pollers)
