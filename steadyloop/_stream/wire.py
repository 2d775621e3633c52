"""The wire an endpoint speaks: where a turn is posted, with what, and who reads the answer.

`EndpointConfig.api` names it (`chat`, `responses`, `anthropic`); `wire_for(api)` is
the `Wire` the model activity uses for every request to that endpoint. A wire builds
the URL, the headers and the body from the same `CompletionRequest` (one transcript,
one tool list, whatever the wire), and makes the `StreamAssembler` that folds the
answer's SSE events into the same `AssembledTurn`. Everything else the activity does
(sniffing the body, the watchdog, the runaway guard, forwarding, the token budget,
classifying failures, redaction) reads only the assembler's counters, so it holds on
every wire without knowing which one it is.

What goes wrong when a second wire is bolted on, and what prevents each here:

- A body ending without its terminal event is a cut stream on Responses and Anthropic
  (`response.completed`, `message_stop` never came), while Chat Completions accepts a
  body that ended after a finish reason (servers omit `[DONE]`). The rule is the
  wire's (`accepts_end_of_body`), and the truncation message names the wire's own
  terminal (`terminal_words`).
- Pass-back items sent to an endpoint that did not issue them are refused: each wire
  that sends them filters through `steadyloop._stream.passback.passback_for`; the chat
  wire never sends any.
- The chat wire must not change or slow down: `ChatWire` calls today's
  `build_request_body`, `build_headers` and `TurnAssembler`, nothing in between.
- A wire not built into this version is a named, non-retryable refusal
  (`UnsupportedWireError`), never a Chat Completions request to a Responses server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from steadyloop._routing.endpoints import API_CHOICES, EndpointConfig
from steadyloop._stream.anthropic_wire import ANTHROPIC_WIRE
from steadyloop._stream.chat_request import build_headers, build_request_body
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.responses_assembly import ResponsesAssembler
from steadyloop._stream.responses_request import build_responses_body
from steadyloop._stream.runaway_guard import ArgumentsSoFar
from steadyloop._stream.sse import ServerSentEvent
from steadyloop._stream.turn_assembly import TurnAssembler
from steadyloop.errors import UNSUPPORTED_WIRE, SteadyloopError

__all__ = [
    "CHAT_WIRE",
    "RESPONSES_WIRE",
    "WIRES",
    "CallProgress",
    "ChatWire",
    "ResponsesWire",
    "StreamAssembler",
    "UnsupportedWireError",
    "Wire",
    "wire_for",
]


class CallProgress(Protocol):
    """What the activity reads of the tool calls being assembled, mid-stream."""

    @property
    def records(self) -> Sequence[ArgumentsSoFar]: ...

    @property
    def is_empty(self) -> bool: ...

    def was_minted(self, call_id: str) -> bool: ...


class StreamAssembler(Protocol):
    """Folds the SSE events of one response body into an `AssembledTurn`.

    `feed_events` takes one network read's events and returns True once the wire's
    terminal event arrived (stop reading); it raises `StreamFailed` for a failure the
    stream itself reports. The properties are cheap counters, read once per read (see
    `TurnAssembler` for what each means). `finish` is called once.
    """

    def feed_events(self, events: Sequence[ServerSentEvent | str | bytes]) -> bool: ...

    def finish(self) -> AssembledTurn: ...

    @property
    def output_chars(self) -> int: ...

    @property
    def text_parts(self) -> list[str]: ...

    @property
    def reasoning_parts(self) -> list[str]: ...

    @property
    def tool_call_count(self) -> int: ...

    @property
    def first_token_seen(self) -> bool: ...

    @property
    def answer_token_seen(self) -> bool: ...

    @property
    def content_mark(self) -> int: ...

    @property
    def may_hold_surrogates(self) -> bool: ...

    @property
    def reported_completion_tokens(self) -> int | None: ...

    @property
    def finish_reason_seen(self) -> bool: ...

    @property
    def chunks(self) -> int: ...

    @property
    def calls(self) -> CallProgress: ...


class Wire(Protocol):
    """One wire: the request for an endpoint, and the assembler of its answer."""

    api: str
    # The terminal the truncation message names ("[DONE] or a finish_reason").
    terminal_words: str
    # Whether the assembler reads SSE event names (chat: `event: error`). False lets the
    # decoder hand `event:`-labelled events over as plain data (`SSEDecoder(event_names=)`);
    # an `event: error` block still arrives as an event.
    reads_event_names: bool

    def url(self, endpoint: EndpointConfig) -> str: ...

    def headers(self, endpoint: EndpointConfig, api_key: str | None) -> dict[str, str]: ...

    def body(self, request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]: ...

    def assembler(self, request: CompletionRequest) -> StreamAssembler:
        """A fresh assembler for one answer; `request.endpoint` names the endpoint that
        issues what it keeps for pass-back."""
        ...

    def accepts_end_of_body(self, assembler: StreamAssembler, saw_terminal: bool) -> bool:
        """Whether a body that ended here is a whole answer (else `truncated_stream`)."""
        ...


class ChatWire:
    """OpenAI Chat Completions: today's request and `TurnAssembler`, unchanged."""

    api = "chat"
    terminal_words = "[DONE] or a finish_reason"
    reads_event_names = True

    def url(self, endpoint: EndpointConfig) -> str:
        return endpoint.chat_completions_url

    def headers(self, endpoint: EndpointConfig, api_key: str | None) -> dict[str, str]:
        return build_headers(endpoint, api_key)

    def body(self, request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]:
        return build_request_body(request, endpoint)

    def assembler(self, request: CompletionRequest) -> TurnAssembler:
        return TurnAssembler(mint_prefix=request.mint_prefix, wants_json=request.wants_json())

    def accepts_end_of_body(self, assembler: StreamAssembler, saw_terminal: bool) -> bool:
        # Some servers never send `[DONE]`: a finish reason is the end of the answer.
        return saw_terminal or assembler.finish_reason_seen


