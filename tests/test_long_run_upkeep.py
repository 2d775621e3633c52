"""The loop's upkeep for long runs, end to end: the transcript is healed before every
request, compacted at turn boundaries, tool schemas follow the provider profile, and
cost and retries are counted."""

from __future__ import annotations

import re

import pytest
from loop_harness import ENDPOINT, assert_every_call_answered, run_input, running_loop, summarize
from temporalio import activity
from temporalio.exceptions import ApplicationError

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.compaction import (
    ELIDED_MARK,
    CompactionPolicy,
    CompactionReply,
    CompactionRequest,
)
from steadyloop._history.healing import NO_RESULT
from steadyloop._routing.pricing import Price
from steadyloop._run.models import RunLimits
from steadyloop.testing import (
    ScriptedCall,
    finish_chunk,
    sse_response,
    text_response,
    tool_call_chunks,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


async def test_a_broken_conversation_is_healed_before_the_first_request() -> None:
    history = [
        ChatMessage(role="user", content="add things"),
        ChatMessage(
            role="assistant",
            tool_calls=[
                ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'),
                ToolCall(id="c2", name="add", arguments='{"a": 3, "b": 4}'),
            ],
        ),
        ChatMessage(role="tool", content="3.0", tool_call_id="c1"),
        ChatMessage(role="tool", content="stray", tool_call_id="nobody"),
        ChatMessage(role="system", content="Be brief."),
    ]
    run = run_input("what did you get?").model_copy(update={"messages": history})
    async with running_loop([text_response("3 and unknown", usage=(10, 5))]) as loop:
        result = await loop.run(run)
        first = loop.server.requests[0].messages
    assert [(m["role"], m.get("tool_call_id")) for m in first] == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
    ]
    # The run's own system prompt is not added when the conversation has one; that one
    # is moved to the start.
    assert first[0]["content"] == "Be brief."
    assert first[4]["content"] == NO_RESULT
    assert result.stats.healed == {
        "orphan_answer_dropped": 1,
        "missing_answer_added": 1,
        "system_merged": 1,
    }
    assert_every_call_answered(result.transcript)


async def test_the_mistral_profile_sends_nine_character_ids_on_both_sides() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="call_abc_123")),
        text_response("3", usage=(10, 5)),
    ]
    run = run_input().model_copy(update={"provider_profile": "mistral"})
    async with running_loop(script) as loop:
        result = await loop.run(run)
        second = loop.server.requests[1].messages
    call_ids = [c["id"] for m in second for c in m.get("tool_calls") or []]
    answer_ids = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert len(call_ids) == 1 and re.fullmatch(r"[A-Za-z0-9]{9}", call_ids[0])
    assert answer_ids == call_ids
    assert result.stats.healed == {"call_id_format": 1}


async def test_old_tool_results_are_elided_at_a_turn_boundary_and_stay_answered() -> None:
    texts = [f"{i}" + "y" * 600 for i in range(3)]
    script = [
        tool_calls_response(ScriptedCall("note", {"text": t}, id=f"n{i}"))
        for i, t in enumerate(texts)
    ]
    script.append(text_response("done", usage=(10, 5)))
    policy = CompactionPolicy(max_chars=2500, keep_recent_turns=1, min_result_chars=100)
    run = run_input().model_copy(update={"limits": RunLimits(compaction=policy)})
    async with running_loop(script) as loop:
        result = await loop.run(run)
        last = loop.server.requests[-1].messages
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    answers = [m["content"] for m in last if m["role"] == "tool"]
    assert [str(a).startswith(ELIDED_MARK) for a in answers] == [True, True, False]
    assert result.stats.compactions == {"elided": 1}
    assert result.stats.elided_results == 2
    assert loop.effects.notes == texts  # compaction never re-runs or skips a tool


@activity.defn(name="test.broken_summarizer")
async def broken_summarizer(request: CompactionRequest) -> CompactionReply:
    raise ApplicationError("summarizer is down", non_retryable=True)


@pytest.mark.parametrize(
    ("name", "kind"), [("test.summarize", "custom"), ("test.broken_summarizer", "custom_failed")]
)
async def test_a_compaction_activity_runs_instead_of_elision_and_a_failing_one_falls_back(
    name: str, kind: str
) -> None:
    texts = [f"{i}" + "z" * 600 for i in range(3)]
    script = [
        tool_calls_response(ScriptedCall("note", {"text": t}, id=f"n{i}"))
        for i, t in enumerate(texts)
    ]
    script.append(text_response("done", usage=(10, 5)))
    policy = CompactionPolicy(
        max_chars=2500, keep_recent_turns=1, min_result_chars=100, activity=name
    )
    run = run_input().model_copy(update={"limits": RunLimits(compaction=policy)})
    async with running_loop(script, [summarize, broken_summarizer]) as loop:
        result = await loop.run(run)
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    assert result.stats.compactions == {kind: 1}
    if kind == "custom":
        assert any("(summary of" in (m.content or "") for m in result.transcript)
        assert result.stats.elided_results == 0
        assert result.stats.healed.get("orphan_answer_dropped") == 1  # the careless part
    else:
        assert result.stats.elided_results == 2


async def test_the_openai_strict_profile_offers_strict_schemas() -> None:
    run = run_input().model_copy(update={"provider_profile": "openai_strict"})
    async with running_loop([text_response("hi", usage=(10, 5))]) as loop:
        await loop.run(run)
        tools = loop.server.requests[0].json["tools"]
    add = next(t["function"] for t in tools if t["function"]["name"] == "add")
    assert add["strict"] is True
    assert add["parameters"]["additionalProperties"] is False
    assert add["parameters"]["required"] == ["a", "b"]


async def test_cost_is_summed_from_reported_usage_and_unreported_calls_are_counted() -> None:
    truncated = sse_response(
        [*tool_call_chunks([ScriptedCall("add", '{"a": 1, "b"')]), finish_chunk("length")]
    )
    script = [
        truncated,
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 1}, id="ok")),
        text_response("2", usage=(10, 5)),
    ]
    prices = {ENDPOINT: Price(input=1000.0, output=2000.0)}
    run = run_input().model_copy(update={"prices": prices})
    async with running_loop(script) as loop:
        result = await loop.run(run)
        handle_progress_cost = result.stats.cost_usd
    # Only the final answer reported usage: 10 prompt and 5 completion tokens.
    assert handle_progress_cost == pytest.approx((10 * 1000 + 5 * 2000) / 1_000_000)
    assert (result.stats.priced_calls, result.stats.unpriced_calls) == (1, 2)
    assert result.stats.retries == {"truncated_tool_call": 1}
