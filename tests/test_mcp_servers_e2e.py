"""Real MCP servers nobody here wrote (installed from PyPI by the `dev` extras), served by a
steadyloop worker to runs on a real Temporal dev server, with a scripted model:

1. `mcp-server-sqlite`, started by `steadyloop worker --config ...` as its own process:
   the agent inserts a row with `write_query`; the worker (and its servers) are SIGKILLed
   right after the insert, before its answer arrived; a new worker surfaces the call as
   ambiguous (it is opaque: the server says nothing about it), never runs it again; a
   person lists it and says it happened (`steadyloop receipts`); the model asks for the
   same insert again and it replays. The row exists exactly once.
2. `mcp-server-time`, killed the same way: its tool is read-only, so the next worker
   simply runs it again; nobody is asked.
3. `mcp-server-git` on a throwaway repository and `mcp-server-time`, in one run on an
   in-process worker: the commit happens once though the model asks for it twice;
   `git_add` and the time tools are `pure` from their annotations, `git_commit` `opaque`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from polling import eventually
from receipts_e2e_harness import tool_answers
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.serving import serving_mcp
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._run.models import AmbiguousCall, RunInput, RunResult
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
from steadyloop.tools._payloads import RUN_TOOL_ACTIVITY, ToolInvocation
from steadyloop.tools._registry import ToolRegistry

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
PROXY = Path(__file__).with_name("mcp_hold_proxy.py")
INSERT = "INSERT INTO notes (body) VALUES ('hello from the agent')"


@asynccontextmanager
async def temporal_and_model(
    model: Any,
) -> AsyncIterator[tuple[WorkflowEnvironment, ScriptedServer]]:
    async with ScriptedServer(model) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(), data_converter=pydantic_data_converter
        )
        async with env:
            yield env, provider
        assert provider.errors == [], provider.errors


async def start_run(
    client: Client, task_queue: str, tools: list[str]
) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
    run = RunInput(endpoint="scripted", model="scripted-model", prompt="go", tools=tools)
    return await client.start_workflow(
        ToolLoopWorkflow.run, run, id=f"mcp-e2e-{uuid.uuid4()}", task_queue=task_queue
    )


async def run_tool_inputs(client: Client, handle: WorkflowHandle[Any, Any]) -> list[ToolInvocation]:
    inputs: list[ToolInvocation] = []
    async for event in handle.fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name == RUN_TOOL_ACTIVITY:
            (invocation,) = await client.data_converter.decode(
                attributes.input.payloads, [ToolInvocation]
            )
            inputs.append(invocation)
    return inputs


# -- 1. sqlite: SIGKILL right after an insert ------------------------------------------


@dataclass
class CliWorker:
    """`python -m steadyloop worker ...` in its own process group (its MCP servers too)."""

    process: asyncio.subprocess.Process
    log: Path
    lines: list[str] = field(default_factory=list)

    @classmethod
    async def start(cls, args: list[str], log: Path) -> CliWorker:
        environ = {**os.environ, "STEADYLOOP_BLOB_DIR": "off"}
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "steadyloop", "worker", *args,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, env=environ,
                start_new_session=True,
            )  # fmt: skip
        worker = cls(process, log)
        assert process.stdout is not None
        while not any("Ctrl-C to stop" in line for line in worker.lines):
            raw = await asyncio.wait_for(process.stdout.readline(), 30)
            assert raw, f"the worker exited: {log.read_text()[-3000:]}"
            worker.lines.append(raw.decode().rstrip())
        return worker

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    async def kill(self) -> None:
        """SIGKILL to the worker and everything it started: a lost machine."""
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), 10)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                await self.kill()


async def cli(*args: str) -> str:
    """`python -m steadyloop ARGS`: its standard output (it must exit 0)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "steadyloop", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STEADYLOOP_BLOB_DIR": "off"},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    print(out.decode())
    return out.decode()


def rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as connection:
        return list(connection.execute("SELECT body FROM notes"))


def server_config(path: Path, name: str, server: list[str], *, hold: str | None) -> Path:
    """A config file serving `server` as `name`; with `hold`, behind the proxy that holds
    that tool's answers back (the window a test kills the worker in)."""
    if hold is not None:
        server = [sys.executable, str(PROXY), "--hold", hold, "--seconds", "60", "--", *server]
    path.write_text(
        f"[mcp.{name}]\n"
        f"command = {server[0]!r}\n"
        f"args = {server[1:]!r}\n"
        "timeout_s = 4\n"
    )  # fmt: skip
    return path


