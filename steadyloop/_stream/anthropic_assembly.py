"""Folding the events of one streamed Anthropic Messages response into an `AssembledTurn`.

The model activity hands each network read's SSE events to `AnthropicAssembler.feed_events`
(the same surface `TurnAssembler` has for Chat Completions); `finish` returns the same
`AssembledTurn`: text, reasoning, tool calls, finish reason, usage, defects and the
blocks to pass back to the endpoint that issued them.

The stream is `message_start`, then per content block `content_block_start` (with the
block's `index`), `content_block_delta`s and `content_block_stop`, then `message_delta`
(the stop reason and the output usage) and `message_stop`; `ping` may come anywhere.
What the obvious implementation gets wrong, and what prevents each here:

- Dispatching on the SSE `event:` line: proxies strip it (earendil-works/pi#1983,
  openclaw/openclaw#37571). Only the payload's own `type` decides; the event name is
  never read, not even `event: error` (its data says `"type": "error"`).
- Keying a dict by `index` and trusting it: the index is an *alias*. A block's index
  is valid only between its start and its stop; a delta for an index with no open
  block (a frame for a block never started, or after it stopped) cannot be attributed.
  What decides is whether it carries something the turn would lose: text, thinking or
  argument fragments for no block are counted as a dropped delta, a defect, so the
  turn is retried instead of dispatching a partial batch. A frame that carries nothing
  the turn could hold is noted (`stats.notes`) and ignored: a `content_block_stop` for
  no open block (it closes nothing), and a `signature_delta` for an index no block ever
  started at (a signature only goes back inside its thinking block, and there is none
  to send back; one arriving after its block stopped would be lost from that block, and
  is a dropped delta). MiniMax-M3 behind an Anthropic-compatible endpoint sends both,
  for an index 0 never started, before a normal first block (MadAppGang/claudish#200);
  refusing them refused every such turn. An empty delta is ignored silently. A gap in
  the numbering (0, 2) is only a label a gateway chose and is accepted; a second start
  for an index whose block is still open is a dropped frame too. Blocks at different
  indices may be open at once (the protocol allows a block to start before the one
  before it stops), and are accepted; llama.cpp's recorded streams close each block
  before the next starts.
- `tool_use` starts with `input: {}` (llama.cpp leaves `input` out) and the arguments
  arrive as `input_json_delta.partial_json` fragments, concatenated verbatim, where
  `""` adds nothing. A start whose `input` is a non-empty object and no fragment after
  it is a call whose arguments came whole (gateways that do not stream them); when
  fragments follow, they are the arguments (vLLM-style servers repeat the first
  fragment there). Calls go through `ToolCallAccumulator`, so ids, minting and the
  runaway guard's counters are the ones the Chat Completions wire has.
- Only client `tool_use` blocks are calls. `server_tool_use` (web search, code
  execution) ran on the provider; dispatching it would run it twice, here. It and its
  result blocks (`*_tool_result`), `thinking` and `redacted_thinking`, and any block
  type not known here, are kept as pass-back blocks, in order, with the text of every
  string exactly as received (`thinking` and `signature` joined from their deltas,
  even a thinking block that holds only a signature, as Claude's default `display:
  "omitted"` sends). They go back only to the endpoint that issued them
  (`steadyloop._stream.anthropic_request`): one altered byte is answered by 400
  "Invalid signature in thinking block".
- Vetoes before any dispatch. An `error` event after HTTP 200 raises `stream_error`
  (Anthropic's `{"type": "error", "error": {...}}`, or llama.cpp's chat-shaped
  `{"code": 500, "message": ..., "type": "server_error"}`) with the provider's type
  (`overloaded_error` is a server error, retried with backoff; `rate_limit_error` a
  rate limit; see `steadyloop._routing.taxonomy`).
  `refusal` raises `stream_error` of type `refusal` with the refusal's category as
  its code (a content filter: traversed, never retried here); `pause_turn` raises
  `stream_error` of type `pause_turn` (a server-tool turn the provider paused: this
  wire does not resume it, and the calls it holds are not the model's last word).
  `max_tokens` or `model_context_window_exceeded` when a `tool_use` block was the
  last block (still being written when the limit hit; it still closes normally) is a
  `truncated_tool_call` defect, whether or not its JSON happens to parse. The end of
  the body without `message_stop` is the activity's `truncated_stream`
  (`AnthropicWire.accepts_end_of_body`).
- Malformed versus cut: fine-grained tool streaming can send invalid JSON. A call
  whose block finished with a `tool_use` stop reason and whose arguments do not parse
  is not a defect: the argument reader answers the model with the parse error
  (`steadyloop._stream.defects`).
- `stop_reason: end_turn` with a closed `tool_use` block (gateways translating from
  chat, BerriAI/litellm#34692): the call is dispatched, and the turn reports
  `tool_calls`, the provider's label kept as a note
  (`completion.reported_finish_reason`).
- Progress: `ping`, an empty `text_delta` or `partial_json` and a delta for a block
  never started leave `content_mark` where it was, so a stream that only pings looks
  stalled; thinking deltas are reasoning (the watchdog's reasoning budget), not an
  answer token.
- Lone surrogates escaped in JSON (`"\\ud83d"`) are refused by `orjson`: such a payload
  is parsed with the stdlib, and the text is re-joined at `finish` as on the chat wire.

Speed. Nearly every payload is a delta for the newest open block, and Anthropic writes
each one the same way, byte for byte, up to its string. `feed_events` compares a
payload's start with those bytes for that block and parses only the string after them
(`_fast_head` says why that is the same reading); anything else, and any string orjson
refuses, is parsed whole and read by the rules above.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from steadyloop._chat import PassbackItem, ToolCall
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.accumulator import ToolCallAccumulator
from steadyloop._stream.completion import AssembledTurn, add_note, reported_finish_reason
from steadyloop._stream.defects import (
    DEFECT_RETRY_BUDGETS,
    CompletionDefect,
    detect_completion_defects,
)
from steadyloop._stream.failures import excerpt
from steadyloop._stream.sse import MessageData, ServerSentEvent
from steadyloop._stream.surrogates import rejoin_surrogates
from steadyloop._stream.turn_assembly import (
    TurnProgress,
    count_of,
    invalid_chunk,
    provider_error,
    stdlib_event,
)

__all__ = ["STOP_REASONS", "AnthropicAssembler", "PassbackBlock"]

_loads = orjson.loads
_OrjsonDecodeError = orjson.JSONDecodeError

# Anthropic's stop reasons as the chat vocabulary the workflow reads (`finish_reason`);
# any other is kept as sent. `max_tokens` is already a length cut there.
STOP_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "model_context_window_exceeded",
}
_CUT_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
# Block types whose deltas are read here; every other block is passed back as it came.
_TEXT, _TOOL, _THINKING = "text", "tool_use", "thinking"
# The bytes of a delta payload before its string, as Anthropic writes it (compact, keys
# in this order), for a block at index `%d`: see `_fast_head`.
_DELTA_HEAD = b'{"type":"content_block_delta","index":%d,"delta":{"type":'
_JSON_DELTA_HEAD = _DELTA_HEAD + b'"input_json_delta","partial_json":'
_TEXT_DELTA_HEAD = _DELTA_HEAD + b'"text_delta","text":'
# No byte reading: a head no payload slice compares equal to.
_STOP = b'{"type":"content_block_stop","index":%d}'
_MESSAGE_STOP = b'{"type":"message_stop"}'
_NO_FAST: tuple[bytes | None, int, list[str] | None, int, bytes | None] = (None, 0, None, -1, None)


class PassbackBlock:
    """A content block kept for pass-back: its type, the block as received (`raw`), and
    the id of the client tool call it came before (None: no call follows it)."""

    __slots__ = ("before_call", "block", "kind", "parts", "signature")

    def __init__(self, kind: str, block: dict[str, Any]) -> None:
        self.kind = kind
        self.block = block
        self.parts: list[str] = []  # `thinking_delta` text, or a server call's input JSON
        self.signature: list[str] = []
        self.before_call: str | None = None  # set by `finish`

    def raw(self) -> str:
        """The block as received: the start's members, the streamed strings joined."""
        block = dict(self.block)
        if self.kind == _THINKING:
            block["thinking"] = str(block.get("thinking") or "") + "".join(self.parts)
            block["signature"] = str(block.get("signature") or "") + "".join(self.signature)
        elif self.parts:
            joined = "".join(self.parts)
            try:
                block["input"] = json.loads(joined)
            except (ValueError, RecursionError):
                block["input"] = joined  # kept as sent: the endpoint judges its own block
        text = json.dumps(block, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (sent as a JSON escape) cannot be stored as UTF-8: it stays
            # the escape it arrived as, the same JSON value, nothing replaced.
            text = json.dumps(block, separators=(",", ":"))
        return text


class _Open:
    """One open content block: its type, where its deltas go, and what it is."""

    __slots__ = ("fragments", "kind", "passback")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.fragments: list[str] | None = None  # a tool call's argument fragments
        self.passback: PassbackBlock | None = None


class AnthropicAssembler(TurnProgress):
    """Folds the SSE payloads of one streamed Messages response into an `AssembledTurn`.

    The surface is `TurnAssembler`'s (`feed_events`, `feed`, `finish` and the cheap
    counters the model activity reads after each network read). `saw_done` is True once
    `message_stop` arrived.
    """

    _calls: ToolCallAccumulator

    def __init__(
        self, *, endpoint: str = "", mint_prefix: str = "call_sl", wants_json: bool = False
    ) -> None:
        self._endpoint = endpoint  # the endpoint name its pass-back items are tagged with
        self._calls = ToolCallAccumulator(mint_prefix)
        self._wants_json = wants_json
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._open: dict[int, _Open] = {}
        self._passback: list[PassbackBlock] = []
        # The ordinal of the client call each pass-back block came before (None: none).
        self._before: list[int | None] = []
        self._last_kind: str | None = None
        self._last_call_ordinal: int | None = None
        self._stop_reason: str | None = None
        self._usage: dict[str, Any] = {}
        self._model: str | None = None
        self._response_id: str | None = None
        self._chunks = 0
        self._signals = 0  # signature deltas, usage, a stop reason: content, not text
        self._dropped = 0
        self._orphans: dict[str, int] = {}  # frames for no open block that carried nothing
        self._started: set[int] = set()  # every index a block started at
        self._stdlib_parsed = False
        self._counted_chars = 0
        self._counted_text = 0
        self._counted_reasoning = 0
        self._start_inputs: dict[int, str] = {}  # call ordinal -> arguments sent whole
        # The byte reading of the newest open text or tool_use block: the head of its
        # deltas, the head's length, where their strings go, its index, its stop.
        self._fast = _NO_FAST
        self.saw_done = False

    # -- progress, for heartbeats (and `TurnProgress`'s counters) ------------------------

    @property
    def content_mark(self) -> int:
        """Grows with every delta that carried content (see the module docstring)."""
        return len(self._text) + len(self._reasoning) + self._calls.deltas_seen + self._signals

    @property
    def may_hold_surrogates(self) -> bool:
        return self._stdlib_parsed

    @property
    def reported_completion_tokens(self) -> int | None:
        usage = self._usage
        return count_of(usage.get("output_tokens")) if "output_tokens" in usage else None

    @property
    def finish_reason_seen(self) -> bool:
        return self._stop_reason is not None

    @property
    def calls(self) -> ToolCallAccumulator:
        return self._calls

    @property
    def chunks(self) -> int:
        return self._chunks

    # -- input -------------------------------------------------------------------------

    def feed_events(self, events: Sequence[ServerSentEvent | str | bytes]) -> bool:
        """Fold decoded SSE events in order; True once `message_stop` arrived.

        The event name is never read (see the module docstring); events after
        `message_stop` are not read.
        """
        payloads: Sequence[Any]
        raw = events.__class__ is MessageData
        if raw:
            payloads = events.raw  # type: ignore[attr-defined]
            head, cut, sink, at, stop = self._fast
            terminal: bytes | None = _MESSAGE_STOP
        else:
            # Strings, or bytes mixed with them: every payload takes the parsed reading.
            payloads = [e if e.__class__ in (str, bytes) else e.data for e in events]  # type: ignore[union-attr]
            head, cut, sink, at, stop = _NO_FAST
            terminal = None
        fold = self._fold_event
        open_blocks = self._open
        for data in payloads:
            # The commonest payload of all, read from its bytes (see `_fast_head`): a delta
            # for the newest open block, exactly as Anthropic writes it, whose string is
            # the only JSON left to parse. Any other payload takes the reading below.
            if data[:cut] == head and data[-1] == 125 == data[-2]:  # 125: the `}` ending both
                try:
                    piece = _loads(data[cut:-2])
                except _OrjsonDecodeError:
                    piece = None
                if piece.__class__ is str:
                    self._chunks += 1
                    if piece:  # `""` adds nothing
                        sink.append(piece)  # type: ignore[union-attr]
                    continue
            elif data == stop:  # that block's stop, as `_stop` reads it
                self._chunks += 1
                del open_blocks[at]
                self._fast = head, cut, sink, at, stop = _NO_FAST
                continue
            elif data == terminal:  # `message_stop`, as `_fold_event` reads it
                self._chunks += 1
                self.saw_done = True
                return True
            try:
                event = _loads(data)
            except _OrjsonDecodeError:
                event = self._parse_refused(data)
                if event is None:
                    continue
            # The commonest event first, inline: an argument fragment or a text delta for
            # an open block (`_delta` reads anything else, with the same outcome for this).
            if event.__class__ is dict and event.get("type") == "content_block_delta":
                index = event.get("index")
                delta = event.get("delta")
                block = open_blocks.get(index) if index.__class__ is int else None
                if block is not None and delta.__class__ is dict:
                    kind = delta.get("type")
                    if kind == "input_json_delta" and block.fragments is not None:
                        fragment = delta.get("partial_json")
                        if fragment.__class__ is str:
                            self._chunks += 1
                            if fragment:  # `""` adds nothing
                                block.fragments.append(fragment)
                            continue
                    elif kind == "text_delta":
                        text = delta.get("text")
                        if text.__class__ is str:
                            self._chunks += 1
                            if text:
                                self._text.append(text)
                            continue
            if fold(event, data):
                return True
            if raw:
                head, cut, sink, at, stop = self._fast  # a start or a stop may have moved it
        return False

    def feed(self, data: str | bytes) -> bool:
        """Fold one SSE data payload; True when it was `message_stop`."""
        event = self._parse(data)
        return False if event is None else self._fold_event(event, data)

    def _parse(self, data: str | bytes) -> Any:
        try:
            return _loads(data)
        except _OrjsonDecodeError:
            return self._parse_refused(data)

    def _parse_refused(self, data: str | bytes) -> Any:
        """A payload orjson refused: blank (a keep-alive, None), or JSON only the stdlib
        reads (lone surrogate escapes, see the docstring), or not JSON (`invalid_chunk`)."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if not text.strip():
            return None  # `data:` alone: a keep-alive
        try:
            event = stdlib_event(text)  # lone surrogate escapes (see the docstring)
        except (ValueError, RecursionError):
            raise invalid_chunk(data, "a stream event is not valid JSON") from None
        self._stdlib_parsed = True
        return event

    def _fold_event(self, event: Any, data: str | bytes) -> bool:
        self._chunks += 1
        if event.__class__ is not dict:
            raise invalid_chunk(data, "a stream event is JSON but not an object")
        kind = event.get("type")
        try:
            # The deltas `feed_events` folds inline do not come here: starts and stops are
            # the commonest now.
            if kind == "content_block_start":
                self._start(event)
            elif kind == "content_block_stop":
                self._stop(event)
            elif kind == "content_block_delta":
                self._delta(event)
            elif kind == "message_delta":
                self._message_delta(event, data)
            elif kind == "message_start":
                self._message_start(event)
            elif kind == "message_stop":
                self.saw_done = True
                return True
            elif kind == "ping":
                pass
            elif kind == "error" or event.get("error") not in (None, False):
                error = event.get("error")
                raise provider_error(data, error if error not in (None, False) else event)
            elif kind.__class__ is str and kind.endswith("error"):
                # llama.cpp's error event is its chat shape, with no `error` member:
                # `{"code": 500, "message": "...", "type": "server_error"}`.
                raise provider_error(data, event)
            # Any other type is one this reader does not know yet: skipped, as the SDK does.
        except (AttributeError, TypeError, KeyError, ValueError) as err:
            raise invalid_chunk(data, f"a stream event has an unexpected shape ({err})") from None
        return False

    def _index(self, event: dict[str, Any]) -> int | None:
        index = event.get("index")
        return index if index.__class__ is int and index >= 0 else None

    def _delta(self, event: dict[str, Any]) -> None:
        index = self._index(event)
        block = self._open.get(index) if index is not None else None
        delta = event["delta"]
        if block is None:
            if (
                delta.__class__ is dict
                and delta.get("type") == "signature_delta"
                and index not in self._started
            ):
                self._orphan("signature_delta")  # no block to sign: nothing lost
            elif _carries_content(delta):
                self._dropped += 1  # content for a block never started (or stopped)
            return
        kind = delta["type"]
        if kind == "text_delta":
            text = delta["text"]
            if text.__class__ is not str:
                raise TypeError(f"text_delta.text is {type(text).__name__}, not a string")
            if text:
                self._text.append(text)
        elif kind == "input_json_delta":
            fragment = delta["partial_json"]
            if fragment.__class__ is not str:
                raise TypeError(f"partial_json is {type(fragment).__name__}, not a string")
            if not fragment:
                return  # `""` adds nothing
            if block.fragments is not None:
                block.fragments.append(fragment)
            elif block.passback is not None:
                block.passback.parts.append(fragment)
                self._signals += 1
            else:
                self._dropped += 1  # arguments for a text block
        elif kind == "thinking_delta":
            thinking = delta["thinking"]
            if thinking.__class__ is not str:
                raise TypeError(f"thinking is {type(thinking).__name__}, not a string")
            if thinking and block.passback is not None:
                block.passback.parts.append(thinking)
                self._reasoning.append(thinking)
        elif kind == "signature_delta":
            signature = delta["signature"]
            if signature.__class__ is not str:
                raise TypeError(f"signature is {type(signature).__name__}, not a string")
            if signature and block.passback is not None:
                block.passback.signature.append(signature)
                self._signals += 1
        # `citations_delta` and types not known here add nothing to the turn.

    def _start(self, event: dict[str, Any]) -> None:
        index = self._index(event)
        block = event["content_block"]
        if block.__class__ is not dict:
            raise TypeError(f"content_block is {type(block).__name__}, not an object")
        kind = block.get("type")
        if index is None or index in self._open or kind.__class__ is not str:
            self._dropped += 1  # unaddressable, or a second start while the first is open
            return
        opened = _Open(kind)
        if kind == _TEXT:
            text = block.get("text")
            if text and text.__class__ is str:
                self._text.append(text)
        elif kind == _TOOL:
            calls = self._calls
            records = calls.records  # the live list: it grows when a call opens
            before = len(records)
            # The delta `{"index", "id", "function": {"name", "arguments": ""}}`, unbuilt.
            calls.observe_members(index, block.get("id"), block.get("name"), "")
            opened.fragments = calls.parts_by_index.get(index)
            if len(records) > before:
                ordinal = before
                self._last_call_ordinal = ordinal
                start_input = block.get("input")
                if start_input and start_input.__class__ is dict:
                    self._start_inputs[ordinal] = json.dumps(
                        start_input, ensure_ascii=False, separators=(",", ":")
                    )
                # The pass-back blocks since the previous call came before this one.
                pending = self._before
                for position in range(len(pending) - 1, -1, -1) if pending else ():
                    if pending[position] is not None:
                        break
                    pending[position] = ordinal
        else:
            passback = PassbackBlock(kind, block)
            if kind == _THINKING:
                thinking = block.get("thinking")
                if thinking and thinking.__class__ is str:
                    self._reasoning.append(thinking)
            self._passback.append(passback)
            self._before.append(None)
            opened.passback = passback
        self._last_kind = kind
        self._open[index] = opened
        self._started.add(index)
        fast = _fast_head(index, opened, self._text)
        if fast is not None:
            self._fast = fast

    def _stop(self, event: dict[str, Any]) -> None:
        index = self._index(event)
        if index is None or self._open.pop(index, None) is None:
            self._orphan("content_block_stop")  # closes nothing: the turn loses nothing
        elif index == self._fast[3]:
            self._fast = _NO_FAST  # its deltas are dropped now: the reading below counts them

    def _orphan(self, kind: str) -> None:
        """Count a frame for no open block that carries nothing (see the docstring)."""
        self._orphans[kind] = self._orphans.get(kind, 0) + 1

    def _message_start(self, event: dict[str, Any]) -> None:
        message = event["message"]
        if message.__class__ is not dict:
            raise TypeError(f"message is {type(message).__name__}, not an object")
        response_id, model = message.get("id"), message.get("model")
        if response_id and response_id.__class__ is str:
            self._response_id = response_id
        if model and model.__class__ is str:
            self._model = model
        usage = message.get("usage")
        if usage.__class__ is dict:
            self._usage.update(usage)
            self._signals += 1

    def _message_delta(self, event: dict[str, Any], data: str | bytes) -> None:
        delta = event.get("delta")
        if delta.__class__ is dict:
            stop_reason = delta.get("stop_reason")
            if stop_reason and stop_reason.__class__ is str:
                self._stop_reason = stop_reason
                self._signals += 1
                if stop_reason == "refusal":
                    raise _refusal(data, delta)
                if stop_reason == "pause_turn":
                    raise _paused(data)
        usage = event.get("usage")
        if usage.__class__ is dict:
            # Cumulative counts: the last report of each wins (input counts may be
            # restated here, output always is).
            counts = self._usage
            for key, value in usage.items():
                if value is not None:
                    counts[key] = value
            self._signals += 1

    # -- output ------------------------------------------------------------------------

    def finish(self) -> AssembledTurn:
        """The assembled turn (see `TurnAssembler.finish`), with its pass-back blocks."""
        text = "".join(self._text)
        reasoning = "".join(self._reasoning)
        stop_reason = self._stop_reason
        finish_reason = None if stop_reason is None else STOP_REASONS.get(stop_reason, stop_reason)
        model, response_id = self._model, self._response_id
        if self._stdlib_parsed:
            text = rejoin_surrogates(text, json_escape=False)
            reasoning = rejoin_surrogates(reasoning, json_escape=False)
            model = None if model is None else rejoin_surrogates(model, json_escape=False)
            if response_id is not None:
                response_id = rejoin_surrogates(response_id, json_escape=False)
            if finish_reason is not None:
                finish_reason = rejoin_surrogates(finish_reason, json_escape=False)
        calls = self._calls
        tool_calls = calls.assembled()
        if self._start_inputs:
            # Arguments sent whole with the start stand when no fragment followed.
            for ordinal, arguments in self._start_inputs.items():
                record = calls.records[ordinal]
                if not record.parts:
                    position = _position_of(calls, ordinal)
                    tool_calls[position] = tool_calls[position].model_copy(
                        update={"arguments": arguments}
                    )
        notes: list[str] = []
        if self._orphans:
            counted = ", ".join(f"{kind} x{n}" for kind, n in self._orphans.items())
            add_note(notes, f"frames for a block never started, carrying nothing: {counted}")
        dropped = self._dropped + calls.dropped_deltas
        defects = detect_completion_defects(
            text=text,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            dropped_deltas=dropped,
            wants_json=self._wants_json,
        )
        if (
            stop_reason in _CUT_STOP_REASONS
            and self._last_kind == _TOOL
            and self._last_call_ordinal is not None
            and not any(d.kind == "truncated_tool_call" for d in defects)
        ):
            cut = tool_calls[_position_of(calls, self._last_call_ordinal)]
            defects.append(
                CompletionDefect(
                    kind="truncated_tool_call",
                    detail=(
                        f"tool call {cut.name!r} was still being written when the response "
                        f"stopped with {stop_reason!r}; its arguments may be cut short."
                    ),
                    tool_call_id=cut.id,
                    retry_budget=DEFECT_RETRY_BUDGETS["truncated_tool_call"],
                )
            )
        finish_reason = reported_finish_reason(
            finish_reason, bool(tool_calls), notes, said=stop_reason
        )
        passback = (
            [
                PassbackItem(
                    endpoint=self._endpoint,
                    wire="anthropic",
                    kind=block.kind,
                    raw=block.raw(),
                    before_call=block.before_call,
                )
                for block in self.passback_blocks(tool_calls)
            ]
            if self._passback
            else []
        )
        # One validation for the turn and the models inside it (`usage`, `stats`).
        return AssembledTurn.model_validate(
            {
                "text": text,
                "reasoning": reasoning,
                "tool_calls": tool_calls,
                "finish_reason": finish_reason,
                "usage": _usage(self._usage),
                "model": model,
                "response_id": response_id,
                "defects": defects,
                "passback": passback,
                "stats": {
                    "chunks": self._chunks,
                    "saw_done": self.saw_done,
                    "dropped_deltas": dropped,
                    "malformed_aliases": calls.malformed_aliases,
                    "notes": notes,
                },
            }
        )

    def passback_blocks(self, tool_calls: Sequence[ToolCall]) -> list[PassbackBlock]:
        """The blocks to pass back, in the order they arrived, each naming the emitted id
        of the call it came before (`tool_calls` as `finish` returned them)."""
        for passback, ordinal in zip(self._passback, self._before, strict=True):
            passback.before_call = (
                None if ordinal is None else tool_calls[_position_of(self._calls, ordinal)].id
            )
        return list(self._passback)


# -- helpers -------------------------------------------------------------------------------


def _fast_head(
    index: int, block: _Open, text: list[str]
) -> tuple[bytes, int, list[str], int, bytes] | None:
    """The byte reading of the deltas of a block just opened at `index`, or None (a
    thinking block's deltas go to two places: they take the parsed reading).

    A payload that is `head + S + b"}}"`, with `head` the bytes before the delta's string
    as Anthropic writes them for this block (`_JSON_DELTA_HEAD`, `_TEXT_DELTA_HEAD`), is
    that delta exactly when `S` alone parses as a JSON string: nothing else in the object
    can differ (no other member, no repeated key, the index is this one), and the string
    is the one the whole payload holds. `S` that does not parse (a lone surrogate escape,
    invalid UTF-8, a second member) or is not a string, and any other payload, takes the
    parsed reading, with what it decides. The head is valid while the block is open: its
    stop drops it with the block, in `_stop` or read from its bytes (`_STOP`) in
    `feed_events` (`tests/test_anthropic_fast_path.py` holds the readings to the same
    outcome).
    """
    if block.fragments is not None:
        head = _JSON_DELTA_HEAD % index
        return head, len(head), block.fragments, index, _STOP % index
    if block.kind == _TEXT:
        head = _TEXT_DELTA_HEAD % index
        return head, len(head), text, index, _STOP % index
    return None


def _carries_content(delta: Any) -> bool:
    """Whether an unattributable delta lost something (an empty one lost nothing)."""
    if delta.__class__ is not dict:
        return True
    return any(value for key, value in delta.items() if key != "type" and value not in ("", None))


def _position_of(calls: ToolCallAccumulator, ordinal: int) -> int:
    """Where the call created `ordinal`-th sits in `assembled()` (its rule 8 may sort by
    index: when every call has a unique index, the calls with a lower one come first)."""
    records = calls.records
    indices = [record.index for record in records]
    mine = indices[ordinal]
    if mine is None or None in indices or len(set(indices)) != len(indices):
        return ordinal
    return sum(1 for index in indices if index is not None and index < mine)


def _usage(raw: dict[str, Any]) -> dict[str, int | None] | None:
    """Anthropic's counts as the fields of `Usage`: `input_tokens` excludes the cache, so
    the prompt is the three input counts together (as OpenAI reports it, cached included)."""
    if not raw:
        return None
    fresh = count_of(raw.get("input_tokens")) or 0
    written = count_of(raw.get("cache_creation_input_tokens"))
    read = count_of(raw.get("cache_read_input_tokens"))
    prompt = fresh + (written or 0) + (read or 0)
    completion = count_of(raw.get("output_tokens")) or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cached_tokens": read,
        "cache_creation_tokens": written,
    }


def _refusal(data: str | bytes, delta: dict[str, Any]) -> StreamFailed:
    details = delta.get("stop_details")
    category = None
    explanation = None
    if details.__class__ is dict:
        category = details.get("category")
        explanation = details.get("explanation")
    category_text = category if category.__class__ is str and category else None
    message = "the model refused to continue (stop_reason 'refusal'"
    message += f", category {category_text!r})" if category_text else ")"
    if explanation.__class__ is str and explanation:
        message += f": {explanation}"
    return StreamFailed(
        StreamFailure(
            kind="stream_error",
            message=message,
            provider_type="refusal",
            provider_code=category_text,
            body_excerpt=excerpt(data),
        )
    )


def _paused(data: str | bytes) -> StreamFailed:
    return StreamFailed(
        StreamFailure(
            kind="stream_error",
            message=(
                "the provider paused a long-running server-tool turn (stop_reason "
                "'pause_turn'); this wire does not resume paused turns, and nothing of it "
                "was dispatched"
            ),
            provider_type="pause_turn",
            body_excerpt=excerpt(data),
        )
    )
