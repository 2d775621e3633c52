"""Progressive tool disclosure in ToolLoopWorkflow: core tools and `activate_plugin` first,
a plugin's tools from the turn after its activation, carried across continue-as-new."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loop_harness import ALL_TOOLS, assert_every_call_answered, run_input, running_loop
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from steadyloop._chat import ChatMessage
from steadyloop._run.models import RunInput, RunPlugins, RunProgress
from steadyloop.errors import UNKNOWN_PLUGINS
from steadyloop.testing import (
    ScriptedCall,
    text_response,
    tool_calls_response,
)
from steadyloop.tools._disclosure import ACTIVATE_PLUGIN_TOOL

pytestmark = pytest.mark.slow


def activate(plugin: Any, call_id: str) -> ScriptedCall:
    return ScriptedCall(ACTIVATE_PLUGIN_TOOL, {"plugin": plugin}, id=call_id)


def plugin_run(**limits: Any) -> RunInput:
    return run_input(**limits).model_copy(
        update={"tools": ["add"], "plugins": RunPlugins(on_demand=["files", "search"])}
    )


def offered(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in request["tools"]]


def answers(transcript: list[ChatMessage]) -> dict[str, str]:
    return {m.tool_call_id or "": m.content or "" for m in transcript if m.role == "tool"}


async def test_a_plugin_is_offered_from_the_turn_after_its_activation() -> None:
    script = [
        tool_calls_response(activate("files", "act")),
        tool_calls_response(ScriptedCall("write_scratch", {"path": "a", "text": "hi"}, id="w")),
        text_response("written"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(plugin_run())
        requests = [r.json for r in loop.server.requests]
        files = dict(loop.effects.files)
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    # First turn: the core tool and the activation tool, nothing of any plugin.
    assert offered(requests[0]) == ["add", ACTIVATE_PLUGIN_TOOL]
    activation = requests[0]["tools"][1]["function"]
    assert activation["parameters"]["properties"]["plugin"]["enum"] == ["files", "search"]
    assert (
        "- files: Read and write scratch files. (tools: read_scratch, write_scratch)"
        in (activation["description"])
    )
    assert "- search: Look things up in the notes. (tools: find_note)" in activation["description"]
    # From the next turn on, appended after the core and built-in tools.
    assert offered(requests[1]) == ["add", ACTIVATE_PLUGIN_TOOL, "read_scratch", "write_scratch"]
    assert offered(requests[2]) == offered(requests[1])
    said = answers(result.transcript)
    assert said["act"] == (
        "Plugin 'files' is active. From your next turn on you can call: "
        "read_scratch, write_scratch."
    )
    assert said["w"] == "wrote 2 characters to a"
    assert files == {"a": "hi"}
    assert result.active_plugins == ["files"] and result.activatable_plugins == ["search"]
    # Activation is workflow state: no receipt, so only the write holds one.
    assert result.stats.tool_calls == 2 and result.stats.tool_errors == 0


async def test_a_tool_of_an_inactive_plugin_is_unknown_and_names_the_activation_call() -> None:
    script = [
        tool_calls_response(
            ScriptedCall("write_scratch", {"path": "a", "text": "early"}, id="w1"),
            activate("files", "act"),
            ScriptedCall("write_scratch", {"path": "b", "text": "same turn"}, id="w2"),
            ScriptedCall("no_such_tool", {}, id="x"),
        ),
        text_response("gave up"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(plugin_run())
        files = dict(loop.effects.files)
    assert_every_call_answered(result.transcript)
    said = answers(result.transcript)
    assert said["w1"] == (
        "Tool 'write_scratch' belongs to plugin 'files', which is not active. Call "
        'activate_plugin with {"plugin": "files"} first; its tools can be called from the '
        "turn after that."
    )
    # Activated earlier in the batch, but the turn was not offered its schema.
    assert said["w2"] == (
        "Tool 'write_scratch' belongs to plugin 'files', activated in this turn; it can be "
        "called from the next turn on."
    )
    assert said["x"] == "Unknown tool 'no_such_tool'. Available tools: activate_plugin, add."
    assert files == {}  # neither write ran
    assert result.stats.tool_errors == 3


async def test_activating_twice_or_an_unknown_plugin_is_answered_and_changes_nothing() -> None:
    script = [
        tool_calls_response(
            activate("search", "s1"), activate("search", "s2"), activate("web", "u")
        ),
        tool_calls_response(activate("search", "s3"), activate(7, "bad")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(plugin_run())
        requests = [r.json for r in loop.server.requests]
    assert_every_call_answered(result.transcript)
    said = answers(result.transcript)
    assert said["s1"].startswith("Plugin 'search' is active.")
    assert said["s2"] == "Plugin 'search' is already active; its tools: find_note."
    assert said["s3"] == said["s2"]
    assert said["u"] == (
        "Invalid tool arguments: unknown plugin 'web'; plugins you can activate: 'files'"
    )
    assert said["bad"].startswith("Invalid tool arguments: expected {\"plugin\": <one of 'files'")
    assert (
        offered(requests[1]) == offered(requests[2]) == ["add", ACTIVATE_PLUGIN_TOOL, "find_note"]
    )
    assert result.active_plugins == ["search"] and result.activatable_plugins == ["files"]


async def test_activation_is_carried_across_continue_as_new_and_listed_in_progress() -> None:
    script = [
        tool_calls_response(activate("search", "s")),
        tool_calls_response(activate("files", "f")),
        # The third turn streams slowly, so the run is queried while it waits for it (a
        # window wide enough for a query on a loaded machine: 1.5 s was missed).
        text_response("done", pause_s=5),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(plugin_run(continue_as_new_after_turns=1))
        progress = await _progress_at_turn(handle, 3)
        result = await handle.result()
        history = await handle.fetch_history()  # the last run of the chain
        requests = [r.json for r in loop.server.requests]
    assert progress.active_plugins == ["search", "files"]
    assert progress.activatable_plugins == []
    # Each turn ran in its own run; the last one started from carried state.
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id
    assert offered(requests[1]) == ["add", ACTIVATE_PLUGIN_TOOL, "find_note"]
    assert offered(requests[2]) == [
        "add",
        ACTIVATE_PLUGIN_TOOL,
        "find_note",
        "read_scratch",
        "write_scratch",
    ]
    assert result.active_plugins == ["search", "files"]


async def test_core_plugins_are_offered_from_the_start_without_an_activation_tool() -> None:
    run = run_input().model_copy(update={"tools": [], "plugins": RunPlugins(core=["search"])})
    async with running_loop([text_response("ok")]) as loop:
        result = await loop.run(run)
        first = loop.server.requests[0].json
    assert offered(first) == ["find_note"]
    assert result.active_plugins == ["search"] and result.activatable_plugins == []


async def test_a_run_without_plugins_offers_exactly_its_tools() -> None:
    async with running_loop([text_response("ok")]) as loop:
        await loop.run(run_input())
        first = loop.server.requests[0].json
    assert offered(first) == ALL_TOOLS


async def test_a_plugin_the_worker_lacks_fails_the_run_before_any_model_call() -> None:
    run = run_input().model_copy(update={"plugins": RunPlugins(on_demand=["files", "nope"])})
    async with running_loop([text_response("ok")]) as loop:
        with pytest.raises(WorkflowFailureError) as caught:
            await loop.run(run)
        assert loop.server.requests == []
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == UNKNOWN_PLUGINS
    assert "['nope']" in cause.message and "available: ['files', 'search']" in cause.message


async def _progress_at_turn(handle: Any, turn: int, within_s: float = 30) -> RunProgress:
    """The run's progress once it is in the model phase of `turn` (polled, in real time:
    the provider's pause is wall-clock)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while loop.time() < deadline:
        try:
            progress: RunProgress = await handle.query("progress", result_type=RunProgress)
        except RPCError:  # a query landing while the run hands over to its next execution
            await asyncio.sleep(0.05)
            continue
        if progress.turn >= turn and progress.phase == "model":
            return progress
        await asyncio.sleep(0.05)
    raise AssertionError(f"the run never reached turn {turn}")
