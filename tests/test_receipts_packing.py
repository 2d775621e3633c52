"""`PackedLedger`: the receipt ledger as a run carries it beside its transcript.

Pure, no server. What decides the outcome downstream is the ledger `unpack` gives back:
every completed receipt must replay exactly the result the live ledger held, whatever
compaction did to the transcript, and a result is carried once, not twice.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from steadyloop._chat import ChatMessage
from steadyloop._history.compaction import CompactionPolicy, compact_transcript
from steadyloop._receipts.decision import ReceiptKey, receipt_key
from steadyloop._receipts.ledger import (
    MIN_RESULT_LIMIT_BYTES,
    UNRESTORABLE_RESULT,
    PackedLedger,
    ReceiptLedger,
    ResultRef,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def completed(ledger: ReceiptLedger, key: ReceiptKey, result: str) -> None:
    assert ledger.claim(key, 1, NOW + timedelta(minutes=1), now=NOW).applied
    assert ledger.complete(key, 1, result).applied


def conversation(results: list[str]) -> list[ChatMessage]:
    messages = [ChatMessage(role="user", content="go")]
    for index, result in enumerate(results):
        call = {"id": f"c{index}", "name": "read", "arguments": f'{{"n": {index}}}'}
        messages.append(ChatMessage.model_validate({"role": "assistant", "tool_calls": [call]}))
        messages.append(ChatMessage(role="tool", content=result, tool_call_id=f"c{index}"))
    return messages


def key_of(index: int) -> ReceiptKey:
    return receipt_key("t", "run", "read", {"n": index})


def ledger_of(results: list[str], limit: int = 16 * 1024) -> ReceiptLedger:
    ledger = ReceiptLedger(result_limit_bytes=limit)
    for index, result in enumerate(results):
        completed(ledger, key_of(index), result)
    return ledger


def through_json(packed: PackedLedger) -> PackedLedger:
    return PackedLedger.model_validate_json(packed.model_dump_json())


@given(
    st.lists(st.text(max_size=600), max_size=6),
    st.integers(min_value=MIN_RESULT_LIMIT_BYTES, max_value=700),
)
def test_unpack_gives_back_the_ledger_that_was_packed(results: list[str], limit: int) -> None:
    # Results longer than the bound are stored cut in the ledger and whole in the
    # transcript: they still refer, and still replay the cut form.
    ledger = ledger_of(results, limit)
    transcript = conversation(results)
    packed = through_json(PackedLedger.pack(ledger, transcript))
    unpacked, lost = packed.unpack(transcript)
    assert lost == 0
    assert unpacked == ledger
    assert list(unpacked.receipts) == list(ledger.receipts)  # order kept


def test_a_result_the_transcript_holds_is_carried_once() -> None:
    results = [f"{index}" + "r" * 16_000 for index in range(10)]
    ledger = ledger_of(results)
    transcript = conversation(results)
    packed = PackedLedger.pack(ledger, transcript)
    assert all(isinstance(row, ResultRef) for row in packed.rows.values())
    assert len(packed.model_dump_json()) < 5_000
    assert ledger.size_bytes() > 160_000


def test_a_result_compaction_elided_keeps_its_own_copy_and_replays_whole() -> None:
    # Elision rewrites old tool messages; the receipt must not point at the rewrite.
    results = [f"{index}" + "r" * 5_000 for index in range(6)]
    ledger = ledger_of(results)
    compacted, record = compact_transcript(
        conversation(results), CompactionPolicy(max_chars=12_000, keep_recent_turns=1)
    )
    assert record is not None and record.elided_call_ids
    packed = through_json(PackedLedger.pack(ledger, compacted))
    kept = [text for text, row in packed.rows.items() if not isinstance(row, ResultRef)]
    assert len(kept) == len(record.elided_call_ids)
    unpacked, lost = packed.unpack(compacted)
    assert lost == 0 and unpacked == ledger


def test_a_reference_that_no_longer_matches_replays_a_note_never_a_wrong_result() -> None:
    results = ["first result", "second result"]
    transcript = conversation(results)
    packed = PackedLedger.pack(ledger_of(results), transcript)
    altered = [m.model_copy() for m in transcript]
    altered[2] = altered[2].model_copy(update={"content": "something else"})
    unpacked, lost = packed.unpack(altered[:4])  # one altered, the other gone
    assert lost == 2
    for _, receipt in unpacked.items():
        assert receipt.status == "completed" and receipt.result == UNRESTORABLE_RESULT


def test_shrink_cuts_only_the_results_rows_hold_themselves() -> None:
    results = ["a" * 2_000, "b" * 2_000]
    ledger = ledger_of(results)
    packed = PackedLedger.pack(ledger, conversation(results[:1]))  # the second is not held
    assert packed.shrink_results(MIN_RESULT_LIMIT_BYTES) == 1
    unpacked, lost = packed.unpack(conversation(results[:1]))
    first, second = (receipt for _, receipt in unpacked.items())
    assert lost == 0 and first.result == results[0]
    assert second.truncated and second.result is not None
    assert len(second.result.encode()) <= MIN_RESULT_LIMIT_BYTES
    assert second.result.startswith("bbb") and "truncated" in second.result


def test_release_leases_ends_live_leases_only() -> None:
    ledger = ReceiptLedger()
    assert ledger.claim(key_of(0), 1, NOW + timedelta(minutes=5), now=NOW).applied
    completed(ledger, key_of(1), "done")
    assert ledger.release_leases(NOW + timedelta(minutes=1)) == 1
    assert ledger.decide(key_of(0), "opaque", NOW + timedelta(minutes=1)).kind == "ambiguous"
    assert ledger.decide(key_of(1), "opaque", NOW + timedelta(minutes=1)).kind == "replay"
