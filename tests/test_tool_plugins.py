"""Tool plugins without a server: declaring them, describing them, and what a run offers."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._chat import ChatMessage
from steadyloop._cli.progress import result_lines, status_line
from steadyloop._cli.run_command import ServingWorker, run_tools
from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._run.models import RunInput, RunPlugins, RunProgress, RunResult, RunStats
from steadyloop._run.resume import resume_input
from steadyloop._worker.config import load_config, temporal_settings
from steadyloop.tools import PluginError, ToolDefinitionError, ToolPlugin, ToolRegistry, tool
from steadyloop.tools._disclosure import ACTIVATE_PLUGIN_TOOL, PluginDisclosure
from steadyloop.tools._payloads import DescribeToolsInput, DescribeToolsResult


@tool(effect="pure")
async def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool(effect="pure", plugin="files")
async def read_file(path: str) -> str:
    """Read a file."""
    return path


@tool(effect="opaque")
async def write_file(path: str, text: str) -> str:
    """Write a file."""
    return path


@tool(effect="pure")
async def search(query: str) -> list[str]:
    """Search."""
    return [query]


def registry() -> ToolRegistry:
    return ToolRegistry(
        [add, read_file],
        plugins=[
            ToolPlugin("files", "Read and write files.", [write_file]),
            ToolPlugin("web", "Search the web.", [search]),
        ],
    )


# -- declaring -------------------------------------------------------------------------


def test_membership_comes_from_the_decorator_or_the_plugin_and_keeps_registration_order() -> None:
    tools = registry()
    assert tools.names() == ["add", "read_file", "write_file", "search"]
    assert tools.unplugged() == ["add"]
    assert tools.plugin_names() == ["files", "web"]
    assert tools.plugin_tools("files") == ["read_file", "write_file"]
    assert [d.plugin for d in tools.describe()] == [None, "files", "files", "web"]
    assert tools.get("write_file") is write_file  # listed in a plugin, still the same tool


def test_a_plugin_known_only_from_its_tools_has_an_empty_description() -> None:
    (described,) = ToolRegistry([read_file]).describe_plugins(["files"])
    assert (described.description, described.tools) == ("", ["read_file"])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ToolRegistry(plugins=[ToolPlugin("web", "x", [read_file])]),
            "declared in plugin 'files' and listed in plugin 'web'",
        ),
        (
            lambda: ToolRegistry(plugins=[ToolPlugin("web", "x", [search]), ToolPlugin("web")]),
            "plugin 'web' is declared twice",
        ),
        (lambda: ToolRegistry(plugins=[ToolPlugin("empty", "x")]), r"\['empty'\] have no tools"),
        (lambda: ToolPlugin("has space"), "plugin name 'has space' is not valid"),
        (lambda: ToolPlugin("two", "first line\nsecond line"), "must be one line"),
    ],
)
def test_plugin_declarations_that_cannot_work_are_refused(build: Any, message: str) -> None:
    with pytest.raises(PluginError, match=message):
        build()


def test_a_tool_naming_an_invalid_plugin_is_refused_when_decorated() -> None:
    with pytest.raises(ToolDefinitionError, match="plugin 'a b' is not a valid plugin name"):

        @tool(plugin="a b")
        async def nothing() -> None:
            return None


async def test_describe_tools_adds_each_named_plugins_tools_and_reports_unknown_plugins() -> None:
    request = DescribeToolsInput(names=["add", "write_file"], plugins=["files", "nope", "files"])
    result = await ActivityEnvironment().run(ToolActivities(registry()).describe_tools, request)
    assert [(d.name, d.plugin) for d in result.tools] == [
        ("add", None),
        ("write_file", "files"),
        ("read_file", "files"),
    ]
    assert [(p.name, p.description, p.tools) for p in result.plugins] == [
        ("files", "Read and write files.", ["read_file", "write_file"])
    ]
    assert result.unknown_plugins == ["nope"]
    assert result.available_plugins == ["files", "web"]


# -- what a run offers -----------------------------------------------------------------


def disclosure(
    plugins: RunPlugins | None = None, activated: list[str] | None = None, **kw: Any
) -> PluginDisclosure:
    tools = registry()
    plugins = plugins or RunPlugins(on_demand=["files", "web"])
    described = DescribeToolsResult(
        tools=tools.describe(["add", *(n for p in plugins.named for n in tools.plugin_tools(p))]),
        plugins=tools.describe_plugins(plugins.named),
        payload_limit_bytes=MAX_INLINE_PAYLOAD_BYTES,
    )
    return PluginDisclosure(
        tools=["add"], plugins=plugins, described=described, activated=activated or [], **kw
    )


def test_a_run_starts_with_its_core_tools_and_the_activation_tool() -> None:
    plugins = disclosure()
    assert list(plugins.core()) == ["add", ACTIVATE_PLUGIN_TOOL]
    assert list(plugins.with_active_plugins(plugins.core())) == ["add", ACTIVATE_PLUGIN_TOOL]
    activation = plugins.core()[ACTIVATE_PLUGIN_TOOL]
    assert activation.parameters["properties"]["plugin"]["enum"] == ["files", "web"]
    assert activation.description.endswith(
        "- files: Read and write files. (tools: read_file, write_file)\n"
        "- web: Search the web. (tools: search)"
    )
    assert (plugins.active_plugins, plugins.activatable_plugins) == ([], ["files", "web"])


def test_activation_appends_the_plugins_tools_after_everything_offered_before() -> None:
    plugins = disclosure()
    assert plugins.activate({"plugin": "web"}).status == "ok"
    assert plugins.activate({"plugin": "files"}).content == (
        "Plugin 'files' is active. From your next turn on you can call: read_file, write_file."
    )
    builtins = {**plugins.core(), "delegate": plugins.core()["add"]}
    assert list(plugins.with_active_plugins(builtins)) == [
        "add",
        ACTIVATE_PLUGIN_TOOL,
        "delegate",
        "search",
        "read_file",
        "write_file",
    ]
    assert plugins.activated == ["web", "files"]
    assert plugins.allowed(plugins.with_active_plugins(builtins)) == [
        "add",
        "search",
        "read_file",
        "write_file",
    ]


@pytest.mark.parametrize(
    ("arguments", "error_type", "text"),
    [
        ({"plugin": "ftp"}, "UnknownPlugin", "unknown plugin 'ftp'; plugins you can activate"),
        ({}, "InvalidActivation", "got keys []"),
        ({"plugin": "web", "also": 1}, "InvalidActivation", "got keys ['also', 'plugin']"),
        ({"plugin": ["web"]}, "InvalidActivation", "<one of 'files', 'web'>"),
    ],
)
def test_an_activation_the_run_cannot_do_is_an_invalid_arguments_answer(
    arguments: dict[str, Any], error_type: str, text: str
) -> None:
    plugins = disclosure()
    outcome = plugins.activate(arguments)
    assert (outcome.status, outcome.error_type) == ("invalid_arguments", error_type)
    assert text in outcome.content
    assert plugins.activated == []


def test_activating_an_active_or_core_plugin_says_so_and_changes_nothing() -> None:
    plugins = disclosure(RunPlugins(core=["files"], on_demand=["web"]))
    assert list(plugins.core()) == ["add", "read_file", "write_file", ACTIVATE_PLUGIN_TOOL]
    assert plugins.activate({"plugin": "files"}).content == (
        "Plugin 'files' is already active; its tools: read_file, write_file."
    )
    assert plugins.activated == [] and plugins.active_plugins == ["files"]


def test_a_call_to_a_tool_not_offered_says_how_to_get_it() -> None:
    plugins = disclosure()
    offered = plugins.core()
    inactive = plugins.unknown_tool("search", offered)
    assert (inactive.status, inactive.error_type) == ("unknown_tool", "InactiveTool")
    assert 'Call activate_plugin with {"plugin": "web"} first' in inactive.content
    plugins.activate({"plugin": "web"})
    assert "activated in this turn" in plugins.unknown_tool("search", offered).content
    plain = plugins.unknown_tool("rm", offered)
    assert plain.content == "Unknown tool 'rm'. Available tools: activate_plugin, add."


def test_no_on_demand_plugins_no_activation_tool() -> None:
    plugins = disclosure(RunPlugins(core=["web"]))
    assert list(plugins.core()) == ["add", "search"]
    assert not plugins.handles(ACTIVATE_PLUGIN_TOOL)
    assert PluginDisclosure.none().core() == {}


def test_carried_activations_are_restored_and_a_stray_one_is_refused() -> None:
    plugins = disclosure(activated=["web"])
    assert list(plugins.with_active_plugins(plugins.core()))[-1] == "search"
    with pytest.raises(ValueError, match=r"\['ftp'\] are not among the run's on-demand"):
        disclosure(activated=["ftp"])


def test_the_activation_schema_is_sanitized_for_the_runs_provider() -> None:
    gemini = disclosure(profile="gemini").core()[ACTIVATE_PLUGIN_TOOL]
    assert "additionalProperties" not in gemini.parameters
    strict = disclosure(profile="openai_strict").core()[ACTIVATE_PLUGIN_TOOL]
    assert strict.strict and strict.parameters["additionalProperties"] is False


def test_reserved_names_taken_by_the_runs_tools_are_reported() -> None:
    assert disclosure().reserved_names_taken([ACTIVATE_PLUGIN_TOOL, "search", "add"]) == [
        "search",
        "add",
    ]


def test_a_plugin_is_named_once_per_run() -> None:
    with pytest.raises(ValueError, match="each plugin may be named once"):
        RunPlugins(core=["web"], on_demand=["web"])


# -- around the run --------------------------------------------------------------------


def test_a_resumed_run_keeps_its_activated_plugins_as_core() -> None:
    original = RunInput(
        endpoint="e", model="m", prompt="go", plugins=RunPlugins(on_demand=["files", "web"])
    )
    stopped = RunResult(
        final_answer=None,
        stop_reason="max_turns",
        transcript=[ChatMessage(role="user", content="go")],
        stats=RunStats(),
        active_plugins=["web"],
        activatable_plugins=["files"],
    )
    resumed = resume_input(original, stopped)
    assert resumed.plugins == RunPlugins(core=["web"], on_demand=["files"])
    plain = original.model_copy(update={"plugins": RunPlugins()})
    assert resume_input(plain, stopped).plugins == RunPlugins()


def test_progress_and_result_lines_name_the_plugins() -> None:
    progress = RunProgress(turn=2, tool_calls=1, tokens=10, phase="model", active_plugins=["web"])
    assert status_line(progress).endswith("10 tokens | plugins: web")
    result = RunResult(
        final_answer="ok",
        stop_reason="final_answer",
        transcript=[],
        stats=RunStats(),
        active_plugins=["web"],
        activatable_plugins=["files"],
    )
    assert result_lines(result)[-1] == "plugins active: web; not activated: files"
    plain = result.model_copy(update={"active_plugins": [], "activatable_plugins": []})
    assert not any(line.startswith("plugins") for line in result_lines(plain))


def test_steadyloop_run_offers_unplugged_tools_and_every_plugin_unless_told_otherwise() -> None:
    spec = f"{__name__}:registry"
    # With --tools the registry is loaded here and no worker is asked.
    temporal = temporal_settings(
        address=None, namespace=None, task_queue=None, config=load_config(None, {}), environ={}
    )
    serving = ServingWorker(temporal)

    def chosen(**flags: Any) -> tuple[list[str], list[str]]:
        defaults = {"no_tools": False, "tool": None, "plugin": None, "tools": spec}
        return asyncio.run(run_tools(argparse.Namespace(**{**defaults, **flags}), serving))

    assert chosen() == (["add"], ["files", "web"])
    assert chosen(tool=["add", "add"]) == (["add"], [])
    assert chosen(plugin=["web"]) == ([], ["web"])
    assert chosen(no_tools=True) == ([], [])
