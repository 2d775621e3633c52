"""A stdio pass-through in front of a real MCP server that holds back one tool's answers.

    python tests/mcp_hold_proxy.py --hold write_query --seconds 30 -- mcp-server-sqlite ...

Everything is forwarded unchanged, both ways, except the answer to a `tools/call` of the
held tool: the server has already done the call (the SQLite row is committed) and
answered, and the proxy keeps the answer for `--seconds` before passing it on. A test
kills the worker in that window: exactly "SIGKILLed right after an insert", with the
effect done by the real server and its answer not yet in the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any


async def pump_in(reader: asyncio.StreamReader, child: Any, held: set[Any], tool: str) -> None:
    while line := await reader.readline():
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if (
            isinstance(message, dict)
            and message.get("method") == "tools/call"
            and message.get("params", {}).get("name") == tool
        ):
            held.add(message.get("id"))
        child.stdin.write(line)
        await child.stdin.drain()
    child.stdin.close()


async def pump_out(child: Any, held: set[Any], seconds: float) -> None:
    while line := await child.stdout.readline():
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message and message.get("id") in held:
            print(f"HOLDING answer {message.get('id')}", file=sys.stderr, flush=True)
            await asyncio.sleep(seconds)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold", required=True)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    child = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    held: set[Any] = set()
    await asyncio.gather(
        pump_in(reader, child, held, args.hold), pump_out(child, held, args.seconds)
    )
    await child.wait()


if __name__ == "__main__":
    asyncio.run(main())
