"""A ToolLoopWorkflow whose endpoints each speak a wire of their own (chat, responses,
anthropic), each a scripted provider over real HTTP on loopback.

`loop_harness.running_loop` configures only its first endpoint; the others are chat.
The properties of a route that crosses endpoints of one wire (pass-back items go only to
the endpoint that issued them) or of different wires (a knob one wire refuses, schemas
sanitized for the run's profile on each) need every endpoint's wire chosen, and a tool
registry chosen by the test. The worker runs what `steadyloop worker` runs for a run:
the run workflows, the model, tool and endpoint-health activities.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from anthropic_streams import MESSAGE_STOP, delta, message_delta, message_start, sse, start, stop
from loop_harness import Effects, build_tools, loop_worker, time_skipping_environment
from temporalio.client import Client, WorkflowHandle

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.bounds import WireApi
from steadyloop._run.models import RunInput, RunResult
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    ScriptedResponse,
    ScriptedServer,
    raw_response,
    text_response,
)
from steadyloop.tools import ToolRegistry


def text_answer(api: WireApi, text: str) -> ScriptedResponse:
    """A final answer of `text` (no tool call) as `api`'s wire streams it."""
    if api == "chat":
        return text_response(text)
    if api == "anthropic":
        events = [
            message_start(),
            start(0, {"type": "text", "text": ""}),
            delta(0, type="text_delta", text=text),
            stop(0),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
        return raw_response(sse(events))
    message = {"id": "msg_1", "type": "message", "role": "assistant"}
    done = {**message, "status": "completed", "content": [{"type": "output_text", "text": text}]}
    responses: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "content": []},
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "item_id": "msg_1",
            "delta": text,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {
            "type": "response.completed",
            "response": {"id": "resp_1", "status": "completed", "output": [done]},
        },
    ]
    return raw_response(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in responses))


@dataclass(frozen=True)
class Provider:
    """One endpoint of the worker: the wire it speaks and what its server answers."""

    api: WireApi
    script: Iterable[ScriptedResponse] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class WireLoop:
    client: Client
    task_queue: str
    servers: dict[str, ScriptedServer]  # by endpoint name

    async def start(self, run: RunInput) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
        return await self.client.start_workflow(
            ToolLoopWorkflow.run, run, id=f"wire-loop-{uuid.uuid4()}", task_queue=self.task_queue
        )

    async def run(self, run: RunInput) -> RunResult:
        result: RunResult = await (await self.start(run)).result()
        return result


@asynccontextmanager
async def wire_loop(
    providers: Mapping[str, Provider], registry: ToolRegistry | None = None
) -> AsyncIterator[WireLoop]:
    """A worker on the time-skipping server with one endpoint per `providers` entry (name:
    its wire and script) and `registry`'s tools (default: `loop_harness`'s test tools);
    every payload inline (no blob storage: nothing here depends on it)."""
    tools = registry if registry is not None else build_tools(Effects())
    async with AsyncExitStack() as stack:
        servers: dict[str, ScriptedServer] = {}
        for name, provider in providers.items():
            servers[name] = await stack.enter_async_context(ScriptedServer(list(provider.script)))
        endpoints = EndpointRegistry(
            [
                servers[name].endpoint(name, api=provider.api, **provider.config)
                for name, provider in providers.items()
            ]
        )
        model = await stack.enter_async_context(ModelActivities(endpoints, environ={}))
        env = await stack.enter_async_context(
            await time_skipping_environment(steadyloop_data_converter(None))
        )
        task_queue = f"wire-loop-{uuid.uuid4()}"
        await stack.enter_async_context(loop_worker(env.client, task_queue, model, tools))
        yield WireLoop(client=env.client, task_queue=task_queue, servers=servers)
