"""A ToolLoopWorkflow on Temporal's time-skipping test server, talking to a scripted
OpenAI-compatible provider over real HTTP on loopback (and, for routed runs, more
providers, each its own endpoint), with tools whose effects are observable. The worker
runs what `steadyloop worker` runs for a run: the endpoint-health entities and their
activities too. Shared by the workflow tests and the replay-fixture recorder."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._chat import ChatMessage
from steadyloop._history.compaction import CompactionReply, CompactionRequest
from steadyloop._history.payload_storage import (
    DEFAULT_THRESHOLD_BYTES,
    MAX_STORED_PAYLOAD_BYTES,
    steadyloop_data_converter,
)
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits, RunPlugins, RunResult
from steadyloop._temporal_binaries import (
    dev_server_args,
    dev_server_path,
    time_skipping_server_path,
)
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import ScriptedResponse, ScriptedServer
from steadyloop.tools import ToolPlugin, ToolRegistry, activity_as_tool, current_progress, tool
from steadyloop.tools._registry import AnyTool

ENDPOINT = "scripted"
MODEL = "scripted-model"


@dataclass
class Effects:
    """What the test tools did, so a test can count side effects."""

    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    started: Counter[str] = field(default_factory=Counter)
    finished: Counter[str] = field(default_factory=Counter)
    cancelled: Counter[str] = field(default_factory=Counter)
    # Set by a test to let `long_hold` and `long_note` finish.
    release: asyncio.Event = field(default_factory=asyncio.Event)
    running: int = 0
    most_at_once: int = 0


def build_tools(effects: Effects) -> ToolRegistry:
    @tool(effect="pure")
    async def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @tool(effect="pure")
    async def current_time() -> str:
        """The time, as a fixed string so runs are comparable."""
        return "2026-01-01T00:00:00Z"

    @tool(effect="opaque")
    async def note(text: str) -> str:
        """Record a note (a side effect the tests count)."""
        effects.notes.append(text)
        return f"noted {text!r}"

    @tool(effect="opaque")
    async def boom(reason: str) -> str:
        """Always raises."""
        effects.started["boom"] += 1
        raise RuntimeError(f"boom: {reason}")

    @tool(effect="pure", timeout=timedelta(milliseconds=500))
    async def slow() -> str:
        """Takes longer than its timeout."""
        await asyncio.sleep(3)
        return "too late"

    @tool(effect="pure")
    async def hold(label: str) -> str:
        """Holds for a moment, counting how many calls run at once."""
        effects.running += 1
        effects.most_at_once = max(effects.most_at_once, effects.running)
        try:
            await asyncio.sleep(0.3)
        finally:
            effects.running -= 1
        return label

    @tool(effect="opaque", timeout=timedelta(milliseconds=500))
    async def slow_note(text: str) -> str:
        """An opaque side effect that outlives its timeout: its outcome is unknown."""
        effects.started["slow_note"] += 1
        await asyncio.sleep(1.2)
        effects.notes.append(text)
        return f"noted {text!r}"

    @tool(effect="opaque", approval=True)
    async def transfer(amount: float, to: str) -> str:
        """Move money: a side effect a person approves call by call."""
        effects.notes.append(f"transfer {amount:g} to {to}")
        return f"sent {amount:g} to {to}"

    @tool(effect="pure", timeout=timedelta(seconds=60))
    async def long_hold(label: str) -> str:
        """A long computation with no side effect (it never heartbeats); ends on `release`."""
        effects.started["long_hold"] += 1
        await asyncio.wait_for(effects.release.wait(), 30)
        effects.finished["long_hold"] += 1
        return label

    @tool(effect="opaque", timeout=timedelta(seconds=60))
    async def long_note(text: str) -> str:
        """An opaque side effect that never heartbeats (so no cancellation reaches it);
        it takes effect on `release`."""
        effects.started["long_note"] += 1
        await asyncio.wait_for(effects.release.wait(), 30)
        effects.notes.append(text)
        return f"noted {text!r}"

    @tool(effect="resumable", timeout=timedelta(seconds=60))
    async def ticker(steps: int) -> str:
        """Records a step every 50 ms: it heartbeats, so a cancellation reaches it."""
        effects.started["ticker"] += 1
        progress = current_progress()
        try:
            for step in range(steps):
                await asyncio.sleep(0.05)
                progress.record(step)
        except asyncio.CancelledError:
            effects.cancelled["ticker"] += 1
            raise
        return f"ticked {steps}"

    # Plugins (not in ALL_TOOLS: a run offers them only when it names them in
    # `RunInput.plugins`). `files` by `@tool(plugin=...)`, `search` by `ToolPlugin`.
    @tool(effect="pure", plugin="files")
    async def read_scratch(path: str) -> str:
        """Read a scratch file."""
        return effects.files.get(path, "")

    @tool(effect="opaque", plugin="files")
    async def write_scratch(path: str, text: str) -> str:
        """Write a scratch file (a side effect the tests count)."""
        effects.files[path] = text
        return f"wrote {len(text)} characters to {path}"

    @tool(effect="pure")
    async def find_note(word: str) -> list[str]:
        """Notes containing a word."""
        return [n for n in effects.notes if word in n]

    @activity.defn(name="record_payment")
    async def record_payment(order_id: str, amount_cents: int) -> dict[str, Any]:
        """Record a payment: the user's own activity, scheduled by its own type."""
        effects.notes.append(f"payment {order_id} {amount_cents}")
        return {"order_id": order_id, "amount_cents": amount_cents}

    tools: list[AnyTool] = [add, current_time, note, boom, slow, hold, slow_note]
    people: list[AnyTool] = [transfer, long_hold, long_note, ticker]
    return ToolRegistry(
        [*tools, read_scratch, write_scratch, *people, activity_as_tool(record_payment)],
        plugins=[
            ToolPlugin("files", "Read and write scratch files."),
            ToolPlugin("search", "Look things up in the notes.", [find_note]),
        ],
    )


