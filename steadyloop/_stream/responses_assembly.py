"""Folding the events of one streamed OpenAI Responses answer into an `AssembledTurn`.

The model activity hands each network read's SSE events to
`ResponsesAssembler.feed_events`; `finish` returns the same `AssembledTurn` the chat
wire does (text, reasoning, tool calls, finish reason, usage, defects, stats), plus
the reasoning items to pass back (`AssembledTurn.passback`).

What the obvious implementation (`json.loads(data)` per `event:` name, the output
list of `response.completed` as the answer) gets wrong, and what prevents each here:

- Proxies strip `event:` lines (earendil-works/pi#1983, openclaw/openclaw#37571):
  every payload is dispatched on its own `type`, never on the SSE event name (which is
  read only for a payload with no `type` at all, under `event: error`).
- `output_index`, `item_id` and `call_id` are association labels, not slots: llama.cpp
  sends no `output_index` at all, and servers disagree on whether a delta's `item_id`
  is the item's `id` or the call's `call_id`. A call learns every label it is given
  (on `output_item.added`, on a delta, on `.done`); a delta goes to the newest call
  one of its labels names and none contradicts. A delta no label resolves continues
  the one call still open (rotated or missing labels); with several open it opens a
  nameless call, which stays the `unnamed_tool_call` defect unless a `.done` names it.
  A call is never merged into another on a guess.
- Final arguments win: `response.function_call_arguments.done` and
  `response.output_item.done` replace the concatenated deltas (GitHub Copilot streams
  ciphertext deltas and a plaintext `.done`, litellm#30071; some servers send the
  arguments only in `.done`). A `.done` with `""` after non-empty deltas does not erase
  them (noted). `output_item.added` may already carry arguments that the first delta
  then repeats (vLLM): they are used only when no delta and no `.done` came.
- The stream is the truth. `response.completed` only confirms it: the Codex backend
  sends `output: []` there (sipeed/picoclaw#2674) and vLLM another `call_id`. Such a
  disagreement is a note (`stats.notes`), not a failure and not a replacement. Only a
  stream that carried no output at all is read from the terminal's `output`.
- Vetoes before any dispatch: `response.failed` and an `error` event after HTTP 200
  (OpenAI nests the fields under `error`; some servers put them at the top) raise
  `stream_error` with the provider's code and type, so routing classifies them like
  any other (rate limits retried, `insufficient_quota` and authentication not).
  `response.incomplete` ends the turn with the chat finish reason it means
  (`max_output_tokens` -> `length`, `content_filter`), and any tool call of it is a
  `truncated_tool_call` defect, however its arguments parse: it is never dispatched.
  A body that ends without a terminal event, or says `[DONE]` before one, is
  `truncated_stream` (the wire's rule, `ResponsesWire.accepts_end_of_body`).
- `arguments: ""` is a call with no arguments, not a cut; arguments that do not parse
  are told apart as truncated or malformed by `detect_completion_defects`, as on chat.
- Reasoning items round-trip byte-exact: the item of `output_item.done` is cut out of
  the payload's own text (`_raw_member`), never parsed and dumped again, kept even
  when it holds nothing but an id, and tagged with the endpoint that issued it and
  the call it preceded (`PassbackItem.before_call`).
- The watchdog must not take a ping for progress: only text, reasoning, argument
  fragments, items and the terminal move `content_mark`; `response.created`,
  `response.in_progress` and empty deltas do not. Reasoning deltas count as a first
  token, not as an answer token, so they run under the reasoning gap.
- Hostile values: labels that are not what they claim (`output_index: 1.5`, `true`,
  NaN) are ignored as labels and counted; usage counts that are not counts are left
  out; text split inside a surrogate pair is re-joined, and an unpaired half becomes
  U+FFFD, so the turn always serializes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from steadyloop._chat import PassbackItem, ToolCall
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.completion import (
    MAX_STREAM_NOTES,
    STREAM_NOTE_CHARS,
    AssembledTurn,
    StreamStats,
    Usage,
)
from steadyloop._stream.defects import (
    DEFECT_RETRY_BUDGETS,
    CompletionDefect,
    detect_completion_defects,
)
from steadyloop._stream.failures import excerpt
from steadyloop._stream.sse import MessageData, ServerSentEvent
from steadyloop._stream.surrogates import rejoin_surrogates

# The chat assembler's readings of provider values, shared so both wires bound them alike.
from steadyloop._stream.turn_assembly import (
    TurnProgress,
    _text_of,
    count_of,
    invalid_chunk,
    stdlib_event,
)

__all__ = ["ResponsesAssembler", "ResponsesCall"]

_loads = orjson.loads
_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


class ResponsesCall:
    """One function call being assembled. `output_index`, `item_id` and `wire_id` (the
    `call_id`) are labels the wire used for it, not its identity."""

    __slots__ = (
        "done",
        "final",
        "initial",
        "item_id",
        "name",
        "ordinal",
        "output_index",
        "parts",
        "wire_id",
    )

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.output_index: int | None = None
        self.item_id: str | None = None
        self.wire_id: str | None = None
        self.name = ""
        # Streamed fragments, append-only (the runaway guard and the token meter count
        # them as they grow); a `.done`'s text that extends them is appended too.
        self.parts: list[str] = []
        self.final: str | None = None  # the arguments a `.done` gave
        self.initial: str | None = None  # `output_item.added`'s arguments
        self.done = False

    def labels(self) -> tuple[str | None, str | None]:
        return self.item_id, self.wire_id

    def arguments(self) -> str:
        streamed = "".join(self.parts)
        final = self.final
        if final is not None and (final or not streamed):
            return final
        if streamed or self.initial is None:
            return streamed
        return self.initial


class _Calls:
    """The calls of one answer, in creation order, with the counters the activity reads."""

    __slots__ = ("_minted", "by_item", "dropped", "records")

    def __init__(self) -> None:
        self.records: list[ResponsesCall] = []
        # item_id or call_id -> the newest call holding it (the per-delta lookup).
        self.by_item: dict[str, ResponsesCall] = {}
        self.dropped = 0
        self._minted: set[str] = set()

    @property
    def is_empty(self) -> bool:
        return not self.records

    @property
    def call_count(self) -> int:
        return len(self.records)

    def was_minted(self, call_id: str) -> bool:
        return call_id in self._minted

    def open(self) -> ResponsesCall:
        call = ResponsesCall(len(self.records))
        self.records.append(call)
        return call

    def learn(
        self, call: ResponsesCall, index: int | None, item_id: str | None, call_id: str | None
    ) -> None:
        if index is not None and call.output_index is None:
            call.output_index = index
        if item_id is not None:
            if call.item_id is None:
                call.item_id = item_id
            self.by_item[item_id] = call
        if call_id is not None:
            if call.wire_id is None:
                call.wire_id = call_id
            self.by_item[call_id] = call

    def find(
        self,
        index: int | None,
        item_id: str | None,
        call_id: str | None,
        *,
        fallback: bool = True,
        name: str | None = None,
    ) -> ResponsesCall | None:
        """The newest call a label names and none contradicts; else, with `fallback`,
        the one call still open when no label names a known call (and `name`, when
        given, does not name another tool than it has); None otherwise."""
        named = [label for label in (item_id, call_id) if label is not None]
        for call in reversed(self.records):
            if index is not None and call.output_index is not None and call.output_index != index:
                continue
            held = [label for label in call.labels() if label is not None]
            if named and held and not any(label in held for label in named):
                continue
            if (index is not None and call.output_index == index) or any(
                label in held for label in named
            ):
                return call
        if not fallback or any(label in self.by_item for label in named):
            return None  # a label names a known call that another label contradicts
        still_open = [call for call in self.records if not call.done]
        if len(still_open) == 1 and (
            not name or not still_open[0].name or name == still_open[0].name
        ):
            return still_open[0]
        return None

    def assembled(self, mint_prefix: str, stdlib: bool) -> list[tuple[ResponsesCall, ToolCall]]:
        """Each call with its finished `ToolCall` (usable, unique ids), in output order
        when every call has a distinct `output_index`, else in creation order."""
        emitted: set[str] = set()
        wire_ids = {call.wire_id for call in self.records if call.wire_id is not None}
        out: list[tuple[ResponsesCall, ToolCall]] = []
        for call in self.records:
            call_id = call.wire_id
            if call_id is not None and not call_id.isascii():
                call_id = rejoin_surrogates(call_id, json_escape=False)
            if call_id is None or call_id in emitted:
                call_id = _mint(mint_prefix, call.ordinal, emitted | wire_ids)
                self._minted.add(call_id)
            emitted.add(call_id)
            arguments = call.arguments()
            name = call.name
            if stdlib:
                arguments = rejoin_surrogates(arguments, json_escape=True)
                name = rejoin_surrogates(name, json_escape=False)
            out.append((call, ToolCall(id=call_id, name=name, arguments=arguments)))
        indices = [call.output_index for call in self.records]
        if None not in indices and len(set(indices)) == len(indices):
            out.sort(key=lambda pair: pair[0].output_index or 0)
        return out


def _mint(prefix: str, ordinal: int, taken: set[str]) -> str:
    candidate = f"{prefix}_{ordinal}"
    suffix = 0
    while candidate in taken:
        suffix += 1
        candidate = f"{prefix}_{ordinal}_{suffix}"
    return candidate


class _Reasoning:
    """One reasoning item in output order: its labels and, once done, its raw text."""

    __slots__ = ("item_id", "output_index", "raw")

    def __init__(self, output_index: int | None, item_id: str | None) -> None:
        self.output_index = output_index
        self.item_id = item_id
        self.raw: str | None = None


class ResponsesAssembler(TurnProgress):
    """Folds the events of one streamed Responses answer into an `AssembledTurn`.

    `endpoint` names the endpoint the answer came from: every pass-back item is tagged
    with it. Feed each read's events with `feed_events` (True once the terminal event
    arrived), then call `finish` once. The counters are cheap at any point.
    """

    _calls: _Calls

    def __init__(
        self, *, endpoint: str, mint_prefix: str = "call_sl", wants_json: bool = False
    ) -> None:
        if not mint_prefix.strip():
            raise ValueError("mint_prefix must be a non-blank string")
        self._endpoint = endpoint
        self._mint_prefix = mint_prefix
        self._wants_json = wants_json
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls = _Calls()
        # Output order: reasoning items and calls as they were first seen.
        self._order: list[_Reasoning | ResponsesCall] = []
        self._reasoning_by_id: dict[str, _Reasoning] = {}
        self._text_mark = 0  # where the current text part's deltas start
        self._reasoning_mark = 0
        self._argument_deltas = 0
        self._signals = 0
        self._chunks = 0
        self._counted_text = self._counted_reasoning = self._counted_chars = 0
        self._stdlib = False
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._response_id: str | None = None
        self._finish_reason: str | None = None
        self._incomplete = False
        self._refused = False
        self._saw_output = False
        self._notes: list[str] = []
        self._malformed_labels = 0
        self.saw_terminal = False

    # -- progress, for heartbeats ---------------------------------------------------------

    @property
    def content_mark(self) -> int:
        return len(self._text) + len(self._reasoning) + self._argument_deltas + self._signals

    @property
    def may_hold_surrogates(self) -> bool:
        return self._stdlib

    @property
    def reported_completion_tokens(self) -> int | None:
        usage = self._usage
        return None if usage is None else count_of(usage.get("output_tokens"))

    @property
    def finish_reason_seen(self) -> bool:
        return self.saw_terminal

    @property
    def chunks(self) -> int:
        return self._chunks

    @property
    def calls(self) -> _Calls:
        return self._calls

    # -- input ----------------------------------------------------------------------------

    def feed_events(self, events: Sequence[ServerSentEvent | str | bytes]) -> bool:
        """Fold one read's events in order; True once the terminal event arrived (what
        follows it is not read). Raises `StreamFailed` for a failure the stream reports."""
        if events.__class__ is MessageData:
            fold = self._fold
            fold_payload = self._fold_payload
            by_item = self._calls.by_item
            for data in events.raw:
                try:
                    payload = _loads(data)
                except orjson.JSONDecodeError:
                    if fold(data, None):  # blank, `[DONE]`, or JSON only the stdlib reads
                        return True
                    continue
                # The commonest event inline: an argument fragment whose `item_id` its
                # open call holds, with no `output_index` or the call's own (see `_fold`).
                if (
                    payload.__class__ is dict
                    and payload.get("type") == "response.function_call_arguments.delta"
                ):
                    delta = payload.get("delta")
                    item_id = payload.get("item_id")
                    if delta and delta.__class__ is str and item_id.__class__ is str:
                        call = by_item.get(item_id)
                        if call is not None and not call.done:
                            index = payload.get("output_index")
                            if index is None or (
                                index.__class__ is int and index == call.output_index
                            ):
                                self._chunks += 1
                                call.parts.append(delta)
                                self._argument_deltas += 1
                                continue
                self._chunks += 1
                if fold_payload(payload, data, None):
                    return True
            return False
        for event in events:
            if isinstance(event, ServerSentEvent):
                done = self._fold(event.data, event.event)
            else:
                done = self._fold(event, None)
            if done:
                return True
        return False

    def _fold(self, data: str | bytes, event_name: str | None) -> bool:
        if not data:
            return False  # an empty payload: a keep-alive
        self._chunks += 1
        try:
            payload = _loads(data)
        except orjson.JSONDecodeError:
            payload = self._parse_refused(data)
            if payload is None:
                return False
        return self._fold_payload(payload, data, event_name)

    def _fold_payload(self, payload: Any, data: str | bytes, event_name: str | None) -> bool:
        """Fold one parsed payload (counted in `_chunks` by the caller)."""
        if payload.__class__ is not dict:
            raise invalid_chunk(data, "a stream event is not a JSON object")
        kind = payload.get("type")
        # The per-token events first, with as little as possible between them and the append.
        if kind == "response.output_text.delta":
            delta = payload.get("delta")
            if delta and delta.__class__ is str:
                self._text.append(delta)
            return False
        if kind == "response.function_call_arguments.delta":
            delta = payload.get("delta")
            if delta and delta.__class__ is str:
                item_id = payload.get("item_id")
                call = self._calls.by_item.get(item_id) if item_id.__class__ is str else None
                # The commonest delta: a label its call already holds, an `output_index`
                # absent or the call's own (an int: `True` and `1.0` compare equal to 1
                # but are no labels), the call still open. Anything else is resolved.
                if call is not None and not call.done:
                    index = payload.get("output_index")
                    if index is None or (index.__class__ is int and index == call.output_index):
                        call.parts.append(delta)
                        self._argument_deltas += 1
                        return False
                call = self._resolve(payload, delta)
                if call is not None and not call.done:
                    call.parts.append(delta)
                    self._argument_deltas += 1
            return False
        if kind.__class__ is not str:
            if "error" in payload or event_name == "error":
                raise _stream_error(data, payload.get("error", payload), "")
            self._note(f"an event without a type was ignored: {excerpt(data, 80)}")
            return False
        return self._fold_other(kind, payload, data)

    def _fold_other(self, kind: str, payload: dict[str, Any], data: str | bytes) -> bool:
        if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            delta = payload.get("delta")
            if delta and delta.__class__ is str:
                self._reasoning.append(delta)
        elif kind == "response.refusal.delta":
            delta = payload.get("delta")
            if delta and delta.__class__ is str:
                self._refused = True
                self._text.append(delta)
        elif kind == "response.output_item.added":
            self._item_added(payload.get("item"), _index(self, payload))
        elif kind == "response.output_item.done":
            self._item_done(payload.get("item"), _index(self, payload), data)
        elif kind == "response.function_call_arguments.done":
            self._arguments_done(payload)
        elif kind in ("response.content_part.added", "response.reasoning_summary_part.added"):
            self._text_mark, self._reasoning_mark = len(self._text), len(self._reasoning)
        elif kind == "response.output_text.done":
            self._part_done(self._text, self._text_mark, payload.get("text"), "text")
        elif kind in ("response.reasoning_text.done", "response.reasoning_summary_text.done"):
            self._part_done(self._reasoning, self._reasoning_mark, payload.get("text"), "reasoning")
        elif kind == "response.completed":
            self._terminal(payload.get("response"), data)
            self._finish_reason = "refusal" if self._refused and self._calls.is_empty else None
            return True
        elif kind == "response.incomplete":
            response = payload.get("response")
            self._terminal(response, data)
            details = response.get("incomplete_details") if response.__class__ is dict else None
            reason = details.get("reason") if details.__class__ is dict else None
            self._incomplete = True
            self._finish_reason = _INCOMPLETE_REASONS.get(reason, "length")  # type: ignore[arg-type]
            return True
        elif kind == "response.failed":
            response = payload.get("response")
            error = response.get("error") if response.__class__ is dict else None
            raise _stream_error(data, error, "the response failed")
        elif kind == "error":
            error = payload.get("error")
            raise _stream_error(data, error if error.__class__ is dict else payload, "")
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            self._meta(payload.get("response"))
        # Anything else (annotations, web search progress, content_part.done, ...)
        # carries nothing the turn is made of.
        return False

    def _parse_refused(self, data: str | bytes) -> Any:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if not text.strip():
            self._chunks -= 1  # blank: a keep-alive, not an event
            return None
        if text.lstrip().startswith("[DONE]"):
            if self.saw_terminal:
                return None
            raise StreamFailed(
                StreamFailure(
                    kind="truncated_stream",
                    message="the stream sent [DONE] before response.completed",
                    body_excerpt=excerpt(text),
                )
            )
        try:
            payload = stdlib_event(text)  # escapes of lone surrogates, which orjson refuses
        except (ValueError, RecursionError):
            raise invalid_chunk(data, "a stream event is not valid JSON") from None
        self._stdlib = True
        return payload

    # -- items and calls ------------------------------------------------------------------

    def _labels(self, payload: dict[str, Any]) -> tuple[int | None, str | None, str | None]:
        item_id = payload.get("item_id")
        call_id = payload.get("call_id")
        return (
            _index(self, payload),
            item_id if item_id.__class__ is str and item_id.strip() else None,
            call_id if call_id.__class__ is str and call_id.strip() else None,
        )

    def _resolve(self, payload: dict[str, Any], delta: str) -> ResponsesCall | None:
        index, item_id, call_id = self._labels(payload)
        call = self._calls.find(index, item_id, call_id)
        if call is None and (index is not None or item_id is not None or call_id is not None):
            # Frames for an item never announced: a nameless call that a `.done` may name.
            call = self._open_call(index, None, None)
        if call is None:
            self._calls.dropped += 1
            self._note(f"an argument fragment ({len(delta)} chars) matched no call")
            return None
        self._calls.learn(call, index, item_id, call_id)
        return call

    def _open_call(
        self, index: int | None, item_id: str | None, call_id: str | None
    ) -> ResponsesCall:
        call = self._calls.open()
        self._calls.learn(call, index, item_id, call_id)
        self._order.append(call)
        return call

    def _item_added(self, item: Any, index: int | None) -> None:
        self._signals += 1
        if item.__class__ is not dict:
            return
        self._saw_output = True
        kind = item.get("type")
        item_id = _label(item.get("id"))
        if kind == "function_call":
            call_id = _label(item.get("call_id"))
            call = self._calls.find(index, item_id, call_id, fallback=False)
            if call is None or call.done:
                call = self._open_call(index, item_id, call_id)
            else:
                self._calls.learn(call, index, item_id, call_id)
            name = item.get("name")
            if name.__class__ is str and name.strip() and not call.name:
                call.name = name
            arguments = item.get("arguments")
            if arguments.__class__ is str and arguments:
                call.initial = arguments
        elif kind == "reasoning":
            self._reasoning_item(index, item_id)
        elif kind == "message":
            self._text_mark = len(self._text)
        elif kind.__class__ is str:
            self._note(f"an output item of type {kind[:40]!r} was not used")

    def _reasoning_item(self, index: int | None, item_id: str | None) -> _Reasoning:
        known = self._reasoning_by_id.get(item_id) if item_id is not None else None
        if known is not None:
            return known
        reasoning = _Reasoning(index, item_id)
        if item_id is not None:
            self._reasoning_by_id[item_id] = reasoning
        self._order.append(reasoning)
        self._reasoning_mark = len(self._reasoning)
        return reasoning

    def _item_done(self, item: Any, index: int | None, data: str | bytes) -> None:
        self._signals += 1
        if item.__class__ is not dict:
            return
        self._saw_output = True
        kind = item.get("type")
        item_id = _label(item.get("id"))
        if kind == "function_call":
            call_id = _label(item.get("call_id"))
            call = self._calls.find(index, item_id, call_id, name=_label(item.get("name")))
            if call is None or call.done:
                call = self._open_call(index, item_id, call_id)  # arguments only at done
            self._calls.learn(call, index, item_id, call_id)
            self._finalize(call, item.get("name"), item.get("arguments"))
            call.done = True
        elif kind == "reasoning":
            reasoning = self._reasoning_item(index, item_id)
            reasoning.raw = _raw_member(data, "item", item)
        elif kind == "message":
            streamed = "".join(self._text[self._text_mark :])
            content = item.get("content")
            if not streamed and content.__class__ is list:
                for part in content:
                    if part.__class__ is dict:
                        text = part.get("text")
                        if text.__class__ is not str:
                            text = part.get("refusal")
                            self._refused = self._refused or text.__class__ is str
                        if text.__class__ is str and text:
                            self._text.append(text)
            self._text_mark = len(self._text)

    def _arguments_done(self, payload: dict[str, Any]) -> None:
        self._signals += 1
        index, item_id, call_id = self._labels(payload)
        call = self._calls.find(index, item_id, call_id, name=_label(payload.get("name")))
        if call is None or call.done:
            call = self._open_call(index, item_id, call_id)
        self._calls.learn(call, index, item_id, call_id)
        self._finalize(call, payload.get("name"), payload.get("arguments"))

    def _finalize(self, call: ResponsesCall, name: Any, arguments: Any) -> None:
        """The `.done`'s name and arguments: the final word on the call."""
        if name.__class__ is str and name.strip():
            if call.name and call.name != name:
                self._note(f"call {call.wire_id!r} was renamed {name[:40]!r} at done")
            call.name = name
        if arguments.__class__ is not str:
            if arguments is not None:
                self._note(f"call {call.wire_id!r} had non-text arguments at done; ignored")
            return
        streamed = "".join(call.parts)
        if arguments == streamed:
            call.final = arguments
            return
        if not arguments and streamed:
            self._note(f"call {call.wire_id!r} had empty arguments at done; the streamed ones kept")
            return
        if streamed:
            self._note(f"the final arguments of call {call.wire_id!r} replaced the streamed ones")
        # Guard and meter count what grows: the part beyond what streamed, or all of it.
        call.parts.append(
            arguments[len(streamed) :] if arguments.startswith(streamed) else arguments
        )
        call.final = arguments

    def _part_done(self, parts: list[str], mark: int, text: Any, what: str) -> None:
        """A text or reasoning part's final text: used when no delta carried it."""
        if text.__class__ is not str or not text:
            return
        streamed = "".join(parts[mark:])
        if not streamed:
            parts.append(text)
        elif streamed != text:
            self._note(f"the final {what} differs from the streamed {what}; the streamed kept")

    # -- the terminal ---------------------------------------------------------------------

    def _meta(self, response: Any) -> None:
        if response.__class__ is not dict:
            return
        response_id, model = response.get("id"), response.get("model")
        if response_id.__class__ is str and self._response_id is None:
            self._response_id = response_id
        if model.__class__ is str and self._model is None:
            self._model = model

    def _terminal(self, response: Any, data: str | bytes) -> None:
        self.saw_terminal = True
        self._signals += 1
        if response.__class__ is not dict:
            self._note("the terminal event carried no response object")
            return
        self._meta(response)
        usage = response.get("usage")
        if usage.__class__ is dict:
            self._usage = usage
        output = response.get("output")
        if output.__class__ is not list:
            return
        if not self._saw_output and not self._text and not self._reasoning:
            if output:
                self._note(f"the stream carried no output; read {len(output)} item(s) from its end")
            for item in output:
                self._item_done(item, None, data)
            return
        self._confirm(output)

    def _confirm(self, output: list[Any]) -> None:
        """Record where the terminal's `output` disagrees with the stream (which wins)."""
        if not output:
            self._note("the terminal event listed no output; the streamed items kept")
            return
        said = [
            item.get("call_id")
            for item in output
            if item.__class__ is dict and item.get("type") == "function_call"
        ]
        streamed = [call.wire_id for call in self._calls.records]
        if said != streamed:
            self._note(
                f"the terminal event lists calls {said!r:.80} where the stream sent "
                f"{streamed!r:.80}; the streamed calls kept"
            )

    def _note(self, text: str) -> None:
        if len(self._notes) < MAX_STREAM_NOTES:
            self._notes.append(rejoin_surrogates(text[:STREAM_NOTE_CHARS], json_escape=False))

    # -- output ---------------------------------------------------------------------------

    def finish(self) -> AssembledTurn:
        """The assembled turn (see the module docstring for the rules it applied)."""
        stdlib = self._stdlib
        text = "".join(self._text)
        reasoning = "".join(self._reasoning)
        if stdlib:
            text = rejoin_surrogates(text, json_escape=False)
            reasoning = rejoin_surrogates(reasoning, json_escape=False)
        calls = self._calls
        pairs = calls.assembled(self._mint_prefix, stdlib)
        tool_calls = [tool_call for _, tool_call in pairs]
        finish_reason = self._finish_reason
        if finish_reason is None and self.saw_terminal:
            finish_reason = "tool_calls" if tool_calls else "stop"
        defects = detect_completion_defects(
            text=text,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            dropped_deltas=calls.dropped,
            wants_json=self._wants_json,
        )
        if self._incomplete and tool_calls:
            flagged = {d.tool_call_id for d in defects if d.kind == "truncated_tool_call"}
            defects.extend(
                CompletionDefect(
                    kind="truncated_tool_call",
                    detail=f"the response ended incomplete ({finish_reason}) with tool call "
                    f"{call.name!r} in it; it is not dispatched.",
                    tool_call_id=call.id,
                    retry_budget=DEFECT_RETRY_BUDGETS["truncated_tool_call"],
                )
                for call in tool_calls
                if call.id not in flagged
            )
        model, response_id = self._model, self._response_id
        if stdlib:
            model = None if model is None else rejoin_surrogates(model, json_escape=False)
            if response_id is not None:
                response_id = rejoin_surrogates(response_id, json_escape=False)
        return AssembledTurn(
            text=text,
            reasoning=reasoning,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            usage=_usage(self._usage),
            model=model,
            response_id=response_id,
            defects=defects,
            stats=StreamStats(
                chunks=self._chunks,
                saw_done=self.saw_terminal,
                dropped_deltas=calls.dropped,
                malformed_aliases=self._malformed_labels,
                notes=list(self._notes),
            ),
            passback=self._passback({record.ordinal: call.id for record, call in pairs}),
        )

    def _passback(self, emitted: dict[int, str]) -> list[PassbackItem]:
        """The reasoning items in output order, each tagged with the call that followed
        (`emitted`: each call's creation ordinal -> the id it was emitted under)."""
        order = list(self._order)
        indices = [entry.output_index for entry in order]
        if None not in indices and len(set(indices)) == len(indices):
            order.sort(key=lambda entry: entry.output_index or 0)
        items: list[PassbackItem] = []
        waiting: list[str] = []
        for entry in order:
            if isinstance(entry, _Reasoning):
                if entry.raw is not None:
                    waiting.append(entry.raw)
                else:
                    self._note("a reasoning item never finished; it is not passed back")
                continue
            call_id = emitted.get(entry.ordinal)
            items.extend(self._item(raw, call_id) for raw in waiting)
            waiting = []
        items.extend(self._item(raw, None) for raw in waiting)
        return items

    def _item(self, raw: str, before_call: str | None) -> PassbackItem:
        return PassbackItem(
            endpoint=self._endpoint,
            wire="responses",
            kind="reasoning",
            raw=raw,
            before_call=before_call,
        )


