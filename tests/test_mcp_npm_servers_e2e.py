"""An MCP server from npm, served by a steadyloop worker to a run on a real Temporal dev
server, with a scripted model: `@modelcontextprotocol/server-filesystem` (pinned in
`tests/npm_servers/package.json`, installed by `npm ci --prefix tests/npm_servers`, which
`.ci/run` does).

Its `read_text_file` answers the file as text and again as
`structuredContent: {"content": "<the file>"}`. The model must read each file exactly
once: a 42.5 KB file sent twice went past the tool-result ceiling and was cut.

Without the npm install the test is skipped on a developer's machine and fails in CI
(`CI` set), like the other real-server tests.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path

import pytest
from receipts_e2e_harness import tool_answers
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from steadyloop._mcp.config import McpServerConfig
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
from steadyloop.tools._registry import ToolRegistry

pytestmark = [pytest.mark.slow, pytest.mark.realserver]

NPM_SERVERS = Path(__file__).with_name("npm_servers")
FILESYSTEM = NPM_SERVERS / "node_modules" / ".bin" / "mcp-server-filesystem"
INSTALL_HINT = f"npm ci --prefix {NPM_SERVERS} (or deselect with -m 'not realserver')"


def filesystem_server() -> Path:
    """The installed server; skip (developer) or fail (CI) without it."""
    missing = [what for what in ("node", "npm") if shutil.which(what) is None]
    if not FILESYSTEM.exists():
        missing.append(str(FILESYSTEM.relative_to(NPM_SERVERS.parent)))
    if not missing:
        return FILESYSTEM
    message = f"not installed: {', '.join(missing)}; {INSTALL_HINT}"
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the real-server tests, but {message}")
    pytest.skip(message)


def large_text() -> str:
    """42.5 KB (43,520 bytes) of text, some of it outside ASCII."""
    line = "line {:05d}: a read of a real file, déjà vu, ☃, 日本語\n"
    text = "".join(line.format(n) for n in range(700))
    padding = 43_520 - len(text.encode())
    assert padding >= 0
    return text + "x" * padding


async def test_a_file_read_through_the_filesystem_server_reaches_the_model_once(
    tmp_path: Path,
) -> None:
    server = filesystem_server()
    root = (tmp_path / "fsroot").resolve()
    root.mkdir()
    small, large = "hello from fsroot\n", large_text()
    (root / "hello.txt").write_text(small, encoding="utf-8")
    (root / "large.txt").write_text(large, encoding="utf-8")
    assert (root / "large.txt").stat().st_size == 43_520
    reads = [
        ScriptedCall("read_text_file", {"path": str(root / "hello.txt")}, id="small"),
        ScriptedCall("read_text_file", {"path": str(root / "large.txt")}, id="large"),
    ]

    def model(request: RecordedRequest) -> ScriptedResponse:
        return text_response("read them") if tool_answers(request) else tool_calls_response(*reads)

    async with ScriptedServer(model) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(), data_converter=pydantic_data_converter
        )
        async with env:
            options = WorkerOptions(
                task_queue=f"mcp-npm-{uuid.uuid4().hex[:8]}",
                endpoints=EndpointRegistry(
                    [EndpointConfig(name="scripted", base_url=provider.base_url)]
                ),
                tools=ToolRegistry(),
                mcp=(McpServerConfig(name="fs", command=str(server), args=[str(root)]),),
            )
            async with running_worker(env.client, options):
                run = RunInput(
                    endpoint="scripted",
                    model="scripted-model",
                    prompt="read both files",
                    tools=["read_text_file"],
                )
                handle = await env.client.start_workflow(
                    ToolLoopWorkflow.run,
                    run,
                    id=f"mcp-npm-{uuid.uuid4()}",
                    task_queue=options.task_queue,
                )
                result = await asyncio.wait_for(handle.result(), 60)
        assert provider.errors == [], provider.errors
    messages = {m.tool_call_id: m.content for m in result.transcript if m.role == "tool"}
    assert messages["small"] == small
    assert messages["large"] is not None
    assert messages["large"].encode() == large.encode()  # the file's bytes, once, whole
    assert "[steadyloop:" not in messages["large"]
    # What the model was sent on the wire, not only what the workflow kept.
    sent = {m["tool_call_id"]: m["content"] for m in tool_answers(provider.requests[-1])}
    assert sent == {"small": small, "large": large}
    assert result.final_answer == "read them"
