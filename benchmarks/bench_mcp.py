"""What an MCP tool call costs over a Python tool doing the same work, stdio and HTTP.

    .venv/bin/python benchmarks/bench_mcp.py            # 7 rounds of 200 calls (~1 minute)
    .venv/bin/python benchmarks/bench_mcp.py --quick    # 3 rounds of 50 calls

Every candidate runs through the run-tool activity (`ToolActivities.run_tool`: look-up,
validation, invocation, encoding, capping), the path a worker runs for each call, and
echoes the same 1 KB text:

- `python`: a `@tool` that returns its argument (the baseline);
- `mcp stdio`: the same echo as an MCP tool of a FastMCP server started over stdio
  (`tests/mcp_fault_server.py`), served by `steadyloop._mcp`;
- `mcp http`: the same server over streamable HTTP on 127.0.0.1;
- context rows: the bare MCP SDK (`ClientSession.call_tool`) on each transport, so
  steadyloop's own share of the MCP path shows.

Rounds are interleaved (each round runs every candidate once, in turn), and the table
prints the best and the median of per-call times, and the median over rounds of each
ratio to the baseline of the same round. The one-off cost of a connection (starting the
stdio server, the HTTP session's handshake) is printed apart: a worker pays it once per
server, not per call. Inside a run, every tool call is also one Temporal activity (about
50 ms end to end on the dev server here, `shared/DESIGN.md`), which this leaves out.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.live import LiveToolRegistry, McpTools
from steadyloop.tools import ToolInvocation, ToolRegistry, tool

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp_fault_server.py"
TEXT = "x" * 1024

Call = Callable[[], Awaitable[str]]


@tool(name="py_echo", effect="pure")
async def py_echo(text: str) -> str:
    """Answer the text."""
    return text


def invocation(name: str) -> ToolInvocation:
    return ToolInvocation(
        tool=name,
        arguments={"text": TEXT},
        call_id="c",
        workflow_id="bench",
        tenant_id="t",
        attempt=1,
        idempotency_key="k",
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP server did not start") from None
            time.sleep(0.05)


async def candidates(
    stack: AsyncExitStack, workdir: Path
) -> tuple[dict[str, Call], dict[str, float]]:
    effects = str(workdir / "effects.txt")
    port = free_port()
    http = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port), "--effects", effects],
        stderr=subprocess.DEVNULL,
    )
    stack.callback(http.wait)
    stack.callback(http.kill)
    wait_for_port(port, http)
    url = f"http://127.0.0.1:{port}/mcp"
    stdio = [str(SERVER), "--stdio", "--effects", effects]

    connect: dict[str, float] = {}
    started = time.perf_counter()
    registry = LiveToolRegistry(ToolRegistry([py_echo]))
    servers = [
        McpServerConfig(name="stdio", command=sys.executable, args=stdio, prefix="always"),
        McpServerConfig(name="http", url=url, prefix="always"),
    ]
    manager = McpTools(servers, registry, {})
    await manager.start()
    stack.push_async_callback(manager.close)
    connect["steadyloop._mcp, both servers listed"] = time.perf_counter() - started
    activities = ToolActivities(registry)

    async def run(name: str) -> str:
        outcome = await activities.run_tool(invocation(name))
        assert outcome.status == "ok", outcome
        return outcome.content

    sessions: dict[str, ClientSession] = {}
    for label, opener in (
        ("stdio", lambda: stdio_client(StdioServerParameters(command=sys.executable, args=stdio))),
        ("http", lambda: streamable_http_client(url)),
    ):
        started = time.perf_counter()
        streams = await stack.enter_async_context(opener())
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        sessions[label] = session
        connect[f"bare SDK {label}: start + initialize"] = time.perf_counter() - started

    def bare(label: str) -> Call:
        async def call() -> str:
            result = await sessions[label].call_tool("echo", {"text": TEXT})
            text = result.content[0]
            return getattr(text, "text", "")

        return call

    return {
        "python": lambda: run("py_echo"),
        "mcp stdio": lambda: run("stdio__echo"),
        "mcp http": lambda: run("http__echo"),
        "bare SDK stdio": bare("stdio"),
        "bare SDK http": bare("http"),
    }, connect


async def bench(rounds: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        async with AsyncExitStack() as stack:
            paths, connect = await candidates(stack, Path(workdir))
            for name, call in paths.items():  # warm up, and check every path echoes
                for _ in range(5):
                    assert await call() == TEXT, name
            per_call: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(rounds):
                for name, call in paths.items():
                    started = time.perf_counter()
                    for _ in range(calls):
                        await call()
                    per_call[name].append((time.perf_counter() - started) / calls)
    base = per_call["python"]
    print(f"MCP tool call vs a Python tool, same 1 KB echo ({rounds} rounds x {calls} calls)")
    print(f"{'path':<16}{'best us':>10}{'median us':>12}{'x python (median of rounds)':>30}")
    for name, times in per_call.items():
        ratio = statistics.median(t / b for t, b in zip(times, base, strict=True))
        print(
            f"{name:<16}{min(times) * 1e6:>10.1f}{statistics.median(times) * 1e6:>12.1f}"
            f"{ratio:>29.1f}x"
        )
    for name in ("stdio", "http"):
        share = statistics.median(
            m / b
            for m, b in zip(per_call[f"mcp {name}"], per_call[f"bare SDK {name}"], strict=True)
        )
        print(f"steadyloop._mcp over the bare SDK, {name}: {share:.2f}x")
    print("one-off connection costs (paid once per server by a worker):")
    for name, seconds in connect.items():
        print(f"  {name}: {seconds * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, calls = (3, 50) if args.quick else (7, 200)
    asyncio.run(bench(rounds, calls))


if __name__ == "__main__":
    main()
