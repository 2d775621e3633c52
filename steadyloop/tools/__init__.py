"""Tools a user declares, the registry a worker serves, and the payloads the workflow sees.

    from steadyloop.tools import tool, ToolRegistry

    @tool(effect="pure")
    async def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    registry = ToolRegistry([add])

Your own Temporal activities become tools with `activity_as_tool(charge_card)`: the run
schedules `charge_card` itself, under the receipt path (`steadyloop.tools._activity_tools`).

Tools may be grouped into plugins a run discloses on demand (`steadyloop.tools._plugins`);
which tools a run offers each turn, and `activate_plugin`, are `steadyloop.tools._disclosure`.

The worker runs tools through `steadyloop._activities.tool_execution.ToolActivities`;
the workflow imports only the payloads (`steadyloop.tools._payloads`) and never user
code. Example tools live in `steadyloop.tools.examples` (not imported here: they read
and write the disk when called).
"""

from steadyloop.tools._activity_tools import DEFAULT_ACTIVITY_TIMEOUT, activity_as_tool
from steadyloop.tools._content import (
    MAX_TOOL_CONTENT_BYTES,
    TRUNCATION_MARKER,
)
from steadyloop.tools._context import (
    ProgressTooLarge,
    ToolProgress,
    current_invocation,
    current_progress,
)
from steadyloop.tools._definition import (
    DEFAULT_TOOL_TIMEOUT,
    ToolDefinition,
    ToolDefinitionError,
    ToolWithoutDescription,
    tool,
)
from steadyloop.tools._payloads import (
    EFFECTS,
    Effect,
    ToolInvocation,
)
from steadyloop.tools._plugins import PluginError, ToolPlugin
from steadyloop.tools._registry import DuplicateToolError, ToolRegistry, UnknownToolError
from steadyloop.tools._schema import SchemaError, arguments_schema
from steadyloop.tools._schema_profiles import (
    SCHEMA_PROFILES,
    SchemaProfile,
    sanitize_tool_schema,
)

__all__ = [
    "DEFAULT_ACTIVITY_TIMEOUT",
    "DEFAULT_TOOL_TIMEOUT",
    "EFFECTS",
    "MAX_TOOL_CONTENT_BYTES",
    "SCHEMA_PROFILES",
    "TRUNCATION_MARKER",
    "DuplicateToolError",
    "Effect",
    "PluginError",
    "ProgressTooLarge",
    "SchemaError",
    "SchemaProfile",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolInvocation",
    "ToolPlugin",
    "ToolProgress",
    "ToolRegistry",
    "ToolWithoutDescription",
    "UnknownToolError",
    "activity_as_tool",
    "arguments_schema",
    "current_invocation",
    "current_progress",
    "sanitize_tool_schema",
    "tool",
]
