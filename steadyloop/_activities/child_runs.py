"""Waiting for a child run this run's state does not know.

`await_child_run` waits for a run that already exists under a child's derived id
(the parent was restarted or reset and its ledger forgot the call). It heartbeats
while it waits; a child that failed or was cancelled is a non-retryable failure,
whose message the workflow turns into the call's tool message. Register it on the
worker (`activities=[await_child_run]`); it uses the worker's own client
(`activity.client()`).
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from steadyloop._chains.delegation_tool import AWAIT_CHILD_RUN_ACTIVITY, AwaitChildRunInput
from steadyloop._run.models import RunResult
from steadyloop.errors import CHILD_RUN_FAILED

AWAIT_HEARTBEAT_S = 10.0


@activity.defn(name=AWAIT_CHILD_RUN_ACTIVITY)
async def await_child_run(request: AwaitChildRunInput) -> RunResult:
    handle = activity.client().get_workflow_handle(request.workflow_id, result_type=RunResult)
    waiting: asyncio.Future[RunResult] = asyncio.ensure_future(handle.result())
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=AWAIT_HEARTBEAT_S)
            if done:
                break
            activity.heartbeat()
        return waiting.result()
    except WorkflowFailureError as error:
        raise ApplicationError(
            f"run {request.workflow_id} ended without a result: {error.cause or error}",
            type=CHILD_RUN_FAILED,
            non_retryable=True,
        ) from None
    finally:
        waiting.cancel()
