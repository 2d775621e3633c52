"""`steadyloop worker`, `run` and `show` as a user runs them: separate processes, a real
Temporal dev server, and a scripted provider over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import EventType

from steadyloop._cli.demo_conversation import ORDER_PATH, ORDER_TEXT, DemoProvider
from steadyloop._cli.invocation import program_name
from steadyloop._run.models import RunInput
from steadyloop._worker.dev_server import DevServer, dev_server, free_port
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    Chunk,
    Pause,
    ScriptedServer,
    finish_chunk,
    role_chunk,
    sse_response,
    text_chunks,
    text_response,
    usage_chunk,
)

pytestmark = pytest.mark.slow

GUARD_S = 120  # how long a step may hang before the test gives up: a guard, not a measure
READY = "Ctrl-C to stop."


# steadyloop's defaults (the blob store first) live under ~/.steadyloop: the commands get
# a home of their own, one per test process, shared by a test's worker and its commands
# (they read each other's blobs), so no test writes into the user's home.
COMMANDS_HOME = tempfile.mkdtemp(prefix="steadyloop-test-home-")
atexit.register(shutil.rmtree, COMMANDS_HOME, ignore_errors=True)


def cli_environment(**extra: str) -> dict[str, str]:
    """This process's environment without settings that would leak into the commands,
    and with `STEADYLOOP_HOME` in a temporary directory (see `COMMANDS_HOME`)."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    environ["STEADYLOOP_HOME"] = COMMANDS_HOME
    environ.update(extra)
    return environ


@dataclass
class WorkerProcess:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line == READY:
                self.ready.set()
        self.ready.set()  # ended before it was ready: let the waiter see why

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        if self.process.returncode is None:
            self.process.send_signal(sig)
        return await asyncio.wait_for(self.process.wait(), GUARD_S)


@pytest.fixture
async def temporal() -> AsyncIterator[DevServer]:
    async with dev_server(ui=False) as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, str]:
    """The example tools' directories, with the demo's order file in the sandbox."""
    sandbox, outbox = tmp_path / "sandbox", tmp_path / "outbox"
    (sandbox / ORDER_PATH).parent.mkdir(parents=True)
    (sandbox / ORDER_PATH).write_text(ORDER_TEXT, encoding="utf-8")
    return {"STEADYLOOP_SANDBOX_DIR": str(sandbox), "STEADYLOOP_OUTBOX_DIR": str(outbox)}


async def start_worker(*args: str, environ: dict[str, str]) -> WorkerProcess:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop",
        "worker",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
    )
    worker = WorkerProcess(process)
    asyncio.get_running_loop().create_task(worker.read())
    await asyncio.wait_for(worker.ready.wait(), GUARD_S)
    assert READY in worker.lines, worker.output
    return worker


def typed(*words: str) -> str:
    """A command as the CLI prints it from these tests' processes (`python -m steadyloop`)."""
    return f"{program_name('/x/steadyloop/__main__.py')} {shlex.join(words)}"


async def steadyloop(*args: str, environ: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
    )
    out, _ = await asyncio.wait_for(process.communicate(), GUARD_S)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


async def test_run_follows_to_the_answer_detach_prints_the_id_and_show_attaches(
    temporal: DevServer, workspace: dict[str, str]
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    async with ScriptedServer(DemoProvider(pace_s=0)) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url},model=scripted-model",
            environ=cli_environment(**workspace),
        )
        try:
            # `run` learns the model from the environment, the endpoint from a flag.
            environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
            code, out = await steadyloop(
                "run", "the March order?", *connection, "--endpoint", "scripted", environ=environ
            )
            assert code == 0, out
            assert "stop reason: final_answer" in out
            assert "The March order comes to 121.22" in out
            assert "-> current_time {}" in out  # no arguments: read as {}

            code, out = await steadyloop(
                "run", "again", *connection, "--endpoint", "scripted", "--detach", environ=environ
            )
            assert code == 0, out
            (workflow_id,) = out.split()  # nothing but the id, for `$(steadyloop run --detach)`

            code, shown = await steadyloop("show", workflow_id, *connection, environ=environ)
            assert code == 0, shown
            assert f"run {workflow_id}" in shown
            assert "The March order comes to 121.22" in shown
            assert "stop reason: final_answer" in shown
        finally:
            assert await worker.stop() == 0, worker.output
    notes = (Path(workspace["STEADYLOOP_OUTBOX_DIR"]) / "notes.txt").read_text().splitlines()
    assert len(notes) == 2  # one note per run: nothing repeated by following or attaching


