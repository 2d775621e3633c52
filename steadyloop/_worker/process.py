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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._activities.child_runs import await_child_run
from steadyloop._activities.endpoint_health import (
    DEFAULT_CACHE_TTL_S,
    DEFAULT_QUIET_CACHE_TTL_S,
    EndpointHealthActivities,
)
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._activities.worker_description import WorkerDescriptionActivities
from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.serving import serving_mcp
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop._workflows.output_stream import OutputStreamWorkflow
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop._workflows.worker_description import DescribeWorkerWorkflow
from steadyloop.telemetry import worker_plugins
from steadyloop.tools._registry import ToolRegistry

DEFAULT_GRACEFUL_SHUTDOWN = timedelta(seconds=30)
# Every workflow a run needs: the loop, the host of its forwarded output, and the
# endpoint-health entities its routes record outcomes on (started on this task queue).
# A worker serving these also registers `EndpointHealthActivities(...).activities()`:
# the loop reads health through them as local activities.
# The tenants' chain-admission entities run here too (with `ChainAdmissionActivities`).
RUN_WORKFLOWS = [
    ToolLoopWorkflow,
    OutputStreamWorkflow,
    EndpointHealthWorkflow,
    ChainAdmissionWorkflow,
]
# Heartbeats reach the server at most this often. The SDK's default (up to 60 s)
# would let a worker die with "output shown" still unsent; a model stream heartbeats
# only on progress and about once a second, so this costs nothing when idle.
HEARTBEAT_THROTTLE = timedelta(seconds=1)
# Temporal's sandbox re-imports a workflow's module, and every module it reaches that is
# not passed through, for every run (and every replay): CPU spent on imports, not on the
# loop. Measured with `benchmarks/bench_loop.py`: re-importing `tool_loop` (a
# large module with many imports, each checked by the sandbox's importer) was about
# 13 ms of the 16 ms a steadyloop run cost over the floor. So the helper modules and the
# per-run workflow modules are passed through: they hold functions, classes and
# constants only (no module-level state: `tests/test_worker_sandbox.py`) and are
# deterministic by the rule of `steadyloop._workflows`, so runs can share them, as they
# already share the pure modules they import. What passing through gives up is the
# sandbox's *runtime* check of calls like `datetime.now()` inside them; a static check of
# every module under `steadyloop/_workflows/` takes its place
# (`tests/test_workflow_determinism.py`), and the replay tests still catch
# nondeterminism. It also needs every payload model complete at import, not at its first
# use inside the sandbox (`tests/test_payload_models_complete.py`). The entity workflows
# (`endpoint_health`, `chain_admission`) are created rarely and stay re-imported, as
# the SDK intends.
PASSED_THROUGH_WORKFLOW_HELPERS = (
    "steadyloop._workflows.activity_tools",
    "steadyloop._workflows.approvals",
    "steadyloop._workflows.compaction_step",
    "steadyloop._workflows.delegation",
    "steadyloop._workflows.hand_over",
    "steadyloop._workflows.late_results",
    "steadyloop._workflows.model_request",
    "steadyloop._workflows.model_turn",
    "steadyloop._workflows.payload_ceiling",
    "steadyloop._workflows.receipt_path",
    "steadyloop._workflows.routed_turn",
    "steadyloop._workflows.run_state",
    "steadyloop._workflows.run_timeline",
    "steadyloop._workflows.steering",
    "steadyloop._workflows.tool_attempt",
    "steadyloop._workflows.tool_batch",
    "steadyloop._workflows.tool_disclosure",
    "steadyloop._workflows.turn_continuation",
    "steadyloop._workflows.turn_stops",
)
PASSED_THROUGH_WORKFLOW_MODULES = (
    "steadyloop._workflows.tool_loop",
    "steadyloop._workflows.output_stream",
)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox every steadyloop worker runs workflows in (the SDK's defaults, plus
    `PASSED_THROUGH_WORKFLOW_HELPERS` and `PASSED_THROUGH_WORKFLOW_MODULES`)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            *PASSED_THROUGH_WORKFLOW_HELPERS, *PASSED_THROUGH_WORKFLOW_MODULES
        )
    )


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


def build_worker(client: Client, options: WorkerOptions, model: ModelActivities) -> Worker:
    """The Temporal worker; `client` must use steadyloop's (pydantic) data converter."""
    tools = ToolActivities(options.tools)
    health = EndpointHealthActivities(
        client,
        task_queue=options.task_queue,
        policy=options.breaker,
        cache_ttl_s=options.health_cache_ttl_s,
        quiet_cache_ttl_s=options.health_quiet_cache_ttl_s,
    )
    return Worker(
        client,
        task_queue=options.task_queue,
        workflows=[*RUN_WORKFLOWS, DescribeWorkerWorkflow],
        activities=[
            *model.activities(),
            *tools.activities(),
            *WorkerDescriptionActivities(options.endpoints, options.tools).activities(),
            await_child_run,
            *health.activities(),
            *ChainAdmissionActivities(client, task_queue=options.task_queue).activities(),
            *options.tools.activity_functions(),  # the user's activities offered as tools
        ],
        graceful_shutdown_timeout=options.graceful_shutdown,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        max_concurrent_activities=options.max_concurrent_activities,
        workflow_runner=workflow_runner(),
        plugins=worker_plugins(),  # tracing and metrics, when `steadyloop.telemetry` is on
    )


@asynccontextmanager
async def running_worker(client: Client, options: WorkerOptions) -> AsyncIterator[Worker]:
    """A started worker for the body of the block (the demo and tests use this)."""
    async with (
        ModelActivities(options.endpoints) as model,
        serving_mcp(options.tools, options.mcp) as tools,
    ):
        worker = build_worker(client, replace(options, tools=tools), model)
        async with worker:
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
    async with (
        ModelActivities(options.endpoints) as model,
        serving_mcp(options.tools, options.mcp) as tools,
    ):
        if on_tools is not None:
            on_tools(tools)
        worker = build_worker(client, replace(options, tools=tools), model)
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
