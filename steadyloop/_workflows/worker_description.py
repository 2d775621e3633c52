"""`DescribeWorkerWorkflow`: one activity, asked by `steadyloop run` before a run starts.

Deterministic workflow code. It exists because a client cannot call an activity: to
learn what the workers of a task queue serve (`steadyloop._serving`), the command line
starts this workflow there and reads its result. One attempt, bounded: a worker that
cannot describe itself is reported, not waited for.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyloop._serving import (
        DESCRIBE_WORKER_ACTIVITY,
        DESCRIBE_WORKER_WORKFLOW,
        WorkerDescription,
    )

DESCRIBE_TIMEOUT = timedelta(seconds=10)


@workflow.defn(name=DESCRIBE_WORKER_WORKFLOW)
class DescribeWorkerWorkflow:
    @workflow.run
    async def run(self) -> WorkerDescription:
        described: WorkerDescription = await workflow.execute_activity(
            DESCRIBE_WORKER_ACTIVITY,
            result_type=WorkerDescription,
            schedule_to_close_timeout=DESCRIBE_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        return described
