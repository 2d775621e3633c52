"""Receipts: the key, the decision table, and the ledger's fences and bounds.

Every row of the table, both sides of the lease boundary to the microsecond, each
effect; then every ledger write from an attempt that is no longer current, which must
be reported and never applied: that is what keeps an email from going out twice.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pydantic
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from temporalio.contrib.pydantic import pydantic_data_converter

from steadyloop._receipts.canonical_json import MAX_DEPTH, CanonicalJsonError
from steadyloop._receipts.decision import (
    Ambiguous,
    Effect,
    Execute,
    NaiveDatetimeError,
    Receipt,
    ReceiptKey,
    Replay,
    Wait,
    decide_tool_call_receipt,
    lease_live,
    receipt_key,
    tool_call_args_hash,
)
from steadyloop._receipts.ledger import (
    DEFAULT_RESULT_LIMIT_BYTES,
    MIN_RESULT_LIMIT_BYTES,
    AmbiguityResolution,
    DidNotHappen,
    GiveUp,
    Happened,
    ReceiptLedger,
    WriteApplied,
    WriteIgnored,
    abandoned_result,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LEASE = T0 + timedelta(minutes=5)
US = timedelta(microseconds=1)
EFFECTS: list[Effect] = ["pure", "resumable", "opaque"]
KEY = receipt_key("acme", "wf-42", "send_email", {"to": "a@example.com", "n": 1})


def running(attempt: int = 1, progress: list[Any] | None = None) -> Receipt:
    return Receipt(
        status="running",
        attempt=attempt,
        lease_expires_at=LEASE,
        recorded_progress=progress or [],
    )


def claimed(ledger: ReceiptLedger, attempt: int = 1, now: datetime = T0) -> Receipt:
    write = ledger.claim(KEY, attempt, now + timedelta(minutes=5), now=now)
    assert isinstance(write, WriteApplied), write
    return write.receipt


def ignored(write: WriteApplied | WriteIgnored, refusal: str) -> WriteIgnored:
    assert isinstance(write, WriteIgnored), write
    assert write.refusal == refusal, write
    assert not write.applied
    return write


# -- the key -----------------------------------------------------------------------------


def test_key_text_is_unambiguous_where_a_separator_would_not_be() -> None:
    pairs = [
        (("a|b", "c", "t"), ("a", "b|c", "t")),
        (("a", "b", "c:d"), ("a:b", "", "c:d")),
        (('a","b', "c", "t"), ("a", 'b","c', "t")),
        (("a\\", "b", "t"), ("a", "\\b", "t")),
    ]
    for left, right in pairs:
        if "" in left + right:
            continue  # empty parts are refused; see below
        a = receipt_key(*left, {})
        b = receipt_key(*right, {})
        assert a.text != b.text
        assert a != b


@settings(max_examples=200, deadline=None)
@given(
    parts=st.tuples(*[st.text(st.characters(codec="utf-8"), min_size=1)] * 3),
    other=st.tuples(*[st.text(st.characters(codec="utf-8"), min_size=1)] * 3),
)
def test_key_text_equal_exactly_when_parts_equal(
    parts: tuple[str, str, str], other: tuple[str, str, str]
) -> None:
    a, b = receipt_key(*parts, {}), receipt_key(*other, {})
    assert (a.text == b.text) == (parts == other)
    assert ReceiptKey.from_text(a.text) == a
    assert a.text.isascii()


def test_key_is_content_not_formatting_and_every_part_counts() -> None:
    assert receipt_key("t", "r", "f", {"a": 1, "b": [2]}) == receipt_key(
        "t", "r", "f", {"b": [2], "a": 1}
    )
    base = receipt_key("t", "r", "f", {"n": 1})
    for other in [
        receipt_key("t2", "r", "f", {"n": 1}),
        receipt_key("t", "r2", "f", {"n": 1}),
        receipt_key("t", "r", "f2", {"n": 1}),
        receipt_key("t", "r", "f", {"n": 1.0}),
        receipt_key("t", "r", "f", {"n": True}),
        receipt_key("t", "r", "f", {"n": "1"}),
    ]:
        assert other.text != base.text


def test_key_fields_and_text_form() -> None:
    assert KEY.args_hash == tool_call_args_hash({"n": 1, "to": "a@example.com"})
    assert KEY.args_hash == hashlib.sha256(b'{"n":1,"to":"a@example.com"}').hexdigest()
    assert str(KEY) == KEY.text == f'["acme","wf-42","send_email","{KEY.args_hash}"]'
    with pytest.raises(pydantic.ValidationError):
        KEY.tenant = "other"  # type: ignore[misc]
    same = receipt_key("acme", "wf-42", "send_email", {"to": "a@example.com", "n": 1})
    assert {KEY.text: "row"}[same.text] == "row"


@pytest.mark.parametrize(
    "fields",
    [
        {"tenant": "", "run": "r", "tool": "t", "args_hash": "0" * 64},
        {"tenant": "a", "run": "", "tool": "t", "args_hash": "0" * 64},
        {"tenant": "a", "run": "r", "tool": "", "args_hash": "0" * 64},
        {"tenant": "a", "run": "r", "tool": "t", "args_hash": "0" * 63},
        {"tenant": "a", "run": "r", "tool": "t", "args_hash": "A" * 64},
        {"tenant": "a", "run": "r", "tool": "t", "args_hash": "g" * 64},
    ],
)
def test_key_refuses_empty_parts_and_malformed_hashes(fields: dict[str, str]) -> None:
    with pytest.raises(pydantic.ValidationError):
        ReceiptKey(**fields)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '["a","b","c"]',
        '["a","b","c","d","e"]',
        '{"tenant":"a"}',
        '["a","b","c",1]',
        f'[ "a","b","c","{"0" * 64}"]',  # not canonical
        f'["a","b","c","{"0" * 63}"]',
    ],
)
def test_key_from_text_refuses_what_text_would_not_produce(text: str) -> None:
    with pytest.raises(ValueError):
        ReceiptKey.from_text(text)


def test_key_refuses_arguments_without_a_canonical_text() -> None:
    with pytest.raises(CanonicalJsonError):
        receipt_key("t", "r", "f", {"x": float("nan")})


# -- the receipt row ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "running", "attempt": 0, "lease_expires_at": LEASE},
        {"status": "running", "attempt": True, "lease_expires_at": LEASE},
        {"status": "running", "attempt": 1, "lease_expires_at": LEASE.replace(tzinfo=None)},
        {"status": "completed", "attempt": 1, "lease_expires_at": LEASE},
        {"status": "running", "attempt": 1, "lease_expires_at": LEASE, "result": "x"},
        {"status": "failed", "attempt": 1, "lease_expires_at": LEASE, "truncated": True},
        {"status": "done", "attempt": 1, "lease_expires_at": LEASE},
        {"status": "completed", "attempt": 1, "lease_expires_at": LEASE, "result": "\ud800"},
        {
            "status": "running",
            "attempt": 1,
            "lease_expires_at": LEASE,
            "recorded_progress": [float("nan")],
        },
        {
            "status": "running",
            "attempt": 1,
            "lease_expires_at": LEASE,
            "recorded_progress": ["\ud800"],
        },
    ],
)
def test_receipt_refuses_inconsistent_rows(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        Receipt(**fields)


# -- the decision table ------------------------------------------------------------------


@pytest.mark.parametrize("effect", EFFECTS)
def test_absent_executes_attempt_1(effect: Effect) -> None:
    assert decide_tool_call_receipt(None, effect, T0) == Execute(attempt=1, reclaimed=False)


@pytest.mark.parametrize("effect", EFFECTS)
@pytest.mark.parametrize("now", [T0, LEASE, LEASE + timedelta(days=3)])
def test_completed_replays_whatever_the_lease(effect: Effect, now: datetime) -> None:
    receipt = Receipt(
        status="completed", attempt=3, lease_expires_at=LEASE, result="sent", truncated=True
    )
    assert decide_tool_call_receipt(receipt, effect, now) == Replay(result="sent", truncated=True)


@pytest.mark.parametrize("effect", EFFECTS)
@pytest.mark.parametrize("now", [T0, LEASE + timedelta(days=3)])
def test_failed_executes_the_next_attempt_carrying_progress(effect: Effect, now: datetime) -> None:
    receipt = Receipt(
        status="failed", attempt=2, lease_expires_at=LEASE, recorded_progress=["op1", {"op": 2}]
    )
    assert decide_tool_call_receipt(receipt, effect, now) == Execute(
        attempt=3, reclaimed=False, previous_progress=("op1", {"op": 2})
    )


@pytest.mark.parametrize("effect", EFFECTS)
def test_running_with_a_live_lease_waits(effect: Effect) -> None:
    decision = decide_tool_call_receipt(running(attempt=2), effect, T0)
    assert isinstance(decision, Wait)
    assert (decision.until, decision.attempt) == (LEASE, 2)
    assert "attempt 2" in decision.reason


@pytest.mark.parametrize("effect", ["resumable", "pure"])
def test_running_expired_reclaimable_executes_the_next_attempt(effect: Effect) -> None:
    receipt = running(attempt=2, progress=[{"step": 1}, {"step": 2}])
    assert decide_tool_call_receipt(receipt, effect, LEASE + timedelta(seconds=1)) == Execute(
        attempt=3, reclaimed=True, previous_progress=({"step": 1}, {"step": 2})
    )


def test_running_expired_opaque_is_ambiguous() -> None:
    decision = decide_tool_call_receipt(running(attempt=2), "opaque", LEASE + timedelta(hours=1))
    assert isinstance(decision, Ambiguous)
    assert decision.attempt == 2
    assert "may or may not have taken effect" in decision.reason


@pytest.mark.parametrize("effect", EFFECTS)
def test_lease_boundary_to_the_microsecond(effect: Effect) -> None:
    before = decide_tool_call_receipt(running(), effect, LEASE - US)
    at = decide_tool_call_receipt(running(), effect, LEASE)
    after = decide_tool_call_receipt(running(), effect, LEASE + US)
    assert isinstance(before, Wait)
    expired = Ambiguous if effect == "opaque" else Execute
    assert isinstance(at, expired)
    assert isinstance(after, expired)
    assert lease_live(running(), LEASE - US)
    assert not lease_live(running(), LEASE)


def test_lease_compares_instants_not_wall_readings() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert lease_live(running(), (LEASE - US).astimezone(plus_two))
    assert not lease_live(running(), LEASE.astimezone(plus_two))
    minus_five = timezone(timedelta(hours=-5))
    assert isinstance(
        decide_tool_call_receipt(running(), "opaque", LEASE.astimezone(minus_five)), Ambiguous
    )


@pytest.mark.parametrize("receipt", [None, running()])
def test_naive_now_is_refused(receipt: Receipt | None) -> None:
    naive = datetime(2026, 5, 1, 12, 0)
    with pytest.raises(NaiveDatetimeError, match="naive"):
        decide_tool_call_receipt(receipt, "opaque", naive)
    with pytest.raises(NaiveDatetimeError):
        lease_live(running(), naive)


def test_unknown_effect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown effect"):
        decide_tool_call_receipt(None, "idempotent", T0)  # type: ignore[arg-type]


# -- the ledger: claims ------------------------------------------------------------------


def test_claim_absent_as_attempt_1_only() -> None:
    ledger = ReceiptLedger()
    ignored(ledger.claim(KEY, 2, LEASE, now=T0), "not_next_attempt")
    assert ledger.get(KEY) is None
    receipt = claimed(ledger)
    assert (receipt.status, receipt.attempt, receipt.lease_expires_at) == ("running", 1, LEASE)
    assert ledger.get(KEY) == receipt


def test_double_claim_is_refused_and_changes_nothing() -> None:
    ledger = ReceiptLedger()
    first = claimed(ledger)
    ignored(ledger.claim(KEY, 1, LEASE + timedelta(hours=1), now=T0), "not_next_attempt")
    # The same attempt after its lease expired is still not the next attempt.
    ignored(ledger.claim(KEY, 1, LEASE + timedelta(hours=1), now=LEASE), "not_next_attempt")
    ignored(ledger.claim(KEY, 3, LEASE + timedelta(hours=1), now=LEASE), "not_next_attempt")
    assert ledger.get(KEY) == first


def test_claim_over_a_live_lease_is_refused_up_to_the_microsecond() -> None:
    ledger = ReceiptLedger()
    first = claimed(ledger)
    later = LEASE + timedelta(minutes=5)
    write = ignored(ledger.claim(KEY, 2, later, now=LEASE - US), "lease_live")
    assert write.current == first
    assert ledger.get(KEY) == first
    taken = ledger.claim(KEY, 2, later, now=LEASE)
    assert isinstance(taken, WriteApplied)
    assert (taken.receipt.attempt, taken.receipt.lease_expires_at) == (2, later)


def test_claim_after_failure_ignores_the_old_lease() -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    assert ledger.fail(KEY, 1).applied
    # The failed attempt's lease has not expired, but a failed attempt owns nothing.
    assert ledger.claim(KEY, 2, LEASE + timedelta(minutes=1), now=T0 + US).applied


def test_claim_over_completed_is_refused() -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.complete(KEY, 1, "sent")
    ignored(ledger.claim(KEY, 2, LEASE + timedelta(hours=1), now=LEASE), "final")


def test_claim_carries_recorded_progress_to_the_next_attempt() -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.record_progress(KEY, 1, ["a", "b"])
    reclaimed = claimed(ledger, attempt=2, now=LEASE)
    assert reclaimed.recorded_progress == ["a", "b"]
    assert ledger.fail(KEY, 2).applied
    assert claimed(ledger, attempt=3, now=LEASE).recorded_progress == ["a", "b"]


def test_claim_refuses_bad_times() -> None:
    ledger = ReceiptLedger()
    with pytest.raises(ValueError, match="must be after now"):
        ledger.claim(KEY, 1, T0, now=T0)
    with pytest.raises(NaiveDatetimeError):
        ledger.claim(KEY, 1, LEASE, now=T0.replace(tzinfo=None))
    with pytest.raises(NaiveDatetimeError):
        ledger.claim(KEY, 1, LEASE.replace(tzinfo=None), now=T0)
    assert ledger.get(KEY) is None


# -- the ledger: fenced writes -----------------------------------------------------------


def reclaimed_ledger() -> tuple[ReceiptLedger, Receipt]:
    """Attempt 1 lost its lease; attempt 2 owns the call and has recorded progress."""
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.record_progress(KEY, 1, ["one"])
    claimed(ledger, attempt=2, now=LEASE)
    write = ledger.record_progress(KEY, 2, ["one", "two"])
    assert isinstance(write, WriteApplied)
    return ledger, write.receipt


def test_a_stale_completion_is_ignored() -> None:
    ledger, current = reclaimed_ledger()
    write = ignored(ledger.complete(KEY, 1, "late result from attempt 1"), "stale_attempt")
    assert write.current == current
    assert ledger.get(KEY) == current
    assert ledger.complete(KEY, 2, "result").applied


def test_a_stale_failure_is_ignored() -> None:
    ledger, current = reclaimed_ledger()
    ignored(ledger.fail(KEY, 1), "stale_attempt")
    ignored(ledger.fail(KEY, 3), "stale_attempt")
    assert ledger.get(KEY) == current


def test_stale_progress_is_ignored() -> None:
    ledger, current = reclaimed_ledger()
    ignored(ledger.record_progress(KEY, 1, ["one"]), "stale_attempt")
    assert ledger.get(KEY) == current
    assert current.recorded_progress == ["one", "two"]


@pytest.mark.parametrize("final", ["complete", "fail"])
def test_writes_after_the_attempt_ended_are_ignored(final: str) -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.record_progress(KEY, 1, ["one"])
    ended = ledger.complete(KEY, 1, "first") if final == "complete" else ledger.fail(KEY, 1)
    assert isinstance(ended, WriteApplied)
    ignored(ledger.complete(KEY, 1, "second"), "not_running")
    ignored(ledger.fail(KEY, 1), "not_running")
    ignored(ledger.record_progress(KEY, 1, ["one", "two"]), "not_running")
    assert ledger.get(KEY) == ended.receipt


def test_writes_to_an_absent_receipt_are_ignored() -> None:
    ledger = ReceiptLedger()
    ignored(ledger.complete(KEY, 1, "x"), "absent")
    ignored(ledger.fail(KEY, 1), "absent")
    ignored(ledger.record_progress(KEY, 1, []), "absent")
    ignored(ledger.resolve_ambiguous(KEY, 1, DidNotHappen(), now=LEASE), "absent")
    assert len(ledger) == 0


def test_completion_replays_and_drops_progress() -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.record_progress(KEY, 1, ["one"])
    write = ledger.complete(KEY, 1, "sent to a@example.com")
    assert isinstance(write, WriteApplied)
    assert write.receipt.recorded_progress == []
    assert write.receipt.result_bytes == len("sent to a@example.com")
    assert ledger.decide(KEY, "opaque", LEASE + timedelta(days=1)) == Replay(
        result="sent to a@example.com", truncated=False
    )


def test_progress_is_a_deep_copy_bounded_and_json() -> None:
    ledger = ReceiptLedger(progress_limit_bytes=20)
    claimed(ledger)
    progress: list[Any] = [{"ids": [1, 2]}]
    assert ledger.record_progress(KEY, 1, progress).applied
    progress[0]["ids"].append(3)
    receipt = ledger.get(KEY)
    assert receipt is not None
    assert receipt.recorded_progress == [{"ids": [1, 2]}]
    assert ledger.record_progress(KEY, 1, ["x" * 16]).applied  # '["x...x"]': 20 bytes, at the bound
    write = ignored(ledger.record_progress(KEY, 1, ["x" * 17]), "too_large")  # 21 bytes
    assert write.current is not None
    assert write.current.recorded_progress == ["x" * 16]  # the previous snapshot is kept
    with pytest.raises(CanonicalJsonError):
        ledger.record_progress(KEY, 1, [float("nan")])


# -- the ledger: bounded results ---------------------------------------------------------


def completed_with(result: str, limit: int = DEFAULT_RESULT_LIMIT_BYTES) -> Receipt:
    ledger = ReceiptLedger(result_limit_bytes=limit)
    claimed(ledger)
    write = ledger.complete(KEY, 1, result)
    assert isinstance(write, WriteApplied)
    return write.receipt


def test_result_at_the_bound_is_kept_whole_one_byte_over_is_truncated() -> None:
    at = completed_with("x" * DEFAULT_RESULT_LIMIT_BYTES)
    assert (at.truncated, at.result, at.result_bytes) == (
        False,
        "x" * DEFAULT_RESULT_LIMIT_BYTES,
        DEFAULT_RESULT_LIMIT_BYTES,
    )
    over = completed_with("x" * (DEFAULT_RESULT_LIMIT_BYTES + 1))
    assert over.truncated
    assert over.result is not None
    assert len(over.result.encode()) <= DEFAULT_RESULT_LIMIT_BYTES
    assert over.result_bytes == DEFAULT_RESULT_LIMIT_BYTES + 1
    assert over.result.endswith(f"of {DEFAULT_RESULT_LIMIT_BYTES + 1} bytes]")
    assert "[steadyloop: result truncated" in over.result


@st.composite
def results_around_a_limit(draw: st.DrawFn) -> tuple[str, int]:
    """(result, limit) with the result's size mostly over the limit, often far over.

    Plain `st.text(max_size=400)` against a limit of 256 or more almost never went over
    (0 of 300 examples in 3 runs), so the truncation below was never exercised. A run of
    one character of 1 to 4 UTF-8 bytes fills the result to a size drawn around the
    limit; text of any width before and after it moves where the cut falls.
    """
    limit = draw(st.integers(MIN_RESULT_LIMIT_BYTES, 700))
    head = draw(st.text(st.characters(codec="utf-8"), max_size=30))
    tail = draw(st.text(st.characters(codec="utf-8"), max_size=30))
    filler = draw(st.characters(codec="utf-8"))
    size = limit + draw(st.integers(-8, 300))
    room = size - len(head.encode()) - len(tail.encode())
    return head + filler * max(0, room // len(filler.encode())) + tail, limit


def test_the_truncation_property_draws_results_over_the_limit() -> None:
    # The property below is only as good as its inputs: it must see results past the
    # limit, including ones whose marker is longer than the space it frees.
    far_over = find(results_around_a_limit(), lambda r: len(r[0].encode()) > r[1] + 100)
    assert len(far_over[0].encode()) > far_over[1] + 100


@settings(max_examples=300, deadline=None)
@given(result_and_limit=results_around_a_limit())
def test_truncation_keeps_a_whole_character_prefix_under_the_bound(
    result_and_limit: tuple[str, int],
) -> None:
    result, limit = result_and_limit
    receipt = completed_with(result, limit)
    assert receipt.result is not None
    size = len(result.encode())
    assert receipt.result_bytes == size
    assert receipt.truncated == (size > limit)
    assert len(receipt.result.encode()) <= limit
    if receipt.truncated:
        kept, marker = receipt.result.rsplit("\n[steadyloop: result truncated to ", 1)
        assert result.startswith(kept)
        assert marker == f"{len(kept.encode())} of {size} bytes]"
        # the longest prefix that fits beside the longest marker (kept spelled like total)
        longest_marker = len(f"\n[steadyloop: result truncated to {size} of {size} bytes]")
        assert len(result[: len(kept) + 1].encode()) + longest_marker > limit
    else:
        assert receipt.result == result


def test_a_truncated_result_replays_with_its_flag() -> None:
    ledger = ReceiptLedger(result_limit_bytes=256)
    claimed(ledger)
    ledger.complete(KEY, 1, "é" * 1000)
    decision = ledger.decide(KEY, "pure", T0)
    assert isinstance(decision, Replay)
    assert decision.truncated
    assert len(decision.result.encode()) <= 256


def test_a_lone_surrogate_cannot_poison_the_ledger() -> None:
    receipt = completed_with("ok \ud800 ok")
    assert receipt.result == "ok \ufffd ok"
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.complete(KEY, 1, "\udcff" * 10)
    assert ledger.size_bytes() > 0


def test_ledger_refuses_a_result_bound_too_small_for_the_marker() -> None:
    with pytest.raises(pydantic.ValidationError):
        ReceiptLedger(result_limit_bytes=100)


def test_size_is_visible_and_bounded() -> None:
    ledger = ReceiptLedger(result_limit_bytes=1024)
    empty = ledger.size_bytes()
    for n in range(20):
        key = receipt_key("acme", "wf-42", "fetch", {"page": n})
        ledger.claim(key, 1, LEASE, now=T0)
        ledger.complete(key, 1, "z" * 100_000)
    assert len(ledger) == 20
    assert empty < ledger.size_bytes() < 20 * (1024 + 400)
    payload = pydantic_data_converter.payload_converter.to_payloads([ledger])[0]
    assert ledger.size_bytes() == len(payload.data)


# -- the ledger: resolving ambiguity -----------------------------------------------------


def ambiguous_ledger() -> ReceiptLedger:
    ledger = ReceiptLedger()
    claimed(ledger)
    assert isinstance(ledger.decide(KEY, "opaque", LEASE), Ambiguous)
    return ledger


def test_resolved_happened_completes_with_the_given_result() -> None:
    ledger = ambiguous_ledger()
    write = ledger.resolve_ambiguous(KEY, 1, Happened(result="sent, id 7"), now=LEASE)
    assert isinstance(write, WriteApplied)
    assert (write.receipt.status, write.receipt.resolution) == ("completed", "happened")
    assert ledger.decide(KEY, "opaque", LEASE) == Replay(result="sent, id 7", truncated=False)


def test_resolved_did_not_happen_runs_the_next_attempt() -> None:
    ledger = ambiguous_ledger()
    write = ledger.resolve_ambiguous(KEY, 1, DidNotHappen(), now=LEASE)
    assert isinstance(write, WriteApplied)
    assert (write.receipt.status, write.receipt.resolution) == ("failed", "did_not_happen")
    assert ledger.decide(KEY, "opaque", LEASE) == Execute(attempt=2, reclaimed=False)
    assert claimed(ledger, attempt=2, now=LEASE).resolution is None


@pytest.mark.parametrize("note", [None, "the SMTP log shows nothing either way"])
def test_resolved_give_up_tells_the_model(note: str | None) -> None:
    ledger = ambiguous_ledger()
    write = ledger.resolve_ambiguous(KEY, 1, GiveUp(note=note), now=LEASE)
    assert isinstance(write, WriteApplied)
    assert (write.receipt.status, write.receipt.resolution) == ("completed", "give_up")
    decision = ledger.decide(KEY, "opaque", LEASE + timedelta(days=1))
    assert decision == Replay(result=abandoned_result("send_email", note), truncated=False)
    assert "send_email was abandoned" in decision.result
    assert "unknown whether it took effect" in decision.result
    if note is not None:
        assert note in decision.result


def test_resolution_is_refused_while_the_lease_is_live() -> None:
    ledger = ReceiptLedger()
    first = claimed(ledger)
    ignored(ledger.resolve_ambiguous(KEY, 1, DidNotHappen(), now=LEASE - US), "lease_live")
    assert ledger.get(KEY) == first
    assert ledger.resolve_ambiguous(KEY, 1, DidNotHappen(), now=LEASE).applied


def test_resolution_is_fenced_by_attempt() -> None:
    ledger, current = reclaimed_ledger()
    ignored(
        ledger.resolve_ambiguous(KEY, 1, Happened(result="x"), now=LEASE + timedelta(hours=1)),
        "stale_attempt",
    )
    assert ledger.get(KEY) == current
    ledger.complete(KEY, 2, "done")
    ignored(
        ledger.resolve_ambiguous(KEY, 2, GiveUp(), now=LEASE + timedelta(hours=1)),
        "not_running",
    )


def test_resolution_refuses_a_naive_now() -> None:
    ledger = ambiguous_ledger()
    with pytest.raises(NaiveDatetimeError):
        ledger.resolve_ambiguous(KEY, 1, DidNotHappen(), now=LEASE.replace(tzinfo=None))


# -- the ledger in the workflow's shoes --------------------------------------------------


def test_the_same_call_twice_in_one_batch_runs_once() -> None:
    ledger = ReceiptLedger()
    first = ledger.decide(KEY, "opaque", T0)
    assert first == Execute(attempt=1, reclaimed=False)
    claimed(ledger)
    assert isinstance(ledger.decide(KEY, "opaque", T0), Wait)
    ledger.complete(KEY, 1, "sent")
    assert ledger.decide(KEY, "opaque", T0) == Replay(result="sent", truncated=False)


def test_a_resumable_reclaim_sees_what_the_dead_attempt_recorded() -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    ledger.record_progress(KEY, 1, [{"done": "a"}, {"done": "b"}])
    decision = ledger.decide(KEY, "resumable", LEASE)
    assert decision == Execute(
        attempt=2, reclaimed=True, previous_progress=({"done": "a"}, {"done": "b"})
    )
    claimed(ledger, attempt=2, now=LEASE)
    ignored(ledger.record_progress(KEY, 1, [{"done": "a"}]), "stale_attempt")  # the zombie
    assert ledger.record_progress(KEY, 2, [{"done": "a"}, {"done": "b"}, {"done": "c"}]).applied
    assert ledger.complete(KEY, 2, "three done").applied
    ignored(ledger.complete(KEY, 1, "zombie says two done"), "stale_attempt")
    assert ledger.decide(KEY, "resumable", LEASE) == Replay(result="three done", truncated=False)


def test_items_read_keys_back() -> None:
    ledger = ReceiptLedger()
    other = receipt_key("acme", "wf-42", "fetch", {"page": 1})
    claimed(ledger)
    ledger.claim(other, 1, LEASE, now=T0)
    assert [key for key, _ in ledger.items()] == [KEY, other]


# -- data conversion -----------------------------------------------------------------------


def test_ledger_round_trips_through_the_pydantic_data_converter() -> None:
    ledger = ReceiptLedger(result_limit_bytes=300)
    keys = [receipt_key("acme", "wf-42", f"tool{n}", {"n": n}) for n in range(5)]
    for key in keys:
        ledger.claim(key, 1, LEASE, now=T0)
    ledger.record_progress(keys[0], 1, [{"sub": 1, "nested": [1.5, None, True, "é"]}])
    ledger.complete(keys[1], 1, "ü" * 500)  # truncated
    ledger.fail(keys[2], 1)
    ledger.resolve_ambiguous(keys[3], 1, GiveUp(note="n"), now=LEASE)
    converter = pydantic_data_converter.payload_converter
    (back,) = converter.from_payloads(converter.to_payloads([ledger]), [ReceiptLedger])
    assert isinstance(back, ReceiptLedger)
    assert back == ledger
    assert back.result_limit_bytes == 300
    for key in keys:
        restored = back.get(key)
        assert restored is not None
        assert restored.lease_expires_at.utcoffset() == timedelta(0)
        for effect in EFFECTS:
            for now in (T0, LEASE):
                assert back.decide(key, effect, now) == ledger.decide(key, effect, now)
    # Writes still fence after the trip.
    ignored(back.complete(keys[0], 2, "x"), "stale_attempt")


@pytest.mark.parametrize(
    "resolution", [Happened(result="r"), DidNotHappen(), GiveUp(), GiveUp(note="n")]
)
def test_resolutions_round_trip_as_one_union(resolution: Any) -> None:
    converter = pydantic_data_converter.payload_converter
    hint = cast(type, AmbiguityResolution)  # an annotated union: the converter takes any hint
    (back,) = converter.from_payloads(converter.to_payloads([resolution]), [hint])
    assert back == resolution
    assert type(back) is type(resolution)


# -- an invariant over random histories ----------------------------------------------------

operations = st.lists(
    st.tuples(
        st.sampled_from(["claim", "complete", "fail", "progress", "resolve"]),
        st.integers(1, 4),  # attempt
        st.integers(0, 20),  # minutes after T0
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(ops=operations)
def test_an_ignored_write_never_changes_the_row_and_an_applied_one_was_the_owner(
    ops: list[tuple[str, int, int]],
) -> None:
    ledger = ReceiptLedger()
    for op, attempt, minutes in ops:
        now = T0 + timedelta(minutes=minutes)
        before = ledger.get(KEY)
        if op == "claim":
            write = ledger.claim(KEY, attempt, now + timedelta(minutes=5), now=now)
        elif op == "complete":
            write = ledger.complete(KEY, attempt, f"result {attempt}")
        elif op == "fail":
            write = ledger.fail(KEY, attempt)
        elif op == "progress":
            write = ledger.record_progress(KEY, attempt, [attempt, minutes])
        else:
            write = ledger.resolve_ambiguous(KEY, attempt, DidNotHappen(), now=now)
        after = ledger.get(KEY)
        if isinstance(write, WriteIgnored):
            assert after == before
            assert write.current == before
            continue
        assert after == write.receipt
        if op == "claim":
            assert attempt == (1 if before is None else before.attempt + 1)
            assert before is None or before.status == "failed" or not lease_live(before, now)
            assert before is None or before.status != "completed"
        else:
            assert before is not None
            assert before.status == "running"
            assert before.attempt == attempt == write.receipt.attempt
        if op == "resolve":
            assert before is not None
            assert not lease_live(before, now)


# -- the ledger: progress depth, one limit, one error --------------------------------------


def _nested(depth: int, *, dicts: bool) -> Any:
    value: Any = {} if dicts else []
    for _ in range(depth - 1):
        value = {"a": value} if dicts else [value]
    return value


@pytest.mark.parametrize("dicts", [False, True], ids=["lists", "dicts"])
@pytest.mark.parametrize("depth", [MAX_DEPTH, 200, 256, 600, 994, 1000, 1001, 2500])
def test_progress_deeper_than_the_one_limit_is_refused_with_canonical_json_error(
    depth: int, dicts: bool
) -> None:
    # Before: applied at 1-255, ValidationError at 256-993, RecursionError at 994-1000.
    ledger = ReceiptLedger()
    claimed(ledger)
    with pytest.raises(CanonicalJsonError, match=f"deeper than {MAX_DEPTH} levels"):
        ledger.record_progress(KEY, 1, [_nested(depth, dicts=dicts)])
    receipt = ledger.get(KEY)
    assert receipt is not None and receipt.recorded_progress == []


@pytest.mark.parametrize("dicts", [False, True], ids=["lists", "dicts"])
def test_progress_at_the_limit_is_stored_and_crosses_the_converter(dicts: bool) -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    trail = [_nested(MAX_DEPTH - 1, dicts=dicts)]  # MAX_DEPTH containers, the trail included
    assert ledger.record_progress(KEY, 1, trail).applied
    converter = pydantic_data_converter.payload_converter
    (back,) = converter.from_payloads(converter.to_payloads([ledger]), [ReceiptLedger])
    assert back == ledger


@pytest.mark.parametrize("step", ["half \ud83d", {"k\udcff": 1}], ids=["value", "key"])
def test_progress_with_a_lone_surrogate_is_refused_with_canonical_json_error(step: Any) -> None:
    ledger = ReceiptLedger()
    claimed(ledger)
    with pytest.raises(CanonicalJsonError, match="lone surrogate"):
        ledger.record_progress(KEY, 1, [step])
