"""A follower outlives its Temporal: `steadyloop run` while the server is SIGKILLed.

`steadyloop worker --dev` runs Temporal inside the worker, so a killed worker takes the
server with it, and every follower of its runs loses its connection. Here a real dev
server (`temporal server start-dev --db-filename`, so a restarted server has the run)
is SIGKILLed while `steadyloop run` follows a run whose tool is still working:

- started again on the same port and file, the follower has said one line (that it
  lost Temporal and retries), printed no traceback and none of the SDK's Rust log lines,
  and ends with the run's real outcome (its answer, exit 0);
- left down, the follower gives up after its bound (`STEADYLOOP_RECONNECT_S`) with exit
  4 (`EXIT_UNKNOWN`) and the command to look again, which, once the server is back,
  shows the run's answer.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from chaos_harness import DevServer
from process_signals import stop_process

from steadyloop._cli.outcome import EXIT_OK, EXIT_UNKNOWN, RECONNECT_ENV
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
GUARD_S = 90.0
# How long the run's tool works (within a tool's 30 s timeout): the server is killed, and
# restarted, meanwhile.
TOOL_S = 20.0
ANSWER = "All done: 42"
TOOLS_MODULE = '''
import asyncio

from steadyloop.tools import ToolRegistry, tool


@tool(effect="pure")
async def wait_a_while(seconds: float) -> str:
    """Wait that many seconds, then say so."""
    await asyncio.sleep(seconds)
    return "waited"


registry = ToolRegistry([wait_a_while])
'''
# What must never reach the user's terminal: a traceback, the SDK core's own log lines
# (`WARN temporalio_client::retry: ...`), its colours.
RAW = re.compile(r"Traceback|temporalio_client|sdk_core|\bWARN\b|\x1b\[")


def provider(request: RecordedRequest) -> ScriptedResponse:
    """Calls the slow tool first, then answers with what it said."""
    if request.messages[-1]["role"] == "tool":
        return text_response(ANSWER, usage=(10, 5))
    call = ScriptedCall("wait_a_while", {"seconds": TOOL_S}, id="call_wait")
    return tool_calls_response(call, usage=(10, 5))


@dataclass
class Process:
    """A `python -m steadyloop` process, its stdout and stderr read line by line."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self.changed.set()
        self.changed.set()

    async def said(self, text: str, timeout_s: float = GUARD_S) -> None:
        """Wait until a line holds `text` (or the process ended without it)."""

        async def wait() -> None:
            while text not in self.output:
                if self.reader is not None and self.reader.done():
                    raise AssertionError(f"ended without {text!r}:\n{self.output}")
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            raise AssertionError(f"no {text!r} in {timeout_s:g}s:\n{self.output}") from None

    async def exit_code(self, timeout_s: float = GUARD_S) -> int:
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout_s)
        except TimeoutError:
            raise AssertionError(f"still running after {timeout_s:g}s:\n{self.output}") from None
        if self.reader is not None:
            await asyncio.wait_for(self.reader, timeout_s)
        return code


@dataclass
class Setup:
    server: DevServer
    queue: str
    environ: dict[str, str]
    cwd: Path
    processes: list[Process] = field(default_factory=list)

    @property
    def connection(self) -> list[str]:
        return ["--address", self.server.address, "--task-queue", self.queue]

    async def steadyloop(self, *args: str, **environ: str) -> Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "steadyloop",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=self.environ | environ,
            cwd=self.cwd,
        )
        started = Process(process)
        started.reader = asyncio.ensure_future(started.read())
        self.processes.append(started)
        return started


def environment(cwd: Path) -> dict[str, str]:
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    path = os.pathsep.join([str(ROOT), str(cwd)])
    return kept | {"PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    """A dev server on a file, a worker process with the slow tool, a scripted model."""
    (tmp_path / "slow_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    server = DevServer(tmp_path)
    await server.start()
    async with ScriptedServer(provider) as model:
        here = Setup(server, f"q-{uuid.uuid4().hex[:8]}", environment(tmp_path), tmp_path)
        try:
            worker = await here.steadyloop(
                "worker",
                *here.connection,
                "--tools",
                "slow_tools:registry",
                "--endpoint",
                f"default={model.base_url},model=tiny-model",
            )
            await worker.said("ready ", GUARD_S)
            yield here
        finally:
            for process in here.processes:
                await stop_process(process.process, 10.0)
            await server.stop()


async def test_a_follower_rides_out_a_killed_temporal_and_ends_with_the_runs_outcome(
    setup: Setup,
) -> None:
    follower = await setup.steadyloop("run", "Wait, then answer", *setup.connection)
    await follower.said("-> wait_a_while")  # the tool runs: the run is mid-follow
    await setup.server.kill()
    await follower.said("lost Temporal", 60.0)
    await setup.server.start()  # the same port and database: the run is there
    code = await follower.exit_code()
    out = follower.output
    assert code == EXIT_OK, out
    assert ANSWER in out, out
    assert out.count("lost Temporal") == 1, out
    assert "retrying for up to 300s" in out, out
    assert not RAW.search(out), out


async def test_a_follower_whose_temporal_stays_down_gives_up_with_its_own_exit_code(
    setup: Setup,
) -> None:
    bound = {RECONNECT_ENV: "4"}
    follower = await setup.steadyloop("run", "Wait, then answer", *setup.connection, **bound)
    await follower.said("-> wait_a_while")
    await setup.server.kill()
    code = await follower.exit_code(60.0)
    out = follower.output
    assert code == EXIT_UNKNOWN, out
    assert out.count("lost Temporal") == 1, out
    assert "How the run is doing is unknown" in out, out
    show = re.search(r"steadyloop show (\S+)", out)
    assert show is not None, out
    assert not RAW.search(out), out

    # The command it names looks again, once the server is back: the run went on.
    await setup.server.start()
    again = await setup.steadyloop("show", show.group(1), *setup.connection)
    code = await again.exit_code()
    assert code == EXIT_OK, again.output
    assert ANSWER in again.output, again.output
