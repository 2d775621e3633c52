"""Call ids a server reuses across the responses of one run.

Bedrock's GPT models number the calls of every response from `call_0`. Kept as sent,
the transcript held two tool messages answering `call_0`, one per turn: a late result,
an approval or a reader pairing answers by id then reaches the wrong call, and healing
had to rename them again on every request. The workflow qualifies a reused wire id
where every wire's turn passes (`steadyloop._history.call_ids`), behind a patch.
"""

from __future__ import annotations

import pytest
from loop_harness import assert_every_call_answered, run_input, running_loop, tool_messages

from steadyloop.client import RunHandle
from steadyloop.testing import (
    ScriptedCall,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


async def test_a_wire_id_reused_by_a_later_response_is_qualified_in_the_transcript() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="call_0")),
        tool_calls_response(
            ScriptedCall("add", {"a": 3, "b": 4}, id="call_0"),
            ScriptedCall("add", {"a": 5, "b": 6}, id="call_1"),
        ),
        tool_calls_response(ScriptedCall("add", {"a": 7, "b": 8}, id="call_0")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        bodies = [request.json for request in loop.server.requests]
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    answered = [m.tool_call_id for m in tool_messages(result.transcript)]
    assert answered == ["call_0", "call_0_t2", "call_1", "call_0_t3"], answered
    assert [m.content for m in tool_messages(result.transcript)] == ["3.0", "7.0", "11.0", "15.0"]
    # What the provider is sent is the transcript: the qualified ids, paired.
    last = bodies[-1]["messages"]
    sent_calls = [
        c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    sent_answers = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert sent_calls == sent_answers == answered


async def test_a_run_that_stops_after_the_batch_keeps_no_reused_id() -> None:
    """Healing before the next request renamed a reused id, but a run that stops after
    the batch (its turn budget spent) sent no next request: its transcript kept both."""
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="call_0")),
        tool_calls_response(ScriptedCall("add", {"a": 3, "b": 4}, id="call_0")),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input(max_turns=2))
    assert result.stop_reason == "max_turns"
    assert_every_call_answered(result.transcript)
    assert [m.tool_call_id for m in tool_messages(result.transcript)] == ["call_0", "call_0_t2"]


async def test_the_rename_is_on_the_timeline() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="call_0")),
        tool_calls_response(ScriptedCall("add", {"a": 3, "b": 4}, id="call_0")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        await handle.result()
        timeline = await RunHandle(loop.client, handle.id).timeline()
    [event] = [e for e in timeline if "earlier turn used" in e.text]
    assert (event.turn, event.kind) == (2, "healed")
    assert "'call_0' as 'call_0_t2'" in event.text
    # Nothing left for the healing before the third request to rename.
    assert not [e for e in timeline if "replaced by" in e.text]
