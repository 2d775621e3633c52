"""Receipts: what mutation testing found no test noticed.

Each test here was written against a mutant of `receipt_decision` or `receipt_ledger`
that survived the rest of the suite: a clock check weakened from `or` to `and`, a
hash check that accepts a prefix, a refusal or marker that reads `None`. They assert
behaviour (what is accepted, what a person or a model reads), not exact wording.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

import pydantic
import pytest

from steadyloop._receipts.decision import (
    NaiveDatetimeError,
    Receipt,
    ReceiptKey,
    decide_tool_call_receipt,
    lease_live,
    receipt_key,
    require_aware,
)
from steadyloop._receipts.ledger import (
    MIN_RESULT_LIMIT_BYTES,
    GiveUp,
    LedgerWrite,
    ReceiptLedger,
    WriteApplied,
    WriteIgnored,
    abandoned_result,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LEASE = T0 + timedelta(minutes=5)
HASH = "0" * 64
KEY = receipt_key("acme", "wf-42", "send_email", {"to": "a@example.com"})
NAIVE = datetime(2026, 5, 1, 12, 0)


class _NoOffset(tzinfo):
    """A tzinfo that does not know its offset: `utcoffset()` is None, so the datetime is
    naive by Python's own definition even though `tzinfo` is set."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


def running() -> Receipt:
    return Receipt(status="running", attempt=1, lease_expires_at=LEASE)


# -- clocks ------------------------------------------------------------------------------


def test_a_tzinfo_without_an_offset_is_naive() -> None:
    # Compared with an aware lease it would raise TypeError mid workflow task.
    moment = datetime(2026, 5, 1, 12, 0, tzinfo=_NoOffset())
    assert moment.utcoffset() is None
    with pytest.raises(NaiveDatetimeError):
        require_aware(moment, "now")
    with pytest.raises(NaiveDatetimeError):
        decide_tool_call_receipt(running(), "opaque", moment)
    with pytest.raises(NaiveDatetimeError):
        lease_live(running(), moment)


def test_a_naive_refusal_names_the_argument_and_the_remedy() -> None:
    naive = datetime(2026, 5, 1, 12, 0)
    for call in (
        lambda: decide_tool_call_receipt(None, "opaque", naive),
        lambda: lease_live(running(), naive),
    ):
        with pytest.raises(NaiveDatetimeError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith("now is a naive datetime (2026-05-01T12:00:00)")
        assert "workflow time, which is tz-aware UTC: pass workflow.now()" in message


# -- the key -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args_hash",
    [HASH + "0", HASH + "\n", HASH + " ", "\n" + HASH, HASH + "g", HASH * 2],
    ids=repr,
)
def test_an_args_hash_must_be_exactly_64_hex_digits_not_start_with_them(args_hash: str) -> None:
    # `re.match` (or a `$` anchor, which also matches before a final newline) would accept
    # a hash with anything after it: two texts for one key, and a key that never matches.
    with pytest.raises(pydantic.ValidationError, match="64 lowercase hex digits"):
        ReceiptKey(tenant="a", run="r", tool="t", args_hash=args_hash)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "not a receipt key: Expecting value"),
        ('["a","r","t"]', "not a receipt key: expected a JSON array of four strings"),
        ('{"a":1}', "not a receipt key: expected a JSON array of four strings"),
        (f'[ "a","r","t","{HASH}"]', "not a receipt key: not in canonical form"),
    ],
)
def test_a_text_that_is_not_a_key_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(ValueError) as caught:
        ReceiptKey.from_text(text)
    assert str(caught.value).startswith(why)


# -- the row -----------------------------------------------------------------------------


def test_a_result_with_a_lone_surrogate_is_refused_saying_so() -> None:
    with pytest.raises(pydantic.ValidationError, match="result contains a lone surrogate"):
        Receipt(status="completed", attempt=1, lease_expires_at=LEASE, result="half \ud83d")


# -- the ledger: truncation --------------------------------------------------------------


def completed(result: str, limit: int) -> Receipt:
    ledger = ReceiptLedger(result_limit_bytes=limit)
    ledger.claim(KEY, 1, LEASE, now=T0)
    write = ledger.complete(KEY, 1, result)
    assert isinstance(write, WriteApplied), write
    return write.receipt


def test_a_cut_inside_a_character_moves_back_never_over_the_limit() -> None:
    # A known repro: 800 bytes of two-byte characters under a 300-byte limit.
    # The cut (300 minus the longest marker, 51) falls on byte 249, inside a character;
    # moving it forward instead of back stored 301 bytes.
    receipt = completed("é" * 400, 300)
    assert receipt.result is not None and receipt.truncated
    assert len(receipt.result.encode()) <= 300
    kept = receipt.result.split("\n[steadyloop:", 1)[0]
    assert kept == "é" * 124  # 248 bytes: the whole characters before the cut


