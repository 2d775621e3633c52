"""Chains of ToolLoopWorkflow runs on Temporal's time-skipping test server.

The model is a scripted provider on loopback whose answer depends on who asks: a
`Brain` gets the asking agent (from its system prompt, "You are agent NAME."), its
task, its turn number and the tool results so far, so concurrent runs of a chain are
scripted without depending on which request arrives first.

Admission: chain rules are decided by the tenant's admission workflow
(`steadyloop._workflows.chain_admission`), run by the same worker with its activities
(`real_admission`; a test may pass stand-ins as `admission`).

Listing a chain's runs: the time-skipping server (V1) stores custom search attributes
once they are registered, but implements no list or count of workflows. `ChainWalk`
walks the chains from the roots a test started instead (each run's history names the
children it started, each description gives status, start time and search attributes).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from loop_harness import ALL_TOOLS, MODEL, Effects, Loop, build_tools
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._activities.child_runs import await_child_run
from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._chains.delegation_tool import DELEGATE_TOOL
from steadyloop._chains.limits import ChainLimit, DepthLimit
from steadyloop._chains.queries import AGENT, CHAIN_SEARCH_ATTRIBUTES
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import AgentProfile, Delegation, RunInput, RunLimits, RunResult
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._worker.process import RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
)
from steadyloop.tools import ToolRegistry, tool

ENDPOINT = "scripted"
TENANT_ID = "acme"


# -- the scripted model ----------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One model request, as the brain sees it."""

    agent: str
    task: str
    turn: int  # 1 for the first request of a run
    results: list[str]  # the contents of the tool messages so far, in order


Brain = Callable[[Turn], "ScriptedResponse | Awaitable[ScriptedResponse]"]


def read_turn(request: RecordedRequest) -> Turn:
    messages: list[dict[str, Any]] = request.messages
    system = next(m["content"] for m in messages if m["role"] == "system")
    agent = system.removeprefix("You are agent ").removesuffix(".")
    task = next(m["content"] for m in messages if m["role"] == "user")
    turn = 1 + sum(m["role"] == "assistant" for m in messages)
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return Turn(agent=agent, task=task, turn=turn, results=results)


def delegate(agent: str, task: str, call_id: str | None = None) -> ScriptedCall:
    return ScriptedCall(DELEGATE_TOOL, {"agent": agent, "task": task}, id=call_id)


