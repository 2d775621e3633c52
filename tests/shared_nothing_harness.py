"""Workers that share no disk, one object store: the harness of the blob-store e2e tests.

`shared_nothing(workdir)` starts a dev server, SeaweedFS (`seaweed_harness`), a fault
proxy in front of it (`http_fault_proxy`) and a scripted model, and yields a
`SharedNothing` that starts worker processes with the real command line
(`python -m steadyloop worker`), each with its own `HOME`, working directory and
`STEADYLOOP_HOME` (so its own chunk cache and no blob directory at all), all on one task
queue, all given `STEADYLOOP_BLOB_DIR=s3://...` and the standard AWS variables pointing
at the proxy. This process's client reads the same store, as a third machine would.

The model asks for `read_page(1)`, `read_page(2)`, ... one page a turn (4 KB each, from
`blob_e2e_tools`) until `pages`, then answers; it decides from the request's own tool
messages, so a retried turn asks the same again. The blob threshold is 2 KB, so every
request from the first turn on is a reference to the store.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from http_fault_proxy import FaultProxy
from process_signals import kill_process, stop_process
from seaweed_harness import Seaweed, aws_environ, restore_environ, seaweed
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._run.models import RunInput, RunResult
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

TESTS = Path(__file__).parent
ROOT = TESTS.parent
THRESHOLD_BYTES = 2048
START_GUARD_S = 60.0
STOP_GUARD_S = 15.0
CALLS_LOG = "tool-calls.log"


def answer_text(pages: int) -> str:
    return f"read {pages} pages"


def responder(pages: int) -> ScriptedServer:
    def respond(request: RecordedRequest) -> ScriptedResponse:
        body = request.json
        assert isinstance(body, dict)
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < pages:
            call = ScriptedCall("read_page", {"n": done + 1}, id=f"call-{done + 1}")
            return tool_calls_response(call)
        return text_response(answer_text(pages))

    return ScriptedServer(respond)


@dataclass
class WorkerProcess:
    name: str
    process: asyncio.subprocess.Process
    directory: Path
    log: Path

    def calls(self) -> list[int]:
        """The pages this worker's tool started, in order."""
        path = self.directory / CALLS_LOG
        if not path.exists():
            return []
        return [int(line.split()[0]) for line in path.read_text().splitlines() if line]

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    async def kill(self) -> None:
        await kill_process(self.process, STOP_GUARD_S)

    async def stop(self) -> None:
        await stop_process(self.process, STOP_GUARD_S)


