"""The Anthropic Messages wire (`api = "anthropic"`): `<base>/messages`, its request
(`anthropic_request`) and its assembler (`anthropic_assembly`).

The one rule of its own: a body is a whole answer only once `message_stop` arrived. A
Messages stream reports its stop reason in `message_delta` before `message_stop`, so
accepting a body that ended after a stop reason (as the chat wire does, for servers
that omit `[DONE]`) would accept a stream cut between the two, usage and all.
"""

from __future__ import annotations

from typing import Any

from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.anthropic_assembly import AnthropicAssembler
from steadyloop._stream.anthropic_request import anthropic_body, anthropic_headers
from steadyloop._stream.completion import CompletionRequest

__all__ = ["ANTHROPIC_WIRE", "AnthropicWire"]


class AnthropicWire:
    """Anthropic Messages, streamed (`x-api-key`, `anthropic-version`)."""

    api = "anthropic"
    terminal_words = "message_stop"
    # The assembler dispatches on each payload's `type` and never reads an event's name,
    # so the decoder may hand `event:` + `data:` blocks over as plain data (its fast path).
    reads_event_names = False

    def url(self, endpoint: EndpointConfig) -> str:
        return endpoint.url

    def headers(self, endpoint: EndpointConfig, api_key: str | None) -> dict[str, str]:
        return anthropic_headers(endpoint, api_key)

    def body(self, request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]:
        return anthropic_body(request, endpoint)

    def assembler(self, request: CompletionRequest) -> AnthropicAssembler:
        return AnthropicAssembler(
            endpoint=request.endpoint,
            mint_prefix=request.mint_prefix,
            wants_json=request.wants_json(),
        )

    def accepts_end_of_body(self, assembler: object, saw_terminal: bool) -> bool:
        return saw_terminal


ANTHROPIC_WIRE = AnthropicWire()
