"""The worker's MCP servers, their tools kept current in the registry it serves.

`McpTools` connects to every configured server before the worker polls (so a run that
names an MCP tool does not start before the tool is listed), then keeps each server's
tools current: it lists them again every `list_ttl_s` and at once when a server sends
`notifications/tools/list_changed`. The workflow never talks to a server; it learns
the tools through the describe-tools activity, which reads `LiveToolRegistry`.

A changed list is picked up without restarting the worker: new tools are served from
the next listing on (to runs that start, or continue as new, after it), and a call to a
tool the server no longer lists is answered `unknown_tool`. A server that is down at
start is logged and retried on its clock; its tools appear when it answers. A listing
that fails keeps the tools of the last one that worked (the calls themselves report a
dead server), rather than pulling tools from under running runs over one lost poll.

A server that keeps failing (down, or a command that is not an MCP server at all) is not
started again every `list_ttl_s` for ever, each time with the same log: each failed
listing is one log line saying when the next try is, and the wait doubles after each
failure in a row (`retry_delay`, up to `MAX_RETRY_S`), back to the clock once it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from steadyloop._mcp.catalog import ListedTool, ToolKey, assign_names, effect_of
from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.connection import McpConnection, McpServerError
from steadyloop._mcp.tools import mcp_tool_definition, schema_problem
from steadyloop.tools._registry import AnyTool, ToolRegistry

logger = logging.getLogger("steadyloop.mcp")

# The longest wait between listings of a server that keeps failing.
MAX_RETRY_S = 600.0


def retry_delay(failures: int, ttl_s: float) -> float:
    """How long to wait before listing a server again after `failures` failed listings in
    a row: its clock (`ttl_s`) while it answers, then twice as long after each failure,
    at most `MAX_RETRY_S` (never below its clock)."""
    if failures <= 0:
        return ttl_s
    return max(ttl_s, min(ttl_s * 2.0 ** min(failures - 1, 64), MAX_RETRY_S))


class LiveToolRegistry(ToolRegistry):
    """A worker's Python tools plus the MCP tools its servers list now."""

    def __init__(self, base: ToolRegistry) -> None:
        super().__init__()
        plugins = base.describe_plugins(base.plugin_names())
        plugin_of = {name: plugin.name for plugin in plugins for name in plugin.tools}
        for definition in base:
            self.register(definition, plugin=plugin_of.get(definition.name))
        for plugin in plugins:
            self._plugins[plugin.name] = plugin.description
        self._python = set(base.names())
        self._mcp: dict[str, list[str]] = {}

    @property
    def python_names(self) -> set[str]:
        return set(self._python)

    def mcp_names(self, server: str) -> list[str]:
        return list(self._mcp.get(server, []))

    def replace_mcp_tools(self, server: str, definitions: Sequence[AnyTool]) -> None:
        """Serve `definitions` as `server`'s tools from now on, instead of its last ones."""
        for name in self._mcp.pop(server, []):
            self._tools.pop(name, None)
            self._plugin_of.pop(name, None)
        for definition in definitions:
            self.register(definition)
        self._mcp[server] = [definition.name for definition in definitions]


