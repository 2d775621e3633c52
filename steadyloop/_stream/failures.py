"""The words and bounds of a streamed completion's failure.

Every way a stream can go wrong becomes one `StreamFailure` (`steadyloop._routing.
taxonomy`, the one model of a failed attempt), raised by the stream reader inside
`StreamFailed`: never an unhandled exception, never a hang. This module holds what that
model is made of and kept within: where a stream stalled, how a network failure broke,
how long a provider's text and `Retry-After` may be, and a body's printable excerpt.

Every field a provider controls is hostile: it may echo the API key, hold lone
surrogates or NUL, or be megabytes long. `redact_failure` passes each of them through
`steadyloop._redaction.safe_text` (clean, redact, then bound) before a failure leaves
the activity, and `retry_after_s` is bounded on construction (`bounded_retry_after`),
so no provider number can overflow a `timedelta` downstream.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from steadyloop._redaction import Secrets, safe_text

# Where a stream stalled: waiting for its first token, between two chunks (the
# inter-chunk budget once the answer started, the reasoning gap before), or past the
# absolute cap on the call.
StallPhase = Literal["before_first_token", "between_chunks", "total_cap"]

# What a `network` failure was, read from the httpx exception and its causes
# (`steadyloop._routing.transport_errors.network_reason`): no connection (`refused`, `dns`,
# `tls`), a connection that broke (`reset`: no answer or a reset; `cut`: a body ended
# mid-message), an httpx `timeout`, or `other`.
NetworkReason = Literal["refused", "dns", "tls", "reset", "cut", "timeout", "other"]

BODY_EXCERPT_CHARS = 500
# Bounds of the provider-controlled text fields of a failure once redacted.
MESSAGE_CHARS: Final = 2000
FIELD_CHARS: Final = 200
# The longest wait a provider's `Retry-After` can ask for. Anything longer (1e300, an
# infinity, an HTTP date centuries away) is this, which every rule treats as too long to
# wait (`steadyloop._routing.disposition`), and which still fits a `timedelta`.
RETRY_AFTER_CEILING_S: Final = 10 * 365 * 86_400.0
# The free-text fields of `StreamFailure` (the ones a provider's answer can fill), and
# the bound of each; `redact_failure` covers exactly these.
TEXT_FIELDS: Final[dict[str, int]] = {
    "message": MESSAGE_CHARS,
    "provider_code": FIELD_CHARS,
    "provider_type": FIELD_CHARS,
    # An excerpt is already cut to BODY_EXCERPT_CHARS plus a note of the full length.
    "body_excerpt": BODY_EXCERPT_CHARS + 40,
    "parameter": FIELD_CHARS,
    "budget": FIELD_CHARS,
}


def bounded_retry_after(value: float | None) -> float | None:
    """A provider's requested wait in seconds, made safe for arithmetic: NaN and negative
    values are no request (None); +infinity and anything past `RETRY_AFTER_CEILING_S` is
    the ceiling (too long for any candidate to wait)."""
    if value is None or math.isnan(value) or value < 0:
        return None
    return min(value, RETRY_AFTER_CEILING_S)


def excerpt(
    body: str | bytes, limit: int = BODY_EXCERPT_CHARS, *, secrets: Secrets | None = None
) -> str:
    """A short, printable excerpt of a body, for a person reading the failure: invalid
    UTF-8, lone surrogates and NUL replaced, the `secrets` redacted *before* the cut."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return safe_text(text, secrets, limit)
