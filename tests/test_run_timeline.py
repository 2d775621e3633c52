"""The run's timeline, a view of its event log (`RunHandle.timeline`): a stall with its
phase, replays with their reason, numbered across continue-as-new, read after a cursor
like any event."""

from __future__ import annotations

import pytest
from loop_harness import run_input, running_loop

from steadyloop.client import RunHandle
from steadyloop.events import TimelineEntryEvent
from steadyloop.testing import (
    Pause,
    ScriptedCall,
    sse_response,
    text_chunks,
    text_response,
    tool_calls_response,
)


async def test_a_stall_is_recorded_with_its_phase_and_the_retry() -> None:
    stalled = sse_response([Pause(3.0), *text_chunks("late")])
    async with running_loop([stalled, text_response("Done.")], first_token_s=0.5) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        timeline = await RunHandle(loop.client, handle.id).timeline()
    assert result.stop_reason == "final_answer"
    retries = [e for e in timeline if e.kind == "model_retry"]
    assert len(retries) == 1, timeline
    assert retries[0].text.startswith("model attempt 1 failed, stalled before first token; retry")
    assert retries[0].turn == 1 and retries[0].phase == "model"


async def test_replays_say_why_and_the_timeline_survives_continue_as_new() -> None:
    same = {"a": 2, "b": 3}
    script = [
        tool_calls_response(ScriptedCall("add", same, id="c1"), ScriptedCall("add", same, id="c2")),
        tool_calls_response(ScriptedCall("add", same, id="c3")),
        text_response("Done."),
    ]
    async with running_loop(script) as loop:
        # A hand-over after every turn: turn 2's replay is decided by a later execution.
        handle = await loop.start(run_input(continue_as_new_after_turns=1))
        result = await handle.result()
        run = RunHandle(loop.client, handle.id)
        timeline = await run.timeline()
        later = [e async for e in run.events(after=timeline[0].cursor)]
    assert result.stop_reason == "final_answer"
    assert result.stats.continued_as_new
    replays = {e.call_id: e.text for e in timeline if e.kind == "replay"}
    assert replays == {
        "c2": "replayed, not run: same call twice in this batch (c1's answer)",
        "c3": "replayed, not run: same call earlier in the run (turn 1, c1)",
    }
    assert result.stats.tool_replays == 2  # one run for three answers
    assert [e.seq for e in timeline] == [1, 2]  # numbered across executions
    # A follower reads only what is new.
    assert [e.seq for e in later if isinstance(e, TimelineEntryEvent)] == [2]


async def test_a_lost_tool_attempt_run_again_is_said_on_its_call() -> None:
    script = [tool_calls_response(ScriptedCall("slow", {}, id="s1")), text_response("Done.")]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        timeline = await RunHandle(loop.client, handle.id).timeline()
    retried = [e for e in timeline if e.kind == "tool_retry"]
    assert [(e.call_id, e.phase) for e in retried] == [("s1", "tools"), ("s1", "tools")]
    assert retried[0].text.startswith(
        "attempt 1 lost (Tool 'slow' timed out: it gave no answer within its 0.5 s timeout: "
        "its worker may have stopped, or may still be running it.)"
    )
    assert result.stats.retries == {"tool_lost": 2}


async def test_a_result_over_the_payload_limit_drops_its_log_events_before_any_receipt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The events riding on the result are for people: a result that does not fit loses
    them first (its followers then raise `StopUnread` saying why)."""
    from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
    from steadyloop._receipts.ledger import PackedLedger
    from steadyloop._run.models import RunResult, RunStats
    from steadyloop._workflows import hand_over
    from steadyloop._workflows.hand_over import HandOver
    from steadyloop._workflows.payload_ceiling import PayloadCeiling
    from steadyloop._workflows.run_state import RunState

    def measured(result: RunResult) -> int:  # too large exactly while it carries events
        return MAX_INLINE_PAYLOAD_BYTES + 1 if result.log_events else 10

    monkeypatch.setattr(hand_over, "payload_bytes", measured)
    state = RunState()
    state.ceiling = PayloadCeiling(MAX_INLINE_PAYLOAD_BYTES)
    stop = {"type": "stop", "turn": 1, "reason": "final_answer", "final_answer": "ok"}
    result = RunResult(
        final_answer="ok",
        stop_reason="final_answer",
        transcript=[],
        stats=RunStats(),
        receipts=PackedLedger(),
        log_events=[stop],
    )
    bounded = await HandOver(state).bounded_result(result)
    assert bounded.log_events == []
    assert bounded.receipts is not None and bounded.detail == ""
