"""The tools a worker can run, by name.

The worker is given a registry; the workflow never sees it, only the descriptions the
describe-tools activity returns. Failure modes refused here:

- Two tools under one name: the second would silently shadow the first and the model
  would call code its author did not mean. `register` raises `DuplicateToolError`.
- A plain function registered without `@tool`: it has no checked schema, effect or
  timeout. `register` raises `TypeError` and says to decorate it.
- A lookup of a missing name raises `UnknownToolError` listing what exists; the
  run-tool activity turns that case into an `unknown_tool` outcome, never an exception.

Order is registration order: it is the order tools are offered to the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from steadyloop.chat import ToolSpec
from steadyloop.tools.definition import ToolDefinition
from steadyloop.tools.payloads import ToolDescription
from steadyloop.tools.schema_profiles import SchemaProfile

AnyTool = ToolDefinition[..., Any]


class DuplicateToolError(ValueError):
    """A second tool was registered under a name already taken."""


class UnknownToolError(LookupError):
    """No tool of that name is registered."""

    def __init__(self, name: str, available: list[str]) -> None:
        listing = ", ".join(available) if available else "none"
        super().__init__(f"unknown tool {name!r}; registered tools: {listing}")
        self.name = name
        self.available = available


class ToolRegistry:
    """Tool definitions by name. Not thread-safe for registration; build it, then serve."""

    def __init__(self, tools: Iterable[AnyTool] = ()) -> None:
        self._tools: dict[str, AnyTool] = {}
        for definition in tools:
            self.register(definition)

    def register(self, definition: AnyTool) -> AnyTool:
        """Add a tool; returns it. Raises `DuplicateToolError` if the name is taken."""
        if not isinstance(definition, ToolDefinition):
            raise TypeError(
                f"{definition!r} is not a tool; decorate it with @steadyloop.tools.tool first"
            )
        if definition.name in self._tools:
            raise DuplicateToolError(
                f"a tool named {definition.name!r} is already registered "
                f"({self._tools[definition.name].fn!r}); tool names must be unique"
            )
        self._tools[definition.name] = definition
        return definition

    def get(self, name: str) -> AnyTool:
        """The tool called `name`; raises `UnknownToolError` listing the registered ones."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, self.names()) from None

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def describe(
        self, names: Iterable[str] | None = None, profile: SchemaProfile = "portable"
    ) -> list[ToolDescription]:
        """Descriptions of `names` in that order, repeats dropped (every tool when None),
        with schemas for `profile`'s provider.

        Raises `UnknownToolError` for the first missing name; the describe-tools
        activity partitions names first, so it reports missing ones as a value.
        """
        selected = self.names() if names is None else list(dict.fromkeys(names))
        return [self.get(name).describe(profile) for name in selected]

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
