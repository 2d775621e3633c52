"""The worker's ready line lists every tool it serves, its MCP servers' included, and
marks the ones whose calls wait for a person."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from steadyloop._worker.dev_server import free_port

TESTS = Path(__file__).parent
GUARD_S = 60  # how long a step may hang before the test gives up: a guard, not a measure


@pytest.mark.slow
async def test_the_ready_line_lists_mcp_tools_and_marks_approval(tmp_path: Path) -> None:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent)])
    environ["STEADYLOOP_HOME"] = str(tmp_path)
    ready_file = tmp_path / "ready.json"
    server = f"{sys.executable} {TESTS / 'mcp_fault_server.py'} --stdio --effects {tmp_path / 'e'}"
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop",
        "worker",
        "--dev",
        "--dev-port",
        str(free_port()),
        "--dev-ui-port",
        str(free_port()),
        "--tools",
        "approval_tools:TOOLS",
        "--mcp",
        f"fault={server}",
        "--ready-file",
        str(ready_file),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
    )
    try:
        deadline = time.monotonic() + GUARD_S
        while not ready_file.is_file():
            assert worker.returncode is None and time.monotonic() < deadline
            await asyncio.sleep(0.1)
        ready = json.loads(ready_file.read_text(encoding="utf-8"))
    finally:
        worker.send_signal(2)
        out, _ = await asyncio.wait_for(worker.communicate(), GUARD_S)
    printed = out.decode(errors="replace")
    assert "wire" in ready["tools"]
    mcp_tools = [name for name in ready["tools"] if name != "wire"]
    assert any("echo" in name for name in mcp_tools), ready["tools"]  # the MCP server's
    assert ready["approval"] == ["wire"]
    assert f"ready {json.dumps(ready, separators=(', ', ': '))}" in printed
    assert "wire (needs approval)" in printed
