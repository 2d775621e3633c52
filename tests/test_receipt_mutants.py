"""Receipts: what mutation testing found no test noticed (issue 14, "Tests that would notice").

Each test here was written against a mutant of `receipt_decision` or `receipt_ledger`
that survived the rest of the suite: a clock check weakened from `or` to `and`, a
hash check that accepts a prefix, a refusal or marker that reads `None`. They assert
behaviour (what is accepted, what a person or a model reads), not exact wording.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

import pydantic
import pytest

from steadyloop.receipt_decision import (
    NaiveDatetimeError,
    Receipt,
    ReceiptKey,
    decide_tool_call_receipt,
    lease_live,
    require_aware,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LEASE = T0 + timedelta(minutes=5)
HASH = "0" * 64


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
