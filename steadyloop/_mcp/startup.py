"""Whether each stdio MCP server's command can be started, checked once as the worker starts.

A command that cannot be started (a typo, a server not installed, a `cwd` that is not
there) fails every connection the same way. Found only when the first connection fails,
it is a warning that scrolls away while the worker serves runs without the tools it was
configured with. So it is refused before the worker polls, naming the server, the command
and the fix, unless the server is marked `optional`; an optional one is logged, and the
worker keeps trying it on its listing clock (`steadyloop._mcp.live`).

The command is looked up as the server's process will be started (the SDK execs it with
the environment it builds): a name without `/` on the PATH the server gets (its own
`env` PATH, else the worker's), a path with `/` relative to the server's `cwd`. An HTTP
server is not checked here: a URL that does not answer yet may answer later.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from steadyloop._mcp.config import OPTIONAL_PREFIX, McpConfigError, McpServerConfig


def start_problem(server: McpServerConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """Why `server`'s command cannot be started, or None (HTTP servers: always None).

    `environ` is where the server's PATH comes from: the worker's own environment by
    default, as the SDK passes it on."""
    environ = os.environ if environ is None else environ
    command = server.command
    if command is None:
        return None
    cwd = Path(server.cwd) if server.cwd is not None else None
    if cwd is not None and not cwd.is_dir():
        return f"its cwd {server.cwd!r} is not a directory"
    if "/" in command:
        path = Path(command)
        if not path.is_absolute() and cwd is not None:
            path = cwd / path
        if not path.is_file():
            return f"its command {command!r} does not exist"
        if not os.access(path, os.X_OK):
            return f"its command {command!r} is not executable"
        return None
    search = server.env.get("PATH", environ.get("PATH", os.defpath))
    if shutil.which(command, path=search) is None:
        return f"its command {command!r} was not found on PATH"
    return None


def refuse_unstartable(
    servers: Sequence[McpServerConfig], environ: Mapping[str, str] | None = None
) -> None:
    """`McpConfigError` naming every server not marked optional whose command cannot be
    started. An optional one is left to its connection, which logs why it fails."""
    refused = [
        (server.name, problem)
        for server in servers
        if not server.optional and (problem := start_problem(server, environ)) is not None
    ]
    if refused:
        raise McpConfigError(
            "; ".join(f"MCP server {name!r} cannot be started: {why}" for name, why in refused)
            + ". Install the server or fix its settings, or mark it optional to start without "
            + "it (`optional = true` in its [mcp.NAME] table, or "
            + f"--mcp {OPTIONAL_PREFIX}{refused[0][0]}=...)"
        )
