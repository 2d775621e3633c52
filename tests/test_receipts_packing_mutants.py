"""Packing and releasing receipts: what mutation testing found no test noticed.

Each test was written against a mutant of `receipt_ledger` (`PackedLedger`,
`release_leases`, the progress backstop) that survived `test_receipts_packing.py`: a
field the round trip dropped, a `continue` turned into `break`, an `and` turned into
`or`. What decides the outcome downstream is the ledger `unpack` gives back (it must
equal the ledger that was packed, row for row) and which attempts a resumed run treats
as ended.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from steadyloop._chat import ChatMessage
from steadyloop._receipts import ledger as receipt_ledger
from steadyloop._receipts.canonical_json import CanonicalJsonError
from steadyloop._receipts.decision import NaiveDatetimeError, ReceiptKey, receipt_key
from steadyloop._receipts.ledger import (
    MIN_RESULT_LIMIT_BYTES,
    AmbiguityResolution,
    GiveUp,
    Happened,
    PackedLedger,
    ReceiptLedger,
    ResultRef,
    WriteIgnored,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = NOW + timedelta(minutes=1)
LATER = NOW + timedelta(minutes=2)


def key_of(index: int) -> ReceiptKey:
    return receipt_key("t", "run", "read", {"n": index})


def tool_message(index: int, content: str) -> list[ChatMessage]:
    call = {"id": f"c{index}", "name": "read", "arguments": f'{{"n": {index}}}'}
    return [
        ChatMessage.model_validate({"role": "assistant", "tool_calls": [call]}),
        ChatMessage(role="tool", content=content, tool_call_id=f"c{index}"),
    ]


def complete(ledger: ReceiptLedger, index: int, result: str) -> None:
    assert ledger.claim(key_of(index), 1, LEASE, now=NOW).applied
    assert ledger.complete(key_of(index), 1, result).applied


def round_trip(ledger: ReceiptLedger, transcript: list[ChatMessage]) -> ReceiptLedger:
    packed = PackedLedger.pack(ledger, transcript)
    assert all(isinstance(row, ResultRef) for row in packed.rows.values())
    again = PackedLedger.model_validate_json(packed.model_dump_json())
    unpacked, lost = again.unpack(transcript)
    assert lost == 0
    return unpacked


def test_a_resolved_receipt_keeps_its_resolution_through_a_reference() -> None:
    # Dropping `resolution` would turn a person's "give up" into an ordinary result.
    ledger = ReceiptLedger()
    resolutions: list[AmbiguityResolution] = [Happened(result="it did"), GiveUp(note="no")]
    for index, resolution in enumerate(resolutions):
        assert ledger.claim(key_of(index), 1, LEASE, now=NOW).applied
        assert ledger.resolve_ambiguous(key_of(index), 1, resolution, now=LATER).applied
    transcript = [ChatMessage(role="user", content="go")]
    for index, (_, receipt) in enumerate(ledger.items()):
        assert receipt.result is not None
        transcript += tool_message(index, receipt.result)
    unpacked = round_trip(ledger, transcript)
    assert [r.resolution for _, r in unpacked.items()] == ["happened", "give_up"]
    assert unpacked == ledger


def test_a_truncated_receipt_stays_truncated_through_a_reference() -> None:
    # The model must still read that the replayed result was cut.
    ledger = ReceiptLedger(result_limit_bytes=MIN_RESULT_LIMIT_BYTES)
    complete(ledger, 0, "a" * 1_000)
    transcript = [ChatMessage(role="user", content="go"), *tool_message(0, "a" * 1_000)]
    unpacked = round_trip(ledger, transcript)
    receipt = unpacked.get(key_of(0))
    assert receipt is not None and receipt.truncated and receipt.result_bytes == 1_000
    assert unpacked == ledger


def test_the_progress_limit_survives_packing() -> None:
    ledger = ReceiptLedger(progress_limit_bytes=100)
    complete(ledger, 0, "done")
    transcript = [ChatMessage(role="user", content="go"), *tool_message(0, "done")]
    unpacked = round_trip(ledger, transcript)
    assert unpacked.progress_limit_bytes == 100
    assert unpacked == ledger


def test_a_result_the_transcript_does_not_hold_does_not_stop_the_rows_after_it() -> None:
    ledger = ReceiptLedger()
    complete(ledger, 0, "not in the transcript")
    complete(ledger, 1, "held")
    assert ledger.claim(key_of(2), 1, LEASE, now=NOW).applied
    transcript = [ChatMessage(role="user", content="go"), *tool_message(1, "held")]
    packed = PackedLedger.pack(ledger, transcript)
    assert len(packed) == 3
    assert isinstance(packed.rows[key_of(1).text], ResultRef)
    unpacked, lost = packed.unpack(transcript)
    assert lost == 0 and unpacked == ledger


def test_only_a_tool_message_is_taken_for_a_result() -> None:
    # A user or assistant message with the same text is not the result: compaction and
    # the model rewrite those, and `unpack` refuses to read a result from one.
    ledger = ReceiptLedger()
    complete(ledger, 0, "go")
    transcript = [
        ChatMessage(role="user", content="go"),
        ChatMessage(role="assistant", content="go"),
        *tool_message(0, "go"),
    ]
    packed = PackedLedger.pack(ledger, transcript)
    row = packed.rows[key_of(0).text]
    assert isinstance(row, ResultRef) and transcript[row.message].role == "tool"
    unpacked, lost = packed.unpack(transcript)
    assert lost == 0 and unpacked == ledger
    alone = PackedLedger.pack(ledger, transcript[:2])
    assert not isinstance(alone.rows[key_of(0).text], ResultRef)


def test_a_reference_to_a_message_that_is_no_longer_a_tool_message_is_lost() -> None:
    ledger = ReceiptLedger()
    complete(ledger, 0, "same text")
    transcript = [ChatMessage(role="user", content="go"), *tool_message(0, "same text")]
    packed = PackedLedger.pack(ledger, transcript)
    row = packed.rows[key_of(0).text]
    assert isinstance(row, ResultRef)
    replaced = list(transcript)
    replaced[row.message] = ChatMessage(role="user", content="same text")
    unpacked, lost = packed.unpack(replaced)
    assert lost == 1
    receipt = unpacked.get(key_of(0))
    assert receipt is not None and receipt.result == receipt_ledger.UNRESTORABLE_RESULT


def test_shrink_counts_every_result_it_cut() -> None:
    ledger = ReceiptLedger()
    for index in range(3):
        complete(ledger, index, chr(ord("a") + index) * 2_000)
    complete(ledger, 3, "short")
    packed = PackedLedger.pack(ledger, [])
    assert packed.shrink_results(MIN_RESULT_LIMIT_BYTES) == 3


def test_release_leases_counts_every_live_lease_and_touches_nothing_else() -> None:
    ledger = ReceiptLedger()
    assert ledger.claim(key_of(0), 1, NOW + timedelta(minutes=5), now=NOW).applied
    assert ledger.claim(key_of(1), 1, NOW + timedelta(minutes=5), now=NOW).applied
    assert ledger.claim(key_of(2), 1, LEASE, now=NOW).applied  # expires before release
    complete(ledger, 3, "done")  # completed, its lease still in the future
    before = ledger.model_copy(deep=True)
    released_at = NOW + timedelta(seconds=90)
    assert ledger.release_leases(released_at) == 2
    for index in (0, 1):
        receipt = ledger.get(key_of(index))
        assert receipt is not None and receipt.lease_ended
        # Ended whatever the clock says: workflow code, which asks without one, agrees.
        assert ledger.decide(key_of(index), "opaque").kind == "ambiguous"
    assert ledger.get(key_of(2)) == before.get(key_of(2))  # already over: not moved
    assert ledger.get(key_of(3)) == before.get(key_of(3))  # completed: not touched
    assert ledger.release_leases(released_at) == 0


def test_release_leases_names_a_naive_now() -> None:
    with pytest.raises(NaiveDatetimeError) as caught:
        ReceiptLedger().release_leases(datetime(2026, 1, 1))
    assert str(caught.value).startswith("now is a naive datetime")


def test_progress_the_receipt_refuses_is_a_canonical_json_error_at_the_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The backstop: should the check before storing ever accept what the receipt model
    # refuses, the caller still gets the one documented error, at `$`, saying why.
    def no_depth_check(value: object, *, utf8: bool = False) -> str:
        return json.dumps(value)

    monkeypatch.setattr(receipt_ledger, "canonical_json", no_depth_check)
    ledger = ReceiptLedger()
    assert ledger.claim(key_of(0), 1, LEASE, now=NOW).applied
    deep: list[object] = []
    for _ in range(80):
        deep = [deep]
    with pytest.raises(CanonicalJsonError) as caught:
        ledger.record_progress(key_of(0), 1, [deep])  # type: ignore[list-item]
    assert caught.value.path == "$"
    assert caught.value.reason.startswith("progress cannot be stored")
    receipt = ledger.get(key_of(0))
    assert receipt is not None and receipt.recorded_progress == []


def test_without_a_clock_a_lease_holds_until_it_is_ended_and_only_its_attempt_ends_it() -> None:
    """Workflow code decides leases without reading the clock: a lease whose expiry is
    long past still holds until `end_lease` (the durable timer's), so the same history
    decides the same way whichever workflow task a replay reads the time in."""
    ledger = ReceiptLedger()
    assert ledger.claim(key_of(0), 1, LEASE, now=NOW).applied
    assert ledger.decide(key_of(0), "opaque").kind == "wait"  # its expiry is in the past
    assert ledger.decide(key_of(0), "opaque", LEASE).kind == "ambiguous"  # by the clock: over
    refused = ledger.resolve_ambiguous(key_of(0), 1, GiveUp())
    assert isinstance(refused, WriteIgnored) and refused.refusal == "lease_live"
    stale = ledger.end_lease(key_of(0), 2)
    assert isinstance(stale, WriteIgnored) and stale.refusal == "stale_attempt"
    assert ledger.end_lease(key_of(0), 1).applied
    assert ledger.decide(key_of(0), "opaque").kind == "ambiguous"
    assert ledger.decide(key_of(0), "resumable").kind == "execute"
    assert ledger.resolve_ambiguous(key_of(0), 1, GiveUp()).applied
    assert not ledger.end_lease(key_of(0), 1).applied  # final: nothing to end


def test_an_ended_lease_travels_with_the_ledger_a_run_carries() -> None:
    ledger = ReceiptLedger()
    assert ledger.claim(key_of(0), 1, LEASE, now=NOW).applied
    assert ledger.end_lease(key_of(0), 1).applied
    again, lost = PackedLedger.pack(ledger, []).unpack([])
    assert lost == 0 and again.decide(key_of(0), "opaque").kind == "ambiguous"
