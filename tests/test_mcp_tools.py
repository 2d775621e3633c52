"""An MCP tool as the `ToolDefinition` a worker serves (`steadyloop._mcp.tools`), without a
server: what the workflow is told, what the activity validates, what is refused."""

from __future__ import annotations

from typing import Any

from steadyloop._mcp.catalog import ListedTool
from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.connection import McpConnection
from steadyloop._mcp.tools import McpArguments, mcp_tool_definition, schema_problem

SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "args",
    "properties": {
        "query": {"type": "string", "description": "SQL"},
        "limit": {"type": "integer", "default": 10},
    },
    "required": ["query"],
}


def definition(**options: Any) -> Any:
    config = McpServerConfig.model_validate({"name": "db", "command": "srv", **options})
    listed = ListedTool("write_query", "Run a write.", SCHEMA, read_only=None, idempotent=None)
    return mcp_tool_definition(
        McpConnection(config, {}), config, listed, served_name="db__write_query", effect="opaque"
    )


def test_the_workflow_sees_the_served_name_effect_timeout_approval_and_sanitized_schema() -> None:
    tool = definition(timeout_s=12, approval=["write_query"])
    portable = tool.describe("portable")
    assert (portable.name, portable.effect, portable.timeout_s, portable.approval) == (
        "db__write_query",
        "opaque",
        12.0,
        True,
    )
    assert portable.heartbeat_timeout_s is None
    assert portable.description == "[db MCP server: write_query] Run a write."
    assert "title" not in portable.parameters
    strict = tool.describe("openai_strict")
    assert strict.strict and strict.parameters["additionalProperties"] is False
    assert sorted(strict.parameters["required"]) == ["limit", "query"]
    assert "additionalProperties" not in tool.describe("gemini").parameters


def test_arguments_reach_the_server_as_sent_except_a_strict_models_nulls_for_absent_ones() -> None:
    tool = definition()
    validated = tool.validate({"query": "INSERT 1", "limit": None, "extra": [1]})
    assert isinstance(validated, McpArguments)
    # `limit: null` is what a model answering the strict schema sends for "not given".
    assert validated.root == {"query": "INSERT 1", "extra": [1]}


def test_a_schema_no_provider_profile_can_take_is_refused_before_it_is_served() -> None:
    cycle = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    assert schema_problem(SCHEMA) is None
    assert schema_problem({"type": "object"}) is None
    problem = schema_problem(cycle)
    assert problem is not None and "cannot be offered" in problem
