"""httpx exceptions and raw HTTP error answers, classified as `StreamFailure`.

The model activity calls `network_reason` when a request fails below HTTP, and callers
that talk to a provider with their own httpx client can classify what they got with
`classify_transport_error` (any httpx exception, `HTTPStatusError` included) or
`classify_http_error` (a status, headers and body). Kept apart from
`steadyloop._routing.taxonomy` so workflow code, which reads facts, never imports httpx.

Why the exception's class is not enough: httpx raises `ConnectError` for a refused
connection, a failed DNS lookup and a failed TLS handshake alike, and `ReadError` for a
reset; what happened is in the chain of causes (`ConnectionRefusedError`,
`socket.gaierror`, `ssl.SSLError`, `ConnectionResetError`), which anyio may wrap once
more (`OSError("All connection attempts failed")` caused by the refusal). The chain is
walked through `__cause__` and `__context__`, then the message is read as a last resort.

Both classifiers take the `secrets` the caller sent (its API keys): every text that
came from the provider or the exception is redacted of them and bounded
(`steadyloop._redaction`), exactly as the model activity does, so facts can be logged.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable, Mapping

import httpx

from steadyloop._redaction import Secrets, safe_text
from steadyloop._routing.provider_errors import blamed_parameter, parse_retry_after, provider_error
from steadyloop._routing.taxonomy import (
    NetworkReason,
    StreamFailure,
    network_reason_from_message,
    redact_failure,
)
from steadyloop._stream.failures import MESSAGE_CHARS, excerpt

__all__ = ["classify_http_error", "classify_transport_error", "network_reason"]

_MAX_CHAIN = 16


def network_reason(exc: BaseException) -> NetworkReason:
    """What broke, for an httpx transport exception (or any exception below HTTP)."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLError | ssl.CertificateError):
            return "tls"
        if isinstance(cause, socket.gaierror):
            return "dns"
        if isinstance(cause, ConnectionRefusedError):
            return "refused"
        if isinstance(cause, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
            return "reset"
    message = " ".join(f"{type(c).__name__}: {c}" for c in _chain(exc))
    reason = network_reason_from_message(message)
    if reason == "other" and isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return "reset"
    return reason


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < _MAX_CHAIN and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def classify_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    produced_output: bool = False,
    secrets: Iterable[str | None] = (),
) -> StreamFailure:
    """A non-2xx answer: its category, the provider's code and type, Retry-After."""
    message, code, kind = provider_error(body)
    redactor = Secrets(secrets)
    failure = StreamFailure(
        kind="http_status",
        produced_output=produced_output,
        message=message or f"HTTP {status}",
        status=status,
        provider_code=code,
        provider_type=kind,
        body_excerpt=excerpt(body, secrets=redactor),
        retry_after_s=parse_retry_after(headers),
        parameter=blamed_parameter(body),
    )
    return redact_failure(failure, redactor)


def classify_transport_error(
    exc: httpx.HTTPError, *, secrets: Iterable[str | None] = ()
) -> StreamFailure:
    """Any httpx exception: a status error by its response, the rest as network facts."""
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        try:
            body = response.content
        except httpx.ResponseNotRead:
            body = b""
        return classify_http_error(response.status_code, response.headers, body, secrets=secrets)
    text = safe_text(str(exc), Secrets(secrets), MESSAGE_CHARS)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(exc, httpx.DecodingError):
        return StreamFailure(kind="not_sse", message=message)
    return StreamFailure(kind="network", network_reason=network_reason(exc), message=message)
