"""Reading a run's forwarded output from outside, as it streams (`steadyloop run` uses it).

The output host starts when the run first forwards, so a reader that arrives first
waits for it instead of failing; a host that ended (idle, or the run closed it) is
drained to its last item; a host started again later for the same run (after an idle
close) is followed too. Following ends when the run has ended and its host is drained.
A host the run could not close (the run failed) ends by itself when idle; a caller
that should not wait for that cancels the iteration a moment after the run's result.

The host is keyed to the run's first execution (`output_stream_id(id, run_id)`): a
workflow id used again for a new run has a new host, so following one run never shows
another's text. Without a run id, the id's latest run is followed.

A poll can fail while the host is alive: when a signal lands during the workflow task
in which the host continues-as-new, that task fails (`UnhandledCommand`) and the server
aborts the updates admitted meanwhile with "unexpected workflow task failure", which
`WorkflowStreamClient.subscribe` raises instead of retrying. Following picks up again
right after the last item it yielded, so nothing is lost or repeated; it gives up only
after `MAX_POLL_FAILURES` failures in a row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from steadyloop.output.forwarding import OUTPUT_TOPIC, OutputDelta, output_stream_id

logger = logging.getLogger(__name__)

DEFAULT_POLL_S = 0.1
# Failed polls in a row (with backoff, about 25 s in all) before following gives up.
MAX_POLL_FAILURES = 10
MAX_BACKOFF_S = 5.0


async def follow_output(
    client: Client,
    run_workflow_id: str,
    run_id: str | None = None,
    *,
    poll_s: float = DEFAULT_POLL_S,
) -> AsyncIterator[OutputDelta]:
    """Every piece of output the run forwards, in order, until the run is over.

    `run_id`: the run's first execution run id (None: the latest run of the id)."""
    if run_id is None:
        run_id = await first_run_id(client.get_workflow_handle(run_workflow_id))
    host_id = output_stream_id(run_workflow_id, run_id)
    host = client.get_workflow_handle(host_id)
    drained: str | None = None
    while True:
        current = await _host_run(host)
        if current is None or current == drained:
            if await run_over(client, run_workflow_id, run_id):
                return
            await asyncio.sleep(poll_s)
            continue
        async for delta in _follow_chain(client, host_id, poll_s):
            yield delta
        drained = await _host_run(host)


async def _follow_chain(client: Client, host_id: str, poll_s: float) -> AsyncIterator[OutputDelta]:
    """One host's continue-as-new chain, from its first item to its end.

    Offsets are global across the chain, so a failed poll resumes right after the last
    item yielded: no item twice, none skipped.
    """
    stream = WorkflowStreamClient.create(client, host_id)
    offset = 0
    failures = 0
    while True:
        try:
            async for item in stream.subscribe(
                [OUTPUT_TOPIC],
                from_offset=offset,
                result_type=OutputDelta,
                poll_cooldown=timedelta(seconds=poll_s),
            ):
                offset = item.offset + 1
                failures = 0
                yield item.data
            return
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:
            failures += 1
            if failures >= MAX_POLL_FAILURES:
                raise
            logger.info("output poll failed (following again from offset %d): %s", offset, error)
            await asyncio.sleep(min(poll_s * 2**failures, MAX_BACKOFF_S))


async def _host_run(host: WorkflowHandle[Any, Any]) -> str | None:
    """The latest run id of the host, or None when it never started."""
    try:
        return (await host.describe()).run_id
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def first_run_id(run: WorkflowHandle[Any, Any]) -> str:
    """The first execution run id of the run `run` names: the key of its output host.

    A handle from `start_workflow` knows it; otherwise the execution is described (the
    latest run of the id, when the handle names no run).
    """
    if run.first_execution_run_id:
        return run.first_execution_run_id
    info = (await run.describe()).raw_description.workflow_execution_info
    return info.first_run_id or info.execution.run_id


async def run_over(client: Client, run_workflow_id: str, run_id: str) -> bool:
    """Whether the run that began as execution `run_id` has ended.

    The id's latest execution answers, unless the id was used again since: then that is
    another run, and this one is over.
    """
    described = await client.get_workflow_handle(run_workflow_id).describe()
    first = described.raw_description.workflow_execution_info.first_run_id
    if first and first != run_id:
        return True
    return described.status is not None and described.status != WorkflowExecutionStatus.RUNNING


async def run_completed(client: Client, run_workflow_id: str, run_id: str) -> bool:
    """Whether the run that began as execution `run_id` completed: returned its result.

    A run returns only after publishing its stop, so its followers are owed one; False
    while it runs, or when it closed otherwise (failed, terminated, timed out, canceled).
    """
    described = await client.get_workflow_handle(run_workflow_id).describe()
    first = described.raw_description.workflow_execution_info.first_run_id
    if not first or first == run_id:
        return described.status == WorkflowExecutionStatus.COMPLETED
    return await _chain_completed(client, run_workflow_id, run_id)


async def _chain_completed(client: Client, run_workflow_id: str, run_id: str) -> bool:
    """Whether the chain from execution `run_id` completed, read from the close event of
    each execution in it: the id was used again since, so describing it names another run."""
    execution = run_id
    while True:
        handle = client.get_workflow_handle(run_workflow_id, run_id=execution)
        events = handle.fetch_history_events(
            event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
        )
        close = await anext(aiter(events), None)
        if close is None:
            return False  # no close event: the chain still runs
        if close.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
        attributes = close.workflow_execution_continued_as_new_event_attributes
        execution = attributes.new_execution_run_id