class ResponsesWire:
    """OpenAI Responses: `steadyloop._stream.responses_request` and `responses_assembly`."""

    api = "responses"
    terminal_words = "response.completed (or response.incomplete)"
    reads_event_names = False  # it dispatches on each payload's `type`

    def url(self, endpoint: EndpointConfig) -> str:
        return endpoint.url

    def headers(self, endpoint: EndpointConfig, api_key: str | None) -> dict[str, str]:
        return build_headers(endpoint, api_key)

    def body(self, request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]:
        return build_responses_body(request, endpoint)

    def assembler(self, request: CompletionRequest) -> ResponsesAssembler:
        return ResponsesAssembler(
            endpoint=request.endpoint,
            mint_prefix=request.mint_prefix,
            wants_json=request.wants_json(),
        )

    def accepts_end_of_body(self, assembler: StreamAssembler, saw_terminal: bool) -> bool:
        # Without its terminal event the answer may be partial: a cut, never a turn.
        return saw_terminal


CHAT_WIRE = ChatWire()
RESPONSES_WIRE = ResponsesWire()
# The wires this version speaks, by `EndpointConfig.api`.
WIRES: dict[str, Wire] = {
    "chat": CHAT_WIRE,
    "responses": RESPONSES_WIRE,
    "anthropic": ANTHROPIC_WIRE,
}


class UnsupportedWireError(SteadyloopError, LookupError):
    """The endpoint's `api` names a wire this version of steadyloop does not speak."""

    error_type = UNSUPPORTED_WIRE

    def __init__(self, endpoint: str, api: str) -> None:
        spoken = ", ".join(repr(name) for name in API_CHOICES if name in WIRES)
        super().__init__(
            f"model endpoint {endpoint!r} is configured with api={api!r}, which this version "
            f"of steadyloop does not speak (it speaks {spoken}); change the endpoint's api "
            "or upgrade the worker"
        )
        self.endpoint = endpoint
        self.api = api


def wire_for(endpoint: EndpointConfig) -> Wire:
    """The wire `endpoint` speaks; `UnsupportedWireError` when it is not built in."""
    wire = WIRES.get(endpoint.api)
    if wire is None:
        raise UnsupportedWireError(endpoint.name, endpoint.api)
    return wire