@pytest.mark.parametrize("limit", [MIN_RESULT_LIMIT_BYTES, 300, 1000])
@pytest.mark.parametrize("char", ["x", "é", "€", "😀"])
def test_truncation_keeps_a_non_empty_prefix_and_says_how_much(char: str, limit: int) -> None:
    result = char * (limit + 1)  # over the limit whatever the character's width
    receipt = completed(result, limit)
    assert receipt.result is not None and receipt.truncated
    kept, marker = receipt.result.split("\n", 1)
    assert kept and result.startswith(kept)
    size = len(result.encode())
    assert marker == f"[steadyloop: result truncated to {len(kept.encode())} of {size} bytes]"
    assert len(receipt.result.encode()) <= limit
    assert receipt.result_bytes == size


# -- the ledger: what a person or the model reads ---------------------------------------


def test_a_give_up_without_a_note_says_nothing_about_a_note() -> None:
    text = abandoned_result("send_email", None)
    assert "None" not in text and "Note" not in text
    assert abandoned_result("send_email", "refunded by hand").endswith(
        " Note from the operator: refunded by hand"
    )


def test_an_abandoned_call_tells_the_model_the_outcome_is_unknown() -> None:
    text = abandoned_result("send_email", None)
    assert text.startswith("The call to send_email was abandoned.")
    assert "stopped without reporting an outcome, so it is unknown whether it took effect" in text
    assert "a person chose not to run it again." in text
    assert text.endswith("Do not assume it succeeded or that it failed.")


def test_a_given_up_call_replays_its_abandonment_without_none() -> None:
    ledger = ReceiptLedger()
    ledger.claim(KEY, 1, LEASE, now=T0)
    write = ledger.resolve_ambiguous(KEY, 1, GiveUp(), now=LEASE)
    assert isinstance(write, WriteApplied) and write.receipt.result is not None
    assert write.receipt.result == abandoned_result("send_email", None)


def ignored(write: LedgerWrite, refusal: str) -> str:
    assert isinstance(write, WriteIgnored), write
    assert write.refusal == refusal
    return write.detail


def test_every_ignored_write_says_why_in_words() -> None:
    # The detail reaches a person: the workflow raises it when a resolution is refused.
    ledger = ReceiptLedger(progress_limit_bytes=10)
    assert ignored(ledger.complete(KEY, 1, "x"), "absent") == "no receipt under this key"
    ledger.claim(KEY, 1, LEASE, now=T0)
    assert ignored(ledger.claim(KEY, 3, LEASE, now=T0), "not_next_attempt") == (
        "the next attempt is 2, not 3"
    )
    assert ignored(ledger.claim(KEY, 2, LEASE, now=T0), "lease_live") == (
        f"attempt 1 holds the lease until {LEASE.isoformat()}"
    )
    assert ignored(ledger.resolve_ambiguous(KEY, 1, GiveUp(), now=T0), "lease_live") == (
        f"attempt 1 holds the lease until {LEASE.isoformat()}; it may still report"
    )
    assert ignored(ledger.record_progress(KEY, 1, ["a" * 20]), "too_large") == (
        "progress of 24 bytes exceeds 10; the previous snapshot is kept"
    )
    assert ignored(ledger.complete(KEY, 2, "x"), "stale_attempt") == (
        "attempt 2 is stale: attempt 1 owns the receipt"
    )
    done = ledger.complete(KEY, 1, "sent")
    assert isinstance(done, WriteApplied)
    assert ignored(ledger.fail(KEY, 1), "not_running") == "attempt 1 already completed"
    later = LEASE + timedelta(minutes=1)
    final = ledger.claim(KEY, 2, later + timedelta(minutes=5), now=later)
    assert ignored(final, "final") == "attempt 1 completed it"
    assert isinstance(final, WriteIgnored) and final.current == done.receipt  # what to replay


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda ledger: ledger.claim(KEY, 1, LEASE, now=NAIVE), "now"),
        (lambda ledger: ledger.claim(KEY, 1, NAIVE, now=T0), "lease_expires_at"),
        (lambda ledger: ledger.resolve_ambiguous(KEY, 1, GiveUp(), now=NAIVE), "now"),
    ],
)
def test_a_naive_datetime_given_to_the_ledger_is_named(call: Any, name: str) -> None:
    with pytest.raises(NaiveDatetimeError) as caught:
        call(ReceiptLedger())
    assert str(caught.value).startswith(f"{name} is a naive datetime")
