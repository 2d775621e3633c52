"""A killed launcher takes its embedded dev server with it.

`steadyloop worker --dev` and `steadyloop demo --keep-running` killed with SIGKILL would
otherwise leave `temporal server start-dev` running under PID 1, holding the port, so the
same command would then fail. These tests kill real processes with a real SIGKILL, then check the
port is free, no server process is left, and (for the worker) that a restart on the same
`--dev-db` carries on the run that was waiting when the worker died.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._run.models import RunInput, RunResult
from steadyloop._run.steering import ApprovalDecision, PendingApproval
from steadyloop._worker.dev_server import free_port
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    ScriptedCall,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

TESTS = Path(__file__).parent
WATCH = TESTS.parent / "steadyloop" / "_worker" / "parent_watch.py"
GUARD_S = 60  # how long a step may hang before the test gives up: a guard, not a measure


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it holds no port and runs nothing.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _dev_servers_on(port: int) -> list[int]:
    """Pids of `temporal server start-dev --port PORT` processes (Linux /proc), the server
    itself, not the watch that runs it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        server = Path(os.fsdecode(argv[0])).name == "temporal" and b"start-dev" in argv
        ours = server and b"--port" in argv and str(port).encode() in argv
        if ours and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        await asyncio.sleep(0.1)


# -- the watch itself ------------------------------------------------------------------


def _launcher(child: str) -> subprocess.Popen[str]:
    """A process that runs `child` under the watch and prints the watch's and child's pids."""
    code = (
        "import os, subprocess, sys, time\n"
        f"watch = subprocess.Popen([sys.executable, '-I', {str(WATCH)!r}, str(os.getpid()), "
        f"sys.executable, '-c', {child!r}])\n"
        "print(watch.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def _child_of(pid: int) -> int:
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children")
        found = children.read_text().split() if children.is_file() else []
        if found:
            return int(found[0])
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child")


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + GUARD_S
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_child_ends_when_its_launcher_is_sigkilled() -> None:
    launcher = _launcher("import time; time.sleep(600)")
    assert launcher.stdout is not None
    watch = int(launcher.stdout.readline())
    child = _child_of(watch)
    launcher.kill()
    launcher.wait()
    assert _gone(child), "the child outlived its launcher"
    assert _gone(watch)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_the_child_ends_when_the_watch_itself_is_sigkilled() -> None:
    # How the SDK stops the server it spawned: SIGKILL to the process it knows.
    launcher = _launcher("import time; time.sleep(600)")
    assert launcher.stdout is not None
    try:
        watch = int(launcher.stdout.readline())
        child = _child_of(watch)
        os.kill(watch, signal.SIGKILL)
        assert _gone(child), "the child outlived the watch"
    finally:
        launcher.kill()
        launcher.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_is_passed_on_and_the_childs_status_is_the_watchs() -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
        "time.sleep(600)\n"
    )
    command = [sys.executable, "-I", str(WATCH), str(os.getpid()), sys.executable, "-c", code]
    watch = subprocess.Popen(command)
    try:
        _child_of(watch.pid)
        time.sleep(0.3)  # the child's handler is installed
        watch.terminate()
        assert watch.wait(GUARD_S) == 7
    finally:
        watch.kill()


# -- the commands that start a dev server ------------------------------------------------


def _environment(home: Path) -> dict[str, str]:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent)])
    environ["STEADYLOOP_HOME"] = str(home)
    return environ


async def _start(*args: str, environ: dict[str, str], ready: str) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
    )
    assert process.stdout is not None
    lines: list[str] = []

    async def read() -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            lines.append(raw.decode(errors="replace").rstrip("\n"))
            if ready in lines[-1]:
                return
        raise AssertionError("ended before it was ready:\n" + "\n".join(lines))

    await asyncio.wait_for(read(), GUARD_S)
    process.lines = lines  # type: ignore[attr-defined]
    asyncio.get_running_loop().create_task(_drain(process))
    return process