async def run_inputs(client: Client, runs: Sequence[RunView]) -> list[RunInput]:
    """Each run's first input (what its parent started it with), in order of start."""
    inputs: list[RunInput] = []
    for view in sorted(runs, key=lambda v: (v.started_at, v.workflow_id)):
        history = await client.get_workflow_handle(view.workflow_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        (decoded,) = await client.data_converter.decode(started.input.payloads, [RunInput])
        inputs.append(decoded)
    return inputs


# -- runs and profiles -------------------------------------------------------------------


def profile(name: str, *, delegates_to: Sequence[str] = (), **fields: Any) -> AgentProfile:
    return AgentProfile(
        description=f"The {name} agent.",
        system_prompt=f"You are agent {name}.",
        delegates_to=list(delegates_to),
        **fields,
    )


def chain_input(
    task: str,
    *,
    agent: str = "main",
    to: Sequence[str],
    agents: dict[str, AgentProfile],
    limits: Sequence[ChainLimit],
    tenant: str = TENANT_ID,
    **run_limits: Any,
) -> RunInput:
    """A root run; a generous depth limit is added after `limits` when they have none
    (a Delegation requires one), so a test's rule is the one that decides."""
    if not any(limit.kind == "depth" for limit in limits):
        limits = [*limits, DepthLimit(max_depth=5)]
    return RunInput(
        endpoint=ENDPOINT,
        model=MODEL,
        prompt=task,
        system_prompt=f"You are agent {agent}.",
        tools=[*ALL_TOOLS, "wait_for_release"],
        agent=agent,
        tenant_id=tenant,
        delegation=Delegation(to=list(to), agents=agents, limits=list(limits)),
        limits=RunLimits(**run_limits),
    )


# -- a chain's runs on the time-skipping server -------------------------------------------


@dataclass(frozen=True)
class RunView:
    workflow_id: str
    running: bool
    started_at: datetime
    attributes: dict[str, Any]


@dataclass
class ChainWalk:
    """The runs of the chains a test started, read from their histories."""

    roots: list[str] = field(default_factory=list)

    async def runs(self, client: Client) -> list[RunView]:
        views: list[RunView] = []
        frontier = list(self.roots)
        while frontier:
            handle = client.get_workflow_handle(frontier.pop())
            described = await handle.describe()
            views.append(
                RunView(
                    workflow_id=handle.id,
                    running=described.status == WorkflowExecutionStatus.RUNNING,
                    started_at=described.start_time,
                    attributes={p.key.name: p.value for p in described.typed_search_attributes},
                )
            )
            async for event in handle.fetch_history_events():
                if event.HasField("child_workflow_execution_started_event_attributes"):
                    started = event.child_workflow_execution_started_event_attributes
                    if started.workflow_execution.workflow_id not in frontier:
                        frontier.append(started.workflow_execution.workflow_id)
        # A re-attached child appears in two histories; count it once.
        return list({view.workflow_id: view for view in views}.values())


# -- the environment ---------------------------------------------------------------------


@dataclass
class Gate:
    """The `wait_for_release` tool: a call that holds until the test releases it."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def tools(self, effects: Effects) -> ToolRegistry:
        @tool(effect="opaque", timeout=timedelta(seconds=120))
        async def wait_for_release() -> str:
            """Holds until released."""
            self.entered.set()
            await self.released.wait()
            return "released"

        @tool(name=DELEGATE_TOOL, effect="pure")
        async def a_tool_named_delegate() -> str:
            """A user tool whose name collides with the built-in one."""
            return "never offered"

        return ToolRegistry([*build_tools(effects), wait_for_release, a_tool_named_delegate])


@dataclass
class Chains(Loop):
    """A `Loop` whose roots are walked by `ChainWalk`."""

    walk: ChainWalk = field(default_factory=ChainWalk)
    gate: Gate = field(default_factory=Gate)

    async def start(
        self, run: RunInput, workflow_id: str | None = None
    ) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
        workflow_id = workflow_id or f"root-{uuid.uuid4().hex[:8]}"
        if workflow_id not in self.walk.roots:
            self.walk.roots.append(workflow_id)
        return await super().start(run, workflow_id)

    def turns(self, agent: str | None = None) -> list[Turn]:
        """Every model request so far (of `agent` only, when given)."""
        seen = [read_turn(request) for request in self.server.requests]
        return [t for t in seen if agent is None or t.agent == agent]

    async def runs(self) -> list[RunView]:
        return await self.walk.runs(self.client)


async def register_chain_search_attributes(client: Client, namespace: str = "default") -> None:
    kinds = {
        "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    }
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={name: kinds[kind] for name, kind in CHAIN_SEARCH_ATTRIBUTES.items()},
        )
    )


def real_admission(client: Client, task_queue: str) -> Sequence[Callable[..., Any]]:
    return ChainAdmissionActivities(client, task_queue=task_queue).activities()


@asynccontextmanager
async def running_chains(
    brain: Brain,
    admission: Callable[[Client, str], Sequence[Callable[..., Any]]] = real_admission,
) -> AsyncIterator[Chains]:
    async def respond(request: RecordedRequest) -> ScriptedResponse:
        produced = brain(read_turn(request))
        if isinstance(produced, ScriptedResponse):
            return produced
        return await produced

    walk = ChainWalk()
    effects = Effects()
    gate = Gate()
    async with ScriptedServer(respond) as server:
        endpoints = EndpointRegistry([server.endpoint(ENDPOINT)])
        async with ModelActivities(endpoints, environ={}) as model:
            env = await WorkflowEnvironment.start_time_skipping(
                data_converter=pydantic_data_converter,
                test_server_existing_path=time_skipping_server_path(),
            )
            async with env:
                await register_chain_search_attributes(env.client)
                task_queue = f"tq-{uuid.uuid4()}"
                async with Worker(
                    env.client,
                    task_queue=task_queue,
                    workflows=RUN_WORKFLOWS,
                    activities=[
                        *model.activities(),
                        *ToolActivities(gate.tools(effects)).activities(),
                        await_child_run,
                        *EndpointHealthActivities(env.client, task_queue=task_queue).activities(),
                        *admission(env.client, task_queue),
                    ],
                ):
                    try:
                        yield Chains(env, server, task_queue, effects, walk=walk, gate=gate)
                    finally:
                        gate.released.set()  # a held call must not keep the worker open


def agent_of(view: RunView) -> str:
    return str(view.attributes.get(AGENT))


async def eventually(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Wait in real time for something a concurrent run does."""
    for _ in range(int(timeout / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
