"""The run's timeline as the workflow records it: a stall with its phase, replays with their
reason, carried across continue-as-new, readable while the run goes on (`timeline`,
`RunProgress.events`) and in the result."""

from __future__ import annotations

import pytest
from loop_harness import run_input, running_loop

from steadyloop.testing import Pause, sse_response, text_chunks
from steadyloop.testing.chunks import ScriptedCall, finish_chunk, tool_call_chunks
from steadyloop.testing.scripted_server import ScriptedResponse
from steadyloop.workflows.tool_loop import ToolLoopWorkflow


def calls(*scripted: ScriptedCall) -> ScriptedResponse:
    return sse_response([*tool_call_chunks(list(scripted)), finish_chunk("tool_calls")])


def answer(text: str = "Done.") -> ScriptedResponse:
    return sse_response([*text_chunks(text), finish_chunk("stop")])


async def test_a_stall_is_recorded_with_its_phase_and_the_retry() -> None:
    stalled = sse_response([Pause(3.0), *text_chunks("late")])
    async with running_loop([stalled, answer()], first_token_s=0.5) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "final_answer"
    retries = [e for e in result.timeline if e.kind == "model_retry"]
    assert len(retries) == 1, result.timeline
    assert retries[0].text.startswith("model attempt 1 failed, stalled before first token; retry")
    assert retries[0].turn == 1 and retries[0].phase == "model"


async def test_replays_say_why_and_the_timeline_survives_continue_as_new() -> None:
    same = {"a": 2, "b": 3}
    script = [
        calls(ScriptedCall("add", same, id="c1"), ScriptedCall("add", same, id="c2")),
        calls(ScriptedCall("add", same, id="c3")),
        answer(),
    ]
    async with running_loop(script) as loop:
        # A hand-over after every turn: turn 2's replay is decided by a later execution.
        handle = await loop.start(run_input(continue_as_new_after_turns=1))
        result = await handle.result()
        queried = await handle.query(ToolLoopWorkflow.timeline, 1)
    assert result.stop_reason == "final_answer"
    assert result.stats.continued_as_new
    replays = {e.call_id: e.text for e in result.timeline if e.kind == "replay"}
    assert replays == {
        "c2": "replayed, not run: same call twice in this batch (c1's answer)",
        "c3": "replayed, not run: same call earlier in the run (turn 1, c1)",
    }
    assert result.stats.tool_replays == 2  # one run for three answers
    assert [e.seq for e in result.timeline] == [1, 2]  # numbered across executions
    assert [e.seq for e in queried] == [2]  # a follower reads only what is new


async def test_a_lost_tool_attempt_run_again_is_said_on_its_call() -> None:
    script = [calls(ScriptedCall("slow", {}, id="s1")), answer()]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
    retried = [e for e in result.timeline if e.kind == "tool_retry"]
    assert [(e.call_id, e.phase) for e in retried] == [("s1", "tools"), ("s1", "tools")]
    assert retried[0].text.startswith(
        "attempt 1 lost (Tool 'slow' timed out: it ran past its 0.5 s timeout; the worker "
        "may still finish it.)"
    )
    assert result.stats.retries == {"tool_lost": 2}


async def test_a_result_over_the_payload_limit_drops_the_timeline_before_any_receipt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timeline is for people: a result that does not fit loses it first."""
    from steadyloop.history.budget import MAX_INLINE_PAYLOAD_BYTES
    from steadyloop.receipts.ledger import PackedLedger
    from steadyloop.run.models import RunResult, RunStats
    from steadyloop.run.timeline import Timeline
    from steadyloop.workflows import hand_over
    from steadyloop.workflows.hand_over import HandOver
    from steadyloop.workflows.payload_ceiling import PayloadCeiling
    from steadyloop.workflows.run_state import RunState

    def measured(result: RunResult) -> int:  # too large exactly while it has a timeline
        return MAX_INLINE_PAYLOAD_BYTES + 1 if result.timeline else 10

    monkeypatch.setattr(hand_over, "payload_bytes", measured)
    state = RunState()
    state.ceiling = PayloadCeiling(MAX_INLINE_PAYLOAD_BYTES)
    timeline = Timeline()
    timeline.add(1, "model", "healed", "transcript healed", at=2)
    result = RunResult(
        final_answer="ok",
        stop_reason="final_answer",
        transcript=[],
        stats=RunStats(),
        receipts=PackedLedger(),
        timeline=timeline.events,
    )
    bounded = await HandOver(state).bounded_result(result)
    assert bounded.timeline == []
    assert bounded.receipts is not None and bounded.detail == ""
