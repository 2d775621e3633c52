"""An MCP server of our own that misbehaves on request, for the MCP fault tests.

    python tests/mcp_fault_server.py --http PORT --effects FILE   # streamable HTTP at /mcp
    python tests/mcp_fault_server.py --stdio --effects FILE

Tools (annotations as the MCP spec defines them):

- `echo(text)`, read-only: answers `text`.
- `slow_echo(text, seconds)`, read-only: answers `text` after `seconds`.
- `record(item)`, no annotations (opaque): appends `item` to FILE, answers "recorded".
- `hang()`: never answers; when the client cancels it, appends `cancelled hang` to FILE.
- `crash()`: the process exits in the middle of the call.
- `crash_once(item)`, read-only: the first call in a fresh FILE exits the process; later
  calls answer (a restarted server serves them).
- `progress(steps)`, read-only: one progress notification every 0.3 s, then "done".
- `grow(announce)`: adds the tool `grown` and (if `announce`) sends
  `notifications/tools/list_changed`.
- `failing()`: answers `isError: true`.
- `malformed()` (HTTP only): the HTTP layer answers with a result that is not a
  `CallToolResult` (`content` a string).

Every call but `echo` appends `call NAME` to FILE first (over HTTP, the `X-Token`
header it carried too; over stdio the server notes its pid at start), so a test
counts what reached the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult, TextContent, ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True)
server = FastMCP("faults", log_level="WARNING")
_effects: Path = Path("effects.txt")


def note(line: str) -> None:
    fd = os.open(_effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def noted() -> list[str]:
    return _effects.read_text().splitlines() if _effects.exists() else []


@server.tool(annotations=READ_ONLY)
async def echo(text: str) -> str:
    """Answer the text (no note: the benchmark times it as the server's least work)."""
    return text


@server.tool(annotations=READ_ONLY)
async def slow_echo(text: str, seconds: float) -> str:
    """Answer the text after a while."""
    note("call slow_echo")
    await asyncio.sleep(seconds)
    return text


@server.tool()
async def record(item: str) -> str:
    """Record an item (a side effect)."""
    note("call record")
    note(f"recorded {item}")
    return "recorded"


@server.tool()
async def hang() -> str:
    """Never answer."""
    note("call hang")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        note("cancelled hang")
        raise
    return "late"


@server.tool()
async def crash() -> str:
    """Exit mid-call."""
    note("call crash")
    os._exit(3)


@server.tool(annotations=READ_ONLY)
async def crash_once(item: str) -> str:
    """Exit on the first call, answer later ones."""
    first = "crashed once" not in noted()
    note("call crash_once")
    if first:
        note("crashed once")
        os._exit(3)
    return f"answered {item} after a restart"


@server.tool(annotations=READ_ONLY)
async def progress(steps: int, ctx: Context[Any, Any, Any]) -> str:
    """Report progress, then answer."""
    note("call progress")
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        await asyncio.sleep(0.3)
    return "done"


@server.tool()
async def grow(ctx: Context[Any, Any, Any], announce: bool = True) -> str:
    """Add a tool and (unless told not to) say the list changed."""
    note("call grow")

    def grown() -> str:
        """A tool added at run time."""
        return "grown"

    server.add_tool(grown, annotations=READ_ONLY)
    if announce:
        await ctx.session.send_tool_list_changed()
    return "grew"


@server.tool()
async def failing() -> CallToolResult:
    """Answer with an error result."""
    note("call failing")
    return CallToolResult(content=[TextContent(type="text", text="quota exceeded")], isError=True)


@server.tool()
async def malformed() -> str:
    """Replaced by a malformed answer at the HTTP layer."""
    return "unreachable"


def malformed_answers(app: Any) -> Any:
    """ASGI middleware: a `tools/call` of `malformed` gets a result that is not one."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        token = dict(scope["headers"]).get(b"x-token")
        if isinstance(request, dict) and request.get("method") == "tools/call" and token:
            note(f"x-token {token.decode()}")
        if (
            isinstance(request, dict)
            and request.get("method") == "tools/call"
            and request.get("params", {}).get("name") == "malformed"
        ):
            note("call malformed")
            answer = json.dumps(
                {"jsonrpc": "2.0", "id": request["id"], "result": {"content": "garbage"}}
            ).encode()
            headers = [(b"content-type", b"application/json")]
            session = dict(scope["headers"]).get(b"mcp-session-id")
            if session:
                headers.append((b"mcp-session-id", session))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            result: dict[str, Any] = await receive()
            return result

        await app(scope, replay, send)

    return wrapped


def main() -> None:
    global _effects
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--effects", type=Path, required=True)
    args = parser.parse_args()
    _effects = args.effects
    if args.stdio:
        note(f"pid {os.getpid()}")
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app()
    config = uvicorn.Config(
        malformed_answers(app),
        host="127.0.0.1",
        port=args.http,
        log_level="warning",
        lifespan="on",
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
