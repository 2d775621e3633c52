"""MCP servers' tools, served by a worker beside its Python tools, under receipts.

A worker configured with MCP servers (`[mcp.NAME]` in the config file, `--mcp NAME=...`
on the command line: `steadyloop._mcp.config`) lists their tools and serves each as a
`ToolDefinition` (`steadyloop._mcp.tools`), so a call takes the same run-tool activity and
the same content-keyed receipt as a Python tool. The effect class comes from the tool's
annotations (`steadyloop._mcp.catalog`), the result is rendered faithfully
(`steadyloop._mcp.results`), and a dead or hung server is answered, logged and reconnected
(`steadyloop._mcp.connection`). `steadyloop._mcp.serving.serving_mcp` is the worker's one
entry point.

Only `config` and `catalog` are imported here: they are pure, and importing this package
must not require the `mcp` SDK (a worker without MCP servers does not need it).
"""

from steadyloop._mcp.catalog import ListedTool, assign_names, effect_of
from steadyloop._mcp.config import (
    McpConfigError,
    McpServerConfig,
    describe_server,
    mcp_servers,
    parse_mcp_flag,
    resolve_env,
    resolve_headers,
)

__all__ = [
    "ListedTool",
    "McpConfigError",
    "McpServerConfig",
    "assign_names",
    "describe_server",
    "effect_of",
    "mcp_servers",
    "parse_mcp_flag",
    "resolve_env",
    "resolve_headers",
]
