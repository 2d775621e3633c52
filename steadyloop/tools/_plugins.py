"""Plugins: named groups of tools a run can disclose to the model a group at a time.

An agent offered every tool at once reads every schema on every turn and picks worse
among many. A plugin groups tools the model only needs for some tasks; a run offers
its core tools plus an activation tool, and the model activates a plugin when it needs
it (`steadyloop.tools._disclosure`). Membership is declared on the worker's side, either way:

    @tool(effect="pure", plugin="files")
    async def read_file(path: str) -> str: ...

    registry = ToolRegistry(
        [add],
        plugins=[ToolPlugin("files", "Read and write workspace files.", [write_file])],
    )

Here both `read_file` and `write_file` belong to `files`. Refused when the registry is
built (`PluginError`), never on a run: a tool claimed by two plugins, a plugin declared
twice, a name the activation tool's enum could not carry, a plugin with no tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from steadyloop.errors import SteadyloopError
from steadyloop.tools._definition import TOOL_NAME_PATTERN, ToolDefinition


class PluginError(SteadyloopError, ValueError):
    """A plugin declaration the registry cannot serve."""


@dataclass(frozen=True)
class ToolPlugin:
    """A named group of tools with a one-line description the model reads to decide
    whether to activate it. `tools` may be empty when every member is declared with
    `@tool(plugin=name)`."""

    name: str
    description: str = ""
    tools: Sequence[ToolDefinition[..., Any]] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        check_plugin_name(self.name)
        if not isinstance(self.description, str) or "\n" in self.description.strip():
            raise PluginError(f"plugin {self.name!r}: the description must be one line of text")


def check_plugin_name(name: object) -> str:
    """`name` when it can be a plugin's name (the tool-name rule), else `PluginError`."""
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise PluginError(
            f"plugin name {name!r} is not valid; it must match {TOOL_NAME_PATTERN.pattern} "
            "(letters, digits, '_' and '-', at most 64)"
        )
    return name
