"""The one call a worker makes: `serving_mcp(tools, servers)` around its lifetime.

With no server configured it hands back the worker's registry untouched and imports
nothing of the MCP SDK, so a worker without MCP servers neither needs the `mcp` package
nor pays for it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.startup import refuse_unstartable
from steadyloop.tools._registry import ToolRegistry


@asynccontextmanager
async def serving_mcp(
    tools: ToolRegistry,
    servers: Sequence[McpServerConfig],
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[ToolRegistry]:
    """`tools` plus the tools of `servers`, kept current while the block runs; every
    server connection is closed (stdio servers stopped) when it ends.

    `McpConfigError` before anything starts when a required server's command cannot be
    started (`steadyloop._mcp.startup`)."""
    if not servers:
        yield tools
        return
    from steadyloop._mcp.live import LiveToolRegistry, McpTools

    refuse_unstartable(servers)  # an optional one is logged when it fails to connect
    registry = LiveToolRegistry(tools)
    manager = McpTools(servers, registry, os.environ if environ is None else environ)
    await manager.start()
    try:
        yield registry
    finally:
        await manager.close()
