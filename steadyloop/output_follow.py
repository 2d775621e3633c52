"""Reading a run's forwarded output from outside, as it streams (`steadyloop run` uses it).

The output host starts when the run first forwards, so a reader that arrives first
waits for it instead of failing; a host that ended (idle, or the run closed it) is
drained to its last item; a host started again later for the same run (after an idle
close) is followed too. Following ends when the run has ended and its host is drained.
A host the run could not close (the run failed) ends by itself when idle; a caller
that should not wait for that cancels the iteration a moment after the run's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from steadyloop.output_forwarding import OUTPUT_TOPIC, OutputDelta, output_stream_id

DEFAULT_POLL_S = 0.1


async def follow_output(
    client: Client, run_workflow_id: str, *, poll_s: float = DEFAULT_POLL_S
) -> AsyncIterator[OutputDelta]:
    """Every piece of output the run forwards, in order, until the run is over."""
    host_id = output_stream_id(run_workflow_id)
    host = client.get_workflow_handle(host_id)
    run = client.get_workflow_handle(run_workflow_id)
    drained: str | None = None
    while True:
        current = await _host_run(host_id, client)
        if current is None or current == drained:
            if await _ended(run):
                return
            await asyncio.sleep(poll_s)
            continue
        stream = WorkflowStreamClient.create(client, host_id)
        async for item in stream.subscribe(
            [OUTPUT_TOPIC], result_type=OutputDelta, poll_cooldown=timedelta(seconds=poll_s)
        ):
            yield item.data
        drained = (await host.describe()).run_id


async def _host_run(host_id: str, client: Client) -> str | None:
    """The latest run id of the host, or None when it never started."""
    try:
        return (await client.get_workflow_handle(host_id).describe()).run_id
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _ended(run: WorkflowHandle[Any, Any]) -> bool:
    status = (await run.describe()).status
    return status is not None and status != WorkflowExecutionStatus.RUNNING
