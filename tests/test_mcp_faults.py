"""MCP servers that die, hang or answer garbage, driven through the run-tool activity as a
worker runs it (no Temporal server): every call gets a clear answer, the worker logs
it, reconnects, and other calls are not lost. The server is our own
(`mcp_fault_server.py`), over streamable HTTP and over stdio."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.live import LiveToolRegistry, McpTools
from steadyloop.tools._payloads import ToolInvocation, ToolOutcome
from steadyloop.tools._registry import ToolRegistry

pytestmark = pytest.mark.slow

SERVER = Path(__file__).with_name("mcp_fault_server.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def http_server(port: int, effects: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port), "--effects", str(effects)]
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, "the fault server exited at start"
                assert time.monotonic() < deadline, "the fault server did not start"
                time.sleep(0.05)
        yield process
    finally:
        process.kill()
        process.wait()


@asynccontextmanager
async def serving(*servers: McpServerConfig) -> AsyncIterator[tuple[McpTools, ToolActivities]]:
    registry = LiveToolRegistry(ToolRegistry())
    manager = McpTools(servers, registry, {})
    await manager.start()
    try:
        yield manager, ToolActivities(registry)
    finally:
        await manager.close()


def invocation(tool: str, **arguments: Any) -> ToolInvocation:
    return ToolInvocation(
        tool=tool,
        arguments=arguments,
        call_id=f"call-{tool}",
        workflow_id="wf",
        tenant_id="t",
        attempt=1,
        idempotency_key=f"key-{tool}",
    )


async def call(activities: ToolActivities, tool: str, **arguments: Any) -> ToolOutcome:
    return await activities.run_tool(invocation(tool, **arguments))


def noted(effects: Path) -> list[str]:
    return effects.read_text().splitlines() if effects.exists() else []


def http_config(port: int, **options: Any) -> McpServerConfig:
    return McpServerConfig.model_validate(
        {"name": "faults", "url": f"http://127.0.0.1:{port}/mcp", **options}
    )


def stdio_config(effects: Path, **options: Any) -> McpServerConfig:
    return McpServerConfig.model_validate(
        {
            "name": "faults",
            "command": sys.executable,
            "args": [str(SERVER), "--stdio", "--effects", str(effects)],
            **options,
        }
    )


async def test_a_hung_call_is_answered_cancelled_on_the_server_and_the_next_call_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    effects, port = tmp_path / "effects.txt", free_port()
    with http_server(port, effects), caplog.at_level(logging.WARNING, "steadyloop.mcp"):
        async with serving(http_config(port, timeout_s=3)) as (_, activities):
            started = time.monotonic()
            hung = await call(activities, "hang")
            waited = time.monotonic() - started
            after = await call(activities, "echo", text="still here")
            await asyncio.sleep(0.3)
    assert hung.status == "tool_error"
    assert "did not answer 'hang' within 2.4s" in hung.content
    assert "may or may not have taken effect" in hung.content
    assert waited < 3.0  # answered before the tool's timeout would have lost the attempt
    assert "cancelled hang" in noted(effects)  # notifications/cancelled reached the server
    assert (after.status, after.content) == ("ok", "still here")
    assert any("retired" in r.getMessage() for r in caplog.records)


async def test_a_malformed_answer_and_an_error_result_are_clear_tool_answers(
    tmp_path: Path,
) -> None:
    effects, port = tmp_path / "effects.txt", free_port()
    with http_server(port, effects):
        async with serving(http_config(port)) as (_, activities):
            garbage = await call(activities, "malformed")
            failing = await call(activities, "failing")
            after = await call(activities, "echo", text="ok")
    assert garbage.status == "tool_error"
    assert "answered 'malformed' with something that is not a tool result" in garbage.content
    assert (failing.status, failing.error_type) == ("tool_error", "McpToolError")
    assert failing.content == "Tool 'failing' failed: McpToolError: quota exceeded"
    assert after.content == "ok"


async def test_an_http_server_that_dies_mid_call_is_answered_and_reconnected_when_back(
    tmp_path: Path,
) -> None:
    effects, port = tmp_path / "effects.txt", free_port()
    with http_server(port, effects):
        async with serving(http_config(port, timeout_s=4)) as (_, activities):
            crashed = await call(activities, "crash")
            with http_server(port, effects):
                back = await call(activities, "echo", text="back")
    assert crashed.status == "tool_error"
    assert "may or may not have taken effect" in crashed.content
    assert noted(effects).count("call crash") == 1  # answered, not sent again
    assert (back.status, back.content) == ("ok", "back")


async def test_a_stdio_server_that_dies_is_restarted_and_a_pure_call_in_flight_is_not_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    effects = tmp_path / "effects.txt"
    with caplog.at_level(logging.WARNING, "steadyloop.mcp"):
        async with serving(stdio_config(effects)) as (manager, activities):
            # Another run's read-only call is in flight when the server dies under an
            # opaque call: the opaque call is answered as possibly done, never re-sent;
            # the read-only one is sent again to the restarted server and answered.
            slow = asyncio.create_task(call(activities, "slow_echo", text="other run", seconds=1))
            await asyncio.sleep(0.3)
            crashed = await call(activities, "crash")
            other = await slow
            retried = await call(activities, "crash_once", item="x")
            restarts = manager.connections["faults"].restarts
    assert crashed.status == "tool_error"
    assert "closed the connection during the call" in crashed.content
    assert "was not sent again" in crashed.content
    assert (other.status, other.content) == ("ok", "other run")
    assert (retried.status, retried.content) == ("ok", "answered x after a restart")
    lines = noted(effects)
    assert lines.count("call crash") == 1
    assert lines.count("call crash_once") == 2  # pure: the lost call was sent again
    assert restarts >= 2
    assert any("restarting the server" in r.getMessage() for r in caplog.records)


async def test_progress_heartbeats_the_activity_and_cancelling_it_cancels_the_mcp_request(
    tmp_path: Path,
) -> None:
    effects = tmp_path / "effects.txt"
    async with serving(stdio_config(effects)) as (_, activities):
        env = ActivityEnvironment()
        beats: list[Any] = []
        env.on_heartbeat = lambda *details: beats.append(details[0])
        done = await env.run(activities.run_tool, invocation("progress", steps=3))
        assert done.content == "done"
        assert [b["progress"] for b in beats if "progress" in b] == [1, 2, 3]
        assert beats[0] == {"mcp_server": "faults", "progress": 1, "total": 3, "message": "step 1"}

        cancelling = ActivityEnvironment()
        task = asyncio.create_task(cancelling.run(activities.run_tool, invocation("hang")))
        for _ in range(100):
            if "call hang" in noted(effects):
                break
            await asyncio.sleep(0.05)
        cancelling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if "cancelled hang" in noted(effects):
                break
            await asyncio.sleep(0.05)
        # Seen while the server still runs: the cancel, not its shutdown, stopped the call.
        assert "cancelled hang" in noted(effects)


async def test_a_changed_tool_list_is_served_without_restarting_notified_or_on_the_clock(
    tmp_path: Path,
) -> None:
    effects, port = tmp_path / "effects.txt", free_port()
    with http_server(port, effects):
        # Notified: the server sends tools/list_changed (the clock is far away).
        async with serving(http_config(port, list_ttl_s=600)) as (manager, activities):
            assert "grown" not in manager.registry
            await call(activities, "grow")
            for _ in range(100):
                if "grown" in manager.registry:
                    break
                await asyncio.sleep(0.05)
            grown = await call(activities, "grown")
    assert (grown.status, grown.content) == ("ok", "grown")

    port = free_port()
    with http_server(port, effects):
        # Not notified: the next listing on the clock finds it.
        async with serving(http_config(port, list_ttl_s=0.5)) as (manager, activities):
            await call(activities, "grow", announce=False)
            assert "grown" not in manager.registry
            for _ in range(60):
                if "grown" in manager.registry:
                    break
                await asyncio.sleep(0.1)
            assert manager.registry.describe(["grown"])[0].effect == "pure"


async def test_a_stdio_server_that_dies_while_idle_is_restarted_on_the_listing_clock(
    tmp_path: Path,
) -> None:
    effects = tmp_path / "effects.txt"
    async with serving(stdio_config(effects, list_ttl_s=0.3)) as (manager, activities):
        (first,) = [int(line.split()[1]) for line in noted(effects) if line.startswith("pid ")]
        os.kill(first, signal.SIGKILL)
        for _ in range(100):
            if manager.connections["faults"].restarts:
                break
            await asyncio.sleep(0.05)
        restarted_before_any_call = manager.connections["faults"].restarts
        answer = await call(activities, "echo", text="after")
    pids = [line for line in noted(effects) if line.startswith("pid ")]
    assert restarted_before_any_call == 1
    assert len(pids) == 2
    assert (answer.status, answer.content) == ("ok", "after")


async def test_a_header_is_read_from_the_variable_it_names_and_an_unset_one_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    effects, port = tmp_path / "effects.txt", free_port()
    config = http_config(port, headers={"X-Token": "FAULT_TOKEN"})
    with http_server(port, effects):
        registry = LiveToolRegistry(ToolRegistry())
        manager = McpTools([config], registry, {"FAULT_TOKEN": "t0ken"})
        await manager.start()
        try:
            answer = await ToolActivities(registry).run_tool(invocation("echo", text="hi"))
        finally:
            await manager.close()
        with caplog.at_level(logging.WARNING, "steadyloop.mcp"):
            unset = McpTools([config], LiveToolRegistry(ToolRegistry()), {})
            await unset.start()
            served = unset.registry.names()
            await unset.close()
    assert answer.content == "hi"
    assert "x-token t0ken" in noted(effects)
    assert served == []
    assert "header 'X-Token' names $FAULT_TOKEN, which is not set" in caplog.text


async def test_interrupting_a_run_cancels_its_mcp_request_on_the_server(tmp_path: Path) -> None:
    """Through Temporal: the interrupt cancels the tool activity, the worker learns it at
    the call's next heartbeat, and the server gets `notifications/cancelled`."""
    from receipts_e2e_harness import tool_answers
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
    from steadyloop._run.models import RunInput
    from steadyloop._temporal_binaries import dev_server_path
    from steadyloop._worker.process import WorkerOptions, running_worker
    from steadyloop._workflows.tool_loop import ToolLoopWorkflow
    from steadyloop.testing import (
        RecordedRequest,
        ScriptedCall,
        ScriptedResponse,
        ScriptedServer,
        text_response,
        tool_calls_response,
    )

    effects = tmp_path / "effects.txt"

    def model(request: RecordedRequest) -> ScriptedResponse:
        if not tool_answers(request):
            return tool_calls_response(ScriptedCall("hang", {}, id="h1"))
        return text_response("unreachable")

    async with ScriptedServer(model) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(), data_converter=pydantic_data_converter
        )
        async with env:
            options = WorkerOptions(
                task_queue=f"mcp-{os.getpid()}-{time.monotonic_ns()}",
                endpoints=EndpointRegistry(
                    [EndpointConfig(name="scripted", base_url=provider.base_url)]
                ),
                tools=ToolRegistry(),
                mcp=(stdio_config(effects, timeout_s=60),),
            )
            async with running_worker(env.client, options):
                run = RunInput(endpoint="scripted", model="m", prompt="go", tools=["hang"])
                handle = await env.client.start_workflow(
                    ToolLoopWorkflow.run, run, id=f"mcp-cancel-{time.monotonic_ns()}",
                    task_queue=options.task_queue,
                )  # fmt: skip
                for _ in range(200):
                    if "call hang" in noted(effects):
                        break
                    await asyncio.sleep(0.05)
                await handle.signal(ToolLoopWorkflow.interrupt, "stop, please")
                result = await asyncio.wait_for(handle.result(), 30)
                for _ in range(100):  # while the worker and its server still run
                    if "cancelled hang" in noted(effects):
                        break
                    await asyncio.sleep(0.05)
                seen = noted(effects)
    assert result.stop_reason == "interrupted"
    assert "cancelled hang" in seen
    (message,) = [m for m in result.transcript if m.role == "tool"]
    assert message.tool_call_id == "h1"


async def test_a_server_down_when_the_worker_starts_is_served_once_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    effects, port = tmp_path / "effects.txt", free_port()
    with caplog.at_level(logging.WARNING, "steadyloop.mcp"):
        async with serving(http_config(port, list_ttl_s=0.3)) as (manager, activities):
            served_at_start = manager.registry.names()
            with http_server(port, effects):
                for _ in range(100):
                    if "echo" in manager.registry:
                        break
                    await asyncio.sleep(0.1)
                answer = await call(activities, "echo", text="up")
    assert served_at_start == []
    assert "could not be reached" in caplog.text
    assert (answer.status, answer.content) == ("ok", "up")