ALL_TOOLS = ["add", "current_time", "note", "boom", "slow", "hold", "slow_note"]
# Tools for people-in-the-loop tests, offered only by the runs that use them.
PEOPLE_TOOLS = ["transfer", "long_hold", "long_note", "ticker"]


@dataclass
class Loop:
    env: WorkflowEnvironment
    server: ScriptedServer  # the endpoint ENDPOINT
    task_queue: str
    effects: Effects
    # Every scripted provider by endpoint name (ENDPOINT and `more_endpoints`).
    servers: dict[str, ScriptedServer] = field(default_factory=dict)
    # The worker's endpoint-health activities (to record outcomes as another run would).
    health: EndpointHealthActivities | None = None

    @property
    def client(self) -> Client:
        return self.env.client

    async def start(
        self, run: RunInput, workflow_id: str | None = None
    ) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
        return await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=workflow_id or f"loop-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )

    async def run(self, run: RunInput) -> RunResult:
        handle = await self.start(run)
        result: RunResult = await handle.result()
        return result


def loop_worker(
    client: Client, task_queue: str, model: ModelActivities, tools: ToolRegistry
) -> Worker:
    """A worker of the run workflows with the model, tool and endpoint-health activities:
    what a test that builds its own endpoints or converter runs."""
    health = EndpointHealthActivities(client, task_queue=task_queue)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=RUN_WORKFLOWS,
        activities=[*model.activities(), *ToolActivities(tools).activities(), *health.activities()],
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
    )


def run_input(prompt: str = "help me", **limits: Any) -> RunInput:
    return RunInput(
        endpoint=ENDPOINT,
        model=MODEL,
        prompt=prompt,
        system_prompt="You are a test agent.",
        tools=ALL_TOOLS,
        limits=RunLimits(**limits),
    )


def files_run(**limits: Any) -> RunInput:
    """`run_input` with the core `files` plugin on: scratch files to write and read."""
    return run_input(**limits).model_copy(update={"plugins": RunPlugins(core=["files"])})


@asynccontextmanager
async def running_loop(
    script: Iterable[ScriptedResponse],
    extra_activities: Iterable[Any] = (),
    blob_threshold: int = DEFAULT_THRESHOLD_BYTES,
    blob_dir: Path | None = None,
    *,
    blob_storage: bool = True,
    max_stored_payload_bytes: int = MAX_STORED_PAYLOAD_BYTES,
    more_endpoints: Mapping[str, Iterable[ScriptedResponse]] | None = None,
    tools_apart: bool = False,
    **endpoint_config: Any,
) -> AsyncIterator[Loop]:
    """A worker on the time-skipping server for runs on ENDPOINT (scripted by `script`,
    configured by `endpoint_config`) and on each of `more_endpoints` (name: its script),
    with steadyloop's data converter: payloads of `blob_threshold` bytes or more go to
    `blob_dir`, else a directory of the loop's own (`blob_storage=False`: no external
    storage, every payload inline; `max_stored_payload_bytes`: the tool activities' bound
    on one stored activity input; `tools_apart`: the tool activities run on a second
    worker of the task queue, so the workflows' worker has none of its own)."""
    effects = Effects()
    registry = build_tools(effects)
    own: contextlib.AbstractContextManager[str] = (
        tempfile.TemporaryDirectory(prefix="steadyloop-blobs-")
        if blob_dir is None
        else contextlib.nullcontext(str(blob_dir))
    )
    with own as blobs:
        async with _loop_on(
            script,
            extra_activities,
            blobs if blob_storage else None,
            blob_threshold,
            max_stored_payload_bytes,
            more_endpoints or {},
            endpoint_config,
            effects,
            registry,
            tools_apart,
        ) as loop:
            yield loop


