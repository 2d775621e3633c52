"""The web page's end-to-end stack: a dev server, a scripted provider, and a real
`steadyloop worker` and `steadyloop serve`, each its own process that a test may kill.

`web_stack(responder, workdir)` starts the dev server and the provider in this process
and guarantees, in its `finally`, that every process it started is dead (SIGTERM, then
SIGKILL). The worker serves the tour's tools (`refund` waits for approval and writes one
line per refund to the outbox, so a repeat would show). Workers and servers share the
test's blob directory, as a deployment's processes share theirs.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polling import eventually
from process_signals import kill_process, stop_process
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from steadyloop._cli.demo_tour_tools import REFUNDS_FILE
from steadyloop._history.payload_storage import BLOB_DIR_ENV, steadyloop_data_converter
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._run.models import RunLimits
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._web.client_backend import thread_tag
from steadyloop._worker.dev_server import free_port
from steadyloop.client import RunOptions, SteadyloopClient
from steadyloop.testing import (
    Pause,
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    finish_chunk,
    sse_response,
    text_chunks,
)
from steadyloop.tools.examples import OUTBOX_DIR_ENV

ENDPOINT = "scripted"
MODEL = "scripted-model"
TOOLS_SPEC = "steadyloop._cli.demo_tour_tools:registry"
# Two tenants, each with its bearer token (the server keeps only their hashes).
TOKENS = {"tenant-a": "token-a-7f3c9d", "tenant-b": "token-b-41e0aa"}
START_GUARD_S = 30.0
STOP_GUARD_S = 10.0


# -- the scripted model --------------------------------------------------------------


def paced_answer(words: list[str], pace_s: float) -> ScriptedResponse:
    """An answer streamed one word per chunk, `pace_s` apart: time to act mid-answer."""
    parts: list[dict[str, object] | Pause] = []
    for chunk in text_chunks(words):
        parts += [chunk, Pause(pace_s)]
    return sse_response([*parts, finish_chunk("stop")])


def tool_answers(request: RecordedRequest) -> list[dict[str, object]]:
    return [m for m in request.messages if m.get("role") == "tool"]


# -- processes -----------------------------------------------------------------------


@dataclass
class Process:
    """A child process whose output goes to a log file the failure message quotes."""

    name: str
    process: asyncio.subprocess.Process
    log: Path

    def output(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} (pid {self.process.pid}) ---\n{text[-6000:]}"

    async def kill(self) -> None:
        """SIGKILL: no cleanup, no graceful shutdown, exactly a lost machine."""
        await kill_process(self.process, STOP_GUARD_S)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        await stop_process(self.process, STOP_GUARD_S)


@dataclass
class WebStack:
    env: WorkflowEnvironment
    provider: ScriptedServer
    task_queue: str
    workdir: Path
    processes: list[Process] = field(default_factory=list)
    server_port: int = 0

    @property
    def client(self) -> Client:
        return self.env.client

    @property
    def address(self) -> str:
        return self.env.client.service_client.config.target_host

    @property
    def outbox(self) -> Path:
        return self.workdir / "outbox"

    @property
    def url(self) -> str:
        """The page's address (the same port across restarts of the server)."""
        return f"http://127.0.0.1:{self.server_port}"

    def refunds(self) -> list[str]:
        path = self.outbox / REFUNDS_FILE
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def environment(self) -> dict[str, str]:
        environment = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
        }
        environment.update(
            {
                "PYTHONUNBUFFERED": "1",
                "TEMPORAL_ADDRESS": self.address,
                "STEADYLOOP_TASK_QUEUE": self.task_queue,
                BLOB_DIR_ENV: str(self.workdir / "blobs"),
                "STEADYLOOP_ENDPOINT": ENDPOINT,
                "STEADYLOOP_WEB_TOKENS": ",".join(f"{t}={k}" for t, k in TOKENS.items()),
                OUTBOX_DIR_ENV: str(self.outbox),
            }
        )
        return environment

    async def _spawn(self, name: str, *args: str) -> Process:
        log = self.workdir / f"{name}-{len(self.processes) + 1}.log"
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "steadyloop",
                *args,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=self.environment(),
            )
        started = Process(name, process, log)
        self.processes.append(started)
        return started

    def page_url(self, thread: str | None = None, *, tenant: str = "tenant-a") -> str:
        """The page, with the tenant's token in the fragment (the page keeps it)."""
        query = f"?thread={thread}" if thread else ""
        return f"{self.url}/{query}#token={TOKENS[tenant]}"

    def headers(self, tenant: str = "tenant-a") -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKENS[tenant]}"}

    async def start_server(self) -> Process:
        """A `steadyloop serve` on the stack's port (the same one across restarts)."""
        ready = self.workdir / f"server-ready-{uuid.uuid4().hex[:6]}.txt"
        server = await self._spawn(
            "server",
            "serve",
            "--port",
            str(self.server_port),
            "--model",
            MODEL,
            "--tool",
            "refund",
            "--tool",
            "charge",
            "--ready-file",
            str(ready),
        )

        async def serving() -> bool | None:
            if server.process.returncode is not None:
                raise AssertionError(f"the server exited early\n{server.output()}")
            return True if ready.exists() else None

        await eventually(serving, timeout_s=START_GUARD_S, what="the server to listen")
        return server

    async def start_worker(self) -> Process:
        """A `steadyloop worker` serving the scripted endpoint and the tour's tools."""
        ready = self.workdir / f"worker-ready-{uuid.uuid4().hex[:6]}.json"
        worker = await self._spawn(
            "worker",
            "worker",
            "--endpoint",
            f"{ENDPOINT}={self.provider.base_url},model={MODEL}",
            "--tools",
            TOOLS_SPEC,
            "--ready-file",
            str(ready),
        )

        async def polling() -> bool | None:
            if worker.process.returncode is not None:
                raise AssertionError(f"the worker exited early\n{worker.output()}")
            return True if ready.exists() else None

        await eventually(polling, timeout_s=START_GUARD_S, what="the worker to poll")
        return worker


