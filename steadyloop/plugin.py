"""Add steadyloop to your own Temporal client and worker: one plugin.

    plugin = SteadyloopPlugin(tools=registry)
    client = await Client.connect("localhost:7233", plugins=[plugin])
    worker = Worker(client, task_queue="orders", workflows=[OrderWorkflow],
                    activities=[charge_card])

`SteadyloopPlugin` is a `temporalio.plugin.SimplePlugin`, for the client and the worker:

- On the client it sets the payload converter a run needs (pydantic, with steadyloop's
  blob store for payloads too large for history), keeping your payload codec, your
  failure converter and your external storage. A converter it cannot work with (a payload
  converter other than Temporal's default or its pydantic one) is refused by
  `Client.connect`, with the fix, not found mid-run as `Failed decoding arguments`.
- On every worker of that client (or a worker given the plugin itself) it registers what
  a run needs beside your own workflows and activities, on your task queue: the loop, its
  output host, the endpoint-health and chain-admission entities, and the model, tool,
  health, chain and child-run activities. It owns the model activities' HTTP clients
  and the MCP servers' connections for the worker's lifetime.
- It adds steadyloop's workflow modules to the passthrough of your sandbox runner (or
  gives the worker steadyloop's runner when you set none), keeps heartbeats at most
  1 s apart (a lost attempt's "output shown" flag must reach the server), and gives
  running activities a grace period on shutdown (an `opaque` tool cut mid-effect cannot
  be told apart from one that did it).

`steadyloop worker` is this plugin on a worker of its own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultPayloadConverter,
)
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

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
from steadyloop._history.object_store import ObjectStore
from steadyloop._history.payload_storage import blob_settings, steadyloop_data_converter
from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.serving import serving_mcp
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._worker.config import ConfigError, endpoint_settings, load_config
from steadyloop._worker.sandbox import (
    PASSED_THROUGH,
    RUN_WORKFLOWS,
    SERVING_WORKFLOWS,
    workflow_runner,
)
from steadyloop.tools._registry import AnyTool, ToolRegistry

__all__ = ["ConverterRefused", "EndpointConfig", "SteadyloopPlugin"]

PLUGIN_NAME = "steadyloop.SteadyloopPlugin"
DEFAULT_GRACEFUL_SHUTDOWN = timedelta(seconds=30)
# Heartbeats reach the server at most this often. The SDK's default (up to 60 s)
# would let a worker die with "output shown" still unsent; a model stream heartbeats
# only on progress and about once a second, so this costs nothing when idle.
HEARTBEAT_THROTTLE = timedelta(seconds=1)


class ConverterRefused(ConfigError):
    """The client's data converter cannot carry a run's payloads; the message names the
    converter and the fix. Raised by `Client.connect` (or `Worker(...)`), before any run."""


@dataclasses.dataclass
class _Served:
    """The activity objects of one worker, bound to what it serves once it runs."""

    task_queue: str
    model: ModelActivities
    owns_model: bool
    tools: ToolActivities
    description: WorkerDescriptionActivities

    def serve_tools(self, registry: ToolRegistry) -> None:
        self.tools.registry = registry
        self.description.tools = registry


class SteadyloopPlugin(SimplePlugin):
    """steadyloop on your Temporal client and worker (see the module's docstring).

    `tools`: the tools runs may call (a `ToolRegistry`, or the tools themselves;
    `steadyloop.tools.activity_as_tool` makes your activities tools, and the plugin
    registers those of them that run on the worker's own queue). `endpoints`: the model
    endpoints (`EndpointConfig`s, or a registry); None reads them as `steadyloop worker`
    does (`STEADYLOOP_CONFIG`, `STEADYLOOP_ENDPOINTS`, `OPENAI_BASE_URL`). Provider keys
    are read by the model activity from the worker's environment, never passed here.
    `mcp`: MCP servers whose tools are served beside `tools`. `blobs`: where payloads
    too large for history go (a directory, `s3://bucket/prefix`, an `ObjectStore`, or
    `"off"`); None reads `STEADYLOOP_BLOB_DIR` as `steadyloop worker` does.
    `graceful_shutdown`: the least grace running activities get when the worker shuts
    down (a longer one of yours is kept). `on_tools` and `model_activities` are for
    `steadyloop worker` and the test kit.
    """

    def __init__(
        self,
        *,
        tools: ToolRegistry | Sequence[AnyTool] | None = None,
        endpoints: EndpointRegistry | Iterable[EndpointConfig] | None = None,
        mcp: Sequence[McpServerConfig] = (),
        blobs: str | os.PathLike[str] | ObjectStore | None = None,
        graceful_shutdown: timedelta = DEFAULT_GRACEFUL_SHUTDOWN,
        breaker: BreakerPolicy | None = None,
        health_cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
        health_quiet_cache_ttl_s: float | None = DEFAULT_QUIET_CACHE_TTL_S,
        environ: Mapping[str, str] | None = None,
        on_tools: Callable[[ToolRegistry], None] | None = None,
        model_activities: ModelActivities | None = None,
    ) -> None:
        super().__init__(
            PLUGIN_NAME,
            data_converter=self._converter,
            workflows=[*RUN_WORKFLOWS, *SERVING_WORKFLOWS],
            workflow_runner=_with_passthrough,
        )
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(list(tools or ()))
        self._environ = environ
        self.endpoints = _registry(endpoints, environ)
        self._mcp = tuple(mcp)
        self._blobs = blobs
        self._graceful_shutdown = graceful_shutdown
        self._breaker = breaker or BreakerPolicy()
        self._health_ttl = health_cache_ttl_s
        self._health_quiet_ttl = health_quiet_cache_ttl_s
        self._on_tools = on_tools
        self._given_model = model_activities
        self._served: list[_Served] = []

    # -- the client ----------------------------------------------------------------------

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        return steadyloop_converter(existing, self._blob_location())

    def _blob_location(self) -> str | os.PathLike[str] | ObjectStore | None:
        if isinstance(self._blobs, ObjectStore):
            return self._blobs
        if self._blobs is not None:
            text = os.fspath(self._blobs)
            return None if text.strip().lower() == "off" else self._blobs
        environ = os.environ if self._environ is None else self._environ
        return blob_settings(environ).location

    # -- the worker ----------------------------------------------------------------------

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Register what a run needs beside the user's workflows and activities."""
        config = super().configure_worker(config)
        client = config["client"]
        _refuse_unusable(client.data_converter, on="the worker's client")
        task_queue = config["task_queue"]
        served = self._serve(task_queue)
        health = EndpointHealthActivities(
            client,
            task_queue=task_queue,
            policy=self._breaker,
            cache_ttl_s=self._health_ttl,
            quiet_cache_ttl_s=self._health_quiet_ttl,
        )
        ours: list[Callable[..., Any]] = [
            *served.model.activities(),
            *served.tools.activities(),
            *served.description.activities(),
            await_child_run,
            *health.activities(),
            *ChainAdmissionActivities(client, task_queue=task_queue).activities(),
        ]
        theirs = list(config.get("activities") or [])
        known = set(map(_activity_name, theirs))
        # The user's activities offered as tools on this queue, unless registered already.
        offered = self.tools.activity_functions()
        extra = [fn for fn in offered if _activity_name(fn) not in known]
        config["activities"] = [*theirs, *ours, *extra]
        throttle = config.get("max_heartbeat_throttle_interval") or HEARTBEAT_THROTTLE
        config["max_heartbeat_throttle_interval"] = min(throttle, HEARTBEAT_THROTTLE)
        grace = config.get("graceful_shutdown_timeout") or timedelta(0)
        config["graceful_shutdown_timeout"] = max(grace, self._graceful_shutdown)
        return config

    def _serve(self, task_queue: str) -> _Served:
        owns = self._given_model is None
        model = self._given_model or ModelActivities(self.endpoints, environ=self._environ)
        served = _Served(
            task_queue=task_queue,
            model=model,
            owns_model=owns,
            tools=ToolActivities(self.tools),
            description=WorkerDescriptionActivities(self.endpoints, self.tools),
        )
        self._served.append(served)
        return served

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Run `worker` with its MCP servers connected and its HTTP clients open; close them
        once it has stopped."""
        served = self._served_by(worker)
        async with AsyncExitStack() as stack:
            if served is not None and served.owns_model:
                stack.push_async_callback(served.model.aclose)
            registry = await stack.enter_async_context(serving_mcp(self.tools, self._mcp))
            if served is not None:
                served.serve_tools(registry)
            if self._on_tools is not None:
                self._on_tools(registry)
            await super().run_worker(worker, next)

    def _served_by(self, worker: Worker) -> _Served | None:
        registered = worker.config(active_config=True).get("activities") or []
        for served in self._served:
            if served.model.stream_completion in registered:
                return served
        return None


# -- the converter ---------------------------------------------------------------------


def steadyloop_converter(
    existing: DataConverter | None,
    blobs: str | os.PathLike[str] | ObjectStore | None,
) -> DataConverter:
    """`existing` (Temporal's default when None) with the pydantic payload converter and,
    unless it has its own, steadyloop's blob store; its codec and failure converter kept.
    `ConverterRefused` when its payload converter is neither the default nor pydantic."""
    base = existing if existing is not None else DataConverter.default
    _refuse_unusable(base, on="the client", replaceable=True)
    ours = steadyloop_data_converter(blobs)
    failure = base.failure_converter_class
    if failure is DefaultFailureConverter:
        failure = ours.failure_converter_class  # names failure details it cannot decode
    payload = base.payload_converter_class
    if not issubclass(payload, PydanticPayloadConverter):
        payload = PydanticPayloadConverter
    return dataclasses.replace(
        base,
        payload_converter_class=payload,
        failure_converter_class=failure,
        external_storage=base.external_storage or ours.external_storage,
    )


def _refuse_unusable(converter: DataConverter, *, on: str, replaceable: bool = False) -> None:
    payload = converter.payload_converter_class
    if issubclass(payload, PydanticPayloadConverter):
        return
    if replaceable and payload is DefaultPayloadConverter:
        return
    fix = (
        "drop it (the plugin sets pydantic's) or derive yours from "
        "temporalio.contrib.pydantic.PydanticPayloadConverter"
        if replaceable
        else "pass SteadyloopPlugin to Client.connect(plugins=[...]), which sets it, "
        "rather than only to the Worker"
    )
    raise ConverterRefused(
        f"steadyloop: {on} uses payload converter {payload.__module__}.{payload.__qualname__}, "
        "which cannot carry a run's pydantic payloads (its input, its turns, its result); "
        f"{fix}. A payload codec, failure converter or external storage of yours is kept."
    )


# -- the sandbox -----------------------------------------------------------------------


def _with_passthrough(existing: Any) -> Any:
    """The user's sandbox runner with steadyloop's workflow modules passed through;
    steadyloop's own runner when none was set; any other runner as it is."""
    if existing is None:
        return workflow_runner()
    if isinstance(existing, SandboxedWorkflowRunner):
        return dataclasses.replace(
            existing,
            restrictions=existing.restrictions.with_passthrough_modules(*PASSED_THROUGH),
        )
    return existing


# -- what it serves --------------------------------------------------------------------


def _registry(
    endpoints: EndpointRegistry | Iterable[EndpointConfig] | None,
    environ: Mapping[str, str] | None,
) -> EndpointRegistry:
    if isinstance(endpoints, EndpointRegistry):
        return endpoints
    if endpoints is not None:
        return EndpointRegistry(endpoints)
    env = os.environ if environ is None else environ
    config = load_config(None, env)
    return endpoint_settings(flags=[], config=config, environ=env).registry


def _activity_name(fn: Callable[..., Any]) -> str:
    definition = activity._Definition.from_callable(fn)
    return definition.name if definition is not None and definition.name else repr(fn)
