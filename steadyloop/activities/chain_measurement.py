"""The activities behind delegation: chain measurements from Temporal visibility, and
waiting for a child run this run's state does not know.

Register both on the worker (`activities=[measure_chain, await_child_run]`); they use
the worker's own client (`activity.client()`).

`measure_chain` counts runs *other than* the measuring run and its children, through
the custom search attributes chain runs carry (`steadyloop.chains.search_attributes`);
the workflow adds what it knows about itself. Each count is its own query, and a query
that fails leaves its field None (the workflow then leaves that rule out, which
admits), with the error in `failed`: a visibility outage must not stop every
delegation, and must not be read as "zero runs". Nothing here decides admission.

`await_child_run` waits for a run that already exists under a child's derived id
(the parent was restarted or reset and its ledger forgot the call). It heartbeats
while it waits; a child that failed or was cancelled is a non-retryable failure,
whose message the workflow turns into the call's tool message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from steadyloop.chains.delegation_tool import AWAIT_CHILD_RUN_ACTIVITY, AwaitChildRunInput
from steadyloop.chains.limits import (
    MEASURE_CHAIN_ACTIVITY,
    ChainMeasurements,
    MeasureChainInput,
    PairRecency,
)
from steadyloop.chains.queries import others_in_chain, others_of_tenant
from steadyloop.errors import CHILD_RUN_FAILED
from steadyloop.run.models import RunResult

# More starts of one pair than this in one chain would be a runaway anyway; the latest
# start among the first this many listed is taken.
MAX_PAIR_LISTING = 1000
AWAIT_HEARTBEAT_S = 10.0


async def _count(client: Client, query: str) -> int:
    return (await client.count_workflows(query)).count


async def _last_start(client: Client, query: str) -> PairRecency:
    latest: datetime | None = None
    async for execution in client.list_workflows(query, limit=MAX_PAIR_LISTING):
        if latest is None or execution.start_time > latest:
            latest = execution.start_time
    return PairRecency(last_started=latest)


async def measure(client: Client, request: MeasureChainInput) -> ChainMeasurements:
    """The counts `request.kinds` need, each None when its query failed."""
    kinds = set(request.kinds)
    me = request.run
    queries: dict[str, Callable[[], Awaitable[object]]] = {}
    if "chain_budget" in kinds:
        queries["runs_in_chain"] = lambda: _count(client, others_in_chain(request.chain_root, me))
    if request.pair is not None:
        pair_query = others_in_chain(request.chain_root, me, pair=request.pair)
        if "pair_seen" in kinds:
            queries["pair_runs"] = lambda: _count(client, pair_query)
        if "pair_cooldown" in kinds:
            queries["pair_recency"] = lambda: _last_start(client, pair_query)
    if "tenant_rate" in kinds and request.window_start is not None:
        since = request.window_start
        queries["tenant_started_in_window"] = lambda: _count(
            client, others_of_tenant(request.tenant, me, started_since=since)
        )
    if "tenant_ceiling" in kinds:
        queries["tenant_active"] = lambda: _count(
            client, others_of_tenant(request.tenant, me, running=True)
        )
    names = list(queries)
    answers = await asyncio.gather(*(queries[n]() for n in names), return_exceptions=True)
    values: dict[str, object] = {}
    failed: dict[str, str] = {}
    for name, answer in zip(names, answers, strict=True):
        if isinstance(answer, asyncio.CancelledError):
            raise answer
        if isinstance(answer, BaseException):
            failed[name] = f"{type(answer).__name__}: {answer}"
        else:
            values[name] = answer
    return ChainMeasurements.model_validate({**values, "failed": failed})


@activity.defn(name=MEASURE_CHAIN_ACTIVITY)
async def measure_chain(request: MeasureChainInput) -> ChainMeasurements:
    measured = await measure(activity.client(), request)
    if measured.failed:
        activity.logger.warning("chain measurements failed: %s", measured.failed)
    return measured


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