class McpTools:
    """Connections to the configured servers and the refresh of their tool lists."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        registry: LiveToolRegistry,
        environ: Mapping[str, str],
    ) -> None:
        self.registry = registry
        self.servers = list(servers)
        self._changed = {server.name: asyncio.Event() for server in self.servers}
        self.connections = {
            server.name: McpConnection(
                server, environ, on_tools_changed=self._changed[server.name].set
            )
            for server in self.servers
        }
        self._listings: dict[str, list[ListedTool]] = {}
        self._assigned: dict[ToolKey, str] = {}
        self._refreshers: list[asyncio.Task[None]] = []
        self._served: dict[str, list[str]] = {}
        self.failures = {server.name: 0 for server in self.servers}  # listings, in a row

    async def start(self) -> None:
        """List every server once (concurrently), serve what they list, then keep it current."""
        results = await asyncio.gather(
            *(self._list(server) for server in self.servers), return_exceptions=True
        )
        for server, result in zip(self.servers, results, strict=True):
            if isinstance(result, list):
                self._listings[server.name] = result
            elif isinstance(result, McpServerError):
                self._failed(server, str(result))
            elif isinstance(result, Exception):  # a listing that could not be read
                self._failed(
                    server,
                    f"MCP server {server.name!r}: listing its tools failed: "
                    f"{type(result).__name__}: {result}",
                )
            elif isinstance(result, BaseException):  # cancelled: the worker is stopping
                raise result
        self._publish()
        self._refreshers = [
            asyncio.create_task(self._refresh(server), name=f"steadyloop-mcp-list-{server.name}")
            for server in self.servers
        ]

    async def close(self) -> None:
        for task in self._refreshers:
            task.cancel()
        for task in self._refreshers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.gather(
            *(connection.close() for connection in self.connections.values()),
            return_exceptions=True,
        )

    async def refresh_now(self, server: str) -> None:
        """List `server` again now (tests, and the refresher)."""
        config = next(s for s in self.servers if s.name == server)
        try:
            listed = await self._list(config)
        except McpServerError as error:
            self._failed(config, str(error))
            return
        self.failures[server] = 0
        if listed != self._listings.get(server):
            self._listings[server] = listed
            self._publish()

    async def _list(self, server: McpServerConfig) -> list[ListedTool]:
        return await self.connections[server.name].list_tools()

    def _failed(self, server: McpServerConfig, error: str) -> None:
        """One log line for a failed listing, saying what stays served and when the next
        try is."""
        self.failures[server.name] += 1
        kept = (
            "its last tools stay served"
            if self._listings.get(server.name)
            else "its tools are not served until it answers"
        )
        delay = retry_delay(self.failures[server.name], server.list_ttl_s)
        logger.warning("%s; %s; next try in %gs", error, kept, delay)

    async def _refresh(self, server: McpServerConfig) -> None:
        changed = self._changed[server.name]
        while True:
            delay = retry_delay(self.failures[server.name], server.list_ttl_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), delay)
            changed.clear()
            try:
                await self.refresh_now(server.name)
            except Exception:  # a refresher must outlive one bad listing
                logger.exception("MCP server %r: refreshing its tools failed", server.name)

    def _publish(self) -> None:
        """Name every listed tool and serve the definitions (see `catalog`)."""
        listings = [
            (server, self._listings[server.name])
            for server in self.servers
            if server.name in self._listings
        ]
        usable: list[tuple[McpServerConfig, list[ListedTool]]] = []
        for server, tools in listings:
            kept = []
            for tool in tools:
                problem = schema_problem(tool.input_schema)
                if problem is None:
                    kept.append(tool)
                else:
                    logger.warning(
                        "MCP server %r: tool %r not served: %s", server.name, tool.name, problem
                    )
            usable.append((server, kept))
        names, refusals = assign_names(
            usable, taken=self.registry.python_names, assigned=self._assigned
        )
        for refusal in refusals:
            logger.warning(
                "MCP server %r: tool %r not served: %s",
                refusal.key[0],
                refusal.key[1],
                refusal.reason,
            )
        self._assigned = dict(names)
        # Every server's old names go first, so a name can move between servers in one step.
        definitions: dict[str, list[Any]] = {}
        for server, tools in usable:
            connection = self.connections[server.name]
            definitions[server.name] = [
                mcp_tool_definition(
                    connection,
                    server,
                    tool,
                    served_name=names[(server.name, tool.name)],
                    effect=effect_of(tool, server.effects.get(tool.name)),
                )
                for tool in tools
                if (server.name, tool.name) in names
            ]
        for server, _ in usable:
            self.registry.replace_mcp_tools(server.name, [])
        for server, _ in usable:
            before = set(self._served.get(server.name, []))
            self.registry.replace_mcp_tools(server.name, definitions[server.name])
            now = [d.name for d in definitions[server.name]]
            if set(now) != before:
                logger.info(
                    "MCP server %r: serving %s",
                    server.name,
                    ", ".join(f"{d.name} ({d.effect})" for d in definitions[server.name])
                    or "no tools",
                )
            self._served[server.name] = now
