"""ToolLoopWorkflow end to end: time-skipping test server, real HTTP to a scripted provider."""

from __future__ import annotations

import asyncio
import json

import pytest
from loop_harness import (
    ENDPOINT,
    MODEL,
    assert_every_call_answered,
    run_input,
    running_loop,
    tool_messages,
)
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from steadyloop._chat import ChatMessage
from steadyloop._cli.progress import result_lines
from steadyloop._run.models import RunInput, RunProgress
from steadyloop.errors import UNKNOWN_TOOLS
from steadyloop.testing import (
    ScriptedCall,
    error_response,
    finish_chunk,
    sse_response,
    text_response,
    tool_call_chunks,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


async def test_multi_turn_run_with_parallel_ollama_shaped_calls() -> None:
    script = [
        tool_calls_response(
            ScriptedCall("add", {"a": 1, "b": 2}, id="c1"),
            ScriptedCall("note", {"text": "hello"}, id="c2"),
            ScriptedCall("add", {"a": 3, "b": 4}, id="c3"),
            index="zero",
            fragment_size=4,
        ),
        tool_calls_response(ScriptedCall("current_time", ""), index="zero"),
        text_response("All done: 3 and 7.", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        requests = [r.json for r in loop.server.requests]
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "All done: 3 and 7."
    assert_every_call_answered(result.transcript)
    answers = [m.content for m in tool_messages(result.transcript)]
    assert answers == ["3.0", "noted 'hello'", "7.0", "2026-01-01T00:00:00Z"]
    assert loop.effects.notes == ["hello"]
    assert result.stats.turns == 3 and result.stats.model_attempts == 3
    # Each request carried the whole transcript so far, with every call answered.
    assert len(requests) == 3
    second = loop.server.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert [t["function"]["name"] for t in requests[0]["tools"]] == [
        "add",
        "current_time",
        "note",
        "boom",
        "slow",
        "hold",
        "slow_note",
    ]


@pytest.mark.parametrize("pool", [1, 2])
async def test_batch_runs_concurrently_up_to_the_pool_and_answers_in_order(pool: int) -> None:
    labels = ["a", "b", "c", "d", "e"]
    script = [
        tool_calls_response(
            *(ScriptedCall("hold", {"label": x}, id=f"h_{x}") for x in labels), parallel=True
        ),
        text_response("held", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input(tool_concurrency=pool))
        most_at_once = loop.effects.most_at_once
    assert most_at_once == pool
    assert [m.content for m in tool_messages(result.transcript)] == labels
    assert [m.tool_call_id for m in tool_messages(result.transcript)] == [f"h_{x}" for x in labels]


async def test_zero_argument_call_sent_as_empty_string_runs() -> None:
    script = [
        tool_calls_response(ScriptedCall("current_time", "")),
        text_response("It is 2026.", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "final_answer"
    assert tool_messages(result.transcript)[0].content == "2026-01-01T00:00:00Z"


async def test_unparseable_arguments_are_answered_and_corrected_next_turn() -> None:
    script = [
        # Valid JSON but not an object: not a completion defect, a model mistake.
        tool_calls_response(ScriptedCall("add", "[1, 2]", id="bad")),
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="good")),
        text_response("3", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        second_request = loop.server.requests[1].messages
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    first, second = tool_messages(result.transcript)
    assert first.tool_call_id == "bad"
    assert first.content is not None and "must be a JSON object" in first.content
    assert second.content == "3.0"
    # The correction was put in front of the model.
    assert "must be a JSON object" in str(second_request[-1]["content"])


async def test_schema_refusal_unknown_tool_raising_tool_and_timeout_each_get_one_answer() -> None:
    script = [
        tool_calls_response(
            ScriptedCall("add", {"a": "not a number", "b": 1}, id="c_schema"),
            ScriptedCall("no_such_tool", {}, id="c_unknown"),
            ScriptedCall("boom", {"reason": "disk full"}, id="c_boom"),
            ScriptedCall("slow", "", id="c_slow"),
        ),
        text_response("I could not do it.", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    by_id = {m.tool_call_id: m.content or "" for m in tool_messages(result.transcript)}
    assert "a" in by_id["c_schema"] and "number" in by_id["c_schema"].lower()
    assert "Unknown tool 'no_such_tool'" in by_id["c_unknown"] and "add" in by_id["c_unknown"]
    assert "disk full" in by_id["c_boom"]
    assert "timed out" in by_id["c_slow"]
    assert result.stats.tool_errors == 4


async def test_defective_completion_is_retried_fresh_and_never_appended() -> None:
    truncated = sse_response(
        [*tool_call_chunks([ScriptedCall("add", '{"a": 1, "b"')]), finish_chunk("length")]
    )
    script = [
        truncated,
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 1}, id="ok")),
        text_response("2", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        second_request = loop.server.requests[1].messages
    assert result.stop_reason == "final_answer"
    assert result.stats.defect_retries == {"truncated_tool_call": 1}
    assert_every_call_answered(result.transcript)
    # The retry sent the same transcript: the defective turn was never appended.
    assert [m["role"] for m in second_request] == ["system", "user"]


async def test_defect_budget_spent_stops_with_valid_transcript() -> None:
    empty = text_response("")
    async with running_loop([empty, empty, empty]) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "failed"
    assert "empty_completion" in result.detail
    assert [m.role for m in result.transcript] == ["system", "user"]


async def test_max_turns_stops_after_answering_the_last_batch() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(3)
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input(max_turns=2))
    assert result.stop_reason == "max_turns"
    assert result.final_answer is None
    assert_every_call_answered(result.transcript)
    assert len(tool_messages(result.transcript)) == 2


async def test_token_budget_stops_at_the_turn_boundary() -> None:
    with_usage = tool_calls_response(
        ScriptedCall("add", {"a": 1, "b": 1}, id="c1"), usage=(900, 200)
    )
    async with running_loop([with_usage, text_response("never sent", usage=(10, 5))]) as loop:
        result = await loop.run(run_input(token_budget=1000))
    assert result.stop_reason == "token_budget"
    assert result.stats.total_tokens == 1100
    assert_every_call_answered(result.transcript)


async def test_deadline_reached_by_skipping_workflow_time() -> None:
    # The provider is overloaded and asks to be retried in two hours. The run's deadline
    # is one hour away, so the run must stop at the deadline instead of waiting: the
    # test server skips workflow time while the retry backoff is pending.
    overloaded = error_response(503, "overloaded", type="server_error", retry_after=7200)
    async with running_loop([overloaded, text_response("too late", usage=(10, 5))]) as loop:
        handle = await loop.start(run_input(deadline_s=3600))
        result = await handle.result()
        assert len(loop.server.requests) == 1
    assert result.stop_reason == "deadline"
    assert [m.role for m in result.transcript] == ["system", "user"]


async def test_interrupt_answers_pending_calls_without_running_them() -> None:
    first = tool_calls_response(
        ScriptedCall("note", {"text": "must not run"}, id="n1"), pause_s=1.0
    )
    async with running_loop([first]) as loop:
        handle = await loop.start(run_input())
        await asyncio.sleep(0.3)
        await handle.signal("interrupt", "user pressed stop")
        result = await handle.result()
        progress = await handle.query("progress", result_type=RunProgress)
    assert result.stop_reason == "interrupted"
    assert "user pressed stop" in result.detail
    assert loop.effects.notes == []
    assert_every_call_answered(result.transcript)
    assert progress.stop_reason == "interrupted"


async def test_model_failure_stops_with_failed_and_names_the_cause() -> None:
    bad_request = error_response(400, "model 'x' does not exist", code="model_not_found")
    async with running_loop([bad_request]) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "failed"
    assert "does not exist" in result.detail
    assert len(loop.server.requests) == 1  # a 400 is not retried


async def test_progress_and_transcript_queries() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="c1")),
        # The second turn waits, so the run is queried in it: 5 s, wide enough for
        # queries on a loaded machine, polled for at most 30 s of wall time.
        text_response("done", pause_s=5),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        progress = None
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            progress = await handle.query("progress", result_type=RunProgress)
            if progress.turn == 2 and progress.phase == "model":
                break
            await asyncio.sleep(0.05)
        transcript = await handle.query("transcript", result_type=list[ChatMessage])
        await handle.result()
    assert progress is not None and progress.turn == 2 and progress.tool_calls == 1
    assert progress.phase == "model"
    assert [m.role for m in transcript] == ["system", "user", "assistant", "tool"]


async def test_unknown_configured_tool_fails_the_run_with_a_clear_error() -> None:
    async with running_loop([]) as loop:
        run = RunInput(endpoint=ENDPOINT, model=MODEL, prompt="hi", tools=["add", "missing"])
        handle = await loop.start(run)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == UNKNOWN_TOOLS and "missing" in cause.message


def test_run_input_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="prompt or messages"):
        RunInput(endpoint="e", model="m")
    with pytest.raises(ValueError):
        RunInput(endpoint="e", model="m", prompt="p", limits={"max_turns": 0})
    with pytest.raises(ValueError, match="unique"):
        RunInput(endpoint="e", model="m", prompt="p", tools=["a", "a"])
    dumped = RunInput(endpoint="e", model="m", prompt="p").model_dump_json()
    assert json.loads(dumped)["tools"] == []


async def test_wall_time_is_workflow_time_from_the_start_across_continue_as_new() -> None:
    """A 503 asking for 30 s (a workflow timer the time-skipping server skips), then a turn
    in each of two executions: the wall time counts from the first execution's start."""
    script = [
        error_response(503, "busy", type="server_error", retry_after=30),
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2})),
        text_response("3", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input(continue_as_new_after_turns=1))
    assert result.stop_reason == "final_answer"
    assert result.stats.wall_time_s >= 30
    assert "wall time:" in "\n".join(result_lines(result))
