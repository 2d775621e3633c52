"""The `steadyloop.describe_worker` activity: this worker's endpoints and tools.

`steadyloop run` asks for it (through `DescribeWorkerWorkflow`) when a run names no
model or no tools, so the worker's configuration is the run's default
(`steadyloop._serving`). Names and default models only: no URL, key variable or header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._serving import DESCRIBE_WORKER_ACTIVITY, ServedEndpoint, WorkerDescription
from steadyloop.tools._registry import ToolRegistry


class WorkerDescriptionActivities:
    """Describes one worker's endpoint registry and tool registry."""

    def __init__(self, endpoints: EndpointRegistry, tools: ToolRegistry) -> None:
        self.endpoints = endpoints
        self.tools = tools

    def activities(self) -> list[Callable[..., Any]]:
        return [self.describe_worker]

    def description(self) -> WorkerDescription:
        return WorkerDescription(
            endpoints=[
                ServedEndpoint(name=e.name, model=e.model, api=e.api) for e in self.endpoints
            ],
            tools=self.tools.names(),
            unplugged_tools=self.tools.unplugged(),
            plugins=self.tools.plugin_names(),
        )

    @activity.defn(name=DESCRIBE_WORKER_ACTIVITY)
    async def describe_worker(self) -> WorkerDescription:
        return self.description()
