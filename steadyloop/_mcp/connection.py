"""One MCP server, as the worker holds it: a session shared by every run's calls, restarted
when the server dies or hangs, closed with the worker.

What the obvious client gets wrong, and where this one prevents it:

- **A session opened inside an activity.** The MCP SDK's transports are anyio task
  groups that must be entered and left by the same task; opened per call, a stdio server
  would start (1 to 2 s) for every call; shared naively, the first activity to finish
  would close it under the others. Each connection (`_Generation`) is owned by one task
  that opens it, waits, and closes it; calls from any activity use its session, which
  multiplexes requests.
- **A dead server taking later calls with it.** A server that exits fails the calls in
  flight on it (`CONNECTION_CLOSED`), and every later call would fail the same way. The
  failed generation is retired, and the next call (or the next tool listing) starts a new
  one: a stdio server is started again. Calls still in flight on a retired generation
  finish on it; it is closed when the last one leaves (the same rule as the session pool
  of Temporal's `temporalio-mcp`).
- **Retrying what may have happened.** A request that never left (the stream was already
  closed) is sent again on a new connection, whatever the tool's effect. A request that
  was sent and lost its answer is sent again only when `retry_lost` (pure tools); for an
  opaque tool the caller reports the loss, and the call is not repeated.
- **A hung server holding the activity until Temporal times it out.** Each call has a
  deadline shorter than the tool's timeout; at the deadline the request is cancelled on
  the wire (`notifications/cancelled`), the generation is retired (a server that hangs one
  request may hang them all), and the caller answers the model.
- **Cancellation that never reaches the server.** The SDK (1.x) stops waiting when its
  task is cancelled but sends nothing; `call_tool` sends `notifications/cancelled` for
  the request id before the cancellation goes on.
- **Secrets.** Header and environment values are read from the worker's environment when
  a connection opens (`resolve_headers`, `resolve_env`), and are never logged.
- **A command that is not an MCP server flooding the log.** The SDK logs a 25-line
  traceback for every line a server writes that is not JSON-RPC, and hands the same
  error to the session. Its record is dropped (`_QuietParseErrors`); the first such line
  of a connection is logged in one line, the rest are counted, and the connection's
  failure names them ("it wrote 12 lines that are not MCP, the first 'total 128'"). The
  listing clock backs off while it keeps failing (`steadyloop._mcp.live`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
import httpx
from mcp import ClientSession, McpError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.session import ProgressFnT
from pydantic import ValidationError

from steadyloop._mcp.catalog import ListedTool
from steadyloop._mcp.config import McpServerConfig, resolve_env, resolve_headers
from steadyloop._mcp.startup import start_problem
from steadyloop.errors import SteadyloopError

logger = logging.getLogger("steadyloop.mcp")

CONNECT_TIMEOUT_S = 20.0
CANCEL_SEND_TIMEOUT_S = 2.0
MAX_LIST_PAGES = 100
# Errors from writing a request to a transport that is already closed: it never left.
_NOT_SENT = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
EXCERPT_CHARS = 80
# What the SDK logs, with a traceback or a 20-line validation report, for each message
# it cannot read, before it hands the same error to the session or answers the server
# with a JSON-RPC error that fails the connection (`McpConnection._on_message`,
# `_generation`). The session module logs through the root logger.
_SDK_PARSE_ERRORS = {
    "mcp.client.stdio": ("Failed to parse JSONRPC message",),
    "mcp.client.streamable_http": ("Error parsing SSE message", "Error parsing JSON response"),
    "root": ("Failed to validate request",),
}


class _QuietParseErrors(logging.Filter):
    """Drops the SDK's record of a message it could not read: this module reports it in
    one line (see the module docstring). Only records the MCP SDK itself made."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        from_sdk = f"{os.sep}mcp{os.sep}" in record.pathname
        return not (from_sdk and str(record.msg).startswith(self.prefixes))


