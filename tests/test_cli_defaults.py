"""The worker's configuration is the run's default, and the request knobs reach the model:
`steadyloop worker` and `steadyloop run` as separate processes, as a user runs them, on a
real Temporal dev server with a scripted provider on loopback.

The property each test holds is what the provider received (`RecordedRequest.json` and
its headers: the request as it arrived) or what the command refused before anything
started (exit 2, the name and the known names in its words, no request, no workflow).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import RPCError

from steadyloop._worker.dev_server import DevServer, dev_server, free_port
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

GUARD_S = 120  # how long a step may hang before the test gives up: a guard, not a measure
SECRET = "gw-3f9Kq7ZpX2mLw8RtY5vB1nC4"  # the gateway key a header names by variable
TOOLS_MODULE = '''
from steadyloop.tools import ToolRegistry, tool

@tool(effect="pure")
async def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"

@tool(effect="pure")
async def whisper(text: str) -> str:
    """Say it softly."""
    return text.lower()

registry = ToolRegistry([shout, whisper])
'''


def shouting_provider(request: RecordedRequest) -> ScriptedResponse:
    """Calls `shout` when the last message is the user's (or a prefill), else answers
    with what the tool said: decided from the transcript, so a retry gets the same."""
    messages: list[dict[str, Any]] = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        return text_response(f"It says {last['content']}", usage=(10, 5))
    call = ScriptedCall("shout", {"text": "hello"}, id="call_shout")
    return tool_calls_response(call, usage=(10, 5))


def environment(**extra: str) -> dict[str, str]:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_", "GW_"))
    }
    return environ | extra


@dataclass
class Worker:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def ready_json(self) -> dict[str, Any]:
        line = next(line for line in self.lines if line.startswith("ready "))
        found: dict[str, Any] = json.loads(line.removeprefix("ready "))
        return found

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith("ready "):
                self.ready.set()
        self.ready.set()  # ended before it was ready: let the waiter see why

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), GUARD_S)


async def start_worker(*args: str, environ: dict[str, str], cwd: Path) -> Worker:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop",
        "worker",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
        cwd=cwd,
    )
    worker = Worker(process)
    asyncio.get_running_loop().create_task(worker.read())
    await asyncio.wait_for(worker.ready.wait(), GUARD_S)
    assert any(line.startswith("ready ") for line in worker.lines), worker.output
    return worker


async def steadyloop(*args: str, environ: dict[str, str], cwd: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
        cwd=cwd,
    )
    out, _ = await asyncio.wait_for(process.communicate(), GUARD_S)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


async def workflow_exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return False
    return True


@dataclass
class Served:
    temporal: DevServer
    provider: ScriptedServer
    picky: ScriptedServer  # refuses `tool_choice`, as some local servers do
    worker: Worker
    connection: list[str]
    environ: dict[str, str]
    cwd: Path
    ready_file: Path

    async def run(self, *args: str) -> tuple[int, str]:
        return await steadyloop("run", *args, *self.connection, environ=self.environ, cwd=self.cwd)


MORE_TOOLS_MODULE = '''
from steadyloop.tools import ToolRegistry, tool

@tool(effect="pure")
async def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"

@tool(effect="opaque")
async def refund(order: str) -> str:
    """Refund an order."""
    return order

registry = ToolRegistry([shout, refund])
'''


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A worker with the user's own tools (`--tools tools_here:registry`, a module in its
    working directory), an endpoint `default` with a model, a header naming `$GW_KEY`
    and an `extra_body` field, an endpoint `bare` without a model, and one that refuses
    `tool_choice`, and `claude` on the Anthropic wire (never reached: the tests that
    name it are refused before the run). The command line shares none of that
    configuration."""
    (tmp_path / "tools_here.py").write_text(TOOLS_MODULE, encoding="utf-8")
    ready_file = tmp_path / "worker.ready"
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with (
        dev_server(ui=False) as temporal,
        ScriptedServer(shouting_provider) as provider,
        ScriptedServer(shouting_provider, unsupported_parameters=["tool_choice"]) as picky,
    ):
        connection = ["--address", temporal.address, "--task-queue", queue]
        worker = await start_worker(
            *connection,
            "--tools",
            "tools_here:registry",
            "--endpoint",
            f"default={provider.base_url},model=tiny-model,header.X-Gateway-Key=${{GW_KEY}},"
            "extra_body.cache_prompt=true",
            "--endpoint",
            f"bare={provider.base_url}",
            "--endpoint",
            f"picky={picky.base_url},model=picky-model",
            "--endpoint",
            f"claude={provider.base_url},model=claude-x,api=anthropic",
            "--ready-file",
            str(ready_file),
            environ=environment(GW_KEY=SECRET),
            cwd=tmp_path,
        )
        try:
            yield Served(
                temporal,
                provider,
                picky,
                worker,
                connection,
                environment(),  # the run's own environment: no key, no settings
                tmp_path / "elsewhere",
                ready_file,
            )
        finally:
            await worker.stop()


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()  # `run` from a directory without the tools module