async def test_sqlite_insert_killed_right_after_is_ambiguous_never_rerun_and_exists_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agent.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")

    def model(request: RecordedRequest) -> ScriptedResponse:
        answers = tool_answers(request)
        if len(answers) < 2:  # the second ask of the same insert must replay
            return tool_calls_response(
                ScriptedCall("write_query", {"query": INSERT}, id=f"c{len(answers) + 1}")
            )
        return text_response("inserted")

    async with temporal_and_model(model) as (env, provider):
        task_queue = f"mcp-{uuid.uuid4().hex[:8]}"
        address = env.client.service_client.config.target_host
        common = ["--address", address, "--task-queue", task_queue,
                  "--endpoint", f"scripted={provider.base_url}"]  # fmt: skip
        sqlite = [str(BIN / "mcp-server-sqlite"), "--db-path", str(db)]
        held = server_config(tmp_path / "held.toml", "sqlite", sqlite, hold="write_query")
        first = await CliWorker.start([*common, "--config", str(held)], tmp_path / "w1.log")
        workers = [first]
        try:
            handle = await start_run(env.client, task_queue, ["write_query", "read_query"])

            async def inserted() -> bool | None:
                return True if "HOLDING answer" in first.stderr() and rows(db) else None

            await eventually(inserted, timeout_s=30, what="the insert", every_s=0.05)
            await first.kill()
            assert rows(db) == [("hello from the agent",)]
            plain = server_config(tmp_path / "plain.toml", "sqlite", sqlite, hold=None)
            workers.append(
                await CliWorker.start([*common, "--config", str(plain)], tmp_path / "w2.log")
            )

            async def suspended() -> list[AmbiguousCall] | None:
                return await handle.query(ToolLoopWorkflow.ambiguous_receipts) or None

            (ambiguous,) = await eventually(
                suspended, timeout_s=45, what="the insert to be ambiguous", every_s=0.3
            )
            assert (ambiguous.tool, ambiguous.arguments) == ("write_query", {"query": INSERT})
            assert "opaque" in ambiguous.reason
            assert rows(db) == [("hello from the agent",)]  # waiting, not re-run
            # What a person sees, and how they answer: `steadyloop receipts`.
            listing = await cli("receipts", handle.id, "--address", address)
            resolved = await cli(
                "receipts", handle.id, "--address", address,
                "--resolve", ambiguous.key, "--happened", "1 row inserted",
            )  # fmt: skip
            result = await asyncio.wait_for(handle.result(), 60)
            inputs = await run_tool_inputs(env.client, handle)
        finally:
            for worker in workers:
                await worker.stop()

    assert "write_query" in listing and "opaque" in listing, listing
    assert "happened" in resolved, resolved
    assert rows(db) == [("hello from the agent",)]
    assert [i.attempt for i in inputs] == [1]  # scheduled once, never again
    tool_messages = [m for m in result.transcript if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [
        ("c1", "1 row inserted"),
        ("c2", "1 row inserted"),  # the model's second ask replayed the receipt
    ]
    # Both answers come from the receipt: c1's once resolved, c2's as a replay of it.
    assert result.stats.tool_replays == 2
    assert (result.stop_reason, result.final_answer) == ("final_answer", "inserted")
    assert any("MCP server sqlite (stdio)" in line for line in first.lines)


async def test_a_read_only_time_call_killed_before_its_answer_is_simply_run_again(
    tmp_path: Path,
) -> None:
    """The same kill as above, on `mcp-server-time`'s read-only tool: no person is asked,
    the call is run again by the next worker (pure), and the run answers."""
    now = {"timezone": "UTC"}

    def model(request: RecordedRequest) -> ScriptedResponse:
        if not tool_answers(request):
            return tool_calls_response(ScriptedCall("get_current_time", now, id="t1"))
        return text_response("it is now")

    async with temporal_and_model(model) as (env, provider):
        task_queue = f"mcp-{uuid.uuid4().hex[:8]}"
        address = env.client.service_client.config.target_host
        common = ["--address", address, "--task-queue", task_queue,
                  "--endpoint", f"scripted={provider.base_url}"]  # fmt: skip
        time_server = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
        held = server_config(tmp_path / "held.toml", "time", time_server, hold="get_current_time")
        first = await CliWorker.start([*common, "--config", str(held)], tmp_path / "w1.log")
        workers = [first]
        try:
            handle = await start_run(env.client, task_queue, ["get_current_time"])

            async def answered_by_the_server() -> bool | None:
                return True if "HOLDING answer" in first.stderr() else None

            await eventually(answered_by_the_server, timeout_s=30, what="the call", every_s=0.05)
            await first.kill()
            plain = server_config(tmp_path / "plain.toml", "time", time_server, hold=None)
            workers.append(
                await CliWorker.start([*common, "--config", str(plain)], tmp_path / "w2.log")
            )
            result = await asyncio.wait_for(handle.result(), 60)
            ambiguous = await handle.query(ToolLoopWorkflow.ambiguous_receipts)
            inputs = await run_tool_inputs(env.client, handle)
        finally:
            for worker in workers:
                await worker.stop()

    assert [(i.tool, i.attempt) for i in inputs] == [
        ("get_current_time", 1),
        ("get_current_time", 2),  # retried freely: pure, from readOnlyHint
    ]
    assert ambiguous == []
    (message,) = [m for m in result.transcript if m.role == "tool"]
    assert '"timezone": "UTC"' in (message.content or "")
    assert result.final_answer == "it is now"


# -- 3. git and time: one commit, effect classes from annotations ----------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


async def test_git_commit_happens_once_and_time_and_git_effects_come_from_annotations(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(
        repo,
        "-c",
        "user.email=a@b",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    )
    (repo / "notes.txt").write_text("agent notes\n")
    add = ScriptedCall("git_add", {"repo_path": str(repo), "files": ["notes.txt"]}, id="a1")
    commit = {"repo_path": str(repo), "message": "Add notes"}
    now = ScriptedCall("get_current_time", {"timezone": "UTC"}, id="t1")

    def model(request: RecordedRequest) -> ScriptedResponse:
        answers = tool_answers(request)
        if not answers:
            return tool_calls_response(add, now)
        if len(answers) == 2:
            return tool_calls_response(ScriptedCall("git_commit", commit, id="c1"))
        if len(answers) == 3:  # asks again: one commit, the receipt replays
            return tool_calls_response(ScriptedCall("git_commit", commit, id="c2"))
        return text_response("committed")

    servers = (
        McpServerConfig(
            name="git",
            command=str(BIN / "mcp-server-git"),
            args=["--repository", str(repo)],
            env={
                "GIT_AUTHOR_NAME": "agent",
                "GIT_AUTHOR_EMAIL": "agent@example.com",
                "GIT_COMMITTER_NAME": "agent",
                "GIT_COMMITTER_EMAIL": "agent@example.com",
            },
        ),
        McpServerConfig(
            name="time", command=str(BIN / "mcp-server-time"), args=["--local-timezone", "UTC"]
        ),
    )
    async with temporal_and_model(model) as (env, provider):
        options = WorkerOptions(
            task_queue=f"mcp-{uuid.uuid4().hex[:8]}",
            endpoints=EndpointRegistry(
                [EndpointConfig(name="scripted", base_url=provider.base_url)]
            ),
            tools=ToolRegistry(),
            mcp=servers,
        )
        async with running_worker(env.client, options):
            handle = await start_run(
                env.client, options.task_queue, ["git_add", "git_commit", "get_current_time"]
            )
            result = await asyncio.wait_for(handle.result(), 60)
    assert git(repo, "rev-list", "--count", "HEAD") == "2"
    assert git(repo, "log", "-1", "--format=%s") == "Add notes"
    messages = {m.tool_call_id: m.content for m in result.transcript if m.role == "tool"}
    assert messages["c1"] == messages["c2"]
    assert "Changes committed successfully" in (messages["c1"] or "")
    assert '"timezone": "UTC"' in (messages["t1"] or "")
    assert result.stats.tool_replays == 1
    assert result.final_answer == "committed"


async def test_the_effect_class_of_each_real_servers_tool_comes_from_its_annotations(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    servers = [
        McpServerConfig(name="git", command=str(BIN / "mcp-server-git"), args=["-r", str(repo)]),
        McpServerConfig(name="time", command=str(BIN / "mcp-server-time")),
        McpServerConfig(
            name="sqlite",
            command=str(BIN / "mcp-server-sqlite"),
            args=["--db-path", str(tmp_path / "x.db")],
            effects={"read_query": "pure"},
        ),
    ]
    async with serving_mcp(ToolRegistry(), servers) as registry:
        effects = {d.name: d.effect for d in registry.describe(profile="openai_strict")}
    assert effects["get_current_time"] == effects["convert_time"] == "pure"  # readOnlyHint
    assert effects["git_status"] == effects["git_log"] == "pure"  # readOnlyHint
    assert effects["git_add"] == effects["git_reset"] == "pure"  # idempotentHint
    assert effects["git_commit"] == effects["git_checkout"] == "opaque"  # neither
    assert effects["write_query"] == effects["create_table"] == "opaque"  # says nothing
    assert effects["read_query"] == "pure"  # configured