for _name, _prefixes in _SDK_PARSE_ERRORS.items():
    _logger = logging.getLogger(None if _name == "root" else _name)
    if not any(isinstance(f, _QuietParseErrors) for f in _logger.filters):
        _logger.addFilter(_QuietParseErrors(_prefixes))

ProgressHandler = ProgressFnT


class McpServerError(SteadyloopError):
    """The server gave no usable answer (died, hung, answered garbage, unreachable).

    The message is written for the model and the worker's log alike: it names the server
    and says whether the call may have taken effect."""


@dataclass(eq=False)
class _Generation:
    """One connection: its owner task, its session, and how many calls use it."""

    number: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    owner: asyncio.Task[None] | None = None
    session: ClientSession | None = None
    inflight: int = 0
    retired: bool = False
    connected: bool = False  # initialized and handed over
    unreadable: int = 0  # messages the server sent that are not MCP
    first_unreadable: str | None = None

    def garbage(self) -> str:
        """What the server wrote that is not MCP, for a log line ("" when nothing)."""
        if not self.unreadable:
            return ""
        lines = "a line that is" if self.unreadable == 1 else f"{self.unreadable} lines that are"
        return f"it wrote {lines} not MCP (JSON-RPC), the first {self.first_unreadable}"


class McpConnection:
    """The worker's connection to one configured MCP server."""

    def __init__(
        self,
        config: McpServerConfig,
        environ: Mapping[str, str],
        *,
        on_tools_changed: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self._environ = dict(environ)
        self._on_tools_changed = on_tools_changed
        self._current: _Generation | None = None
        self._lock = asyncio.Lock()
        self._generations = 0
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def restarts(self) -> int:
        """How many connections were attempted after the first (a stdio server started
        again, an HTTP session opened again)."""
        return max(0, self._generations - 1)

    # -- connecting ---------------------------------------------------------------------

    async def _generation(self) -> _Generation:
        async with self._lock:
            if self._closed:
                raise McpServerError(f"MCP server {self.name!r}: the worker is shutting down")
            current = self._current
            if current is not None and not current.retired:
                return current
            self._generations += 1
            generation = _Generation(self._generations)
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            # Read even when nobody waits any more (a connect that timed out), so asyncio
            # does not report an exception that was never retrieved.
            ready.add_done_callback(lambda done: done.cancelled() or done.exception())
            generation.owner = asyncio.create_task(
                self._own(generation, ready), name=f"steadyloop-mcp-{self.name}"
            )
            try:
                generation.session = await asyncio.wait_for(
                    asyncio.shield(ready), CONNECT_TIMEOUT_S
                )
            except BaseException as error:
                generation.stop.set()
                generation.owner.cancel()
                if isinstance(error, asyncio.CancelledError):
                    raise
                why = _describe(error)
                if isinstance(error, OSError) and self.config.command is not None:
                    why = start_problem(self.config) or why  # not found, not executable
                garbage = generation.garbage()
                if garbage:
                    why = f"{garbage}, then {why}"
                raise McpServerError(
                    f"MCP server {self.name!r} could not be reached: {why}; nothing was sent to it"
                ) from None
            if generation.number > 1:
                logger.warning(
                    "MCP server %r: connected again (connection %d)", self.name, generation.number
                )
            self._current = generation
            return generation

    async def _own(self, generation: _Generation, ready: asyncio.Future[ClientSession]) -> None:
        """Open the transport and session, hand the session over, and hold them until
        the generation is stopped; all in this one task (anyio's rule)."""
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open(stack)
                session = await stack.enter_async_context(
                    ClientSession(
                        read, write, message_handler=functools.partial(self._on_message, generation)
                    )
                )
                await session.initialize()
                generation.connected = True
                ready.set_result(session)
                await generation.stop.wait()
        except BaseException as error:  # the owner reports, never raises
            if not ready.done():
                ready.set_exception(
                    error if isinstance(error, Exception) else McpServerError(_describe(error))
                )
            elif not generation.stop.is_set():
                self._retire(generation, f"its connection ended ({_describe(error)})")
        finally:
            handed_over = ready.done() and not ready.cancelled() and ready.exception() is None
            if handed_over and not generation.stop.is_set():
                # Ended on its own (the server went away): no later call may use it.
                self._retire(generation, "its connection ended")

    async def _open(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        config = self.config
        if config.command is not None:
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                # Added to the SDK's safe default set (PATH, HOME, ...), not to the
                # worker's whole environment (no keys of other services leak to it).
                env=resolve_env(config, self._environ),
                cwd=config.cwd,
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
            return read, write
        assert config.url is not None
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=resolve_headers(config, self._environ),
                timeout=httpx.Timeout(30.0, read=config.timeout_s + 30.0),
                follow_redirects=True,
            )
        )
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )
        return read, write

    async def _on_message(self, generation: _Generation, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            logger.info("MCP server %r: tool list changed", self.name)
            if self._on_tools_changed is not None:
                self._on_tools_changed()
        elif isinstance(message, Exception):
            generation.unreadable += 1
            if generation.unreadable > 1:
                return  # one line per connection; the rest are counted
            generation.first_unreadable = _unreadable(message)
            if generation.connected:  # else the failure to connect names it
                logger.warning(
                    "MCP server %r sent something that is not MCP (JSON-RPC): %s",
                    self.name,
                    generation.first_unreadable,
                )

    def _retire(self, generation: _Generation, why: str) -> None:
        if generation.retired:
            return
        generation.retired = True
        if self._current is generation:
            self._current = None
        logger.warning(
            "MCP server %r: %s; connection %d retired, the next call reconnects%s",
            self.name,
            why,
            generation.number,
            " (restarting the server)" if self.config.command is not None else "",
        )
        if generation.inflight == 0:
            self._close_later(generation)

    def _close_later(self, generation: _Generation) -> None:
        task = asyncio.create_task(self._close(generation))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, generation: _Generation) -> None:
        generation.stop.set()
        owner = generation.owner
        if owner is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(owner), 5.0)
        except (TimeoutError, asyncio.CancelledError):
            owner.cancel()
        except Exception:  # the owner reports its own failures
            pass

    async def close(self) -> None:
        """Close every connection (the worker is stopping)."""
        self._closed = True
        current, self._current = self._current, None
        if current is not None:
            current.retired = True
            await self._close(current)
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    # -- requests -----------------------------------------------------------------------

    async def list_tools(self) -> list[ListedTool]:
        """Every page of `tools/list`; a broken connection is retired and reported."""
        generation = await self._generation()
        assert generation.session is not None
        generation.inflight += 1
        try:
            tools: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(MAX_LIST_PAGES):
                page = await asyncio.wait_for(
                    generation.session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor)
                    ),
                    self.config.timeout_s,
                )
                tools.extend(page.tools)
                cursor = page.nextCursor
                if cursor is None:
                    break
            return [_listed(tool) for tool in tools]
        except (McpError, ValidationError, TimeoutError, *_NOT_SENT) as error:
            # A server that died while idle is found here, on the listing clock: the
            # connection is retired, and the next listing or call starts it again.
            if isinstance(error, McpError):
                broken = error.error.code == types.CONNECTION_CLOSED
            else:
                broken = not isinstance(error, ValidationError)
            if broken:
                self._retire(generation, f"tools/list failed: {_describe(error)}")
            raise McpServerError(
                f"MCP server {self.name!r}: tools/list failed: {_describe(error)}"
            ) from None
        finally:
            self._release(generation)

    def _release(self, generation: _Generation) -> None:
        generation.inflight -= 1
        if generation.retired and generation.inflight == 0:
            self._close_later(generation)

    async def call_tool(
        self,
        remote_name: str,
        arguments: dict[str, Any],
        *,
        deadline_s: float,
        retry_lost: bool,
        on_progress: ProgressHandler | None = None,
    ) -> types.CallToolResult:
        """Call a tool; `McpServerError` when the server gives no usable answer.

        At most two sends: the second only when the first never left, or was lost and
        `retry_lost` (see the module docstring)."""
        for send in (1, 2):
            generation = await self._generation()
            session = generation.session
            assert session is not None
            generation.inflight += 1
            # The id the SDK gives this request: it numbers requests in order and takes
            # the next one synchronously inside `call_tool`, before its first await.
            request_id: int | None = getattr(session, "_request_id", None)
            try:
                async with asyncio.timeout(deadline_s):
                    return await session.call_tool(
                        remote_name,
                        arguments,
                        progress_callback=on_progress,
                    )
            except asyncio.CancelledError:
                await self._send_cancel(session, request_id, "the activity was cancelled")
                raise
            except TimeoutError:
                await self._send_cancel(session, request_id, "no answer before the deadline")
                self._retire(generation, f"no answer to {remote_name!r} within {deadline_s:g}s")
                raise McpServerError(
                    f"MCP server {self.name!r} did not answer {remote_name!r} within "
                    f"{deadline_s:g}s; the request was cancelled. It may or may not have "
                    "taken effect."
                ) from None
            except _NOT_SENT as error:
                self._retire(generation, f"its connection was closed ({_describe(error)})")
                if send == 1:
                    continue  # never left: send it on a new connection
                raise McpServerError(
                    f"MCP server {self.name!r} is not reachable: {_describe(error)}; the "
                    "call was not sent."
                ) from None
            except McpError as error:
                if error.error.code != types.CONNECTION_CLOSED:
                    raise McpServerError(
                        f"MCP server {self.name!r} refused {remote_name!r}: "
                        f"{error.error.message} (JSON-RPC error {error.error.code})"
                    ) from None
                self._retire(generation, f"the connection closed during {remote_name!r}")
                if retry_lost and send == 1:
                    continue
                raise McpServerError(
                    f"MCP server {self.name!r} closed the connection during the call "
                    f"(it exited or was restarted); {remote_name!r} may or may not have taken "
                    "effect, and was not sent again."
                ) from None
            except ValidationError as error:
                raise McpServerError(
                    f"MCP server {self.name!r} answered {remote_name!r} with something that is "
                    f"not a tool result ({error.error_count()} problems, first: "
                    f"{error.errors(include_url=False)[0]['msg']}); it may or may not have "
                    "taken effect."
                ) from None
            finally:
                self._release(generation)
        raise AssertionError("unreachable: the second send returns or raises")

    async def _send_cancel(
        self, session: ClientSession, request_id: int | None, reason: str
    ) -> None:
        if request_id is None:
            return
        notification = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
            )
        )
        with contextlib.suppress(Exception):
            await asyncio.shield(
                asyncio.wait_for(session.send_notification(notification), CANCEL_SEND_TIMEOUT_S)
            )
        logger.info("MCP server %r: cancelled request %s (%s)", self.name, request_id, reason)