async def time_skipping_environment(converter: DataConverter) -> WorkflowEnvironment:
    """Temporal's time-skipping test server (Java): what every loop test runs on."""
    return await WorkflowEnvironment.start_time_skipping(
        data_converter=converter, test_server_existing_path=time_skipping_server_path()
    )


async def dev_server_environment(converter: DataConverter) -> WorkflowEnvironment:
    """A real dev server, for a test the time-skipping server cannot host faithfully.

    One such case: with no workflow cache, the test server skips time while a workflow
    task runs a local activity that calls the server (the event log's publish), so the
    task times out and runs again, and what it did is done twice.
    """
    return await WorkflowEnvironment.start_local(
        data_converter=converter,
        dev_server_existing_path=dev_server_path(),
        dev_server_extra_args=dev_server_args(),
    )


# Tests swap this (monkeypatch) for `dev_server_environment`.
start_environment = time_skipping_environment


@asynccontextmanager
async def _loop_on(
    script: Iterable[ScriptedResponse],
    extra_activities: Iterable[Any],
    blobs: str | None,
    blob_threshold: int,
    max_stored_payload_bytes: int,
    more_endpoints: Mapping[str, Iterable[ScriptedResponse]],
    endpoint_config: dict[str, Any],
    effects: Effects,
    registry: ToolRegistry,
    tools_apart: bool,
) -> AsyncIterator[Loop]:
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(ScriptedServer(list(script)))
        servers = {ENDPOINT: server}
        for name, more in more_endpoints.items():
            servers[name] = await stack.enter_async_context(ScriptedServer(list(more)))
        endpoints = EndpointRegistry(
            [server.endpoint(ENDPOINT, **endpoint_config)]
            + [s.endpoint(name) for name, s in servers.items() if name != ENDPOINT]
        )
        async with ModelActivities(endpoints, environ={}) as model:
            env = await start_environment(
                steadyloop_data_converter(blobs, threshold_bytes=blob_threshold)
            )
            async with env:
                task_queue = f"tq-{uuid.uuid4()}"
                health = EndpointHealthActivities(env.client, task_queue=task_queue)
                tools = ToolActivities(
                    registry, max_stored_payload_bytes=max_stored_payload_bytes
                ).activities()
                async with AsyncExitStack() as apart:
                    if tools_apart:  # a client of its own, as another process has
                        other = await Client.connect(
                            env.client.service_client.config.target_host,
                            namespace=env.client.namespace,
                            data_converter=env.client.data_converter,
                        )
                        await apart.enter_async_context(
                            Worker(other, task_queue=task_queue, activities=tools)
                        )
                    async with Worker(
                        env.client,
                        task_queue=task_queue,
                        workflows=RUN_WORKFLOWS,
                        activities=[
                            *model.activities(),
                            *([] if tools_apart else tools),
                            *health.activities(),
                            *registry.activity_functions(),
                            *extra_activities,
                        ],
                        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
                    ):
                        yield Loop(
                            env=env,
                            server=server,
                            task_queue=task_queue,
                            effects=effects,
                            servers=servers,
                            health=health,
                        )


@activity.defn(name="test.summarize")
async def summarize(request: CompactionRequest) -> CompactionReply:
    """A user compaction activity: keeps the system prompt and the first request,
    summarizes the rest in one message, and (carelessly) keeps the last tool answer
    without its call, which healing must drop."""
    kept = request.messages[:2]
    summary = ChatMessage(role="user", content=f"(summary of {len(request.messages)} messages)")
    return CompactionReply(messages=[*kept, summary, request.messages[-1]])


def assert_every_call_answered(transcript: list[ChatMessage]) -> None:
    """The property providers enforce on the next request: each assistant tool call is
    answered by exactly one tool message with its id, right after the assistant message,
    and no tool message answers anything else."""
    position = 0
    while position < len(transcript):
        message = transcript[position]
        position += 1
        if message.role == "tool":
            raise AssertionError(f"orphan tool message {message.tool_call_id!r}")
        if message.role != "assistant" or not message.tool_calls:
            continue
        ids = [call.id for call in message.tool_calls]
        assert all(i.strip() for i in ids), f"blank tool call id in {ids}"
        assert len(set(ids)) == len(ids), f"duplicate tool call ids {ids}"
        answers = transcript[position : position + len(ids)]
        assert [m.role for m in answers] == ["tool"] * len(ids), (
            f"calls {ids} not answered by {len(ids)} tool messages: {answers}"
        )
        assert [m.tool_call_id for m in answers] == ids
        position += len(ids)
    all_ids = [c.id for m in transcript if m.role == "assistant" for c in m.tool_calls]
    assert len(set(all_ids)) == len(all_ids), f"a tool call id repeats across turns: {all_ids}"


def tool_messages(transcript: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in transcript if m.role == "tool"]
