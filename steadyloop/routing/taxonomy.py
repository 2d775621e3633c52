"""What happened to one attempt at a model call, as facts a route table can decide on.

Transports report facts, not decisions. `FailureFacts` says what kind of thing went
wrong (the attempt was aborted or lost, the completion was defective, the network
failed and how, the provider answered with an error status or an in-stream error and
what category it falls in, the stream stalled and in which phase), whether the attempt
had already produced output a user saw, and what the provider asked for (`Retry-After`).
`steadyloop.routing.disposition` turns facts into retry / traverse / stop. Pure: no
I/O, no httpx, no Temporal, so workflow code imports it freely.

What the obvious classification gets wrong, and where this module prevents it:

- "4xx is the caller's fault, 5xx the provider's" misroutes half the cases. A 429 is
  the endpoint's state, not the request's; `insufficient_quota` arrives as a 429 but
  waiting does not refill a quota (`quota`); OpenRouter reports moderation as a 403,
  which is not an authentication problem (`content_filter` is checked before `auth`);
  Anthropic reports an empty credit balance, and a reached spend limit, as a 400.
  `http_category` reads the provider's code, type and message before falling back to
  the status.
- Context-length errors have no common shape: OpenAI and Groq send
  `code: context_length_exceeded`, llama.cpp `type: exceed_context_size_error`, vLLM,
  DeepSeek and OpenRouter only a sentence ("maximum context length is ..."), Anthropic
  "prompt is too long", Gemini "exceeds the maximum number of tokens", Mistral "too
  large for model with ... maximum context length". Sending the same transcript to
  the next provider blindly fails the same way, so this category must be recognised
  (`_CONTEXT_PATTERNS`). A 429 that says "Request too large ... tokens per min" is a
  rate limit, not a context error: rate-limit codes win.
- An unsupported parameter looks like any other 400. Degrading (dropping the
  parameter and retrying) is only safe for the few parameters steadyloop knows how to
  do without (`DEGRADABLE_PARAMETERS`), and only when the provider blamed that
  parameter as unsupported or unknown, by `param`/`loc` or in its message; an
  *invalid* `response_format` schema is the caller's error, not a missing feature.
- A network failure is not one thing: a refused connection, a failed DNS lookup or a
  TLS error means nothing is there to retry against, while a reset or a body cut
  mid-message may well succeed again (`NetworkReason`).
"""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, field_validator

from steadyloop.stream.failures import (
    NetworkReason,
    StallPhase,
    StreamFailure,
    bounded_retry_after,
)

__all__ = [
    "DEGRADABLE_PARAMETERS",
    "DegradableParameter",
    "FailureFacts",
    "FailureKind",
    "HttpCategory",
    "NetworkReason",
    "degradable_parameter",
    "facts_from_stream_failure",
    "http_category",
    "network_reason_from_message",
]

FailureKind = Literal[
    # The attempt was cancelled from outside (the run was cancelled or is shutting down).
    "aborted",
    # The attempt ended without an outcome: the worker died, or the activity timed out.
    "lost",
    # A complete answer that cannot be used (dropped deltas, truncated arguments, ...).
    "completion_defect",
    # This worker cannot call the endpoint: unknown endpoint name, missing API key.
    "configuration",
    # No HTTP answer, or one cut off; `network_reason` says how.
    "network",
    # A non-2xx status before the stream; `category` says what it means.
    "http_status",
    # An error object inside a stream (or as a 2xx body); `category` as for a status.
    "stream_error",
    # A 2xx answer that is not a chat-completions event stream.
    "protocol",
    # The stream watchdog ended a silent stream; `stall_phase` says when.
    "stall",
]

HttpCategory = Literal[
    "rate_limit",  # 429: the endpoint is busy; Retry-After says when to come back
    "quota",  # the account has no quota or credit left: waiting does not help
    "server_error",  # 5xx, overloaded, an unexplained in-stream error
    "transient",  # 408, 409, 425: try the same request again
    "request_rejected",  # 400, 413, 422 and other 4xx: this request, as sent
    "auth",  # 401, 403: the key is missing, wrong or not allowed
    "not_found",  # 404: no such model (or path)
    "content_filter",  # moderation or a content policy refused the input
    "context_length",  # the conversation does not fit the model's context window
    "other",  # a redirect or anything else
]

# Request parameters steadyloop can drop when an endpoint does not support them.
DegradableParameter = Literal[
    "stream_options", "parallel_tool_calls", "response_format", "tool_choice", "reasoning_effort"
]
DEGRADABLE_PARAMETERS: Final[tuple[DegradableParameter, ...]] = get_args(DegradableParameter)