def _listed(tool: types.Tool) -> ListedTool:
    annotations = tool.annotations
    return ListedTool(
        name=tool.name,
        description=(tool.description or tool.title or "").strip(),
        input_schema=dict(tool.inputSchema or {"type": "object"}),
        read_only=None if annotations is None else annotations.readOnlyHint,
        idempotent=None if annotations is None else annotations.idempotentHint,
    )


def _unreadable(error: Exception) -> str:
    """One line for a message the server sent that could not be read: its start and why."""
    if isinstance(error, ValidationError):
        first = error.errors(include_url=False)[0]
        value = first.get("input")
        text = value if isinstance(value, str) else repr(value)
        excerpt = text[:EXCERPT_CHARS] + ("..." if len(text) > EXCERPT_CHARS else "")
        return f"{excerpt!r} ({first['msg']})"
    return _describe(error)


def _describe(error: BaseException) -> str:
    if isinstance(error, McpError):
        return f"{error.error.message} (JSON-RPC error {error.error.code})"
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    if isinstance(error, ValidationError):
        return f"ValidationError: {_unreadable(error)}"
    text = " ".join(str(error).split())  # one line, whatever the error's own text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def timeout_of(config: McpServerConfig) -> timedelta:
    return timedelta(seconds=config.timeout_s)