async def _drain(process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    async for _ in process.stdout:
        pass


async def _sigkill(process: asyncio.subprocess.Process) -> None:
    process.kill()
    await asyncio.wait_for(process.wait(), GUARD_S)


def _pay_then_answer() -> list[object]:
    return [
        tool_calls_response(
            ScriptedCall("wire", {"amount": 5, "to": "bob"}, id="w1"), usage=(10, 5)
        ),
        text_response("paid", usage=(12, 1)),
    ]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_sigkilled_worker_dev_frees_its_port_and_a_restart_on_its_db_goes_on(
    tmp_path: Path,
) -> None:
    port = free_port()
    wires = tmp_path / "wires.txt"
    environ = {**_environment(tmp_path), "STEADYLOOP_TEST_WIRES": str(wires)}
    async with ScriptedServer(_pay_then_answer()) as provider:  # type: ignore[arg-type]
        args = (
            "worker",
            "--dev",
            "--dev-port",
            str(port),
            "--dev-ui-port",
            str(free_port()),
            "--dev-db",
            str(tmp_path / "dev.sqlite"),
            "--tools",
            "approval_tools:TOOLS",
            "--endpoint",
            f"scripted={provider.base_url}",
        )
        worker = await _start(*args, environ=environ, ready="Ctrl-C to stop.")
        client = await Client.connect(
            f"127.0.0.1:{port}", data_converter=steadyloop_data_converter(tmp_path / "blobs")
        )
        run_id = f"orphan-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(
            ToolLoopWorkflow.run,
            RunInput(endpoint="scripted", model="m", prompt="pay bob 5", tools=["wire"]),
            id=run_id,
            task_queue="steadyloop",
        )
        pending: list[PendingApproval] = []

        async def waiting() -> bool:
            nonlocal pending
            pending = await handle.query(ToolLoopWorkflow.pending_approvals)
            return bool(pending)

        deadline = time.monotonic() + GUARD_S
        while not await waiting():
            assert time.monotonic() < deadline, "the run never asked for approval"
            await asyncio.sleep(0.2)
        servers = _dev_servers_on(port)
        assert len(servers) == 1, servers

        await _sigkill(worker)
        await _until(lambda: not _listening(port), f"port {port} freed after SIGKILL")
        await _until(lambda: not _dev_servers_on(port), "no dev server left on the port")

        again = await _start(*args, environ=environ, ready="Ctrl-C to stop.")
        try:
            client = await Client.connect(
                f"127.0.0.1:{port}",
                data_converter=steadyloop_data_converter(tmp_path / "blobs"),
            )
            handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, run_id)
            waits = await handle.query(ToolLoopWorkflow.pending_approvals)
            assert [call.call_id for call in waits] == ["w1"]
            await handle.execute_update(
                ToolLoopWorkflow.approve_call, ApprovalDecision.for_call(waits[0])
            )
            result: RunResult = await asyncio.wait_for(handle.result(), GUARD_S)
        finally:
            again.send_signal(signal.SIGINT)
            await asyncio.wait_for(again.wait(), GUARD_S)
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "paid"
    assert wires.read_text(encoding="utf-8").splitlines() == ["5 to bob"]
    await _until(lambda: not _listening(port), "port freed after a clean stop")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_sigkilled_demo_keep_running_frees_its_port(tmp_path: Path) -> None:
    demo = await _start(
        "demo",
        "--keep-running",
        "--pace",
        "0",
        "--workdir",
        str(tmp_path / "work"),
        environ=_environment(tmp_path),
        ready="stay up until you press Ctrl-C",
    )
    shown = "\n".join(demo.lines)  # type: ignore[attr-defined]
    found = re.search(r"Temporal dev server\s+127\.0\.0\.1:(\d+)", shown)
    assert found, shown
    port = int(found.group(1))
    assert _listening(port) and len(_dev_servers_on(port)) == 1
    await _sigkill(demo)
    await _until(lambda: not _listening(port), f"port {port} freed after SIGKILL")
    await _until(lambda: not _dev_servers_on(port), "no dev server left on the port")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_sigkilled_serve_dev_frees_its_ports_and_leaves_no_dev_server(
    tmp_path: Path,
) -> None:
    """`serve --dev` starts its dev server the way `worker --dev` does, so a SIGKILL to
    the server takes the dev server (and its UI) down with it."""
    port = free_port()
    while port + 1000 > 65535 or _listening(port + 1000):  # the UI's port: port + 1000
        port = free_port()
    http_port = free_port()
    serve = await _start(
        "serve",
        "--dev",
        "--dev-port",
        str(port),
        "--port",
        str(http_port),
        environ=_environment(tmp_path),
        ready="Ctrl-C to stop.",
    )
    assert _listening(port) and _listening(port + 1000) and _listening(http_port)
    assert len(_dev_servers_on(port)) == 1
    await _sigkill(serve)
    await _until(lambda: not _listening(port), f"port {port} freed after SIGKILL")
    await _until(lambda: not _listening(port + 1000), "the dev UI's port freed after SIGKILL")
    await _until(lambda: not _dev_servers_on(port), "no dev server left on the port")
    assert not _listening(http_port)
