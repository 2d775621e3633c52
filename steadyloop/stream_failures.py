"""Classified failures of one streamed completion, as values that cross Temporal.

Every way a stream can go wrong becomes one `StreamFailure`: never an unhandled
exception, never a hang. The kinds are facts about the transport, not decisions:
routing (what to retry, where to fall back) reads them later. Each carries the HTTP
status when there was one, the provider's own message and error code when it sent
them, and a short excerpt of the body so a person can see what actually arrived.

The kind names live here, in one module, so the raising site (the stream reader) and
the handling site (the activity, later the router) cannot drift apart.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

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
# (`steadyloop.transport_errors.network_reason`): no connection (`refused`, `dns`,
# `tls`), a connection that broke (`reset`: no answer or a reset; `cut`: a body ended
# mid-message), an httpx `timeout`, or `other`.
NetworkReason = Literal["refused", "dns", "tls", "reset", "cut", "timeout", "other"]

BODY_EXCERPT_CHARS = 500


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
    # such an attempt is never repeated (`steadyloop.output_forwarding`).
    produced_output: bool = False

    def describe(self) -> str:
        parts: list[str] = [self.kind]
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.provider_code:
            parts.append(f"code={self.provider_code}")
        parts.append(self.message)
        return ": ".join(parts)


class StreamFailed(Exception):
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


def excerpt(body: str | bytes, limit: int = BODY_EXCERPT_CHARS) -> str:
    """A short, printable excerpt of a body, for a person reading the failure."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if not text.isascii():
        # Lone surrogates (a JSON escape parsed by the stdlib) would make the failure
        # itself unserializable: each becomes U+FFFD.
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"
