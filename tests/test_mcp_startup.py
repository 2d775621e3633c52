"""A stdio MCP server whose command cannot be started is refused when the worker starts,
unless it is marked optional; a command that is not an MCP server is one log line per
try, and the tries back off (`steadyloop._mcp.startup`, `.connection`, `.live`)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from steadyloop._cli.main import run_cli
from steadyloop._mcp.config import (
    McpConfigError,
    McpServerConfig,
    describe_server,
    mcp_servers,
    parse_mcp_flag,
)
from steadyloop._mcp.live import MAX_RETRY_S, LiveToolRegistry, McpTools, retry_delay
from steadyloop._mcp.serving import serving_mcp
from steadyloop._mcp.startup import refuse_unstartable, start_problem
from steadyloop.tools._registry import ToolRegistry

NOSUCH = "mcp-server-nosuch"

# -- the optional marking ---------------------------------------------------------------


def test_a_flag_marks_a_server_optional_with_a_prefix_that_no_name_can_have() -> None:
    marked = parse_mcp_flag(f"optional:bad={NOSUCH} --flag")
    assert (marked.name, marked.command, marked.args, marked.optional) == (
        "bad",
        NOSUCH,
        ["--flag"],
        True,
    )
    assert parse_mcp_flag("optional:web=https://x/mcp").optional
    assert not parse_mcp_flag(f"bad={NOSUCH}").optional
    assert describe_server(marked) == f"bad (stdio, optional): {NOSUCH} --flag"
    with pytest.raises(McpConfigError, match="optional:"):
        parse_mcp_flag(f"optional:={NOSUCH}")
    with pytest.raises(McpConfigError, match="must match"):
        parse_mcp_flag(f"maybe:bad={NOSUCH}")  # not a marking: a name with a ':'


def test_the_config_file_marks_a_server_optional_and_refuses_a_value_that_is_not_a_bool() -> None:
    (server,) = mcp_servers({"bad": {"command": NOSUCH, "optional": True}}, [])
    assert server.optional
    with pytest.raises(McpConfigError, match=r"mcp\.bad: optional"):
        mcp_servers({"bad": {"command": NOSUCH, "optional": "perhaps"}}, [])


# -- what cannot be started -------------------------------------------------------------


def stdio(command: str, **settings: object) -> McpServerConfig:
    return McpServerConfig.model_validate({"name": "s", "command": command, **settings})


def test_a_command_is_looked_up_as_the_server_will_be_started(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "my-mcp-server"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("")
    environ = {"PATH": os.defpath}
    assert start_problem(stdio(NOSUCH), environ) == f"its command {NOSUCH!r} was not found on PATH"
    assert start_problem(stdio("my-mcp-server"), environ) is not None
    # the server's own PATH, else the worker's
    assert start_problem(stdio("my-mcp-server", env={"PATH": str(tool.parent)}), environ) is None
    assert start_problem(stdio("my-mcp-server"), {"PATH": str(tool.parent)}) is None
    assert start_problem(stdio(sys.executable), environ) is None
    assert start_problem(stdio(str(tmp_path / "gone")), environ) == (
        f"its command {str(tmp_path / 'gone')!r} does not exist"
    )
    assert start_problem(stdio(str(plain)), environ) == (
        f"its command {str(plain)!r} is not executable"
    )
    # a path with a '/' is relative to the server's cwd
    assert start_problem(stdio("bin/my-mcp-server", cwd=str(tmp_path)), environ) is None
    assert start_problem(stdio("./my-mcp-server", cwd=str(tmp_path)), environ) is not None
    assert start_problem(stdio(sys.executable, cwd=str(tmp_path / "nowhere")), environ) == (
        f"its cwd {str(tmp_path / 'nowhere')!r} is not a directory"
    )
    http = McpServerConfig(name="web", url="http://127.0.0.1:9/mcp")
    assert start_problem(http, environ) is None  # may answer later


def test_a_required_server_that_cannot_start_is_refused_naming_it_and_the_fix() -> None:
    servers = [
        stdio(sys.executable),
        McpServerConfig(name="bad", command=NOSUCH),
        McpServerConfig(name="maybe", command=NOSUCH, optional=True),
    ]
    with pytest.raises(McpConfigError) as refused:
        refuse_unstartable(servers)
    message = str(refused.value)
    assert f"MCP server 'bad' cannot be started: its command {NOSUCH!r} was not found" in message
    assert "'maybe'" not in message
    assert "optional = true" in message and f"--mcp optional:bad={'...'}" in message
    refuse_unstartable([servers[0], servers[2]])  # optional: left to its connection


def test_the_worker_refuses_a_command_not_found_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No --dev, no Temporal at this address: the refusal comes before any connection.
    code = run_cli(["worker", "--address", "127.0.0.1:9", "--mcp", f"bad={NOSUCH}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"MCP server 'bad' cannot be started: its command {NOSUCH!r} was not found" in err


async def test_serving_refuses_it_too_and_starts_an_optional_one_without_its_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(McpConfigError, match="'bad' cannot be started"):
        async with serving_mcp(ToolRegistry(), [McpServerConfig(name="bad", command=NOSUCH)]):
            pass
    optional = McpServerConfig(name="maybe", command=NOSUCH, optional=True)
    with caplog.at_level(logging.WARNING):
        async with serving_mcp(ToolRegistry(), [optional]) as tools:
            served = tools.names()
    assert served == []
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"MCP server 'maybe' could not be reached: its command {NOSUCH!r} was not found on "
        "PATH; nothing was sent to it; its tools are not served until it answers; next try "
        "in 30s"
    ]


# -- a command that is not an MCP server --------------------------------------------------

NOT_MCP = [
    "-c",
    "import sys\nfor n in range(12): print(f'line {n} of something else')\nsys.stdout.flush()",
]


def test_the_wait_doubles_after_each_failure_up_to_a_ceiling() -> None:
    assert [retry_delay(n, 30.0) for n in range(7)] == [30, 30, 60, 120, 240, 480, 600]
    assert retry_delay(10_000, 30.0) == MAX_RETRY_S
    assert retry_delay(3, 900.0) == 900.0  # never below the server's own clock
    assert retry_delay(2, 0.5) == 1.0


async def test_a_command_that_is_not_an_mcp_server_is_one_line_per_try_and_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = McpServerConfig(name="notmcp", command=sys.executable, args=NOT_MCP, list_ttl_s=60)
    manager = McpTools([server], LiveToolRegistry(ToolRegistry()), {})
    with caplog.at_level(logging.DEBUG, "mcp"), caplog.at_level(logging.WARNING):
        await manager.start()
        try:
            await manager.refresh_now("notmcp")
            await manager.refresh_now("notmcp")
            served = manager.registry.names()
        finally:
            await manager.close()
    shown = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert served == []
    assert [r.name for r in shown] == ["steadyloop.mcp"] * 3, [r.getMessage() for r in shown]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in shown)
    first = shown[0].getMessage()
    assert first.startswith("MCP server 'notmcp' could not be reached: it wrote ")
    assert "not MCP (JSON-RPC), the first 'line 0 of something else'" in first
    assert [r.getMessage().rpartition("; ")[2] for r in shown] == [
        "next try in 60s",
        "next try in 120s",
        "next try in 240s",
    ]
    assert manager.failures["notmcp"] == 3