async def test_a_run_naming_no_model_or_tools_takes_the_serving_workers(served: Served) -> None:
    # The ready line is one line of JSON, and the ready file holds the same.
    ready = served.worker.ready_json
    assert ready["task_queue"] == served.connection[-1]
    assert ready["endpoints"] == {
        "default": "tiny-model",
        "picky": "picky-model",
        "claude": "claude-x",
    }
    assert ready["tools"] == ["shout", "whisper"]
    assert json.loads(served.ready_file.read_text(encoding="utf-8")) == ready

    run_id = f"defaults-{uuid.uuid4().hex[:8]}"
    code, out = await served.run("Shout hello", "--id", run_id)
    assert code == 0, out
    assert "stop reason: final_answer" in out
    assert "It says HELLO!" in out
    first = served.provider.requests[0]
    assert first.json["model"] == "tiny-model"  # the worker's model=, not a --model
    offered = [tool["function"]["name"] for tool in first.json["tools"]]
    assert offered == ["shout", "whisper"]  # the worker's registry, not the examples
    # The endpoint's own request settings, the header's secret read by the worker.
    assert first.json["cache_prompt"] is True
    assert first.header("X-Gateway-Key") == SECRET
    # ... and never in the run's history.
    history = await served.temporal.client.get_workflow_handle(run_id).fetch_history()
    assert SECRET not in history.to_json()
    # The ready file goes when the worker does, so a script never reads a stale one.
    assert await served.worker.stop() == 0
    assert not served.ready_file.exists()


async def test_what_a_run_names_is_checked_against_the_worker_before_it_starts(
    served: Served,
) -> None:
    run_id = f"typo-{uuid.uuid4().hex[:8]}"
    code, out = await served.run("Shout hello", "--tool", "shuot", "--id", run_id)
    assert code == 2, out
    assert "--tool shuot: not among the tools of the worker" in out
    assert "it has: shout, whisper (did you mean 'shout'?)" in out
    code, out = await served.run("Shout hello", "--plugin", "files", "--id", run_id)
    assert code == 2, out
    assert "--plugin files: not among the plugins of the worker" in out and "it has: none" in out
    code, out = await served.run("Shout hello", "--endpoint", "defualt", "--id", run_id)
    assert code == 2, out
    assert "endpoint 'defualt' is not one the serving worker knows (did you mean 'default'?)" in out
    # A worker's definition given to `run`, which names one: said so, and where it goes.
    code, out = await served.run(
        "Shout hello", "--endpoint", "x=http://127.0.0.1:9/v1,api=bogus", "--id", run_id
    )
    assert code == 2, out
    assert "a run names an endpoint the worker serves; NAME=URL,... defines one" in out
    assert "`steadyloop worker --endpoint x=http://127.0.0.1:9/v1,api=bogus`" in out
    assert "`steadyloop run --endpoint x`" in out
    code, out = await served.run("Shout hello", "--tool-choice", "shuot", "--id", run_id)
    assert code == 2, out
    assert "--tool-choice shuot: not one of the run's tools (shout, whisper)" in out
    # A registry loaded here with a tool the worker lacks: the worker is asked, by the
    # check the client API's starts share.
    (served.cwd / "more_tools.py").write_text(MORE_TOOLS_MODULE, encoding="utf-8")
    code, out = await served.run("Shout hello", "--tools", "more_tools:registry", "--id", run_id)
    assert code == 2, out
    assert "--tools more_tools:registry: tools refund: not among the tools of the worker" in out
    assert "it has: shout, whisper" in out
    assert served.provider.requests == []
    assert not await workflow_exists(served.temporal.client, run_id)

    # An endpoint with no model= anywhere: the fix is named.
    code, out = await served.run("Shout hello", "--endpoint", "bare")
    assert code == 2, out
    assert "no model to ask endpoint 'bare' for" in out and "pass --model" in out
    # No worker on the queue: said at once, with what to pass instead.
    code, out = await steadyloop(
        "run",
        "Shout hello",
        "--address",
        served.temporal.address,
        "--task-queue",
        "nobody-polls-here",
        environ=served.environ,
        cwd=served.cwd,
    )
    assert code == 2, out
    assert "no worker polls task queue 'nobody-polls-here'" in out and "pass --model" in out
    assert served.provider.requests == []


async def test_the_knob_flags_reach_the_request_and_forcing_applies_to_the_first_turn(
    served: Served,
) -> None:
    code, out = await served.run(
        "Shout hello",
        "--temperature",
        "0.3",
        "--top-p",
        "0.5",
        "--max-tokens",
        "64",
        "--seed",
        "9",
        "--stop",
        "END",
        "--tool-choice",
        "shout",
        "--prefill",
        "<tool_call>\\n",
    )
    assert code == 0, out
    first, second = (request.json for request in served.provider.requests)
    for body in (first, second):
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
            0.3,
            0.5,
            64,
            9,
        )
        assert body["stop"] == ["END"]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "shout"}}
    assert first["messages"][-1] == {"role": "assistant", "content": "<tool_call>\n"}
    # After the tool's answer the model may answer: no forced call, no prefill.
    assert "tool_choice" not in second
    assert second["messages"][-1]["role"] == "tool"


