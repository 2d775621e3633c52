"""Tools a user declares, the registry a worker serves, and the payloads the workflow sees.

    from steadyloop.tools import tool, ToolRegistry

    @tool(effect="pure")
    async def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    registry = ToolRegistry([add])

Tools may be grouped into plugins a run discloses on demand (`steadyloop.tools._plugins`);
which tools a run offers each turn, and `activate_plugin`, are `steadyloop.tools._disclosure`.

The worker runs tools through `steadyloop._activities.tool_execution.ToolActivities`;
the workflow imports only the payloads (`steadyloop.tools._payloads`) and never user
code. Example tools live in `steadyloop.tools.examples` (not imported here: they read
and write the disk when called).
"""

from steadyloop.tools._content import (
    MAX_TOOL_CONTENT_BYTES,
    TRUNCATION_MARKER,
    cap_content,
    encode_result,
)
from steadyloop.tools._context import (
    ProgressTooLarge,
    ToolProgress,
    current_invocation,
    current_progress,
)
from steadyloop.tools._definition import (
    DEFAULT_TOOL_TIMEOUT,
    TOOL_NAME_PATTERN,
    ToolDefinition,
    ToolDefinitionError,
    tool,
)
from steadyloop.tools._payloads import (
    DESCRIBE_TOOLS_ACTIVITY,
    EFFECTS,
    RUN_TOOL_ACTIVITY,
    DescribeToolsInput,
    DescribeToolsResult,
    Effect,
    PluginDescription,
    ToolDescription,
    ToolInvocation,
    ToolOutcome,
    ToolOutcomeStatus,
    unknown_tool_outcome,
)
from steadyloop.tools._plugins import PluginError, ToolPlugin
from steadyloop.tools._registry import DuplicateToolError, ToolRegistry, UnknownToolError
from steadyloop.tools._schema import SchemaError, arguments_schema, sanitize_schema
from steadyloop.tools._schema_profiles import (
    SCHEMA_PROFILES,
    SchemaProfile,
    drop_absent_nulls,
    sanitize_tool_schema,
)

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "DESCRIBE_TOOLS_ACTIVITY",
    "EFFECTS",
    "MAX_TOOL_CONTENT_BYTES",
    "RUN_TOOL_ACTIVITY",
    "SCHEMA_PROFILES",
    "TOOL_NAME_PATTERN",
    "TRUNCATION_MARKER",
    "DescribeToolsInput",
    "DescribeToolsResult",
    "DuplicateToolError",
    "Effect",
    "PluginDescription",
    "PluginError",
    "ProgressTooLarge",
    "SchemaError",
    "SchemaProfile",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolDescription",
    "ToolInvocation",
    "ToolOutcome",
    "ToolOutcomeStatus",
    "ToolPlugin",
    "ToolProgress",
    "ToolRegistry",
    "UnknownToolError",
    "arguments_schema",
    "cap_content",
    "current_invocation",
    "current_progress",
    "drop_absent_nulls",
    "encode_result",
    "sanitize_schema",
    "sanitize_tool_schema",
    "tool",
    "unknown_tool_outcome",
]