@dataclass
class SharedNothing:
    env: WorkflowEnvironment
    store: Seaweed
    proxy: FaultProxy
    model: ScriptedServer
    workdir: Path
    task_queue: str
    client: Client
    workers: list[WorkerProcess] = field(default_factory=list)
    proxies: list[FaultProxy] = field(default_factory=list)
    started: int = 0

    async def add_proxy(self) -> FaultProxy:
        """Another fault proxy in front of the store, for workers whose store misbehaves
        while the others' does not (stopped with the harness)."""
        proxy = FaultProxy("127.0.0.1", self.store.s3_port)
        await proxy.start()
        self.proxies.append(proxy)
        return proxy

    @staticmethod
    def new_queue() -> str:
        return f"shared-nothing-{uuid.uuid4().hex[:8]}"

    @property
    def address(self) -> str:
        return self.env.client.service_client.config.target_host

    def process_environ(
        self, home: Path, *, proxy: FaultProxy | None = None, task_queue: str | None = None
    ) -> dict[str, str]:
        """What a process on another machine would have: no shared path, the S3 URL."""
        kept = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("STEADYLOOP_", "TEMPORAL_", "AWS_", "OPENAI_"))
        }
        return {
            **kept,
            **aws_environ((proxy or self.proxy).endpoint),
            "HOME": str(home),
            "STEADYLOOP_HOME": str(home / ".steadyloop"),
            "STEADYLOOP_BLOB_DIR": self.store.url,
            "STEADYLOOP_BLOB_THRESHOLD": str(THRESHOLD_BYTES),
            "TEMPORAL_ADDRESS": self.address,
            "STEADYLOOP_TASK_QUEUE": task_queue or self.task_queue,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
            "PYTHONUNBUFFERED": "1",
        }

    def machine(self, name: str) -> Path:
        directory = self.workdir / name
        (directory / "home").mkdir(parents=True, exist_ok=True)
        return directory

    async def start_worker(
        self,
        *,
        wait_ready: bool = True,
        proxy: FaultProxy | None = None,
        task_queue: str | None = None,
    ) -> WorkerProcess:
        """A worker on `task_queue` (the harness's own by default), whose store requests
        go through `proxy` (the harness's by default)."""
        self.started += 1  # counted before the first await: workers may start at once
        name = f"worker-{self.started}"
        directory = self.machine(name)
        ready = directory / "ready.json"
        log = directory / "worker.log"
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "steadyloop",
                "worker",
                "--tools",
                "blob_e2e_tools:registry",
                "--endpoint",
                f"scripted={self.model.base_url},model=scripted-model",
                "--ready-file",
                str(ready),
                "--graceful-shutdown",
                "1",
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                cwd=directory,
                env=self.process_environ(directory / "home", proxy=proxy, task_queue=task_queue),
            )
        worker = WorkerProcess(name, process, directory, log)
        self.workers.append(worker)
        if wait_ready:
            for _ in range(int(START_GUARD_S / 0.1)):
                if ready.exists() or process.returncode is not None:
                    break
                await asyncio.sleep(0.1)
            assert ready.exists(), worker.output()
        return worker

    async def start_run(
        self, pages: int, *, task_queue: str | None = None
    ) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
        run = RunInput(
            endpoint="scripted",
            model="scripted-model",
            prompt="read the pages",
            tools=["read_page"],
        )
        assert pages > 0
        return await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=f"shared-nothing-{uuid.uuid4().hex[:10]}",
            task_queue=task_queue or self.task_queue,
        )

    async def run_command(self, *args: str) -> tuple[int, str]:
        """`python -m steadyloop ARGS` from a third machine (its own home, no blob dir)."""
        directory = self.machine(f"cli-{uuid.uuid4().hex[:6]}")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "steadyloop",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=directory,
            env=self.process_environ(directory / "home"),
        )
        out, _ = await asyncio.wait_for(process.communicate(), START_GUARD_S)
        assert process.returncode is not None
        return process.returncode, out.decode(errors="replace")


async def failed_workflow_tasks(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The failure message of every failed or timed-out workflow task in the run."""
    found: list[str] = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            found.append(event.workflow_task_failed_event_attributes.failure.message)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            found.append("workflow task timed out")
    return found


@asynccontextmanager
async def shared_nothing(workdir: Path, *, pages: int) -> AsyncIterator[SharedNothing]:
    async with seaweed(workdir) as store:
        proxy = FaultProxy("127.0.0.1", store.s3_port)
        await proxy.start()
        saved = {name: os.environ.get(name) for name in aws_environ(proxy.endpoint)}
        os.environ.update(aws_environ(proxy.endpoint))
        converter = steadyloop_data_converter(store.url, threshold_bytes=THRESHOLD_BYTES)
        try:
            async with responder(pages) as model:
                env = await WorkflowEnvironment.start_local(
                    dev_server_existing_path=dev_server_path(),
                    data_converter=converter,
                    dev_server_extra_args=dev_server_args(),
                )
                async with env:
                    harness = SharedNothing(
                        env=env,
                        store=store,
                        proxy=proxy,
                        model=model,
                        workdir=workdir,
                        task_queue=SharedNothing.new_queue(),
                        client=env.client,
                    )
                    try:
                        yield harness
                    finally:
                        for worker in harness.workers:
                            await worker.stop()
                        for extra in harness.proxies:
                            await extra.stop()
        finally:
            await proxy.stop()
            restore_environ(saved)