async def test_exit_codes_follow_how_the_run_ended(
    temporal: DevServer, workspace: dict[str, str]
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    async with ScriptedServer(DemoProvider(pace_s=0)) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url}",
            environ=cli_environment(**workspace),
        )
        try:
            # Refused before the run starts: the serving worker says which it knows.
            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "nowhere", environ=environ
            )
            assert code == 2, out
            assert "endpoint 'nowhere' is not one the serving worker knows" in out
            assert "it knows: scripted" in out

            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "scripted", "--max-turns", "1",
                environ=environ,
            )  # fmt: skip
            assert code == 3, out
            assert "stop reason: max_turns" in out

            # A route: the first endpoint is unknown to the worker, so every turn goes on
            # to the second, which answers.
            code, out = await steadyloop(
                "run", "x", *connection,
                "--route", "nowhere=m", "--route", "scripted=scripted-model",
                environ=environ,
            )  # fmt: skip
            assert code == 0, out
            assert "route nowhere=m then scripted=scripted-model" in out
            assert "stop reason: final_answer" in out

            code, out = await steadyloop("show", "no-such-run", *connection, environ=environ)
            assert code == 2, out
            assert "no workflow 'no-such-run'" in out
        finally:
            assert await worker.stop() == 0, worker.output


async def test_sigterm_lets_the_running_model_stream_finish_and_nothing_is_repeated(
    temporal: DevServer,
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    stream: list[Chunk | Pause] = [role_chunk(), Pause(3.0), *text_chunks("done", role=False)]
    slow = sse_response([*stream, finish_chunk("stop"), usage_chunk(3, 1)])
    # One scripted answer only: a repeated model call would get a 500 and fail the run.
    async with ScriptedServer([slow]) as provider:
        environ = cli_environment()
        endpoint = ["--endpoint", f"scripted={provider.base_url}"]
        first = await start_worker(*connection, *endpoint, environ=environ)
        handle = await temporal.client.start_workflow(
            ToolLoopWorkflow.run,
            RunInput(endpoint="scripted", model="m", prompt="hi"),
            id=f"graceful-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
        async with asyncio.timeout(GUARD_S):
            while not provider.exchanges:
                await asyncio.sleep(0.05)
        exchange = provider.exchanges[0]
        assert not exchange.finished  # the signal lands mid-stream

        assert await first.stop(signal.SIGTERM) == 0, first.output
        assert exchange.finished and not exchange.client_disconnected, first.output
        assert "finishing running activities" in first.output
        assert first.lines[-1] == "steadyloop worker: stopped"
        history = await handle.fetch_history()
        kinds = {event.event_type for event in history.events}
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in kinds
        assert not kinds & {
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
            EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
        }

        second = await start_worker(*connection, *endpoint, environ=environ)
        try:
            result = await asyncio.wait_for(handle.result(), GUARD_S)
        finally:
            assert await second.stop(signal.SIGINT) == 0, second.output
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "done"
    assert len(provider.exchanges) == 1


async def test_worker_dev_starts_a_dev_server_whose_ui_answers_at_the_printed_address() -> None:
    port, ui_port = free_port(), free_port()
    worker = await start_worker(
        "--dev",
        "--dev-port",
        str(port),
        "--dev-ui-port",
        str(ui_port),
        environ=cli_environment(),
    )
    try:
        assert f"Temporal at 127.0.0.1:{port}" in worker.output
        found = re.search(r"Temporal UI: (http://\S+)", worker.output)
        assert found, worker.output
        assert found.group(1) == f"http://127.0.0.1:{ui_port}"
        async with httpx.AsyncClient() as client:
            page = await client.get(found.group(1))
        assert page.status_code == 200
        assert "none configured" in worker.output  # no endpoint: said, not silently empty
    finally:
        assert await worker.stop(signal.SIGINT) == 0, worker.output
    assert worker.lines[-1] == "steadyloop worker: stopped"


async def test_run_prints_the_answer_as_it_streams_and_resume_carries_on_after_it_was_cut(
    temporal: DevServer, workspace: dict[str, str]
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    cut = sse_response([*text_chunks("The first half,"), Pause(5.0)], done=False)
    rest = text_response("and the second half.")
    async with ScriptedServer([cut, rest]) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url},inter_chunk_s=0.5",
            environ=cli_environment(**workspace),
        )
        try:
            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "scripted", "--id", "cut-run",
                environ=environ,
            )  # fmt: skip
            assert code == 3, out
            assert "turn 1  model: The first half,\n" in out  # printed as it streamed
            assert "stop reason: output_interrupted" in out
            assert "  The first half," in out
            assert f"resume the run: {typed('resume', 'cut-run', *connection)}" in out
            assert len(provider.requests) == 1  # the shown attempt was not repeated

            code, out = await steadyloop("resume", "cut-run", *connection, environ=environ)
            assert code == 0, out
            assert "run cut-run-resumed-1 resumes cut-run (output_interrupted)" in out
            assert "turn 1  model: and the second half.\n" in out
            sent = provider.requests[-1].messages
            assert [m["role"] for m in sent][-2:] == ["assistant", "user"]
            assert sent[-2]["content"] == "The first half,"
        finally:
            assert await worker.stop() == 0, worker.output
