"""What an MCP server's tool list becomes on a worker: names, effect classes, refusals.
Pure: the listed tools come in as plain values (`ListedTool`), nothing here talks to a
server.

The obvious mapping is wrong in these ways, each prevented where named:

- **Trusting annotations as guarantees, or ignoring them.** An MCP server's
  `readOnlyHint` / `idempotentHint` are the only thing it says about repeating a call.
  `effect_of`: `readOnlyHint: true` is `pure`; `idempotentHint: true` may be repeated,
  so it is `pure` too (a lost attempt is run again, a completed one replays); anything
  else, a server that says nothing included, is `opaque`, whose lost attempts wait for a
  person. The worker's configuration overrides a tool's class (`effects`), both ways.
- **Names that collide or that providers refuse.** Two servers (or a server and a Python
  tool) both offering `search` would shadow one another; a name with `.` or `/`, or over
  64 characters, is refused by the OpenAI API with the whole request. `assign_names`
  keeps a tool's own name when it is free, and otherwise (or with `prefix = "always"`)
  serves it as `SERVER__tool`; characters outside `[a-zA-Z0-9_-]` become `_`, and an
  over-long name is cut and given a digest so two long names stay apart.
- **Renaming a tool under a running run.** A run describes its tools once; if a newly
  listed tool took a name over, the run's calls would reach a different tool. Names
  already assigned keep their holder while it is listed; only newcomers are prefixed. At
  start, every server is listed before the worker serves, so two servers' `search`
  are both prefixed, whichever answered first.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from steadyloop._mcp.config import McpEffect, McpServerConfig
from steadyloop.tools._definition import TOOL_NAME_PATTERN

PREFIX_SEPARATOR = "__"
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
MAX_NAME = 64


@dataclass(frozen=True)
class ListedTool:
    """One entry of a server's `tools/list`, reduced to what the worker uses."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    read_only: bool | None = None
    idempotent: bool | None = None


ToolKey = tuple[str, str]  # (server name, the tool's name on that server)


def effect_of(tool: ListedTool, override: McpEffect | None = None) -> McpEffect:
    """The tool's effect class: the configuration's, else from its annotations."""
    if override is not None:
        return override
    if tool.read_only is True or tool.idempotent is True:
        return "pure"
    return "opaque"


def safe_name(name: str) -> str:
    """`name` as a valid tool name: invalid characters become `_`, a long one is cut and
    given an 8-hex digest of the original (so two long names cannot meet)."""
    cleaned = _INVALID.sub("_", name) or "_"
    if len(cleaned) <= MAX_NAME:
        return cleaned
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[: MAX_NAME - 9]}_{digest}"


def prefixed(server: str, name: str) -> str:
    return safe_name(f"{server}{PREFIX_SEPARATOR}{name}")


@dataclass(frozen=True)
class NameRefusal:
    """A listed tool the worker does not serve, and why (logged)."""

    key: ToolKey
    reason: str


def assign_names(
    listings: Sequence[tuple[McpServerConfig, Sequence[ListedTool]]],
    *,
    taken: Iterable[str],
    assigned: Mapping[ToolKey, str],
) -> tuple[dict[ToolKey, str], list[NameRefusal]]:
    """The served name of every listed tool (see the module docstring for the rule).

    `taken`: names the worker's own Python tools hold. `assigned`: names given before
    (a tool keeps its name while it is listed). Returns the names, and the tools refused.
    """
    reserved = set(taken)
    names: dict[ToolKey, str] = {}
    refusals: list[NameRefusal] = []
    listed: dict[ToolKey, McpServerConfig] = {}
    for server, tools in listings:
        seen: set[str] = set()
        for tool in tools:
            if tool.name in seen:  # a server listing one name twice: serve the first
                refusals.append(NameRefusal((server.name, tool.name), "listed twice by its server"))
                continue
            seen.add(tool.name)
            listed[(server.name, tool.name)] = server
    # Keepers first: a tool still listed keeps the name it had.
    for key, name in assigned.items():
        if key in listed and name not in reserved:
            names[key] = name
            reserved.add(name)
    newcomers = [key for key in listed if key not in names]
    bare_counts: dict[str, int] = {}
    for key in newcomers:
        bare = safe_name(key[1])
        bare_counts[bare] = bare_counts.get(bare, 0) + 1
    for key in newcomers:
        server = listed[key]
        bare = safe_name(key[1])
        wants_prefix = server.prefix == "always" or bare in reserved or bare_counts[bare] > 1
        name = prefixed(server.name, key[1]) if wants_prefix else bare
        if name in reserved or not TOOL_NAME_PATTERN.fullmatch(name):
            refusals.append(
                NameRefusal(key, f"its name {name!r} is already served by another tool")
            )
            continue
        names[key] = name
        reserved.add(name)
    return names, refusals
