"""The model activity: stream one model turn over httpx and return the assembled turn.

`ModelActivities(registry).stream_completion` is the Temporal activity
(`"steadyloop.stream_completion"`). It looks the endpoint up by name in the worker's
`EndpointRegistry` and reads the API key from the worker's environment at call time (no
key or URL ever crosses the workflow boundary). The endpoint's wire
(`steadyloop._stream.wire`: Chat Completions, Responses or Anthropic Messages, as its
`api` says) builds the streaming request from the one `CompletionRequest` and makes the
assembler that folds every SSE event of the answer, decoded by `SSEDecoder`, into the
same `AssembledTurn`, until the wire's terminal event (`[DONE]`, `response.completed`,
`message_stop`). What this module does around the wire (sniffing the body, the
watchdog, the runaway guard, forwarding, the token budget, classifying failures,
redaction) reads only the assembler's counters, so it holds on every wire.
`stream_turn` is the same path without Temporal, for benchmarks and callers that bring
their own client.

Every way the exchange can fail becomes one classified `StreamFailure`, raised from the
activity as an `ApplicationError` whose `type` is the failure kind and whose details are
the failure (`model_dump`). Every one is raised non-retryable: the workflow runs this
activity with one attempt and its route table (`steadyloop._routing.disposition`) alone
decides whether a failure is retried, sent to the next endpoint, or ends the turn.

- `http_status`: a non-2xx answer before the stream. The provider's message, `error.code`
  and `error.type` are read from a JSON body when there is one (OpenAI's
  `{"error": {...}}`, Ollama's `{"error": "..."}`, vLLM's top-level `message`, Gemini's
  list-wrapped error), with a body excerpt and `Retry-After` (`retry-after-ms`, seconds
  or an HTTP date); the failure's `category` says what the status and code mean (a 429
  whose code is `insufficient_quota` is `quota`: waiting does not refill a quota).
- `not_sse`: a 2xx body that is not an event stream. The content type alone does not
  decide: servers send SSE as `text/plain`, `application/json` or with no content type
  at all, and some send a JSON error or an HTML page labelled `text/event-stream`. So
  the first non-blank bytes are sniffed. A body labelled `text/event-stream` is SSE
  unless it starts like a document (`{`, `[`, `<`); any other body is SSE only if it
  starts like SSE (`data:`, `event:`, `id:`, `retry:` or a `:` comment).
- `stream_error`: an `error` object (or an `event: error`) inside the stream, with a
  `category` as for a status.
- `invalid_chunk`: a `data:` payload that is not a JSON event (or a body whose
  content encoding cannot be decoded). An empty `data:` payload is a keep-alive,
  skipped, not a chunk.
- `truncated_stream`: the body ended cleanly before the wire's terminal event (an
  unterminated last event is discarded, as the SSE spec says, and the message names the
  terminal that never came). On Chat Completions a body that ends after a
  `finish_reason` but without `[DONE]` is accepted: some servers never send `[DONE]`
  (`Wire.accepts_end_of_body`).
- `network`: connect refused, reset, DNS, TLS, a body cut mid-chunk
  (`RemoteProtocolError`) and every httpx timeout. Timeouts come from the
  endpoint's configuration, so no read can wait forever.
- `stall`: the stall watchdog (`steadyloop._stream.watchdog`) ended the stream: no
  token within `first_token_s` of the request, nothing for `reasoning_gap_s` while
  the model reasons or for `inter_chunk_s` once it answers, or the call past
  `total_s`. The failure names the phase and the budget; the connection is closed,
  not reused.

Two configuration errors are raised before any request: `unknown_endpoint` and
`missing_api_key` (types from `steadyloop.errors`). The key is
redacted from every message and excerpt that leaves the activity: every text field of a
failure (the provider's message, code, type and param, a body excerpt, a reason phrase
or `Location` header quoted in the message) passes through
`steadyloop._redaction.safe_text` with the key this call read, which also removes any
8+ character fragment of it and bounds the field (`redact_failure`); the excerpt is
redacted before it is cut. An unexpected exception is raised as a redacted
`ApplicationError` of its class's name, and httpx's own log lines (the status line's
reason phrase, at DEBUG the response headers) are redacted by a log filter.

Reading stops at the terminal event and the response is closed: nothing after it is
read, so a server that keeps the stream open after it cannot hold the activity (the cost is
that the connection is not reused). Redirects are not followed: a 3xx is reported as
`http_status` naming the new location, which belongs in the endpoint's `base_url`.

The runaway-argument guard (`steadyloop._stream.runaway_guard`) is not a failure: when a tool
call's arguments pass a limit, reading stops, the connection is closed and the turn
is returned with the guard's code as its first defect and no tool calls (or, observe
only, normally, with the cut call left unparseable).

The run's token budget is not a failure either: a request with `output_budget_tokens`
(what is left of the run's budget) stops reading once the turn's output reaches it,
counted from the provider's usage where it sends one mid-stream, else estimated from
the streamed characters (`steadyloop._stops.budget`); the turn is returned with
`stats.cut_by_budget`, its text so far (already forwarded, if it forwards) kept, and
the workflow stops the run `token_budget` instead of dispatching anything.

Forwarding (`steadyloop._output.forwarding`): when the request names a `forward` target,
the text of every read is published to the run's output host as it arrives, in whole
characters (half of a surrogate pair split across chunks waits for the other half).
From the first forwarded piece on, the attempt has `produced_output`: it is heartbeated
at once (not at the next interval), every failure after it carries the text that was
shown, and a later attempt of the same turn refuses to stream
(`output_already_forwarded`) when the host or the previous attempt's last heartbeat
shows that this one already showed something.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
import orjson
from pydantic import BaseModel, JsonValue
from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError

from steadyloop._activities.output_publisher import (
    OutputPublisher,
    ensure_host,
    publish_events,
    read_forwarded,
)
from steadyloop._output.forwarding import (
    READ_FORWARDED_OUTPUT_ACTIVITY,
    ForwardedOutput,
    ForwardTarget,
    OutputDelta,
    OutputKind,
    ReadForwardedOutput,
)
from steadyloop._redaction import KeyRedactingFilter, Secrets, safe_text
from steadyloop._routing.endpoints import (
    EndpointConfig,
    EndpointRegistry,
    MissingApiKeyError,
    UnknownEndpointError,
)
from steadyloop._routing.provider_errors import (
    blamed_parameter,
    parse_retry_after,
    provider_error,
)
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure, redact_failure
from steadyloop._routing.transport_errors import network_reason
from steadyloop._run.bounds import sampling_problems
from steadyloop._stops.budget import StreamMeter
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._stream.chat_request import USER_AGENT, build_headers, build_request_body
from steadyloop._stream.completion import (
    STREAM_COMPLETION_ACTIVITY,
    AssembledTurn,
    CompletionRequest,
)
from steadyloop._stream.failures import MESSAGE_CHARS, excerpt
from steadyloop._stream.runaway_guard import RunawayGuard, apply_breach
from steadyloop._stream.sse import ServerSentEvent, SSEDecoder
from steadyloop._stream.surrogates import rejoin_surrogates
from steadyloop._stream.watchdog import StreamWatchdog
from steadyloop._stream.wire import (
    CHAT_WIRE,
    StreamAssembler,
    UnsupportedWireError,
    Wire,
    wire_for,
)
from steadyloop.errors import (
    OUTPUT_ALREADY_FORWARDED,
    OUTPUT_HOST_UNAVAILABLE,
    SAMPLING_OUT_OF_RANGE,
)
from steadyloop.events._publishing import (
    PUBLISH_RUN_EVENTS_ACTIVITY,
    RECORD_RUN_EVENTS_ACTIVITY,
    PublishRunEvents,
    RecordRunEvents,
    activity_input,
)
from steadyloop.telemetry._model_spans import model_call

__all__ = [
    "HEARTBEAT_INTERVAL_S",
    "LONG_STREAM_HEARTBEAT_S",
    "STREAM_COMPLETION_ACTIVITY",
    "USER_AGENT",
    "ModelActivities",
    "StreamProgress",
    "build_headers",
    "build_request_body",
    "failure_to_application_error",
    "stream_turn",
    "unexpected_error",
]

HEARTBEAT_INTERVAL_S = 1.0
# The longest a stream that forwards nothing goes between heartbeats (each is a billed
# action: a 60-second turn costs at most 1 + 60/30), and the share of the attempt's
# heartbeat timeout it never exceeds.
LONG_STREAM_HEARTBEAT_S = 30.0
HEARTBEAT_TIMEOUT_SHARE = 0.2
# How often a stream that heartbeats rarely asks whether its activity was cancelled.
CANCEL_CHECK_S = 1.0
WORKFLOW_RUNNING = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
PENDING_ACTIVITY_STATE_CANCEL_REQUESTED = (
    PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
)
# How long a new attempt keeps asking the output host what earlier attempts showed.
HOST_READ_BUDGET_S = 60.0
logger = logging.getLogger(__name__)

# How much of a non-2xx or non-SSE body is read for the message and the excerpt.
ERROR_BODY_LIMIT = 64 * 1024
# How many leading bytes are enough to tell SSE from a document.
_SNIFF_BYTES = 16
_SSE_STARTS = (b"data:", b"data\n", b"data\r", b":", b"event:", b"id:", b"retry:")


class StreamProgress(BaseModel):
    """What the activity heartbeats: how far the stream got (coalesced, about once a second)."""

    chunks: int = 0
    bytes: int = 0
    output_chars: int = 0
    tool_calls: int = 0
    first_token_seen: bool = False
    produced_output: bool = False
    forwarded_chars: int = 0


ProgressCallback = Callable[[StreamProgress], None]
# Receives each forwarded piece; the flag is True for the first piece a person will see.
OutputSink = Callable[[OutputDelta, bool], None]


# -- the request --------------------------------------------------------------------
#
# The body, headers and URL are the endpoint's wire's (`steadyloop._stream.wire`); the
# chat wire's builders are re-exported for callers that build a chat request by hand.


def endpoint_timeout(endpoint: EndpointConfig) -> httpx.Timeout:
    return httpx.Timeout(
        connect=endpoint.connect_timeout_s,
        read=endpoint.read_timeout_s,
        write=endpoint.write_timeout_s,
        pool=endpoint.connect_timeout_s,
    )


# -- reading the answer -------------------------------------------------------------


async def stream_turn(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    request: CompletionRequest,
    *,
    api_key: str | None,
    on_progress: ProgressCallback | None = None,
    progress_interval_s: float = HEARTBEAT_INTERVAL_S,
    sink: OutputSink | None = None,
) -> AssembledTurn:
    """Stream one completion and assemble it; raise `StreamFailed` for every failure.

    `on_progress` is called when a chunk arrives, at most once per
    `progress_interval_s`, the first time one interval after the stream began (a
    short stream never reports), and at once for the first forwarded piece.

    The stall watchdog (`steadyloop._stream.watchdog`, budgets from the endpoint) is one
    `asyncio.timeout`, re-armed after every read that delivered content (keep-alives
    are not progress). When it fires, leaving the `client.stream` block closes the
    response (the connection is dropped, not reused) and the stall is raised as
    `StreamFailed(kind="stall")`. A cancellation from outside (the activity cancelled,
    the worker shutting down) is not the watchdog's: `asyncio.timeout` re-raises it as
    `CancelledError`, never as a stall.
    The runaway-argument guard (`steadyloop._stream.runaway_guard`; the request's
    `argument_limits`, else the endpoint's) stops reading the same way, and the turn
    is finished as its mode says. With a `sink` and a request that forwards, each read's
    text goes to the sink, and a failure after the first piece is marked
    `produced_output` and carries the text that was shown.
    """
    wire = wire_for(endpoint)
    body = orjson.dumps(wire.body(request, endpoint))
    loop = asyncio.get_running_loop()
    watchdog = StreamWatchdog(
        started=loop.time(),
        first_token_s=endpoint.first_token_s,
        inter_chunk_s=endpoint.inter_chunk_s,
        reasoning_gap_s=endpoint.reasoning_gap_s,
        total_s=endpoint.total_s,
    )
    timer = asyncio.timeout_at(watchdog.deadline)
    limits = request.argument_limits or endpoint.argument_limits
    reader = _TurnReader(
        request,
        on_progress,
        progress_interval_s,
        limits,
        watchdog,
        timer,
        sink=sink,
        wire=wire,
    )
    try:
        return await _read_turn(client, endpoint, wire, body, api_key, reader, watchdog, timer)
    except StreamFailed as exc:
        # Whatever raised it (a status, a body, an in-stream error), the failure leaves
        # here with every provider string redacted and bounded.
        failure = redact_failure(exc.failure, Secrets([api_key]))
        if not reader.produced_output:
            raise StreamFailed(failure) from None
        raise StreamFailed(
            failure.model_copy(update={"produced_output": True}),
            shown_text=reader.shown("text"),
            shown_reasoning=reader.shown("reasoning"),
        ) from None


async def _read_turn(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    wire: Wire,
    body: bytes,
    api_key: str | None,
    reader: _TurnReader,
    watchdog: StreamWatchdog,
    timer: asyncio.Timeout,
) -> AssembledTurn:
    loop = asyncio.get_running_loop()
    phase = "connecting"
    url = wire.url(endpoint)
    try:
        async with (
            timer,
            client.stream(
                "POST",
                url,
                content=body,
                headers=wire.headers(endpoint, api_key),
                timeout=endpoint_timeout(endpoint),
            ) as response,
        ):
            phase = "reading the response"
            if not response.is_success:
                raise StreamFailed(await _http_status_failure(response, api_key, url))
            byte_iter = response.aiter_bytes()
            prefix = await _sniff(byte_iter)
            content_type = response.headers.get("content-type", "")
            if not _is_sse(prefix, content_type):
                raise StreamFailed(await _not_sse_failure(response, prefix, byte_iter, api_key))
            phase = "reading the stream"
            if prefix and reader.feed(prefix):
                return reader.finish()
            async for piece in byte_iter:
                if reader.feed(piece):
                    return reader.finish()
    except TimeoutError:
        if not timer.expired():
            raise  # not the watchdog's
        raise StreamFailed(
            watchdog.stall(loop.time(), chunks=reader.assembler.chunks, received_bytes=reader.bytes)
        ) from None
    except httpx.TimeoutException as exc:
        raise StreamFailed(_network_failure(exc, phase, endpoint)) from None
    except httpx.DecodingError as exc:
        raise StreamFailed(
            StreamFailure(
                kind="invalid_chunk",
                message=f"the response body could not be decoded: {exc}",
            )
        ) from None
    except httpx.TransportError as exc:
        raise StreamFailed(_network_failure(exc, phase, endpoint)) from None
    return reader.finish_at_end_of_body()


class _TurnReader:
    """SSE decoding, assembly, stats and progress for one response body.

    Work per event is kept to the payload itself: the clock is read and progress
    reported once per network read, not once per event (events of one read arrived
    together, so time to first token is exact to the read).
    """

    def __init__(
        self,
        request: CompletionRequest,
        on_progress: ProgressCallback | None,
        progress_interval_s: float,
        limits: ArgumentLimits | None = None,
        watchdog: StreamWatchdog | None = None,
        timer: asyncio.Timeout | None = None,
        *,
        sink: OutputSink | None = None,
        wire: Wire = CHAT_WIRE,
    ) -> None:
        self.wire = wire
        self.decoder = SSEDecoder(event_names=wire.reads_event_names)
        self.assembler: StreamAssembler = wire.assembler(request)
        self.started = time.monotonic()
        self.first_token_at: float | None = None
        self.bytes = 0
        self.events = 0
        self.saw_done = False
        self.last_data = ""
        self.on_progress = on_progress
        self.progress_interval_s = progress_interval_s
        # Counted from the start: a stream shorter than one interval reports nothing.
        self.last_progress = self.started
        self.limits = limits
        self.guard = RunawayGuard(limits) if limits is not None and limits.active else None
        self.watchdog = watchdog
        self.timer = timer if watchdog is not None else None
        # The watchdog's clock is the event loop's, the one `asyncio.timeout` reads.
        self.clock = asyncio.get_running_loop().time if self.timer is not None else time.monotonic
        # Forwarding: structured output is never forwarded (`steadyloop._output.forwarding`).
        forward = request.forward if sink is not None and not request.wants_json() else None
        self.forward: ForwardTarget | None = forward
        self.sink = sink if forward is not None else None
        self.marks: dict[OutputKind, int] = {"text": 0, "reasoning": 0}
        # A high surrogate that ended the text forwarded so far, held until its pair
        # arrives (see `_whole_characters`), and the pieces forwarded that count as shown.
        self.held: dict[OutputKind, str] = {"text": "", "reasoning": ""}
        self.shown_pieces: dict[OutputKind, list[str]] = {"text": [], "reasoning": []}
        self.produced_output = False
        self.forwarded_chars = 0
        # What is left of the run's token budget bounds this turn too (`stops.budget`).
        budget = request.output_budget_tokens
        self.meter = None if budget is None else StreamMeter(budget)
        self.cut_by_budget: tuple[int, bool] | None = None

    def feed(self, piece: bytes) -> bool:
        """Consume one network read; True once `[DONE]` arrived or the runaway guard cut
        the stream (stop reading)."""
        self.bytes += len(piece)
        events = self.decoder.feed_data(piece)
        if not events:
            return False
        assembler = self.assembler
        watchdog = self.watchdog if self.timer is not None else None
        if watchdog is not None:
            # Keep-alives are not progress: only a read that moves the content mark is.
            # The mark is read only when the watchdog would re-arm (once its slack is
            # used up), not on every token.
            now = self.clock()
            before = assembler.content_mark if watchdog.wants_content(now) else None
        done = self._consume(events)
        if self.first_token_at is None and assembler.first_token_seen:
            self.first_token_at = time.monotonic()
        if self.sink is not None and self._forward():
            self.last_progress = -math.inf  # the first output shown: heartbeat it now
        if self.on_progress is not None:
            self._report(self.on_progress)
        guard = self.guard
        if (
            guard is not None
            and not assembler.calls.is_empty
            and guard.check(assembler.calls.records)
        ):
            return True
        meter = self.meter
        if meter is not None and not done:
            spent = meter.spent(
                assembler.output_chars,
                assembler.calls.records,
                assembler.reported_completion_tokens,
            )
            if spent is not None:
                self.cut_by_budget = spent  # stop reading: the turn ends here
                return True
        if watchdog is not None and watchdog.progress(
            now,
            first_token=assembler.first_token_seen,
            answer_token=assembler.answer_token_seen,
            content=None if before is None else assembler.content_mark != before,
        ):
            assert self.timer is not None
            self.timer.reschedule(watchdog.deadline)
        return done

    def _consume(self, events: Sequence[ServerSentEvent | str]) -> bool:
        """Fold one read's events. `feed_events` raises for an `event: error` (whatever its
        data) and skips empty keep-alive payloads, so every read takes this one call."""
        self.events += len(events)
        last = events[-1]
        self.last_data = last if isinstance(last, str) else last.data
        done = self.assembler.feed_events(events)
        self.saw_done = self.saw_done or done
        return done

    def _forward(self, *, final: bool = False) -> bool:
        """Publish the text this read added; True when it is the first output shown.

        Whole characters only: a provider may split an astral character into two JSON
        escapes in two chunks, and half of it cannot be serialized (nor shown). A high
        surrogate ending the new text is held until the next read brings its pair, or
        the stream ends (`final`), when it is forwarded as U+FFFD, as `finish` writes
        it in the turn. Anything else left unpaired is U+FFFD at once.
        """
        assert self.forward is not None and self.sink is not None
        first = False
        assembler = self.assembler
        sources: tuple[tuple[OutputKind, list[str]], ...] = (
            ("text", assembler.text_parts),
            ("reasoning", assembler.reasoning_parts),
        )
        for kind, parts in sources:
            mark = self.marks[kind]
            held = self.held[kind]
            if len(parts) == mark and not (final and held):
                continue
            piece = held + "".join(parts[mark:])
            self.marks[kind] = len(parts)
            if assembler.may_hold_surrogates:  # only then can a piece hold a lone half
                piece, self.held[kind] = _whole_characters(piece, final=final)
                if not piece:
                    continue
            counts = self.forward.counts(kind)
            newly = counts and not self.produced_output
            if counts:
                self.produced_output = True
                self.forwarded_chars += len(piece)
                self.shown_pieces[kind].append(piece)
            delta = OutputDelta(
                turn=self.forward.turn,
                attempt=self.forward.attempt,
                kind=kind,
                text=piece,
            )
            self.sink(delta, newly)
            first = first or newly
        return first

    def shown(self, kind: OutputKind) -> str:
        """The text of `kind` forwarded so far, if forwarding it made the output seen."""
        if self.forward is None or not self.forward.counts(kind):
            return ""
        return "".join(self.shown_pieces[kind])

    def _report(self, on_progress: ProgressCallback) -> None:
        now = time.monotonic()
        if now - self.last_progress < self.progress_interval_s:
            return
        self.last_progress = now
        assembler = self.assembler
        on_progress(
            StreamProgress(
                chunks=assembler.chunks,
                bytes=self.bytes,
                output_chars=assembler.output_chars,
                tool_calls=assembler.tool_call_count,
                first_token_seen=assembler.first_token_seen,
                produced_output=self.produced_output,
                forwarded_chars=self.forwarded_chars,
            )
        )

    def finish_at_end_of_body(self) -> AssembledTurn:
        """The body ended before the wire's terminal event: accept it only where the wire
        says such a body is whole (chat: after a finish reason)."""
        tail = self.decoder.flush()
        if tail:
            self._consume(tail)
            if self.sink is not None:
                self._forward()
        # A truncated stream fails: a held half character is not shown as U+FFFD then.
        accepted = self.wire.accepts_end_of_body(self.assembler, self.saw_done)
        turn = self.finish(flush_held=accepted)
        if not accepted:
            cut = self.decoder.incomplete_tail
            raise StreamFailed(
                StreamFailure(
                    kind="truncated_stream",
                    message=(
                        f"the stream ended after {self.bytes} bytes and {turn.stats.chunks} "
                        f"chunks without {self.wire.terminal_words}"
                        + (" (the last event was cut off)" if cut else "")
                    ),
                    body_excerpt=excerpt(self.decoder.discarded_tail if cut else self.last_data),
                )
            )
        return turn

    def finish(self, *, flush_held: bool = True) -> AssembledTurn:
        if flush_held and self.sink is not None and any(self.held.values()):
            self._forward(final=True)
        turn = self.assembler.finish()
        _log_repaired_calls(turn, self.assembler.calls.was_minted)
        breach = None if self.guard is None else self.guard.breach
        if breach is not None:
            assert self.limits is not None
            turn = apply_breach(turn, breach, self.limits.mode)
        ttft = None if self.first_token_at is None else self.first_token_at - self.started
        stats = turn.stats.model_copy(
            update={
                "events": self.events,
                "bytes": self.bytes,
                "time_to_first_token_s": ttft,
                "duration_s": time.monotonic() - self.started,
                "saw_done": self.saw_done,
                "produced_output": self.produced_output,
                "forwarded_chars": self.forwarded_chars,
                "cut_by_budget": None if self.cut_by_budget is None else self.cut_by_budget[0],
                "budget_count_reported": self.cut_by_budget is not None and self.cut_by_budget[1],
            }
        )
        return turn.model_copy(update={"stats": stats})


def _whole_characters(piece: str, *, final: bool) -> tuple[str, str]:
    """`piece` as whole characters that serialize, and a trailing high surrogate held
    back for the next piece (none when `final`).

    Surrogate pairs inside the piece are joined, any other lone half becomes U+FFFD,
    so the forwarded pieces joined equal the turn's text (`rejoin_surrogates`).
    """
    held = ""
    if not final and piece and "\ud800" <= piece[-1] <= "\udbff":
        piece, held = piece[:-1], piece[-1]
    return rejoin_surrogates(piece, json_escape=False), held


def _log_repaired_calls(turn: AssembledTurn, was_minted: Callable[[str], bool]) -> None:
    """One warning per call whose identity arrived empty, naming the empty fields: the
    minted id keeps the transcript valid, a missing name makes the turn a defect."""
    for call in turn.tool_calls:
        empty = []
        if was_minted(call.id):
            empty.append(f"id (absent, blank or repeated on the wire; minted {call.id!r})")
        if not call.name.strip():
            empty.append("name")
        if empty:
            logger.warning("tool call %s repaired: empty %s", call.id, " and ".join(empty))


async def _sniff(byte_iter: AsyncIterator[bytes]) -> bytes:
    """Read until the first non-blank bytes (enough to classify the body) or the end."""
    prefix = b""
    async for piece in byte_iter:
        prefix += piece
        start = prefix.lstrip(b"\xef\xbb\xbf \t\r\n")
        if len(start) >= _SNIFF_BYTES or (start and b"\n" in start) or len(prefix) > 4096:
            break  # (a body of endless blank lines is classified after 4 KB)
    return prefix


def _is_sse(prefix: bytes, content_type: str) -> bool:
    start = prefix.lstrip(b"\xef\xbb\xbf \t\r\n")
    if "text/event-stream" in content_type.lower():
        return start[:1] not in (b"{", b"[", b"<")
    if not start:
        return False
    return start.startswith(_SSE_STARTS)


async def _read_limited(first: bytes, byte_iter: AsyncIterator[bytes]) -> bytes:
    """The body for a failure report, up to `ERROR_BODY_LIMIT`; a cut-off read keeps what came."""
    body = bytearray(first)
    try:
        async for piece in byte_iter:
            body += piece
            if len(body) >= ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        pass
    return bytes(body[:ERROR_BODY_LIMIT])


async def _http_status_failure(
    response: httpx.Response, api_key: str | None, url: str = ""
) -> StreamFailure:
    body = await _read_limited(b"", response.aiter_bytes())
    message, code, kind = provider_error(body)
    status = response.status_code
    if message is None:
        message = f"HTTP {status} {response.reason_phrase}".strip()
    if status == 404 and url:
        # A wrong base_url (a missing /v1) or model name: say which address was asked.
        message += (
            f" (POST {_url_for_people(url, api_key)}: check the endpoint's base_url and "
            "the model name)"
        )
    location = response.headers.get("location")
    if location and 300 <= status < 400:
        message += f" (redirected to {location}; configure that address as the base_url)"
    return StreamFailure(
        kind="http_status",
        message=message,
        status=status,
        provider_code=code,
        provider_type=kind,
        body_excerpt=excerpt(body, secrets=Secrets([api_key])),  # redacted, then cut
        retry_after_s=parse_retry_after(response.headers),
        parameter=blamed_parameter(body),
    )


def _url_for_people(url: str, api_key: str | None) -> str:
    """`url` without what may be a secret: user info, query string, fragment, the key."""
    parts = httpx.URL(url)
    host = parts.host if parts.port is None else f"{parts.host}:{parts.port}"
    shown = f"{parts.scheme}://{host}{parts.path}"
    return Secrets([api_key]).redact(shown) if api_key else shown


async def _not_sse_failure(
    response: httpx.Response, prefix: bytes, byte_iter: AsyncIterator[bytes], api_key: str | None
) -> StreamFailure:
    body = await _read_limited(prefix, byte_iter)
    provider_message, code, kind = provider_error(body)
    content_type = response.headers.get("content-type") or "no content type"
    if not body.strip():
        message = f"the server answered {response.status_code} with an empty body ({content_type})"
    else:
        message = (
            f"the server answered {response.status_code} with a body that is not an event "
            f"stream ({content_type})"
        )
    if provider_message is not None:
        message += f": {provider_message}"
    return StreamFailure(
        kind="not_sse",
        message=message,
        status=response.status_code,
        provider_code=code,
        provider_type=kind,
        body_excerpt=excerpt(body, secrets=Secrets([api_key])),  # redacted, then cut
    )


def _network_failure(exc: httpx.HTTPError, phase: str, endpoint: EndpointConfig) -> StreamFailure:
    name = type(exc).__name__
    detail = str(exc) or name
    if isinstance(exc, httpx.ConnectTimeout):
        detail = f"no connection within {endpoint.connect_timeout_s:g} s"
    elif isinstance(exc, httpx.ReadTimeout):
        detail = f"nothing received for {endpoint.read_timeout_s:g} s (read timeout)"
    elif isinstance(exc, httpx.WriteTimeout):
        detail = f"the request could not be sent within {endpoint.write_timeout_s:g} s"
    elif isinstance(exc, httpx.PoolTimeout):
        detail = "no free connection in the client's pool"
    return StreamFailure(
        kind="network",
        message=f"{name} while {phase} ({endpoint.url}): {detail}",
        network_reason=network_reason(exc),
    )


# -- to Temporal ----------------------------------------------------------------------


def failure_to_application_error(
    failure: StreamFailure,
    *,
    secret: str | None = None,
    shown: ForwardedOutput | None = None,
    also_secret: Sequence[str] = (),
) -> ApplicationError:
    """The `ApplicationError` the activity raises: type = kind, details = the failure.

    Non-retryable whatever failed: the workflow runs the model activity with one attempt
    and decides in its route table (`steadyloop._routing.disposition`) what the failure
    leads to, so Temporal's retry policy must never repeat an attempt behind its back.
    A failure after output was forwarded carries, as its second detail, the output that
    was shown (`ForwardedOutput`), for the run's result. Every provider-controlled field
    is redacted of `secret` (and its fragments) and bounded, and so of `also_secret` (the
    values of the endpoint's `${VARIABLE}` headers).
    """
    failure = redact_failure(failure, Secrets([secret, *also_secret]))
    details: list[Any] = [failure.model_dump(mode="json")]
    if failure.produced_output:
        details.append((shown or ForwardedOutput()).model_dump(mode="json"))
    return ApplicationError(
        # Temporal prints the type before the message: naming the kind again would read
        # `http_status: http_status: HTTP 500 ...` in every log line.
        failure.reported().removeprefix(f"{failure.kind}: "),
        *details,
        type=failure.kind,
        non_retryable=True,
    )


def unexpected_error(
    exc: Exception, secret: str | None, also_secret: Sequence[str] = ()
) -> ApplicationError:
    """An exception the stream reader did not classify, as the `ApplicationError`
    Temporal would have made of it (type: the class name, no details, so the workflow
    reads it as `lost`), with its text redacted and bounded and its cause chain dropped
    (a traceback would print the original text)."""
    name = type(exc).__name__
    text = safe_text(f"{exc}", Secrets([secret, *also_secret]), MESSAGE_CHARS)
    return ApplicationError(f"{name}: {text}" if text else name, type=name)


# -- the activity -------------------------------------------------------------------


class ModelActivities:
    """The model activity with the worker's endpoints and one shared HTTP client.

    Construct once per worker and register `stream_completion`; close with `aclose()`
    (or `async with`) when the worker stops. `environ` replaces `os.environ` for key
    lookups (tests); it is read at call time either way. `heartbeat_interval_s` is the
    heartbeat cadence of a stream that forwards output, `long_stream_heartbeat_s` the
    longest gap of one that does not.

    Cancellation is not caught: `asyncio.CancelledError` ends the request, closes the
    connection and propagates, never reported as a stall or an upstream failure.
    Progress is heartbeated only when a chunk arrives (`StreamProgress`), so the heartbeat
    reports stream progress rather than merely that the worker is alive; the stall watchdog
    watches the same progress. A heartbeat that reaches Temporal is a billed action,
    so the activity heartbeats only when something needs it:

    - A short turn never heartbeats: the first report is due one interval after the
      stream began, not at its first chunk (the obvious version heartbeated every turn:
      one action a tool round for nothing). A lost worker is still found by the heartbeat
      timeout, which Temporal counts from the attempt's start when no heartbeat came.
    - A stream not forwarded to anyone reports at most every `long_stream_heartbeat_s`
      (30 s), and within a fifth of the attempt's heartbeat timeout, so a live stream is
      never declared lost (a 60-second turn: at most two heartbeats). The SDK's throttle
      (the worker's `max_heartbeat_throttle_interval`) only ever delays a heartbeat further.
    - Cancellation reaches an activity only in the answer to a heartbeat, so fewer
      heartbeats would let an interrupted stream read on (and the provider bill tokens)
      for up to 30 s. A stream past its first `CANCEL_CHECK_S` therefore describes its own
      workflow once a second (a describe is not a billed action) and heartbeats at once
      when its activity is cancel-requested or its workflow is gone; that heartbeat's
      answer delivers the cancel (`_watching_for_cancel`).
    - A stream that forwards output (a person watching) keeps reporting every
      `heartbeat_interval_s` (1 s) and the first shown piece at once: the flag
      `produced_output` must be in the last heartbeat a lost attempt leaves, and an
      interrupt must settle within the loop's bound; its batches are one signal each
      anyway (`batch_interval_s`), so these heartbeats are the smaller part of its cost.
    """

    def __init__(
        self,
        registry: EndpointRegistry,
        *,
        client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        long_stream_heartbeat_s: float = LONG_STREAM_HEARTBEAT_S,
    ) -> None:
        self.registry = registry
        self._owns_client = client is None
        self.client = client or httpx.AsyncClient(
            follow_redirects=False,  # a redirect is a misconfigured base_url: say so
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=40),
        )
        self._environ = environ
        self._heartbeat_interval_s = heartbeat_interval_s
        self._long_stream_heartbeat_s = long_stream_heartbeat_s
        # httpx logs each status line (reason phrase included) and httpcore, at DEBUG,
        # the response headers: a provider can echo the key in either.
        self._log_filter = KeyRedactingFilter(self._keys)
        self._log_filter.install()

    def _keys(self) -> list[str]:
        """Every key this worker's endpoints read from the environment right now."""
        env = os.environ if self._environ is None else self._environ
        keys = [
            (env.get(endpoint.api_key_env) or "").strip()
            for endpoint in self.registry
            if endpoint.api_key_env is not None
        ]
        return keys + [secret for e in self.registry for secret in e.header_secrets(env)]

    def activities(self) -> list[Callable[..., Any]]:
        """The model activities (the stream, reading forwarded output back, publishing
        the loop's events beside that output or recording them in its history), for
        `Worker(activities=...)`."""
        return [
            self.stream_completion,
            self.read_forwarded_output,
            publish_run_events,
            record_run_events,
        ]

    async def aclose(self) -> None:
        self._log_filter.uninstall()
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> ModelActivities:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @activity.defn(name=STREAM_COMPLETION_ACTIVITY)
    async def stream_completion(
        self, request: CompletionRequest, log_events: list[JsonValue] | None = None
    ) -> AssembledTurn:
        """Stream one completion from the named endpoint; failures are `ApplicationError`s.

        `log_events`: the run's events riding with the request for its followers
        (`steadyloop.events._publishing`), ignored here."""
        request = activity_input(CompletionRequest, request)
        try:
            endpoint = self.registry.get(request.endpoint)
            api_key = endpoint.api_key(self._environ)
            header_secrets: list[str] = []
            if endpoint.header_variables:  # `${VARIABLE}` values, read now
                header_secrets = endpoint.header_secrets(self._environ)
                endpoint = endpoint.model_copy(
                    update={"headers": endpoint.resolved_headers(self._environ)}
                )
        except UnknownEndpointError as exc:
            raise ApplicationError(
                str(exc),
                {"endpoint": exc.name, "known": exc.known},
                type=exc.error_type,
                non_retryable=True,
            ) from None
        except MissingApiKeyError as exc:
            raise ApplicationError(
                str(exc),
                {"endpoint": exc.endpoint, "variable": exc.variable},
                type=exc.error_type,
                non_retryable=True,
            ) from None
        try:
            wire_for(endpoint)
        except UnsupportedWireError as exc:
            raise ApplicationError(
                str(exc),
                {"endpoint": exc.endpoint, "api": exc.api},
                type=exc.error_type,
                non_retryable=True,
            ) from None
        # The run held its knobs to what some wire takes; this endpoint's may take less.
        refused = sampling_problems(
            {"temperature": request.temperature, "top_p": request.top_p}, endpoint.api
        )
        if refused:
            raise ApplicationError(
                f"model endpoint {endpoint.name!r} (api={endpoint.api!r}) cannot take this "
                f"run's sampling: {'; '.join(refused)}",
                {"endpoint": endpoint.name, "api": endpoint.api, "problems": refused},
                type=SAMPLING_OUT_OF_RANGE,
                non_retryable=True,
            )
        forward = request.forward if not request.wants_json() else None
        try:
            if forward is None:
                return await self._stream(endpoint, request, api_key, None)
            client = activity.client()
            info = activity.info()
            await _refuse_if_already_shown(forward, info.attempt, info.heartbeat_details)
            await ensure_host(client, forward, info.task_queue)
            async with OutputPublisher(client, forward, info.task_queue) as publisher:

                def sink(delta: OutputDelta, first: bool) -> None:
                    publisher.publish(delta, now=first)

                return await self._stream(endpoint, request, api_key, sink)
        except StreamFailed as exc:
            shown = ForwardedOutput(text=exc.shown_text, reasoning=exc.shown_reasoning)
            raise failure_to_application_error(
                exc.failure, secret=api_key, shown=shown, also_secret=header_secrets
            ) from None
        except FailureError:  # ours (ApplicationError) or Temporal's: already what it is
            raise
        except Exception as exc:  # not classified: still never the key, never unbounded
            raise unexpected_error(exc, api_key, header_secrets) from None

    async def _stream(
        self,
        endpoint: EndpointConfig,
        request: CompletionRequest,
        api_key: str | None,
        sink: OutputSink | None,
    ) -> AssembledTurn:
        interval = self._heartbeat_interval_s if sink is not None else self._quiet_interval()
        with model_call(endpoint, request) as call:  # a no-op while telemetry is off
            reading = stream_turn(
                self.client,
                endpoint,
                request,
                api_key=api_key,
                on_progress=_heartbeat,
                progress_interval_s=interval,
                sink=sink,
            )
            if interval <= CANCEL_CHECK_S:
                return call.finished(await reading)
            async with _watching_for_cancel():
                return call.finished(await reading)

    def _quiet_interval(self) -> float:
        """The heartbeat gap of a stream that forwards nothing: `long_stream_heartbeat_s`,
        within a share of the attempt's heartbeat timeout (a live stream is never lost)."""
        interval = self._long_stream_heartbeat_s
        timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
        if timeout is not None and timeout.total_seconds() > 0:
            interval = min(interval, timeout.total_seconds() * HEARTBEAT_TIMEOUT_SHARE)
        return interval

    @activity.defn(name=READ_FORWARDED_OUTPUT_ACTIVITY)
    async def read_forwarded_output(self, request: ReadForwardedOutput) -> ForwardedOutput:
        """What a run's output host retained of one turn (the text a person saw)."""
        return await read_forwarded(
            activity.client(),
            activity.payload_converter(),
            request.stream_id,
            request.turn,
            before_attempt=request.before_attempt,
        )


@activity.defn(name=PUBLISH_RUN_EVENTS_ACTIVITY)
async def publish_run_events(batch: PublishRunEvents) -> None:
    """One batch of the loop's events onto its output host (a local activity)."""
    await publish_events(activity.client(), batch)


@activity.defn(name=RECORD_RUN_EVENTS_ACTIVITY)
async def record_run_events(batch: RecordRunEvents) -> RecordRunEvents:
    """The batch itself (a local activity): its marker records it in the loop's history,
    where followers of a run that does not forward read it."""
    return batch


async def _refuse_if_already_shown(
    forward: ForwardTarget, temporal_attempt: int, previous_heartbeat: Sequence[Any]
) -> None:
    """Raise `output_already_forwarded` when an earlier attempt of this turn showed output.

    Two sources, because either can lag: the previous Temporal attempt's last
    heartbeat (`produced_output`), and the host itself, which holds exactly what was
    published (a heartbeat is coalesced; a publish can land just before a crash).
    """
    if forward.attempt == 1 and temporal_attempt == 1:
        return  # the turn's first try: nothing can have been shown yet
    last = previous_heartbeat[-1] if previous_heartbeat else None
    flagged = isinstance(last, Mapping) and bool(last.get("produced_output"))
    before = forward.attempt + (1 if temporal_attempt > 1 else 0)
    shown = await _read_host_patiently(forward, before)
    # A continuation (`stops.continuation`) follows output the run accepted: only more
    # than that is a repeat.
    seen = len(shown.text) + (len(shown.reasoning) if forward.reasoning_is_output else 0)
    if not flagged and seen <= forward.accepted_chars:
        return
    message = (
        f"turn {forward.turn} already showed output to people watching (attempts "
        f"{shown.attempts or 'unknown'}); repeating it would show a second answer"
    )
    raise ApplicationError(
        message,
        {"kind": OUTPUT_ALREADY_FORWARDED, "message": message, "produced_output": True},
        shown.model_dump(mode="json"),
        type=OUTPUT_ALREADY_FORWARDED,
        non_retryable=True,
    )


async def _read_host_patiently(forward: ForwardTarget, before: int) -> ForwardedOutput:
    """Read what the host shows of earlier attempts, retrying while it cannot answer.

    A host whose worker died (the very case a new attempt follows) answers queries only
    once Temporal gives its workflow task to a live worker; meanwhile this attempt
    heartbeats (so it is not declared lost) and asks again, up to `HOST_READ_BUDGET_S`,
    then fails retryably: streaming without knowing what was shown could show it twice.
    """
    async with _heartbeating():  # one query can outlast a short heartbeat timeout
        return await _read_host_until(forward, before)


async def _read_host_until(forward: ForwardTarget, before: int) -> ForwardedOutput:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HOST_READ_BUDGET_S
    while True:
        try:
            return await read_forwarded(
                activity.client(),
                activity.payload_converter(),
                forward.stream_id,
                forward.turn,
                before_attempt=before,
            )
        except RPCError as error:
            if loop.time() >= deadline:
                raise ApplicationError(
                    f"the run's output host did not answer within {HOST_READ_BUDGET_S:g} s "
                    f"({error}); not streaming without knowing what was already shown",
                    {"kind": OUTPUT_HOST_UNAVAILABLE, "message": str(error)},
                    type=OUTPUT_HOST_UNAVAILABLE,
                ) from None
            _heartbeat(StreamProgress())
            await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def _heartbeating(every_s: float = 0.5) -> AsyncIterator[None]:
    """Heartbeat (nothing shown yet) every `every_s` while the block waits on Temporal: a
    query of a host whose worker died waits for its task to move (seconds), longer than
    a run's heartbeat timeout may be, and the attempt must not be declared lost for it."""

    async def beat() -> None:
        while True:
            _heartbeat(StreamProgress())
            await asyncio.sleep(every_s)

    async with _beside(beat()):
        yield


@contextlib.asynccontextmanager
async def _beside(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run `work` while the block runs; cancel it (and wait for it) when the block ends."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def _watching_for_cancel() -> AsyncIterator[None]:
    """While the block streams, learn of a cancel without heartbeating for it.

    Temporal tells an activity it was cancelled only in the answer to a heartbeat. A
    stream that heartbeats every 30 s would hear of an interrupt that late; so every
    `CANCEL_CHECK_S` it describes its own workflow (not a billed action) and heartbeats
    at once when its activity is cancel-requested, gone, or its workflow closed: that
    heartbeat's answer cancels the activity as a heartbeat always did. Outside a worker
    (`ActivityEnvironment`, no client) there is nothing to watch.
    """
    try:
        client = activity.client()
    except RuntimeError:
        yield
        return
    info = activity.info()
    if info.workflow_id is None:  # a standalone activity: no workflow to ask
        yield
        return
    handle = client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)

    async def watch() -> None:
        while True:
            await asyncio.sleep(CANCEL_CHECK_S)
            try:
                described = (await handle.describe()).raw_description
            except RPCError:
                continue  # a describe is advice; the heartbeat timeout still holds
            mine = [p for p in described.pending_activities if p.activity_id == info.activity_id]
            if (
                described.workflow_execution_info.status != WORKFLOW_RUNNING
                or not mine
                or mine[0].state == PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
            ):
                _heartbeat(StreamProgress())  # its answer carries the cancel

    async with _beside(watch()):
        yield


def _heartbeat(progress: StreamProgress) -> None:
    if activity.in_activity():
        activity.heartbeat(progress.model_dump())
