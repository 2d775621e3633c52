"""The worker process: `ToolLoopWorkflow` and its output host, the model activities, the
tool activities, the delegation activities (chain measurements, awaiting a child) and the
endpoint-health entity workflow with its activities (breakers and degraded parameters
shared by every run), on one task queue, stopped gracefully.

Graceful, because the obvious stop is wrong for this workload. Temporal's worker, told
to shut down with no grace period, cancels every running activity at once. A cancelled
model stream is merely retried; a cancelled `opaque` tool (one indivisible effect, no
trail) may or may not have done its effect, and the retry cannot tell. So on SIGINT or
SIGTERM the worker stops taking new tasks and gives running activities
`graceful_shutdown` (30 s by default) to finish before cancelling what is left. After
the first signal the default handlers are back: a second Ctrl-C stops at once.
(`docker stop` waits 10 s before SIGKILL; the compose file gives the worker a longer
`stop_grace_period` to match.)

A worker that dies (namespace missing, server gone for good) must not look alive: the
worker's own run task is awaited next to the stop signal, and its error propagates.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from steadyloop.activities.chain_measurement import await_child_run, measure_chain
from steadyloop.activities.endpoint_health import DEFAULT_CACHE_TTL_S, EndpointHealthActivities
from steadyloop.activities.model_stream import ModelActivities
from steadyloop.activities.tool_execution import ToolActivities
from steadyloop.routing.circuit_breaker import BreakerPolicy
from steadyloop.routing.endpoints import EndpointRegistry
from steadyloop.tools.registry import ToolRegistry
from steadyloop.workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop.workflows.output_stream import OutputStreamWorkflow
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

DEFAULT_GRACEFUL_SHUTDOWN = timedelta(seconds=30)
# Every workflow a run needs: the loop, the host of its forwarded output, and the
# endpoint-health entities its routes record outcomes on (started on this task queue).
# A worker serving these also registers `EndpointHealthActivities(...).activities()`:
# the loop reads health through them as local activities.
RUN_WORKFLOWS = [ToolLoopWorkflow, OutputStreamWorkflow, EndpointHealthWorkflow]
# Heartbeats reach the server at most this often. The SDK's default (up to 60 s)
# would let a worker die with "output shown" still unsent; a model stream heartbeats
# only on progress and about once a second, so this costs nothing when idle.
HEARTBEAT_THROTTLE = timedelta(seconds=1)


@dataclass(frozen=True)
class WorkerOptions:
    task_queue: str
    endpoints: EndpointRegistry
    tools: ToolRegistry
    graceful_shutdown: timedelta = DEFAULT_GRACEFUL_SHUTDOWN
    max_concurrent_activities: int | None = None
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    health_cache_ttl_s: float = DEFAULT_CACHE_TTL_S


def build_worker(client: Client, options: WorkerOptions, model: ModelActivities) -> Worker:
    """The Temporal worker; `client` must use steadyloop's (pydantic) data converter."""
    tools = ToolActivities(options.tools)
    health = EndpointHealthActivities(
        client,
        task_queue=options.task_queue,
        policy=options.breaker,
        cache_ttl_s=options.health_cache_ttl_s,
    )
    return Worker(
        client,
        task_queue=options.task_queue,
        workflows=RUN_WORKFLOWS,
        activities=[
            *model.activities(),
            *tools.activities(),
            measure_chain,
            await_child_run,
            *health.activities(),
        ],
        graceful_shutdown_timeout=options.graceful_shutdown,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        max_concurrent_activities=options.max_concurrent_activities,
    )


@asynccontextmanager
async def running_worker(client: Client, options: WorkerOptions) -> AsyncIterator[Worker]:
    """A started worker for the body of the block (the demo and tests use this)."""
    async with ModelActivities(options.endpoints) as model:
        worker = build_worker(client, options, model)
        async with worker:
            yield worker


async def serve(client: Client, options: WorkerOptions, stop: asyncio.Event) -> None:
    """Run a worker until `stop` is set, then shut it down gracefully.

    Raises what the worker raised if it stopped on its own (a fatal error).
    """
    async with ModelActivities(options.endpoints) as model:
        worker = build_worker(client, options, model)
        run = asyncio.create_task(worker.run(), name="steadyloop-worker")
        stopped = asyncio.create_task(stop.wait(), name="steadyloop-worker-stop")
        try:
            await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not run.done():
                await worker.shutdown()
            await run
        finally:
            stopped.cancel()
            if not run.done():
                run.cancel()


def install_stop_signals(
    stop: asyncio.Event, announce: Callable[[str], None]
) -> Callable[[], None]:
    """Set `stop` on the first SIGINT/SIGTERM, then restore the default handlers.

    Returns a function that removes the handlers (for when the worker ended on its own).
    """
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def remove() -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)

    def on_signal(sig: signal.Signals) -> None:
        remove()
        if not stop.is_set():
            announce(sig.name)
            stop.set()

    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    return remove