REFUSED_KNOBS = [
    (
        ["--temperature", "nan"],
        "--temperature: temperature must be a number from 0 to 2 on any endpoint; got NaN",
    ),
    (
        ["--temperature", "1e300"],
        "--temperature: temperature must be a number from 0 to 2 on any endpoint; got 1e+300",
    ),
    (["--top-p", "1.5"], "--top-p: top_p must be a number from 0 to 1 on any endpoint; got 1.5"),
    (["--max-tokens", "0"], "--max-tokens: must be at least 1 (got 0)"),
    (["--stop", ""], "--stop: a stop sequence must not be empty"),
    (["--no-tools", "--tool-choice", "required"], "--tool-choice required: the run offers"),
]


async def test_a_knob_no_provider_would_take_is_refused_by_its_flag(served: Served) -> None:
    for flags, said in REFUSED_KNOBS:
        code, out = await served.run("Shout hello", *flags)
        assert code == 2, out
        assert said in out, out
        assert "validation error" not in out and "pydantic" not in out
    assert served.provider.requests == []


async def test_a_knob_an_endpoints_wire_refuses_is_refused_before_the_run_starts(
    served: Served,
) -> None:
    """Anthropic's endpoints take temperature 0 to 1: 1.5 is refused from its flag when
    the run's endpoint, or any endpoint of its route, is the worker's `claude` (the
    worker's word: this machine configures no endpoint); the same 1.5 on a Chat
    Completions endpoint (0 to 2) is sent."""
    run_id = f"wire-knob-{uuid.uuid4().hex[:8]}"
    said = (
        "--temperature: temperature must be a number from 0 to 1 on an Anthropic Messages "
        "endpoint; got 1.5 (endpoint 'claude' speaks it)"
    )
    code, out = await served.run(
        "Shout hello", "--endpoint", "claude", "--temperature", "1.5", "--id", run_id
    )
    assert code == 2, out
    assert said in out, out
    route = ["--route", "default=tiny-model", "--route", "claude=claude-x"]
    code, out = await served.run("Shout hello", *route, "--temperature", "1.5", "--id", run_id)
    assert code == 2, out
    assert said in out and "'default'" not in out, out
    assert served.provider.requests == []
    assert not await workflow_exists(served.temporal.client, run_id)

    code, out = await served.run("Shout hello", "--temperature", "1.5")
    assert code == 0, out
    assert {request.json["temperature"] for request in served.provider.requests} == {1.5}


async def test_a_knob_this_machines_endpoint_refuses_is_refused_with_no_worker_to_ask(
    tmp_path: Path,
) -> None:
    """The wire this machine configures decides when no worker is there to ask: refused
    before any connection is needed (the address is one nothing listens on)."""
    endpoints = {"claude": {"base_url": "http://127.0.0.1:9/v1", "api": "anthropic"}}
    code, out = await steadyloop(
        "run",
        "Shout hello",
        "--endpoint",
        "claude",
        "--model",
        "claude-x",
        "--no-tools",
        "--top-p",
        "0.5",
        "--temperature",
        "1.2",
        "--address",
        f"127.0.0.1:{free_port()}",
        environ=environment(STEADYLOOP_ENDPOINTS=json.dumps(endpoints)),
        cwd=tmp_path,
    )
    assert code == 2, out
    assert (
        "--temperature: temperature must be a number from 0 to 1 on an Anthropic Messages "
        "endpoint; got 1.2 (endpoint 'claude' speaks it)"
    ) in out, out
    assert "--top-p" not in out, out


async def test_a_tool_choice_the_endpoint_refuses_is_dropped_and_the_run_goes_on(
    served: Served,
) -> None:
    code, out = await served.run("Shout hello", "--endpoint", "picky", "--tool-choice", "required")
    assert code == 0, out
    assert "It says HELLO!" in out
    refused, *rest = served.picky.requests
    assert refused.json["tool_choice"] == "required"
    assert rest and all("tool_choice" not in request.json for request in rest)


async def test_worker_dev_listens_where_asked_and_prints_the_host_people_use(
    tmp_path: Path,
) -> None:
    port, ui_port = free_port(), free_port()
    worker = await start_worker(
        "--dev",
        "--dev-port",
        str(port),
        "--dev-ui-port",
        str(ui_port),
        "--ip",
        "0.0.0.0",
        "--ui-host",
        "agents.example",
        "--log-level=WARNING",
        environ=environment(),
        cwd=tmp_path,
    )
    try:
        ready = worker.ready_json
        assert ready["address"] == f"agents.example:{port}"
        assert ready["ui_url"] == f"http://agents.example:{ui_port}"
        assert "state: in memory, gone when it stops (--dev-db FILE keeps it)" in worker.output
        # Bound on every interface: reachable on loopback too.
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{ui_port}/", timeout=30)).status_code == 200
        client = await Client.connect(f"127.0.0.1:{port}")
        assert await client.workflow_service.get_system_info(GetSystemInfoRequest())
    finally:
        assert await worker.stop() == 0
