"""Classified failures of one streamed completion, as values that cross Temporal.

Every way a stream can go wrong becomes one `StreamFailure`: never an unhandled
exception, never a hang. The kinds are facts about the transport, not decisions:
routing (what to retry, where to fall back) reads them later. Each carries the HTTP
status when there was one, the provider's own message and error code when it sent
them, and a short excerpt of the body so a person can see what actually arrived.

The kind names live here, in one module, so the raising site (the stream reader) and
the handling site (the activity, later the router) cannot drift apart.

Every field a provider controls is hostile: it may echo the API key, hold lone
surrogates or NUL, or be megabytes long. `redact_failure` passes each of them through
`steadyloop.redaction.safe_text` (clean, redact, then bound) before a failure leaves
the activity, and `retry_after_s` is bounded on construction (`bounded_retry_after`),
so no provider number can overflow a `timedelta` downstream.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from steadyloop.errors import SteadyloopError
from steadyloop.redaction import Secrets, safe_text

FailureKind = Literal[
    # A non-2xx status before the stream started.
    "http_status",
    # A JSON `error` object sent inside an otherwise well-formed stream.
    "stream_error",
    # A 2xx response whose body is not `text/event-stream` (an HTML page, a JSON body).
    "not_sse",
    # An SSE `data:` payload that is not JSON, or JSON that is not a chunk object.
    "invalid_chunk",
    # The body ended before `[DONE]` or a finish reason: the turn may be partial.
    "truncated_stream",
    # Connect refused, reset, DNS, TLS, read error: no HTTP answer, or one cut off.
    "network",
    # The stall watchdog ended the stream: no first token, no chunk, or no end in time.
    "stall",
]

# Where a stream stalled: waiting for its first token, between two chunks (the
# inter-chunk budget once the answer started, the reasoning gap before), or past the
# absolute cap on the call.
StallPhase = Literal["before_first_token", "between_chunks", "total_cap"]

# What a `network` failure was, read from the httpx exception and its causes
# (`steadyloop.routing.transport_errors.network_reason`): no connection (`refused`, `dns`,
# `tls`), a connection that broke (`reset`: no answer or a reset; `cut`: a body ended
# mid-message), an httpx `timeout`, or `other`.
NetworkReason = Literal["refused", "dns", "tls", "reset", "cut", "timeout", "other"]

BODY_EXCERPT_CHARS = 500
# Bounds of the provider-controlled text fields of a failure once redacted.
MESSAGE_CHARS: Final = 2000
FIELD_CHARS: Final = 200
# The longest wait a provider's `Retry-After` can ask for. Anything longer (1e300, an
# infinity, an HTTP date centuries away) is this, which every rule treats as too long to
# wait (`steadyloop.routing.disposition`), and which still fits a `timedelta`.
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


class StreamFailure(BaseModel):
    """One classified failure of a streamed completion."""

    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    message: str
    status: int | None = None
    provider_code: str | None = None
    provider_type: str | None = None
    body_excerpt: str = ""
    retry_after_s: float | None = None
    # `stall` only: the phase, the budget that ran out (its configuration field name,
    # e.g. `inter_chunk_s`) and its value in seconds.
    stall_phase: StallPhase | None = None
    budget: str | None = None
    budget_s: float | None = None
    # `network` only: what broke (None from a reader that did not say).
    network_reason: NetworkReason | None = None
    # The request parameter the provider's error body blamed (`error.param`, a
    # validation error's `loc`), when it named one.
    parameter: str | None = None
    # True when the attempt had already forwarded output to a person when it failed:
    # such an attempt is never repeated (`steadyloop.output.forwarding`).
    produced_output: bool = False

    @field_validator("retry_after_s")
    @classmethod
    def _bounded_retry_after(cls, value: float | None) -> float | None:
        return bounded_retry_after(value)

    def describe(self) -> str:
        parts: list[str] = [self.kind]
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.provider_code:
            parts.append(f"code={self.provider_code}")
        parts.append(self.message)
        return ": ".join(parts)


class StreamFailed(SteadyloopError):
    """Raised by the stream reader; carries the classified failure as a value.

    `shown_text` and `shown_reasoning` are what the attempt had forwarded to people
    watching before it failed (empty when it forwarded nothing).
    """

    def __init__(
        self, failure: StreamFailure, *, shown_text: str = "", shown_reasoning: str = ""
    ) -> None:
        super().__init__(failure.describe())
        self.failure = failure
        self.shown_text = shown_text
        self.shown_reasoning = shown_reasoning


def excerpt(
    body: str | bytes, limit: int = BODY_EXCERPT_CHARS, *, secrets: Secrets | None = None
) -> str:
    """A short, printable excerpt of a body, for a person reading the failure: invalid
    UTF-8, lone surrogates and NUL replaced, the `secrets` redacted *before* the cut."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return safe_text(text, secrets, limit)


def redact_failure(failure: StreamFailure, secrets: Secrets | None) -> StreamFailure:
    """`failure` with every provider-controlled text field cleaned, redacted and bounded
    (`TEXT_FIELDS`): what may leave the activity, be logged or be recorded."""
    update: dict[str, str] = {}
    for name, limit in TEXT_FIELDS.items():
        value = getattr(failure, name)
        if isinstance(value, str):
            safe = safe_text(value, secrets, limit)
            if safe != value:
                update[name] = safe
    return failure.model_copy(update=update) if update else failure
