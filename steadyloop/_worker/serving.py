"""Asking the workers of a task queue what they serve, before a run is started there.

`describe_serving_worker` starts `DescribeWorkerWorkflow` on the run's task queue and
returns the `WorkerDescription` a worker there answered with (`steadyloop._serving`).
It first asks the server whether anything polls the queue, so a run started with no
worker up is told so at once (with what to pass instead), not after a timeout.

`ServedTools` is the check every starter runs before a run starts (`steadyloop run`
through its own description, the client API's `Thread.start` and through it the web
server): the run's tools and plugins against what the task queue's worker serves
(`steadyloop._serving.unserved`). It asks once per holder (one per `SteadyloopClient`)
and asks again only to confirm a refusal, so a worker restarted with more tools is not
refused from an old answer.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from steadyloop._serving import Unserved, WorkerDescription, unserved
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


class ServedTools:
    """What the worker of `task_queue` serves, asked when a run is about to start there.

    Cost: the first check asks the worker (`describe_serving_worker`: one describe of
    the task queue, then one short workflow and one activity, two billable actions, about
    0.1 s on a dev server); later checks reuse its answer. A run naming a tool the answer
    lacks asks once more before it is refused. No answer refuses nothing: with no worker
    listed as polling the queue (none runs, and the run waits for one; or one started a
    moment ago, before the server lists it) or a worker that cannot say (another
    version), the run starts and its own first task holds it to the same rule: its
    followers then read `RunFailed` naming what it lacks."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue
        self.description: WorkerDescription | None = None
        self._silent = False  # a worker polled but did not say: not asked again

    async def unserved(
        self, tools: list[str], plugins: list[str]
    ) -> tuple[Unserved, WorkerDescription] | None:
        """What of `tools` and `plugins` the serving worker lacks, with its description;
        None when it serves them all, or when no worker said what it serves."""
        if (not tools and not plugins) or self._silent:
            return None
        asked = self.description is None
        if asked:
            self.description = await self._ask()
        missing = self._missing(tools, plugins)
        if missing is not None and not asked:  # confirm with a fresh answer
            self.description = await self._ask()
            missing = self._missing(tools, plugins)
        if missing is None or self.description is None:
            return None
        return missing, self.description

    def _missing(self, tools: list[str], plugins: list[str]) -> Unserved | None:
        return None if self.description is None else unserved(self.description, tools, plugins)

    async def _ask(self) -> WorkerDescription | None:
        if not await _anyone_polls(self.client, self.task_queue):
            return None  # the run waits for a worker; the next start asks again
        try:
            return await describe_serving_worker(
                self.client, self.task_queue, why="checking the run's tools", instead="-"
            )
        except ConfigError:
            self._silent = True  # bounded once (DESCRIBE_WITHIN), not at every start
            return None
