"""Receipts in the loop: a repeated call replays its answer instead of repeating the effect.

Time-skipping test server, real HTTP to the scripted provider. Each test counts the side
effects the tools performed and asserts the exact number.
"""

from __future__ import annotations

import pytest
from loop_harness import assert_every_call_answered, run_input, running_loop, tool_messages

from steadyloop.run_models import RunProgress
from steadyloop.testing.chunks import ScriptedCall, finish_chunk, text_chunks, tool_call_chunks
from steadyloop.testing.scripted_server import ScriptedResponse, sse_response

pytestmark = pytest.mark.slow


def calls(*scripted: ScriptedCall) -> ScriptedResponse:
    return sse_response([*tool_call_chunks(list(scripted)), finish_chunk("tool_calls")])


def answer(text: str) -> ScriptedResponse:
    return sse_response([*text_chunks(text), finish_chunk("stop")])


async def test_a_call_asked_again_next_turn_replays_instead_of_repeating_the_effect() -> None:
    # The spelling differs: identity is the parsed arguments, not their text.
    script = [
        calls(ScriptedCall("note", '{"text": "ship it"}', id="n1")),
        calls(ScriptedCall("note", '{ "text":"ship\\u0020it" }', id="n2")),
        answer("noted"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        progress = await handle.query("progress", result_type=RunProgress)
        notes = list(loop.effects.notes)
    assert notes == ["ship it"]
    first, second = tool_messages(result.transcript)
    assert (first.tool_call_id, second.tool_call_id) == ("n1", "n2")
    assert first.content == second.content == "noted 'ship it'"
    assert result.stats.tool_replays == 1
    assert progress.receipts == 1 and progress.receipts_bytes > 0


async def test_the_same_call_twice_in_one_batch_runs_once_and_is_answered_twice() -> None:
    script = [
        calls(
            ScriptedCall("note", {"text": "once"}, id="a"),
            ScriptedCall("note", {"text": "other"}, id="b"),
            ScriptedCall("note", {"text": "once"}, id="c"),
        ),
        answer("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        history = await handle.fetch_history()
        notes = sorted(loop.effects.notes)
    assert notes == ["once", "other"]
    # The repeat waited for the first call of its batch, not for a lease to run out.
    assert not [e for e in history.events if e.HasField("timer_started_event_attributes")]
    assert_every_call_answered(result.transcript)
    by_id = {m.tool_call_id: m.content for m in tool_messages(result.transcript)}
    assert by_id == {"a": "noted 'once'", "b": "noted 'other'", "c": "noted 'once'"}


async def test_a_tool_error_the_model_saw_is_replayed_not_rerun() -> None:
    script = [
        calls(ScriptedCall("boom", {"reason": "disk full"}, id="b1")),
        calls(ScriptedCall("boom", {"reason": "disk full"}, id="b2")),
        answer("gave up"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        started = loop.effects.started["boom"]
    assert started == 1
    first, second = tool_messages(result.transcript)
    assert first.content == second.content and "disk full" in (first.content or "")


async def test_an_opaque_call_that_timed_out_is_ambiguous_and_never_rerun() -> None:
    # The first attempt times out with its outcome unknown (it finishes later, in the
    # background). Asked again, the call waits out the lease in workflow time, then is
    # refused as ambiguous instead of being run a second time.
    script = [
        calls(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s1")),
        calls(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s2")),
        answer("stopped"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        ambiguous = await handle.query("ambiguous_receipts", result_type=dict[str, str])
        started = loop.effects.started["slow_note"]
    assert started == 1
    assert_every_call_answered(result.transcript)
    first, second = tool_messages(result.transcript)
    assert "timed out" in (first.content or "")
    assert "Not run again" in (second.content or "")
    assert len(ambiguous) == 1 and "opaque" in next(iter(ambiguous.values()))


async def test_different_arguments_are_different_calls() -> None:
    script = [
        calls(ScriptedCall("note", {"text": "a"}, id="x")),
        calls(ScriptedCall("note", {"text": "b"}, id="y")),
        answer("two notes"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        notes = list(loop.effects.notes)
    assert notes == ["a", "b"]
    assert result.stats.tool_replays == 0