# -- helpers ---------------------------------------------------------------------------------


def _label(value: Any) -> str | None:
    return value if value.__class__ is str and value.strip() else None


def _index(assembler: ResponsesAssembler, payload: dict[str, Any]) -> int | None:
    """`output_index` when it is a non-negative integer; anything else is counted."""
    index = payload.get("output_index")
    if index is None:
        return None
    if index.__class__ is int and index >= 0:
        return int(index)
    assembler._malformed_labels += 1
    return None


def _raw_member(data: str | bytes, key: str, value: Any) -> str:
    """The JSON text of `payload[key]` exactly as it arrived in `data`.

    The member is found by its key (`"item":`), then read with `raw_decode`, which says
    where the value ends; a candidate is taken only when it decodes to `value` (a
    nested member of the same name cannot be mistaken for it). Failing that (never on
    a well-formed payload), the value serialized again, which is no longer byte-exact.
    """
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    decoder = json.JSONDecoder()
    needle = f'"{key}"'
    start = text.find(needle)
    while start >= 0:
        colon = start + len(needle)
        while colon < len(text) and text[colon] in " \t\r\n":
            colon += 1
        if colon < len(text) and text[colon] == ":":
            begin = colon + 1
            while begin < len(text) and text[begin] in " \t\r\n":
                begin += 1
            try:
                found, end = decoder.raw_decode(text, begin)
            except (ValueError, RecursionError):
                found, end = None, begin
            if found == value:
                return text[begin:end]
        start = text.find(needle, start + 1)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _usage(raw: dict[str, Any] | None) -> Usage | None:
    """Responses usage (`input_tokens`, `output_tokens`, their details) as `Usage`."""
    if raw is None:
        return None
    prompt = count_of(raw.get("input_tokens")) or 0
    completion = count_of(raw.get("output_tokens")) or 0
    total = count_of(raw.get("total_tokens"))
    input_details, output_details = (
        raw.get("input_tokens_details"),
        raw.get("output_tokens_details"),
    )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        reasoning_tokens=count_of(output_details.get("reasoning_tokens"))
        if output_details.__class__ is dict
        else None,
        cached_tokens=count_of(input_details.get("cached_tokens"))
        if input_details.__class__ is dict
        else None,
    )


def _stream_error(data: str | bytes, error: Any, context: str) -> StreamFailed:
    """`stream_error` from an error object (its fields, OpenAI's nesting or flat)."""
    message = code = error_type = None
    if error.__class__ is dict:
        message = _text_of(error.get("message"))
        code = _text_of(error.get("code"))
        error_type = _text_of(error.get("type"))
    elif error is not None:
        message = _text_of(error)
    if context:
        message = f"{context}: {message}" if message else context
    return StreamFailed(
        StreamFailure(
            kind="stream_error",
            message=message or "the provider reported an error inside the stream",
            provider_code=code,
            provider_type=error_type,
            body_excerpt=excerpt(data),
        )
    )
