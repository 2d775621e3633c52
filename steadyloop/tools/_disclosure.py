"""Progressive tool disclosure: which tools a run offers each turn, and `activate_plugin`.

A run offers its core tools (`RunInput.tools`, the tools of `RunPlugins.core`) and, when
it has on-demand plugins, a built-in `activate_plugin` tool whose schema enumerates
them with their descriptions. Activating one adds its tools from the next turn on.
Pure, no I/O and no Temporal import: the workflow holds one `PluginDisclosure`
(`steadyloop._workflows.tool_disclosure`) and carries `activated` across
continue-as-new. What the obvious version gets wrong, and where this one prevents it:

- **Activation as a side effect.** An activity, or a receipt, for what is a change of
  workflow state would cost a round trip and make a replayed turn depend on a ledger.
  `activate` changes state and returns the tool message; nothing is scheduled, and
  receipts and call ids are untouched.
- **Tools changing mid-batch.** A batch is answered against the tools its turn was
  offered; a tool of a plugin activated earlier in the same batch is answered "from the
  next turn on" (`unknown_tool`), never run from a schema the model was not shown.
- **A model that cannot find its way back.** A call to a tool of a plugin that is not
  active is answered as an unknown tool that names the plugin and the activation call,
  not with a bare list of what is offered.
- **A reordered tool list.** Active plugins' tools are appended after the core tools
  and the built-ins (`with_active_plugins`), so an activation only extends the list: a
  provider's prompt cache over the tools' prefix survives it.
- **An activation tool that says nothing.** Its description lists each plugin's
  one-line description and tool names, and its schema is sanitized for the run's
  provider like every other tool's (Gemini refuses `additionalProperties`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._run.models import RunPlugins
from steadyloop.tools._payloads import (
    DescribeToolsResult,
    PluginDescription,
    ToolDescription,
    ToolOutcome,
    unknown_tool_outcome,
)
from steadyloop.tools._schema_profiles import SchemaProfile, sanitize_tool_schema

__all__ = [
    "ACTIVATE_PLUGIN_TOOL",
    "PluginDisclosure",
    "activation_tool_description",
]

ACTIVATE_PLUGIN_TOOL = "activate_plugin"
# Never used to schedule anything (activation runs no activity); ToolDescription needs one.
_ACTIVATION_TIMEOUT_S = 1.0


def activation_tool_description(
    plugins: Sequence[PluginDescription], profile: SchemaProfile = "portable"
) -> ToolDescription:
    """The `activate_plugin` tool: one `plugin` from those listed, each described."""
    listing = "\n".join(
        f"- {p.name}: {p.description + ' ' if p.description else ''}(tools: {', '.join(p.tools)})"
        for p in plugins
    )
    parameters = {
        "type": "object",
        "properties": {
            "plugin": {
                "type": "string",
                "enum": [p.name for p in plugins],
                "description": "The plugin whose tools you need.",
            }
        },
        "required": ["plugin"],
        "additionalProperties": False,
    }
    return ToolDescription(
        name=ACTIVATE_PLUGIN_TOOL,
        description=(
            "Activate a plugin: a group of tools you do not have yet. Its tools can be "
            "called from your next turn on. Plugins:\n" + listing
        ),
        parameters=sanitize_tool_schema(parameters, profile),
        strict=profile == "openai_strict",
        effect="pure",
        timeout_s=_ACTIVATION_TIMEOUT_S,
    )


class PluginDisclosure:
    """The tools of one run: core, built-in, and those of its active plugins.

    Built from what the describe-tools activity returned for the run (every tool the
    run names or may activate, and its plugins); `activated` is the on-demand plugins
    activated before (carried across continue-as-new), in activation order.
    `payload_limit_bytes` is the worker's limit on one activity input, as described
    (None: nothing was described, so nothing is known of it).
    """

    def __init__(
        self,
        *,
        tools: Sequence[str],
        plugins: RunPlugins,
        described: DescribeToolsResult,
        activated: Sequence[str] = (),
        profile: SchemaProfile = "portable",
    ) -> None:
        self._described = {tool.name: tool for tool in described.tools}
        self.payload_limit_bytes: int | None = described.payload_limit_bytes
        self._core_tools = list(tools)
        self._plugins = {plugin.name: plugin for plugin in described.plugins}
        self._core_plugins = list(plugins.core)
        self._on_demand = list(plugins.on_demand)
        self._plugin_of = {
            name: plugin for plugin in self._on_demand for name in self._plugins[plugin].tools
        }
        stray = [name for name in activated if name not in self._on_demand]
        if stray:
            raise ValueError(
                f"activated plugin(s) {stray} are not among the run's on-demand plugins "
                f"{self._on_demand}"
            )
        self._activated = list(dict.fromkeys(activated))
        self._activation = (
            activation_tool_description([self._plugins[p] for p in self._on_demand], profile)
            if self._on_demand
            else None
        )

    @classmethod
    def none(cls) -> PluginDisclosure:
        """No tools at all (a run before its tools are described, or one without tools)."""
        described = DescribeToolsResult(tools=[], payload_limit_bytes=MAX_INLINE_PAYLOAD_BYTES)
        nothing = cls(tools=[], plugins=RunPlugins(), described=described)
        nothing.payload_limit_bytes = None
        return nothing

    # -- what is offered -----------------------------------------------------------

    @property
    def active_plugins(self) -> list[str]:
        """Plugins whose tools are offered: core first, then in activation order."""
        return [*self._core_plugins, *self._activated]

    @property
    def activatable_plugins(self) -> list[str]:
        """On-demand plugins not activated yet."""
        return [name for name in self._on_demand if name not in self._activated]

    @property
    def activated(self) -> list[str]:
        """On-demand plugins activated so far, in order: what continue-as-new carries."""
        return list(self._activated)

    def core(self) -> dict[str, ToolDescription]:
        """The core tools, then `activate_plugin` when the run has on-demand plugins."""
        tools = {name: self._described[name] for name in self._core_tools}
        for plugin in self._core_plugins:
            tools.update(self._members(plugin, skip=tools))
        if self._activation is not None:
            tools[ACTIVATE_PLUGIN_TOOL] = self._activation
        return tools

    def with_active_plugins(
        self, tools: Mapping[str, ToolDescription]
    ) -> dict[str, ToolDescription]:
        """`tools` followed by the tools of the activated plugins, in activation order."""
        offered = dict(tools)
        for plugin in self._activated:
            offered.update(self._members(plugin, skip=offered))
        return offered

    def allowed(self, offered: Mapping[str, ToolDescription]) -> list[str]:
        """The worker's tools among `offered` (not the built-ins): what the run-tool
        activity may run this turn."""
        return [name for name in offered if name in self._described]

    def reserved_names_taken(self, reserved: Sequence[str]) -> list[str]:
        """Names in `reserved` that one of the run's tools, core or plugin, already uses."""
        return [name for name in reserved if name in self._described]

    def _members(self, plugin: str, *, skip: Mapping[str, object]) -> dict[str, ToolDescription]:
        return {
            name: self._described[name] for name in self._plugins[plugin].tools if name not in skip
        }

    # -- answering calls -----------------------------------------------------------

    def handles(self, tool: str) -> bool:
        """Whether a call to `tool` is an activation this run answers itself."""
        return tool == ACTIVATE_PLUGIN_TOOL and self._activation is not None

    def activate(self, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Activate the plugin `arguments` name; the tool message says what changed."""
        plugin = arguments.get("plugin")
        if set(arguments) != {"plugin"} or not isinstance(plugin, str):
            return _invalid(
                f'expected {{"plugin": <one of {_quoted(self._on_demand)}>}}, '
                f"got keys {sorted(arguments)}",
                "InvalidActivation",
            )
        if plugin in self.active_plugins:
            return ToolOutcome(
                status="ok",
                content=(
                    f"Plugin {plugin!r} is already active; its tools: "
                    f"{', '.join(self._plugins[plugin].tools)}."
                ),
            )
        if plugin not in self._on_demand:
            return _invalid(
                f"unknown plugin {plugin!r}; plugins you can activate: "
                f"{_quoted(self.activatable_plugins)}",
                "UnknownPlugin",
            )
        self._activated.append(plugin)
        return ToolOutcome(
            status="ok",
            content=(
                f"Plugin {plugin!r} is active. From your next turn on you can call: "
                f"{', '.join(self._plugins[plugin].tools)}."
            ),
        )

    def unknown_tool(self, tool: str, offered: Mapping[str, ToolDescription]) -> ToolOutcome:
        """The answer to a call of a tool not offered this turn: for a tool of an
        on-demand plugin, how to get it; otherwise the usual unknown-tool message."""
        plugin = self._plugin_of.get(tool)
        if plugin is None:
            return unknown_tool_outcome(tool, sorted(offered))
        if plugin in self._activated:
            content = (
                f"Tool {tool!r} belongs to plugin {plugin!r}, activated in this turn; it "
                "can be called from the next turn on."
            )
        else:
            content = (
                f"Tool {tool!r} belongs to plugin {plugin!r}, which is not active. Call "
                f'{ACTIVATE_PLUGIN_TOOL} with {{"plugin": "{plugin}"}} first; its tools can '
                "be called from the turn after that."
            )
        return ToolOutcome(status="unknown_tool", content=content, error_type="InactiveTool")


def _invalid(detail: str, error_type: str) -> ToolOutcome:
    return ToolOutcome(
        status="invalid_arguments",
        content=f"Invalid tool arguments: {detail}",
        error_type=error_type,
    )


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(name) for name in names) or "none"
