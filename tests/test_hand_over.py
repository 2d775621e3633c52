"""What a run hands over (continue-as-new) and returns, decided without a server: the
carried state holds everything the next execution needs, and what does not fit one
payload is cut in a stated order (receipts' results, receipts, the oldest messages), or
the run stops `state_too_large`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from steadyloop._chat import ChatMessage
from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._receipts.decision import receipt_key
from steadyloop._receipts.ledger import PackedLedger
from steadyloop._run.models import RunInput, RunResult, RunStats
from steadyloop._workflows import hand_over
from steadyloop._workflows.durable_time import Deadline
from steadyloop._workflows.hand_over import HandOver, initial_transcript
from steadyloop._workflows.payload_ceiling import PayloadCeiling
from steadyloop._workflows.run_state import RunState, Stop
from steadyloop.events import TimelineEntryEvent

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def noted_timeline(state: RunState) -> list[TimelineEntryEvent]:
    """The timeline entries the parts noted on the run's event log, not yet published."""
    return [e for e in state.events._pending if isinstance(e, TimelineEntryEvent)]


def _state() -> RunState:
    state = RunState()
    state.transcript = [
        ChatMessage(role="user", content="add 1 and 2"),
        ChatMessage(role="assistant", content="3"),
    ]
    state.turn = 4
    state.started = START
    state.deadline = Deadline(START + timedelta(hours=1))
    state.receipt_scope = "the-resumed-run"
    state.stats = RunStats(turns=4, prompt_tokens=10)
    state.event("model", "healed", "transcript healed")
    key = receipt_key("default", state.receipt_scope, "add", {"a": 1, "b": 2})
    state.receipts.claim(key, 1, START + timedelta(minutes=1))
    state.receipts.complete(key, 1, "3")
    state.ceiling = PayloadCeiling(MAX_INLINE_PAYLOAD_BYTES)
    return state


def test_the_next_execution_carries_the_whole_state_and_starts_no_new_prompt() -> None:
    state = _state()
    run = RunInput(endpoint="e", model="m", prompt="add 1 and 2", messages=[])
    successor = HandOver(state).successor(run, "turns")
    carried = successor.carried
    assert carried is not None
    assert successor.prompt is None and successor.messages == [] and successor.inherited is None
    assert carried.transcript == state.transcript and carried.turn == 4
    assert carried.receipt_scope == "the-resumed-run"
    assert carried.started == START.isoformat()
    assert carried.deadline == (START + timedelta(hours=1)).isoformat()
    assert carried.timeline_count == 1  # the next execution numbers its events on
    ledger, lost = carried.packed_receipts.unpack(carried.transcript)
    assert lost == 0 and [r.result for _, r in ledger.items()] == ["3"]
    # Counted on the copy it carries: this execution's stats stay as they were.
    assert carried.stats.continued_as_new == {"turns": 1}
    assert state.stats.continued_as_new == {}


def test_a_carried_state_over_the_limit_cuts_receipt_results_then_stops_state_too_large(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = _state()
    successor = HandOver(state).successor(RunInput(endpoint="e", model="m", prompt="go"), "events")
    monkeypatch.setattr(hand_over, "payload_bytes", lambda _: 100)
    with pytest.raises(Stop) as stopped:
        hand_over._shrink_to_fit(successor, 120, 50)
    assert stopped.value.reason == "state_too_large"
    assert "100 bytes (120 before" in stopped.value.detail
    assert successor.carried is not None
    assert "receipt_results" in successor.carried.stats.compactions  # tried before stopping


async def test_a_result_over_the_limit_drops_receipts_then_only_the_oldest_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def measured(result: RunResult) -> int:  # fits with at most two messages, no receipts
        if result.receipts is not None:
            return 10 * MAX_INLINE_PAYLOAD_BYTES
        return MAX_INLINE_PAYLOAD_BYTES + 1 if len(result.transcript) > 2 else 10

    monkeypatch.setattr(hand_over, "payload_bytes", measured)
    transcript = [ChatMessage(role="user", content=str(n)) for n in range(5)]
    result = RunResult(
        final_answer="ok",
        stop_reason="final_answer",
        transcript=transcript,
        stats=RunStats(),
        receipts=PackedLedger(),
    )
    bounded = await HandOver(_state()).bounded_result(result)
    assert bounded.receipts is None
    assert [m.content for m in bounded.transcript] == ["3", "4"]
    assert "receipts were left out" in bounded.detail
    assert "its 3 oldest message(s) were left out" in bounded.detail


async def test_a_result_that_fits_is_returned_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hand_over, "payload_bytes", lambda _: 10)
    result = RunResult(
        final_answer="ok",
        stop_reason="final_answer",
        transcript=[ChatMessage(role="user", content="hi")],
        stats=RunStats(),
        receipts=PackedLedger(),
    )
    bounded = await HandOver(_state()).bounded_result(result.model_copy(deep=True))
    assert bounded == result


def test_a_fresh_transcript_puts_the_system_prompt_first_and_the_prompt_last() -> None:
    run = RunInput(
        endpoint="e",
        model="m",
        system_prompt="be brief",
        messages=[ChatMessage(role="user", content="earlier")],
        prompt="now",
    )
    assert [(m.role, m.content) for m in initial_transcript(run)] == [
        ("system", "be brief"),
        ("user", "earlier"),
        ("user", "now"),
    ]
    given = RunInput(
        endpoint="e",
        model="m",
        system_prompt="ignored",
        messages=[ChatMessage(role="system", content="mine")],
    )
    assert [m.content for m in initial_transcript(given)] == ["mine"]
