"""Helpers for the receipts end-to-end tests: a dev server, a scripted provider, workers
as separate processes (`receipts_worker_main.py`), and the side-effect counter they write.

`e2e_run(responder)` starts everything and guarantees, in its `finally`, that every
worker process it started is dead (SIGTERM, then SIGKILL) and the servers are stopped.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from process_signals import kill_process, stop_process
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.process import RUN_WORKFLOWS, workflow_runner
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    text_response,
)

WORKER_SCRIPT = Path(__file__).with_name("receipts_worker_main.py")
ENDPOINT = "scripted"
MODEL = "scripted-model"
TOOLS = ["deliver", "charge", "notify"]
START_GUARD_S = 20.0
STOP_GUARD_S = 10.0


# -- the scripted model --------------------------------------------------------------


def stall(seconds: float) -> ScriptedResponse:
    """A stream that sends nothing for `seconds` (the worker is killed meanwhile)."""
    return text_response("too late", pause_s=seconds)


def tool_answers(request: RecordedRequest) -> list[dict[str, Any]]:
    """The tool messages of the transcript a request carries, in order."""
    return [m for m in request.messages if m.get("role") == "tool"]


# -- side effects, counted outside every worker ------------------------------------------


@dataclass(frozen=True)
class Effect:
    tool: str
    item: str
    attempt: int
    pid: int
    call_id: str


def read_effects(path: Path) -> list[Effect]:
    if not path.exists():
        return []
    return [Effect(**json.loads(line)) for line in path.read_text().splitlines() if line]


def effect_counts(path: Path, tool: str) -> Counter[str]:
    return Counter(e.item for e in read_effects(path) if e.tool == tool)


# -- worker processes --------------------------------------------------------------------


@dataclass
class WorkerProcess:
    process: asyncio.subprocess.Process
    log: Path
    lines: list[str] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        stderr = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(self.lines) + "\n--- stderr ---\n" + stderr[-4000:]

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line == "READY":
                self.ready.set()
        self.ready.set()  # ended before it was ready: let the waiter see why

    async def kill(self) -> None:
        """SIGKILL: no cleanup, no graceful shutdown, exactly a lost machine."""
        await kill_process(self.process, STOP_GUARD_S)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        await stop_process(self.process, STOP_GUARD_S)
        if self.reader is not None:
            await asyncio.wait_for(self.reader, STOP_GUARD_S)


@dataclass
class E2E:
    env: WorkflowEnvironment
    provider: ScriptedServer
    task_queue: str
    effects: Path
    workdir: Path
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def client(self) -> Client:
        return self.env.client

    @property
    def address(self) -> str:
        return self.env.client.service_client.config.target_host

    async def start_worker(self, *hang: str) -> WorkerProcess:
        """A worker process serving the loop and the test tools; waits until it polls."""
        log = self.workdir / f"worker-{len(self.workers) + 1}.stderr"
        args = [
            str(WORKER_SCRIPT),
            "--address",
            self.address,
            "--task-queue",
            self.task_queue,
            "--base-url",
            self.provider.base_url,
            "--effects",
            str(self.effects),
        ]
        for spec in hang:
            args += ["--hang", spec]
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=stderr
            )
        worker = WorkerProcess(process, log)
        self.workers.append(worker)
        worker.reader = asyncio.ensure_future(worker._read())
        await asyncio.wait_for(worker.ready.wait(), START_GUARD_S)
        assert "READY" in worker.lines, worker.output()
        return worker

    async def start(
        self, *, prompt: str = "go", forwarding: ForwardingOptions | None = None, **limits: Any
    ) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
        run = RunInput(
            endpoint=ENDPOINT,
            model=MODEL,
            prompt=prompt,
            tools=TOOLS,
            limits=RunLimits(**limits),
            forwarding=forwarding or ForwardingOptions(),
        )
        return await self.client.start_workflow(
            ToolLoopWorkflow.run, run, id=f"receipts-e2e-{uuid.uuid4()}", task_queue=self.task_queue
        )


@asynccontextmanager
async def e2e_run(
    responder: Callable[[RecordedRequest], ScriptedResponse], workdir: Path
) -> AsyncIterator[E2E]:
    async with ScriptedServer(responder) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(),
            data_converter=pydantic_data_converter,
            dev_server_extra_args=dev_server_args(),
        )
        async with env:
            harness = E2E(
                env=env,
                provider=provider,
                task_queue=f"receipts-{uuid.uuid4().hex[:8]}",
                effects=workdir / "effects.jsonl",
                workdir=workdir,
            )
            try:
                yield harness
                await assert_every_run_replays(harness.client)
            except BaseException:
                try:
                    await print_what_happened(harness)
                except Exception as error:  # the failure itself is what the test reports
                    print(f"could not print the runs' histories: {error!r}")
                raise
            finally:
                for worker in harness.workers:
                    try:
                        await worker.stop()
                    except Exception:
                        if worker.process.returncode is None:
                            worker.process.kill()
                        raise
            assert provider.errors == [], provider.errors


async def assert_every_run_replays(client: Client) -> None:
    """Each run's history, however its workers were killed, replays under the code that
    made it: the workers the tests kill leave histories no other test records."""
    replayer = Replayer(
        workflows=RUN_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    async for execution in client.list_workflows():
        history = await client.get_workflow_handle(
            execution.id, run_id=execution.run_id
        ).fetch_history()
        replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replay.replay_failure is None, (execution.id, replay.replay_failure)


async def print_what_happened(harness: E2E, *, log_lines: int = 40) -> None:
    """Print each run's history, one line an event, and the end of each worker's log, so
    that a failure seen once (a race under load) can be read from the test's output: the
    dev server and the logs are gone when it ends."""
    async for execution in harness.client.list_workflows():
        handle = harness.client.get_workflow_handle(execution.id, run_id=execution.run_id)
        print(f"history of {execution.id} ({execution.run_id}):")
        for event in (await handle.fetch_history()).events:
            print(f"  {event_line(event)}")
    for number, worker in enumerate(harness.workers, 1):
        text = worker.log.read_text(errors="replace") if worker.log.exists() else ""
        lines = text.splitlines()[-log_lines:]
        print(f"worker {number} log, last {len(lines)} lines:", *lines, sep="\n  ")


def event_line(event: HistoryEvent) -> str:
    """One event: its id, type, and what names it (a marker, an activity, an identity)."""
    kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    name = ""
    if event.HasField("marker_recorded_event_attributes"):
        marker = event.marker_recorded_event_attributes
        data = b"".join(p.data for key in marker.details for p in marker.details[key].payloads)
        name = f"{marker.marker_name} {data[:80]!r}"
    elif event.HasField("activity_task_scheduled_event_attributes"):
        name = event.activity_task_scheduled_event_attributes.activity_type.name
    elif event.HasField("workflow_task_failed_event_attributes"):
        failed = event.workflow_task_failed_event_attributes
        name = f"{failed.identity}: {failed.failure.message[:200]}"
    elif event.HasField("workflow_task_started_event_attributes"):
        name = event.workflow_task_started_event_attributes.identity
    return f"{event.event_id} {event.event_time.ToJsonString()} {kind} {name}".rstrip()


async def pending_heartbeat(
    client: Client, handle: WorkflowHandle[Any, Any], activity_type: str
) -> list[Any] | None:
    """The first heartbeat detail the *server* holds for a pending activity, if any."""
    description = await handle.describe()
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name != activity_type:
            continue
        if not pending.heartbeat_details.payloads:
            return None
        details = await client.data_converter.decode(pending.heartbeat_details.payloads)
        first = details[0]
        return first if isinstance(first, list) else None
    return None
