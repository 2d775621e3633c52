"""What happened to one attempt at a model call, as facts a route table can decide on.

Transports report facts, not decisions. `StreamFailure` is the one model of a failed
attempt, built where the failure is seen (the model activity's stream reader, or the
workflow for an attempt that raised nothing classified) and read as it is by the route
table: what kind of thing went wrong (the attempt was aborted or lost, the completion
was defective, the network failed and how, the provider answered with an error status
or an in-stream error and what category it falls in, the stream stalled and in which
phase), whether the attempt had already produced output a user saw, and what the
provider asked for (`Retry-After`). `steadyloop._routing.disposition` is the one decider:
it turns a failure into retry / traverse / stop. Pure: no I/O, no httpx, no Temporal,
so workflow code imports it freely.

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
  Other wires carry a parameter in a field of their own (`_WIRE_FIELDS`: Responses'
  `text.format`, Anthropic's `output_config.format`): blamed by that name, it is the
  same parameter.
- A network failure is not one thing: a refused connection, a failed DNS lookup or a
  TLS error means nothing is there to retry against, while a reset or a body cut
  mid-message may well succeed again (`NetworkReason`).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from steadyloop._redaction import Secrets, safe_text
from steadyloop._stream.failures import TEXT_FIELDS, NetworkReason, StallPhase, bounded_retry_after
from steadyloop.errors import SteadyloopError

__all__ = [
    "DEGRADABLE_PARAMETERS",
    "DegradableParameter",
    "FailureKind",
    "HttpCategory",
    "NetworkReason",
    "StreamFailed",
    "StreamFailure",
    "degradable_parameter",
    "http_category",
    "network_reason_from_message",
    "redact_failure",
]

FailureKind = Literal[
    # -- what the model activity's stream reader saw (the `ApplicationError` type it raises)
    # A non-2xx status before the stream started; `category` says what it means.
    "http_status",
    # A JSON `error` object inside an otherwise well-formed stream; `category` as for a
    # status.
    "stream_error",
    # A 2xx answer whose body is not an event stream (an HTML page, a JSON body: a
    # provider's error object when `category` is set), or one httpx could not decode.
    "not_sse",
    # An SSE `data:` payload that is not JSON, or JSON that is not a chunk object.
    "invalid_chunk",
    # The body ended before `[DONE]` or a finish reason: the turn may be partial.
    "truncated_stream",
    # Connect refused, reset, DNS, TLS, read error: no HTTP answer, or one cut off;
    # `network_reason` says how.
    "network",
    # The stall watchdog ended the stream; `stall_phase` says when.
    "stall",
    # -- what the workflow saw of an attempt that raised no classified failure
    # The attempt was cancelled from outside (the run was cancelled or is shutting down).
    "aborted",
    # The attempt ended without an outcome: the worker died, or the activity timed out.
    "lost",
    # A complete answer that cannot be used (dropped deltas, truncated arguments, ...).
    "completion_defect",
    # This worker cannot call the endpoint: unknown endpoint name, missing API key.
    "configuration",
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


class StreamFailure(BaseModel):
    """One failed attempt at a model call: the one model of it, from the stream reader
    that saw it to the route table that decides on it.

    The model activity raises it as its `ApplicationError`'s first detail (its type is
    `kind`); the workflow reads it back from there as it is, or builds one for an attempt
    that raised none (aborted, lost, a defect, a worker's configuration). What a
    provider's error means (`category`, `unsupported_parameter`) and how a network
    failure broke (`network_reason`) are read from the facts when the failure is built,
    unless given, so every reader of a failure sees the same classification, and
    `steadyloop._routing.disposition` alone decides what it leads to.

    Every provider-controlled text is hostile until `redact_failure` has passed it
    through `steadyloop._redaction.safe_text`; `retry_after_s` is bounded on construction.
    `produced_output`: the attempt had already forwarded output to a user, so it must be
    neither retried nor sent elsewhere.
    """

    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    message: str = ""
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
    # `network` (and `truncated_stream`: a cut): what broke.
    network_reason: NetworkReason | None = None
    # The request parameter the provider's error body blamed (`error.param`, a
    # validation error's `loc`), when it named one.
    parameter: str | None = None
    produced_output: bool = False
    # A provider's error (`http_status`, `stream_error`, a `not_sse` error body): what
    # it means, and for `request_rejected` the degradable parameter it refused.
    category: HttpCategory | None = None
    unsupported_parameter: DegradableParameter | None = None

    @model_validator(mode="before")
    @classmethod
    def _classified(cls, data: Any) -> Any:
        return _classify(data) if isinstance(data, dict) else data

    @field_validator("retry_after_s")
    @classmethod
    def _bounded_retry_after(cls, value: float | None) -> float | None:
        # A provider's number: NaN or negative is no request, anything huge the ceiling,
        # so no rule downstream computes with a value a `timedelta` cannot hold.
        return bounded_retry_after(value)

    @property
    def route_kind(self) -> str:
        """The kind in the route's words, as the timeline and a decision's reason say it:
        a body cut short is a `network` cut, an answer that is not the wire's protocol is
        `protocol` (or the provider's `stream_error` when it sent an error object)."""
        if self.kind == "truncated_stream":
            return "network"
        if self.kind == "not_sse" and self.category is not None:
            return "stream_error"
        if self.kind in ("not_sse", "invalid_chunk"):
            return "protocol"
        return self.kind

    def describe(self) -> str:
        """The failure as a decision's reason or a stop's detail states it."""
        parts: list[str] = [self.route_kind]
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

    def reported(self) -> str:
        """The failure as the stream reader reports it (the raised error's text)."""
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
        super().__init__(failure.reported())
        self.failure = failure
        self.shown_text = shown_text
        self.shown_reasoning = shown_reasoning


def redact_failure(failure: StreamFailure, secrets: Secrets | None) -> StreamFailure:
    """`failure` with every provider-controlled text field cleaned, redacted and bounded
    (`TEXT_FIELDS`): what may leave the activity, be logged or be recorded. What the
    error means is read again from the redacted text, as any later reader will read it."""
    update: dict[str, str] = {}
    for name, limit in TEXT_FIELDS.items():
        value = getattr(failure, name)
        if isinstance(value, str):
            safe = safe_text(value, secrets, limit)
            if safe != value:
                update[name] = safe
    if not update:
        return failure
    fields = failure.model_dump() | update | {"category": None, "unsupported_parameter": None}
    return type(failure).model_validate(fields)


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
# The body field another wire sends a parameter in -> its chat name (what
# `omit_parameters` holds): a structured-output request is Responses' `text.format` and
# Anthropic's `output_config.format` (or the beta's `output_format`).
_WIRE_FIELDS: dict[str, DegradableParameter] = {
    "text": "response_format",
    "output_config": "response_format",
    "output_format": "response_format",
    "reasoning": "reasoning_effort",
}
# How each parameter is written in messages (`tool_choice`, "tool choice", `tool-choice`).
_PARAMETER_NAMES: dict[DegradableParameter, re.Pattern[str]] = {
    name: re.compile(r"\b" + name.replace("_", "[ _-]") + r"\b", re.IGNORECASE)
    for name in DEGRADABLE_PARAMETERS
}
_PARAMETER_NAMES["response_format"] = re.compile(
    r"\bresponse[ _-]format\b|\boutput_config\b|\boutput_format\b|\btext\.format\b",
    re.IGNORECASE,
)


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
        return _WIRE_FIELDS.get(blamed)
    named = [name for name, pattern in _PARAMETER_NAMES.items() if pattern.search(text)]
    return named[0] if len(named) == 1 else None


# -- a failure's meaning, read when it is built ------------------------------------------

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


def _classify(facts: dict[str, Any]) -> dict[str, Any]:
    """`facts` (a failure's fields) with what they mean filled in where not given: a
    network failure's reason (from its text when the reader did not say; a truncated
    body is a cut), and a provider error's category and refused parameter. A failure
    read back from history is classified by the same rules it was raised under."""
    kind = facts.get("kind")
    if kind in ("network", "truncated_stream") and facts.get("network_reason") is None:
        reason = "cut" if kind == "truncated_stream" else None
        facts = {**facts, "network_reason": reason or _reason_of(facts.get("message"))}
    has_provider_error = facts.get("provider_code") is not None or (
        facts.get("provider_type") is not None
    )
    provider_error = kind in ("http_status", "stream_error") or (
        kind == "not_sse" and has_provider_error
    )
    if not provider_error or facts.get("category") is not None:
        return facts
    message = facts.get("message")
    code = facts.get("provider_code")
    status = facts.get("status") if kind == "http_status" else None
    category = http_category(status, code, facts.get("provider_type"), message)
    unsupported = facts.get("unsupported_parameter")
    if category == "request_rejected" and unsupported is None:
        unsupported = degradable_parameter(facts.get("parameter"), code, message)
    return {**facts, "category": category, "unsupported_parameter": unsupported}


def _reason_of(message: Any) -> NetworkReason:
    return network_reason_from_message(message if isinstance(message, str) else "")
