"""An MCP server's tool as a `ToolDefinition`, so it takes the path every Python tool takes.

The run-tool activity validates, invokes and encodes an MCP tool exactly as it does a
Python one, and the workflow schedules it under the same content-keyed receipt: a
retried or redelivered turn replays a completed call, and an opaque call whose attempt
was lost (a killed worker) is ambiguous and waits for a person. Nothing MCP-specific
reaches the workflow or its history but the tool's description.

Inside the call (`McpToolCall`):

- the arguments are passed as the model sent them (the server validates them against
  its own schema and answers a refusal as an error result, which the model reads);
- the result is rendered by `render_result`; `isError` raises `McpToolError`, which the
  activity answers as a `tool_error` carrying the server's message;
- a server that died, hung or answered garbage raises `McpServerError`, answered as a
  `tool_error` that says whether the call may have taken effect (the activity logs it
  with the call and the run);
- the activity heartbeats while it waits (the details are the server's latest progress
  notification, if any): heartbeats are how a worker learns that Temporal cancelled the
  activity, and a cancelled activity cancels the MCP request on the wire. MCP tools are
  never `resumable`, so these heartbeats overwrite no recorded sub-operations (and the
  workflow reads only a list as progress; these details are an object).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import RootModel
from temporalio import activity

from steadyloop._mcp.catalog import ListedTool
from steadyloop._mcp.config import McpEffect, McpServerConfig
from steadyloop._mcp.connection import McpConnection
from steadyloop._mcp.results import render_result
from steadyloop.errors import SteadyloopError
from steadyloop.tools._definition import ToolDefinition
from steadyloop.tools._schema import SchemaError
from steadyloop.tools._schema_profiles import SCHEMA_PROFILES, sanitize_tool_schema

HEARTBEAT_EVERY_S = 1.0
# The call's own deadline leaves this much of the tool's timeout to answer the model,
# so a hung server is answered as such rather than lost to Temporal's timeout.
DEADLINE_MARGIN_S = 2.0


class McpToolError(SteadyloopError):
    """The server answered the call with `isError: true`; the message is its answer."""


class McpArguments(RootModel[dict[str, Any]]):
    """A call's arguments as the model sent them (the server checks them)."""


_ARGUMENTS = inspect.Parameter("arguments", inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class McpToolCall:
    """The function behind one MCP tool: call `remote_name` on the server's connection."""

    connection: McpConnection
    remote_name: str
    effect: McpEffect
    deadline_s: float

    async def __call__(self, arguments: McpArguments) -> str:
        beats = _Heartbeats(self.connection.name) if activity.in_activity() else None
        waiting = asyncio.create_task(beats.run()) if beats is not None else None
        try:
            result = await self.connection.call_tool(
                self.remote_name,
                arguments.root,
                deadline_s=self.deadline_s,
                retry_lost=self.effect == "pure",
                on_progress=beats.on_progress if beats is not None else None,
            )
        finally:
            if waiting is not None:
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting
        rendered = render_result(result)
        if rendered.is_error:
            raise McpToolError(rendered.text)
        return rendered.text


class _Heartbeats:
    """The activity's heartbeats while an MCP call waits.

    Progress notifications arrive on the session's own task, outside the activity's
    context, where `activity.heartbeat` cannot be called; they are handed to this loop,
    which runs in the activity's task and heartbeats each at once (and otherwise every
    `HEARTBEAT_EVERY_S`, so a cancellation reaches the call)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.details: dict[str, Any] = {"mcp_server": server, "waiting": True}
        self.changed = asyncio.Event()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.details = {
            "mcp_server": self.server,
            "progress": progress,
            "total": total,
            "message": message,
        }
        self.changed.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), HEARTBEAT_EVERY_S)
            self.changed.clear()
            activity.heartbeat(self.details)


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a listed input schema cannot be offered to every provider profile, or None.

    Checked when the tool is listed, so a hostile schema (a `$ref` cycle, a non-object
    root) is refused on the worker with a log line, never in a run's describe-tools
    activity. OpenAI's strict mode is not required: `describe` offers such a tool
    without `strict`."""
    if not isinstance(schema, Mapping):
        return "its input schema is not an object"
    for profile in SCHEMA_PROFILES:
        if profile == "openai_strict":
            continue
        try:
            sanitize_tool_schema(dict(schema), profile)
        except SchemaError as error:
            return f"its input schema cannot be offered ({profile}): {error}"
        except Exception as error:  # a schema shaped so that sanitizing it fails
            return f"its input schema cannot be read: {type(error).__name__}: {error}"
    return None


def mcp_tool_definition(
    connection: McpConnection,
    config: McpServerConfig,
    listed: ListedTool,
    *,
    served_name: str,
    effect: McpEffect,
) -> ToolDefinition[..., str]:
    """The `ToolDefinition` that serves `listed` as `served_name`."""
    timeout = timedelta(seconds=config.timeout_s)
    margin = min(DEADLINE_MARGIN_S, config.timeout_s * 0.2)
    call = McpToolCall(connection, listed.name, effect, config.timeout_s - margin)
    description = listed.description
    if served_name != listed.name:
        description = f"[{config.name} MCP server: {listed.name}] {description}".strip()
    return ToolDefinition(
        fn=call,
        name=served_name,
        description=description,
        effect=effect,
        timeout=timeout,
        heartbeat_timeout=None,
        approval=listed.name in config.approval or served_name in config.approval,
        arguments_model=McpArguments,
        parameters=copy.deepcopy(dict(listed.input_schema)),
        model_parameter=_ARGUMENTS,
        argument_fields=(),
        mcp_server=config.name,
    )