class FailureFacts(BaseModel):
    """One failed attempt, as facts. `produced_output`: the attempt had already forwarded
    output to a user, so it must be neither retried nor sent elsewhere."""

    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    message: str = ""
    category: HttpCategory | None = None
    status: int | None = None
    network_reason: NetworkReason | None = None
    stall_phase: StallPhase | None = None
    retry_after_s: float | None = None
    produced_output: bool = False
    provider_code: str | None = None
    provider_type: str | None = None
    # `request_rejected` only: the degradable parameter the provider refused.
    unsupported_parameter: DegradableParameter | None = None

    @field_validator("retry_after_s")
    @classmethod
    def _bounded_retry_after(cls, value: float | None) -> float | None:
        # A provider's number: NaN or negative is no request, anything huge the ceiling,
        # so no rule downstream computes with a value a `timedelta` cannot hold.
        return bounded_retry_after(value)

    def describe(self) -> str:
        parts: list[str] = [self.kind]
        if self.category is not None:
            parts.append(self.category)
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.network_reason is not None:
            parts.append(self.network_reason)
        if self.stall_phase is not None:
            parts.append(self.stall_phase)
        if self.produced_output:
            parts.append("after output was forwarded")
        if self.message:
            parts.append(self.message)
        return ": ".join(parts)


# -- HTTP and provider errors ---------------------------------------------------------

_RATE_LIMIT_CODES = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "rate_limited", "too_many_requests"}
)
_RATE_LIMIT_TYPES = frozenset({"rate_limit_error", "rate_limit_exceeded", "tokens", "requests"})
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"})
_QUOTA_PATTERNS = re.compile(
    r"insufficient[ _]quota|credit balance is too low|insufficient credits|"
    r"billing hard limit|out of credits|"
    # Anthropic's spend limit, a 400 `invalid_request_error` until the month turns.
    r"reached your specified api usage limits",
    re.IGNORECASE,
)
_AUTH_TYPES = frozenset(
    {
        "authentication_error",
        "permission_error",
        "permission_denied",
        "unauthenticated",
        "invalid_api_key",
    }
)
_AUTH_CODES = frozenset({"invalid_api_key", "invalid_authentication", "unauthorized"})
_NOT_FOUND_TYPES = frozenset({"not_found_error", "not_found"})
_NOT_FOUND_CODES = frozenset({"model_not_found", "not_found"})
_SERVER_TYPES = frozenset(
    {"server_error", "api_error", "overloaded_error", "internal", "unavailable", "internal_error"}
)
_CONTEXT_CODES = frozenset(
    {"context_length_exceeded", "context_window_exceeded", "exceed_context_size_error"}
)
_CONTEXT_PATTERNS = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|prompt is too long|"
    r"input (is )?too long|"
    r"exceed(s|ed)? the (max|maximum) (number of )?(input )?tokens|"
    r"too large for model|reduce the length of the (messages|prompt|input)|"
    r"tokens? \+ `?max_new_tokens`? must be",
    re.IGNORECASE,
)
_FILTER_CODES = frozenset(
    {
        "content_filter",
        "content_policy_violation",
        "invalid_prompt",
        "responsibleaipolicyviolation",
        "moderation_blocked",
        "prohibited_content",
        "safety",
        # Anthropic's `stop_reason: "refusal"` (raised as this type by its wire's reader).
        "refusal",
    }
)
_FILTER_PATTERNS = re.compile(
    r"content[ _](management )?polic|content[ _]filter|moderation|flagged|"
    r"usage polic|safety (system|filter|settings)|prohibited content",
    re.IGNORECASE,
)


def http_category(
    status: int | None,
    code: str | None = None,
    type: str | None = None,
    message: str | None = None,
) -> HttpCategory:
    """What a provider's error means, from its status (None inside a stream), code,
    type and message; the provider's own words win over the status where they differ."""
    code_l = (code or "").strip().lower()
    type_l = (type or "").strip().lower()
    text = message or ""
    if status is None and code_l.isdigit():
        status = int(code_l)  # OpenRouter and Gemini put the status in `code`
    if code_l in _RATE_LIMIT_CODES or type_l in _RATE_LIMIT_TYPES:
        return "rate_limit"
    if code_l in _QUOTA_CODES or type_l in _QUOTA_CODES or status == 402:
        return "quota"
    if _QUOTA_PATTERNS.search(text):
        return "quota"
    if code_l in _CONTEXT_CODES or type_l in _CONTEXT_CODES:
        return "context_length"  # (llama.cpp sent exceed_context_size_error with a 500)
    client_side = status is None or 400 <= status < 500
    if client_side and status != 429:
        if _CONTEXT_PATTERNS.search(text):
            return "context_length"
        if code_l in _FILTER_CODES or type_l in _FILTER_CODES or _FILTER_PATTERNS.search(text):
            return "content_filter"
    if status == 429 or type_l == "resource_exhausted":
        return "rate_limit"
    if status in (401, 403) or type_l in _AUTH_TYPES or code_l in _AUTH_CODES:
        return "auth"
    if status == 404 or type_l in _NOT_FOUND_TYPES or code_l in _NOT_FOUND_CODES:
        return "not_found"
    if status in (408, 409, 425):
        return "transient"
    if status is not None and status >= 500:
        return "server_error"
    if status is not None and 400 <= status < 500:
        return "request_rejected"
    if status is None:
        # Inside a stream: the provider's type decides; an unexplained error is the
        # provider's failure, not the request's.
        if type_l in ("invalid_request_error", "invalid_argument", "badrequesterror"):
            return "request_rejected"
        return "server_error"
    if type_l in _SERVER_TYPES:
        return "server_error"
    return "other"


