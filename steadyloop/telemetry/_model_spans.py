"""The model activity's span and metrics: one `chat`-side span per attempt, where it ran.

The workflow's attempt span (`chat {model}`) says what the route decided; this one, its
child, says what the wire did: the provider, time to first token, the stream's size, the
failure kind and stall phase. Tokens, duration, time to first token and stalls are
recorded here, once per attempt by the worker that streamed it, so a replayed workflow
cannot count them twice. With telemetry off `model_call` returns a shared no-op.

No content by default: the request's messages and the answer are added only under the
content opt-in. The API key is never read here.
"""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop.telemetry import _state as state


class _NoModelCall:
    def __enter__(self) -> _NoModelCall:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def finished(self, turn: AssembledTurn) -> AssembledTurn:
        return turn


_NO_MODEL_CALL = _NoModelCall()

# gen_ai.provider.name by API host (the conventions' well-known values where they have
# one); an endpoint at any other host is named by its configured name.
KNOWN_PROVIDERS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "x_ai",
    "openrouter.ai": "openrouter",
    "api.perplexity.ai": "perplexity",
}
KNOWN_PROVIDER_DOMAINS = {  # a host under one of these (a resource's own subdomain)
    ".openai.azure.com": "azure.ai.openai",
    ".services.ai.azure.com": "azure.ai.inference",
    "-aiplatform.googleapis.com": "gcp.vertex_ai",
}
CONTENT_CHARS = 16384


def provider_name(endpoint: EndpointConfig) -> str:
    """`gen_ai.provider.name`: the conventions' id of the provider behind the endpoint's
    host (`openai`, `anthropic`, ...), else the endpoint's configured name. Never the host
    itself: `127.0.0.1` or a gateway's address names no provider, and a host as a metric
    label would split one endpoint's series by where it was deployed."""
    host = (urlsplit(endpoint.base_url).hostname or "").lower().rstrip(".")
    known = KNOWN_PROVIDERS.get(host)
    if known is not None:
        return known
    for domain, name in KNOWN_PROVIDER_DOMAINS.items():
        if host.endswith(domain):
            return name
    return endpoint.name


def model_call(endpoint: EndpointConfig, request: CompletionRequest) -> _NoModelCall | _ModelCall:
    """A context manager around one streamed completion; `.finished(turn)` records the
    answer and returns it. A `StreamFailed` leaving the block records its kind."""
    installed = state.current()
    if installed is None:
        return _NO_MODEL_CALL
    return _ModelCall(installed, endpoint, request)


class _ModelCall:
    def __init__(self, installed: Any, endpoint: EndpointConfig, request: CompletionRequest):
        from opentelemetry.trace import SpanKind

        from steadyloop.telemetry import _attributes as a

        self.a = a
        self.installed = installed
        parts = urlsplit(endpoint.base_url)
        provider = provider_name(endpoint)
        self.labels = {
            a.PROVIDER: provider,
            a.REQUEST_MODEL: request.model,
            a.ENDPOINT: endpoint.name,
            a.OPERATION: "chat",
        }
        attributes: dict[str, Any] = {
            **self.labels,
            a.SYSTEM: provider,
            "server.address": parts.hostname or "",
        }
        if parts.port is not None:
            attributes["server.port"] = parts.port
        if installed.settings.capture_content:
            attributes[a.CONTENT_INPUT] = _bounded(
                json.dumps(
                    [m.model_dump(mode="json", exclude_none=True) for m in request.messages],
                    ensure_ascii=False,
                )
            )
        self.span = installed.tracer.start_span(
            f"stream {request.model}", kind=SpanKind.CLIENT, attributes=attributes
        )
        self.started = time.monotonic()

    def __enter__(self) -> _ModelCall:
        return self

    def finished(self, turn: AssembledTurn) -> AssembledTurn:
        a, span, instruments = self.a, self.span, self.installed.instruments
        if turn.usage is not None:
            span.set_attribute(a.INPUT_TOKENS, turn.usage.prompt_tokens)
            span.set_attribute(a.OUTPUT_TOKENS, turn.usage.completion_tokens)
            instruments.tokens.record(
                turn.usage.prompt_tokens, {**self.labels, a.TOKEN_TYPE: "input"}
            )
            instruments.tokens.record(
                turn.usage.completion_tokens, {**self.labels, a.TOKEN_TYPE: "output"}
            )
        if turn.finish_reason:
            span.set_attribute(a.FINISH_REASONS, [turn.finish_reason])
        if turn.model:
            span.set_attribute(a.RESPONSE_MODEL, turn.model)
        if turn.response_id:
            span.set_attribute(a.RESPONSE_ID, turn.response_id)
        ttft = turn.stats.time_to_first_token_s
        if ttft is not None:
            span.set_attribute(a.TTFT_S, ttft)
            instruments.time_to_first_token.record(ttft, self.labels)
        span.set_attribute("steadyloop.stream.bytes", turn.stats.bytes)
        if turn.defects:
            span.set_attribute("steadyloop.stream.completion.defect", turn.defects[0].kind)
        if self.installed.settings.capture_content:
            output = {
                "role": "assistant",
                "content": turn.text,
                "tool_calls": [c.model_dump(mode="json") for c in turn.tool_calls],
            }
            span.set_attribute(a.CONTENT_OUTPUT, _bounded(json.dumps([output], ensure_ascii=False)))
        return turn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        from opentelemetry.trace import Status, StatusCode

        a, span, instruments = self.a, self.span, self.installed.instruments
        labels = dict(self.labels)
        if exc is not None:
            failure = getattr(exc, "failure", None)
            kind = str(getattr(failure, "kind", None) or type(exc).__name__)
            # The kind only: a provider's message can echo the prompt.
            span.set_status(Status(StatusCode.ERROR, kind))
            span.set_attribute(a.ERROR_TYPE, kind)
            labels[a.ERROR_TYPE] = kind
            phase = getattr(failure, "stall_phase", None)
            if kind == "stall":
                span.set_attribute(a.STALL_PHASE, str(phase))
                instruments.stalls.add(1, {**self.labels, a.STALL_PHASE: str(phase)})
        instruments.duration.record(time.monotonic() - self.started, labels)
        span.end()


def _bounded(text: str) -> str:
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"
