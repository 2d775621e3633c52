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

"Ready" means polling, not merely constructed: `serve` calls `on_ready` once the
server lists this worker among the pollers of its task queue (workflow and activity
tasks), so a script that waits for the ready line and then starts a run is served.
The worker also serves `DescribeWorkerWorkflow` and its activity, which `steadyloop
run` asks for the defaults it takes from the worker (`steadyloop._serving`).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import (
    DEFAULT_CACHE_TTL_S,
    DEFAULT_QUIET_CACHE_TTL_S,
)
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._mcp.config import McpServerConfig
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._worker.sandbox import (
    PASSED_THROUGH_WORKFLOW_HELPERS,
    PASSED_THROUGH_WORKFLOW_MODULES,
    RUN_WORKFLOWS,
    workflow_runner,
)
from steadyloop.plugin import DEFAULT_GRACEFUL_SHUTDOWN, HEARTBEAT_THROTTLE, SteadyloopPlugin
from steadyloop.telemetry import worker_plugins
from steadyloop.tools._registry import ToolRegistry

__all__ = [
    "DEFAULT_GRACEFUL_SHUTDOWN",
    "HEARTBEAT_THROTTLE",
    "PASSED_THROUGH_WORKFLOW_HELPERS",
    "PASSED_THROUGH_WORKFLOW_MODULES",
    "RUN_WORKFLOWS",
    "WorkerOptions",
    "build_worker",
    "install_stop_signals",
    "running_worker",
    "serve",
    "worker_plugin",
    "workflow_runner",
]

# How often, and how long, `serve` asks the server whether this worker polls yet.
READY_POLL_S = 0.05
READY_WAIT_S = 30.0


@dataclass(frozen=True)
class WorkerOptions:
    task_queue: str
    endpoints: EndpointRegistry
    tools: ToolRegistry
    graceful_shutdown: timedelta = DEFAULT_GRACEFUL_SHUTDOWN
    max_concurrent_activities: int | None = None
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    health_cache_ttl_s: float = DEFAULT_CACHE_TTL_S
    # A quiet endpoint's copy is kept longer: a query per run is a billed action.
    health_quiet_cache_ttl_s: float | None = DEFAULT_QUIET_CACHE_TTL_S
    # MCP servers whose tools are served beside `tools` (`steadyloop._mcp`).
    mcp: tuple[McpServerConfig, ...] = ()


def worker_plugin(
    options: WorkerOptions,
    model: ModelActivities | None = None,
    on_tools: Callable[[ToolRegistry], None] | None = None,
) -> SteadyloopPlugin:
    """The plugin `options` describe (`steadyloop.plugin`); `model`: activities the caller
    owns (the plugin opens its own otherwise)."""
    return SteadyloopPlugin(
        tools=options.tools,
        endpoints=options.endpoints,
        mcp=options.mcp,
        graceful_shutdown=options.graceful_shutdown,
        breaker=options.breaker,
        health_cache_ttl_s=options.health_cache_ttl_s,
        health_quiet_cache_ttl_s=options.health_quiet_cache_ttl_s,
        on_tools=on_tools,
        model_activities=model,
    )


def build_worker(
    client: Client,
    options: WorkerOptions,
    model: ModelActivities | None = None,
    *,
    on_tools: Callable[[ToolRegistry], None] | None = None,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
) -> Worker:
    """A worker for `options`: `SteadyloopPlugin` on a `Worker` that serves `workflows`
    and `activities` of the caller's beside steadyloop's. `client` must use steadyloop's
    (pydantic) data converter (`ConverterRefused` otherwise)."""
    return Worker(
        client,
        task_queue=options.task_queue,
        workflows=list(workflows),
        activities=list(activities),
        graceful_shutdown_timeout=options.graceful_shutdown,
        max_concurrent_activities=options.max_concurrent_activities,
        plugins=[
            worker_plugin(options, model, on_tools),
            *worker_plugins(),  # tracing and metrics, when `steadyloop.telemetry` is on
        ],
    )


@asynccontextmanager
async def running_worker(client: Client, options: WorkerOptions) -> AsyncIterator[Worker]:
    """A started worker for the body of the block (the demo and tests use this)."""
    async with build_worker(client, options) as worker:
        yield worker


async def serve(
    client: Client,
    options: WorkerOptions,
    stop: asyncio.Event,
    on_ready: Callable[[], None] | None = None,
    *,
    on_tools: Callable[[ToolRegistry], None] | None = None,
) -> None:
    """Run a worker until `stop` is set, then shut it down gracefully.

    `on_ready` is called once the server lists the worker as a poller of its task queue
    (or, on a server that cannot say, after `READY_WAIT_S`). `on_tools`, before that,
    with the registry the worker serves: its own tools and its MCP servers' (what a
    ready line lists). Raises what the worker raised if it stopped on its own (a fatal
    error).
    """
    worker = build_worker(client, options, on_tools=on_tools)
    run = asyncio.create_task(worker.run(), name="steadyloop-worker")
    stopped = asyncio.create_task(stop.wait(), name="steadyloop-worker-stop")
    waiting: set[asyncio.Task[None]] = set()
    if on_ready is not None:
        waiting.add(asyncio.create_task(_announce_when_polling(client, options, on_ready)))
    try:
        await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            await worker.shutdown()
        await run
    finally:
        stopped.cancel()
        for task in waiting:
            task.cancel()
        if not run.done():
            run.cancel()


async def _announce_when_polling(
    client: Client, options: WorkerOptions, on_ready: Callable[[], None]
) -> None:
    """Call `on_ready` once this client's identity polls both task types of the queue."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_WAIT_S
    kinds = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)
    while loop.time() < deadline:
        try:
            polling = [
                await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=client.namespace,
                        task_queue=TaskQueue(name=options.task_queue),
                        task_queue_type=kind,
                    )
                )
                for kind in kinds
            ]
        except RPCError:  # a server that cannot describe queues: readiness by time alone
            await asyncio.sleep(READY_POLL_S)
            continue
        if all(any(p.identity == client.identity for p in r.pollers) for r in polling):
            break
        await asyncio.sleep(READY_POLL_S)
    on_ready()


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