@asynccontextmanager
async def web_stack(
    responder: Callable[[RecordedRequest], ScriptedResponse], workdir: Path
) -> AsyncIterator[WebStack]:
    (workdir / "outbox").mkdir(parents=True, exist_ok=True)
    async with ScriptedServer(responder) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(),
            data_converter=steadyloop_data_converter(workdir / "blobs"),
            dev_server_extra_args=dev_server_args(),
        )
        async with env:
            stack = WebStack(
                env=env,
                provider=provider,
                task_queue=f"web-{uuid.uuid4().hex[:8]}",
                workdir=workdir,
                server_port=free_port(),
            )
            try:
                yield stack
            except BaseException:
                for process in stack.processes:
                    print(process.output(), file=sys.stderr)
                raise
            finally:
                for process in stack.processes:
                    await process.stop()


def decoded(line: str) -> object:
    return json.loads(line)


# -- runs started from code, shown on the page -------------------------------------------


async def start_thread_run(
    stack: WebStack,
    name: str,
    prompt: str,
    *,
    tenant: str = "tenant-a",
    forwarding: ForwardingOptions | None = None,
    **limits: Any,
) -> str:
    """Start a run on the web thread `name` of `tenant` through the client API, with
    `limits` the server does not expose (a short model heartbeat timeout finds a killed
    worker in seconds), and return the thread id the page opens."""
    client = SteadyloopClient(stack.client, task_queue=stack.task_queue)
    options = RunOptions(
        endpoint=ENDPOINT,
        model=MODEL,
        tools=["refund"],
        tenant_id=tenant,
        limits=RunLimits(**limits),
        forwarding=forwarding or ForwardingOptions(enabled=True),
    )
    await client.thread(f"web/{tenant}/{name}").start(prompt, options=options)
    return f"{name}~{thread_tag(tenant, name)}"


def run_workflow(tenant: str, thread: str, run: str = "1") -> str:
    """The workflow id of run `run` of the web thread `thread` (its public id)."""
    return f"web/{tenant}/{thread.rpartition('~')[0]}/{run}"
