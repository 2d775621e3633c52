"""The tools a worker can run, by name.

The worker is given a registry; the workflow never sees it, only the descriptions the
describe-tools activity returns. Failure modes refused here:

- Two tools under one name: the second would silently shadow the first and the model
  would call code its author did not mean. `register` raises `DuplicateToolError`.
- A plain function registered without `@tool`: it has no checked schema, effect or
  timeout. `register` raises `TypeError` and says to decorate it.
- A lookup of a missing name raises `UnknownToolError` listing what exists; the
  run-tool activity turns that case into an `unknown_tool` outcome, never an exception.
- A tool claimed by two plugins (its `@tool(plugin=...)` and a `ToolPlugin` listing it),
  a plugin declared twice, a plugin left with no tools: `PluginError` when the registry
  is built (`steadyloop.tools._plugins`). A tool listed twice is a `DuplicateToolError`.

Order is registration order: it is the order tools are offered to the model. The
tools of a plugin are in the order they were registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from steadyloop._chat import ToolSpec
from steadyloop.errors import SteadyloopError
from steadyloop.tools._definition import ToolDefinition
from steadyloop.tools._payloads import PluginDescription, ToolDescription
from steadyloop.tools._plugins import PluginError, ToolPlugin
from steadyloop.tools._schema_profiles import SchemaProfile

AnyTool = ToolDefinition[..., Any]


class DuplicateToolError(SteadyloopError, ValueError):
    """A second tool was registered under a name already taken."""


class UnknownToolError(SteadyloopError, LookupError):
    """No tool of that name is registered."""

    def __init__(self, name: str, available: list[str]) -> None:
        listing = ", ".join(available) if available else "none"
        super().__init__(f"unknown tool {name!r}; registered tools: {listing}")
        self.name = name
        self.available = available


class ToolRegistry:
    """Tool definitions by name, and the plugins that group them. Not thread-safe for
    registration; build it, then serve."""

    def __init__(
        self, tools: Iterable[AnyTool] = (), *, plugins: Iterable[ToolPlugin] = ()
    ) -> None:
        self._tools: dict[str, AnyTool] = {}
        self._plugin_of: dict[str, str] = {}
        self._plugins: dict[str, str] = {}  # name -> description, in declaration order
        declared: set[str] = set()
        for definition in tools:
            self.register(definition)
        for plugin in plugins:
            if plugin.name in declared:
                raise PluginError(f"plugin {plugin.name!r} is declared twice")
            declared.add(plugin.name)
            self._plugins[plugin.name] = plugin.description.strip()
            for definition in plugin.tools:
                self.register(definition, plugin=plugin.name)
        empty = [name for name in self._plugins if not self.plugin_tools(name)]
        if empty:
            raise PluginError(f"plugin(s) {empty} have no tools; a plugin needs at least one")

    def register(self, definition: AnyTool, *, plugin: str | None = None) -> AnyTool:
        """Add a tool (to `plugin`, or to the one it declares); returns it. Raises
        `DuplicateToolError` if the name is taken, `PluginError` if it names two plugins."""
        if not isinstance(definition, ToolDefinition):
            raise TypeError(
                f"{definition!r} is not a tool; decorate it with @steadyloop.tools.tool first "
                "(a Temporal activity: steadyloop.tools.activity_as_tool(fn))"
            )
        if definition.name in self._tools:
            raise DuplicateToolError(
                f"a tool named {definition.name!r} is already registered "
                f"({self._tools[definition.name].fn!r}); tool names must be unique"
            )
        if plugin is not None and definition.plugin not in (None, plugin):
            raise PluginError(
                f"tool {definition.name!r} is declared in plugin {definition.plugin!r} and "
                f"listed in plugin {plugin!r}; a tool belongs to one plugin"
            )
        member_of = plugin or definition.plugin
        self._tools[definition.name] = definition
        if member_of is not None:
            self._plugins.setdefault(member_of, "")
            self._plugin_of[definition.name] = member_of
        return definition

    def activity_functions(self) -> list[Any]:
        """The functions of the activity tools (`activity_as_tool`) that run on the run's
        own task queue, for the worker that serves the runs to register; one given a
        `task_queue` runs on that queue's worker, which registers it itself."""
        return [
            definition.fn
            for definition in self._tools.values()
            if definition.activity is not None and definition.activity.task_queue is None
        ]

    def get(self, name: str) -> AnyTool:
        """The tool called `name`; raises `UnknownToolError` listing the registered ones."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, self.names()) from None

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def unplugged(self) -> list[str]:
        """Names of the tools that belong to no plugin, in registration order."""
        return [name for name in self._tools if name not in self._plugin_of]

    def plugin_names(self) -> list[str]:
        """Plugin names, in the order they were declared (or first named by a tool)."""
        return list(self._plugins)

    def plugin_tools(self, plugin: str) -> list[str]:
        """Names of `plugin`'s tools, in registration order (empty for an unknown plugin)."""
        return [name for name, member_of in self._plugin_of.items() if member_of == plugin]

    def describe_plugins(self, plugins: Iterable[str]) -> list[PluginDescription]:
        """Descriptions of the named plugins, in that order; unknown names are skipped."""
        return [
            PluginDescription(
                name=name, description=self._plugins[name], tools=self.plugin_tools(name)
            )
            for name in dict.fromkeys(plugins)
            if name in self._plugins
        ]

    def describe(
        self, names: Iterable[str] | None = None, profile: SchemaProfile = "portable"
    ) -> list[ToolDescription]:
        """Descriptions of `names` in that order, repeats dropped (every tool when None),
        with schemas for `profile`'s provider.

        Raises `UnknownToolError` for the first missing name; the describe-tools
        activity partitions names first, so it reports missing ones as a value.
        """
        selected = self.names() if names is None else list(dict.fromkeys(names))
        return [self._describe(name, profile) for name in selected]

    def _describe(self, name: str, profile: SchemaProfile) -> ToolDescription:
        description = self.get(name).describe(profile)
        plugin = self._plugin_of.get(name)
        if plugin == description.plugin:
            return description
        return description.model_copy(update={"plugin": plugin})

    def specs(
        self, names: Iterable[str] | None = None, profile: SchemaProfile = "portable"
    ) -> list[ToolSpec]:
        """`describe(names, profile)` as the `ToolSpec`s a completion request carries."""
        return [description.to_spec() for description in self.describe(names, profile)]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)