# Words with which providers say a parameter is not supported (not merely invalid).
_UNSUPPORTED_CODES = frozenset(
    {
        "unsupported_parameter",
        "unsupported_value",
        "unknown_parameter",
        "unrecognized_parameter",
        "extra_forbidden",
    }
)
_UNSUPPORTED_WORDS = re.compile(
    r"unsupported|not supported|does not support|doesn't support|unknown (name|parameter|"
    r"field|argument)|unrecognized|extra inputs are not permitted|extra_forbidden|"
    r"cannot find field|not allowed|not permitted|is not available|requires --enable",
    re.IGNORECASE,
)
# How each parameter is written in messages (`tool_choice`, "tool choice", `tool-choice`).
_PARAMETER_NAMES: dict[DegradableParameter, re.Pattern[str]] = {
    name: re.compile(r"\b" + name.replace("_", "[ _-]") + r"\b", re.IGNORECASE)
    for name in DEGRADABLE_PARAMETERS
}


def degradable_parameter(
    parameter: str | None, code: str | None, message: str | None
) -> DegradableParameter | None:
    """The degradable parameter a rejection says is unsupported, or None.

    `parameter` is what the body blamed (`error.param`, a validation `loc`); without
    one, the message must name exactly one degradable parameter. Either way the code or
    the message must say *unsupported* (or unknown, unrecognized, not permitted):
    a parameter that is merely invalid (a bad JSON schema) is the caller's to fix.
    """
    code_l = (code or "").strip().lower()
    text = message or ""
    says_unsupported = code_l in _UNSUPPORTED_CODES or bool(_UNSUPPORTED_WORDS.search(text))
    if not says_unsupported:
        return None
    if parameter is not None:
        blamed = parameter.strip().split(".", 1)[0].split("[", 1)[0]
        for name in DEGRADABLE_PARAMETERS:
            if blamed == name:
                return name
        return None
    named = [name for name, pattern in _PARAMETER_NAMES.items() if pattern.search(text)]
    return named[0] if len(named) == 1 else None


# -- from the model activity's classified failure ---------------------------------------

_NETWORK_MESSAGES: tuple[tuple[re.Pattern[str], NetworkReason], ...] = (
    (re.compile(r"Timeout\b|timed out", re.IGNORECASE), "timeout"),
    (re.compile(r"refused|Errno 111|Connect call failed", re.IGNORECASE), "refused"),
    (
        re.compile(
            r"Name or service not known|nodename nor servname|getaddrinfo|"
            r"name resolution|Errno -[235]\b|No address associated",
            re.IGNORECASE,
        ),
        "dns",
    ),
    (re.compile(r"\bSSL\b|\bTLS\b|CERTIFICATE", re.IGNORECASE), "tls"),
    (re.compile(r"incomplete chunked read|complete message body", re.IGNORECASE), "cut"),
    (
        re.compile(
            r"reset by peer|Errno 104|Server disconnected|ReadError|WriteError|Broken pipe",
            re.IGNORECASE,
        ),
        "reset",
    ),
)


def network_reason_from_message(message: str) -> NetworkReason:
    """A network failure's reason from its text, for failures reported without one."""
    for pattern, reason in _NETWORK_MESSAGES:
        if pattern.search(message):
            return reason
    return "other"


def facts_from_stream_failure(
    failure: StreamFailure, *, produced_output: bool = False
) -> FailureFacts:
    """The facts of a failure the model activity classified (`StreamFailure`)."""
    common = {
        "message": failure.message,
        "status": failure.status,
        "provider_code": failure.provider_code,
        "provider_type": failure.provider_type,
        "retry_after_s": failure.retry_after_s,
        "produced_output": produced_output,
    }
    kind = failure.kind
    if kind == "stall":
        return FailureFacts(kind="stall", stall_phase=failure.stall_phase, **common)
    if kind == "truncated_stream":
        return FailureFacts(kind="network", network_reason="cut", **common)
    if kind == "network":
        reason = failure.network_reason or network_reason_from_message(failure.message)
        return FailureFacts(kind="network", network_reason=reason, **common)
    has_provider_error = failure.provider_code is not None or failure.provider_type is not None
    if kind == "invalid_chunk" or (kind == "not_sse" and not has_provider_error):
        return FailureFacts(kind="protocol", **common)
    # http_status, stream_error, or a 2xx body that was a provider's error object.
    status = failure.status if kind == "http_status" else None
    category = http_category(status, failure.provider_code, failure.provider_type, failure.message)
    unsupported = None
    if category == "request_rejected":
        unsupported = degradable_parameter(
            failure.parameter, failure.provider_code, failure.message
        )
    return FailureFacts(
        kind="http_status" if kind == "http_status" else "stream_error",
        category=category,
        unsupported_parameter=unsupported,
        **common,
    )
