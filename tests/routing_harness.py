"""Routed model turns on Temporal's time-skipping test server, against scripted
providers over real HTTP: endpoints `a` and `b` (scripted servers) and `down` (a port
nothing listens on). The endpoint-health entity workflow and its activities run on the
same worker, as `steadyloop worker` runs them. Shared by the routing tests and the
replay-fixture recorder."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from routed_turn_workflow import RoutedTurnInput, RoutedTurnWorkflow
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._chat import ChatMessage, ToolSpec
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoint_health import EndpointHealth, health_workflow_id
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._routing.route_plan import Backoff, RouteCandidate, RouteConfig
from steadyloop._stream.completion import CompletionRequest
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop._workflows.routed_turn import RoutedTurn
from steadyloop.testing import ScriptedServer, refused_base_url

POLICY = BreakerPolicy(failure_threshold=3, window_s=60, cool_off_s=30, probe_lease_s=60)
# The stall watchdog's first-token budget on `a`, in real seconds.
FIRST_TOKEN_S = 0.5


def candidate(endpoint: str, attempts: int = 3, **extra: Any) -> RouteCandidate:
    extra.setdefault("backoff", Backoff(initial_s=1, multiplier=2, max_s=10))
    return RouteCandidate(endpoint=endpoint, model=f"model-{endpoint}", attempts=attempts, **extra)


def route(*candidates: RouteCandidate | str) -> RouteConfig:
    return RouteConfig(
        candidates=[c if isinstance(c, RouteCandidate) else candidate(c) for c in candidates]
    )


def request(**update: Any) -> CompletionRequest:
    base = CompletionRequest(
        endpoint="unset",
        model="unset",
        messages=[ChatMessage(role="user", content="What is 2 + 2?")],
        tools=[ToolSpec(name="add", description="Add.", parameters={"type": "object"})],
        parallel_tool_calls=False,
    )
    return base.model_copy(update=update)


@dataclass
class Routing:
    env: WorkflowEnvironment
    a: ScriptedServer
    b: ScriptedServer
    health: EndpointHealthActivities
    task_queue: str

    async def start(
        self, config: RouteConfig, req: CompletionRequest | None = None, **params: Any
    ) -> WorkflowHandle[RoutedTurnWorkflow, RoutedTurn]:
        return await self.env.client.start_workflow(
            RoutedTurnWorkflow.run,
            RoutedTurnInput(route=config, request=req or request(), **params),
            id=f"routed-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )

    async def run(
        self,
        config: RouteConfig,
        req: CompletionRequest | None = None,
        *,
        skip_time: bool = True,
        **params: Any,
    ) -> RoutedTurn:
        handle = await self.start(config, req, **params)
        return await self.result(handle, skip_time=skip_time)

    async def result(
        self, handle: WorkflowHandle[RoutedTurnWorkflow, RoutedTurn], *, skip_time: bool = True
    ) -> RoutedTurn:
        """The run's result. `skip_time=False` when breaker state must survive the wait:
        once the run completes, the time-skipping server jumps to its next timer, and
        with the entity workflow idle that is years away (every breaker would be
        half-open); explicit `env.sleep` still moves time."""
        if skip_time:
            return await handle.result()
        with self.env.auto_time_skipping_disabled():
            return await handle.result()

    async def endpoint_health(self, endpoint: str) -> EndpointHealth | None:
        return await endpoint_health(self.env.client, endpoint)


async def endpoint_health(client: Client, endpoint: str) -> EndpointHealth | None:
    """The entity's own answer (None: nothing was ever recorded for `endpoint`)."""
    handle = client.get_workflow_handle(health_workflow_id(endpoint))
    try:
        health: EndpointHealth = await handle.query(EndpointHealthWorkflow.health)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return health


@asynccontextmanager
async def routing(cache_ttl_s: float = 60.0) -> AsyncIterator[Routing]:
    async with ScriptedServer() as a, ScriptedServer() as b:
        endpoints = EndpointRegistry(
            [
                a.endpoint("a", first_token_s=FIRST_TOKEN_S),
                b.endpoint("b"),
                EndpointConfig(name="down", base_url=refused_base_url()),
            ]
        )
        async with ModelActivities(endpoints, environ={}) as model:
            env = await WorkflowEnvironment.start_time_skipping(
                data_converter=pydantic_data_converter,
                test_server_existing_path=time_skipping_server_path(),
            )
            async with env:
                task_queue = f"routing-{uuid.uuid4()}"
                health = EndpointHealthActivities(
                    env.client, task_queue=task_queue, policy=POLICY, cache_ttl_s=cache_ttl_s
                )
                async with Worker(
                    env.client,
                    task_queue=task_queue,
                    workflows=[RoutedTurnWorkflow, EndpointHealthWorkflow],
                    activities=[model.stream_completion, *health.activities()],
                ):
                    yield Routing(env=env, a=a, b=b, health=health, task_queue=task_queue)
