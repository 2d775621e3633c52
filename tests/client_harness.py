"""The client API against a real dev server: a worker in this process, a scripted provider
that answers from the conversation it is sent, and tools whose effects are counted.

The provider reads the last message of each request:
- a user message `CALL <tool> <json>` asks for that call (`WAIT ...` first holds the
  answer until the test sets `ClientEnv.release`, so a run stays in flight);
- a tool result is answered `done: <result>`;
- any other user message is answered `echo: <text>`.
So a run's answer says which prompt it answered, and a follow-up's request shows what
it inherited.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._worker.dev_server import DevServer, dev_server
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop.client import RunOptions, SteadyloopClient
from steadyloop.testing import (
    RecordedRequest,
    Responder,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)
from steadyloop.tools import ToolRegistry, tool

MODEL = "scripted-model"


@dataclass
class ClientEnv:
    client: SteadyloopClient
    server: DevServer
    provider: ScriptedServer
    notes: list[str] = field(default_factory=list)
    transfers: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    worker_options: WorkerOptions | None = None

    def worker(self) -> AbstractAsyncContextManager[Worker]:
        """Another worker for the task queue (after the first one stopped)."""
        assert self.worker_options is not None
        return running_worker(self.server.client, self.worker_options)

    def options(self, **overrides: Any) -> RunOptions:
        fields: dict[str, Any] = {
            "endpoint": "scripted",
            "model": MODEL,
            "tools": ["note", "slow_note", "transfer"],
        }
        return RunOptions(**(fields | overrides))

    def request_messages(self) -> list[list[dict[str, Any]]]:
        """The messages each model request carried, in order."""
        return [r.messages for r in self.provider.requests]


def _responder(env_release: asyncio.Event) -> Any:
    async def respond(request: RecordedRequest) -> ScriptedResponse:
        last = request.messages[-1]
        content = last.get("content") or ""
        if last["role"] == "tool":
            return text_response(f"done: {content}")
        if content.startswith("WAIT "):
            await asyncio.wait_for(env_release.wait(), 60)
            content = content.removeprefix("WAIT ")
        if content.startswith("CALL "):
            _, name, arguments = content.split(" ", 2)
            calls = [ScriptedCall(name, json.loads(arguments), id="call_0")]
            return tool_calls_response(*calls)
        return text_response(f"echo: {content}")

    return respond


def build_tools(env: ClientEnv) -> ToolRegistry:
    @tool(effect="opaque")
    async def note(text: str) -> str:
        """Record a note (an effect the tests count)."""
        env.notes.append(text)
        return f"noted {text}"

    @tool(effect="opaque", timeout=timedelta(milliseconds=500))
    async def slow_note(text: str) -> str:
        """An opaque effect that outlives its timeout: its outcome is unknown."""
        await asyncio.sleep(1.2)
        env.notes.append(text)
        return f"noted {text}"

    @tool(effect="opaque", approval=True)
    async def transfer(amount: float, to: str) -> str:
        """Move money: a person approves each call."""
        env.transfers.append(f"{amount:g} to {to}")
        return f"sent {amount:g} to {to}"

    return ToolRegistry([note, slow_note, transfer])


@asynccontextmanager
async def client_env(
    tmp_path: Path,
    *,
    worker: bool = True,
    tools: ToolRegistry | None = None,
    responder: Responder | None = None,
    endpoint: str = "scripted",
) -> AsyncIterator[ClientEnv]:
    """A dev server, a worker serving the loop on a fresh task queue (`worker=False`: none
    yet, start one with `env.worker()`), and the client. `tools` and `responder` replace
    the harness's own; the provider is served as endpoint `endpoint`."""
    converter = steadyloop_data_converter(tmp_path / "blobs")
    release = asyncio.Event()
    async with (
        dev_server(ui=False, data_converter=converter) as server,
        ScriptedServer(responder or _responder(release)) as provider,
    ):
        queue = f"client-{uuid.uuid4().hex[:8]}"
        env = ClientEnv(
            client=SteadyloopClient(server.client, task_queue=queue),
            server=server,
            provider=provider,
            release=release,
        )
        env.worker_options = WorkerOptions(
            task_queue=queue,
            endpoints=EndpointRegistry([provider.endpoint(endpoint)]),
            tools=tools if tools is not None else build_tools(env),
            graceful_shutdown=timedelta(seconds=1),
        )
        async with env.worker() if worker else nullcontext():
            try:
                yield env
            finally:
                release.set()  # let a held answer go, so the worker can shut down
