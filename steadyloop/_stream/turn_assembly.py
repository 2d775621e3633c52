"""Folding the chunks of one streamed chat completion into an `AssembledTurn`.

The model activity hands the SSE events of each network read to
`TurnAssembler.feed_events` (or each `data:` payload to `feed`); `finish` returns the
assistant text, reasoning text, tool calls, finish reason, usage, defects and counters.
This runs once per streamed token, so the per-chunk path is one `orjson` parse and a
handful of subscripts on the common shape, and everything that can wait for `finish`
does: text is joined once, usage read once, characters counted only when asked.

What the obvious implementation (`chunk["choices"][0]["delta"]["content"]`) gets wrong,
and what prevents each here:

- Usage chunks have `choices: []` (OpenAI with `stream_options.include_usage`), and
  some providers send `choices: null` or leave it out: indexing `[0]` raises mid-stream.
  An empty or missing `choices` is a chunk with no delta; its `usage` is still read.
- With `n > 1` a chunk's `choices` may hold choice 1 alone. List position 0 is not
  choice 0: the choice's own `index` decides (position only when `index` is absent).
  Other choices are counted in `stats.ignored_choices`, never merged into the turn.
- `finish_reason` often arrives in its own chunk with an empty delta, and `usage`
  after that; a reader that stops at the first finish reason loses the usage.
- Reasoning arrives as `delta.reasoning_content` (DeepSeek, vLLM, llama.cpp) or
  `delta.reasoning` (OpenRouter, Ollama, newer vLLM), some gateways sending both with
  the same text: it is kept apart from the answer, and counted once per delta.
- Mistral's reasoning models (Magistral on Mistral's own API) send `delta.content` as a
  list of typed parts, the thinking first, then plain string content:
  `[{"type": "thinking", "thinking": [{"type": "text", "text": "Hm"}]}]`. A `text`
  part is answer text, a `thinking` part's text parts (or a string) are reasoning; any
  other part (Mistral's `reference` citations, a type not known here, a part that is
  not an object or whose text is not a string) carries nothing the turn can hold and is
  counted by type in a note (`stats.notes`). An empty list is no content. Such a chunk
  is never refused: refusing it made every attempt `invalid_chunk`, and those models
  unusable.
- A turn that holds tool calls reports `tool_calls` when the provider only said `stop`
  (`completion.reported_finish_reason`, the rule every wire shares).
- A provider reports a failure *inside* the stream as a JSON object with an `error`
  member (an object with `message`/`type`/`code`, or a bare string), or vLLM's
  `{"object": "error", ...}`. Read as a chunk it has no choices and the turn would
  look merely empty; here it raises `StreamFailed(kind="stream_error")` with the
  provider's message, code, type and a body excerpt. A payload that is not JSON, or
  JSON that is not an object, raises `StreamFailed(kind="invalid_chunk")`. Wire
  content of the wrong type (a `choices` that is a string, a delta that is a number)
  is `invalid_chunk` too: never an `AttributeError` escaping the activity.
- Text a provider split inside a UTF-16 surrogate pair (`"\\ud83d"` then `"\\ude00"`
  in two chunks) is legal JSON that `orjson` refuses. Such a payload is parsed again
  with the stdlib `json`, and at `finish` pairs split across chunks are re-joined into
  the one character they mean; a half left unpaired becomes U+FFFD, so the turn can
  always be serialized. Tool-call text gets the same treatment in the accumulator.
- Tool calls are not assembled here: each `delta.tool_calls` goes, as sent, to
  `ToolCallAccumulator.observe`, which owns the rules for merged, split and relabelled
  calls. `finish` runs `detect_completion_defects` with its `dropped_deltas`.

- A fast path that reads fewer members than the full check must not change the
  result: it takes only a chunk whose single choice 0 has a null finish reason and a
  delta that is a non-empty string `content` (and at most `role`), reasoning text
  beside no content and no tool calls, or a lone `tool_calls` list, and appends a
  bare argument fragment itself only in the one shape where the accumulator's rules
  leave nothing to decide. Everything else, including any chunk that would raise,
  goes through `_fold`. The tests run every case through both entry points, and every
  wire shape of the accumulator's suite through both the accumulator alone and this
  path.
- A learned chunk shape (the bytes a stream repeats around each chunk's text, see
  `_learn`) must only ever skip parsing what is byte for byte a chunk the fast path
  already took: a payload fits only with one JSON string where the text was (and one
  where OpenAI's padding was), and anything else is parsed whole. `shape_cache=False`
  turns it off; the tests feed every stream both ways and require the same turn.

`[DONE]` is an SSE convention, not JSON: `feed_events` stops at it and returns True;
`feed` also takes a payload that starts with `[DONE]` as the end marker rather than as
an invalid chunk. Either way `stats.saw_done` records it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.accumulator import ToolCallAccumulator
from steadyloop._stream.completion import (
    AssembledTurn,
    StreamStats,
    Usage,
    add_note,
    reported_finish_reason,
)
from steadyloop._stream.defects import detect_completion_defects
from steadyloop._stream.failures import excerpt
from steadyloop._stream.sse import MessageData, ServerSentEvent
from steadyloop._stream.surrogates import rejoin_surrogates

__all__ = ["TurnAssembler", "TurnProgress"]

_loads = orjson.loads
_OrjsonDecodeError = orjson.JSONDecodeError
_DONE: Any = object()  # `_parse_refused` found the end marker
# What `_learn` puts in place of a chunk's text, and of a padding string after it; their
# JSON forms are found in the serialized chunk.
_SENTINEL = "\x00steadyloop text\x00"
_SENTINEL_JSON = orjson.dumps(_SENTINEL)
_PAD_SENTINEL = "\x00steadyloop padding\x00"
_PAD_SENTINEL_JSON = orjson.dumps(_PAD_SENTINEL)
# A learned chunk shape (see `TurnAssembler._learn`): the bytes before the text and at
# the very end, where the text starts and the end starts (negative), the bytes between
# the text and a padding string (None when there is no padding hole), and the map and
# key of the list the text is appended to.
_Template = tuple[bytes, bytes, int, int, bytes | None, Mapping[int, list[str]], int]
_BLANK: Any = object()  # `_parse_refused` found an empty payload (a keep-alive)
# Distinct kinds of content part a turn's note names (`_part_not_read`); more are "other".
_UNREAD_PART_KINDS = 6


class CallCounts(Protocol):
    """What `TurnProgress` reads of a wire's calls: a `ToolCallAccumulator`, or a wire's own
    collection of calls (`responses_assembly`)."""

    @property
    def call_count(self) -> int: ...

    @property
    def is_empty(self) -> bool: ...


class TurnProgress:
    """The cheap progress counters every wire's assembler has, read once per network read
    for heartbeats, forwarding and the watchdog: answer and reasoning text kept as lists
    of pieces (`_text`, `_reasoning`), calls in a `CallCounts` (`_calls`)."""

    __slots__ = ("_counted_chars", "_counted_reasoning", "_counted_text")
    _text: list[str]
    _reasoning: list[str]
    _calls: CallCounts
    _counted_chars: int
    _counted_text: int
    _counted_reasoning: int

    @property
    def output_chars(self) -> int:
        """Characters of answer and reasoning text so far (counted lazily, incrementally)."""
        text, reasoning = self._text, self._reasoning
        added = 0
        for i in range(self._counted_text, len(text)):
            added += len(text[i])
        for i in range(self._counted_reasoning, len(reasoning)):
            added += len(reasoning[i])
        self._counted_text = len(text)
        self._counted_reasoning = len(reasoning)
        self._counted_chars += added
        return self._counted_chars

    @property
    def text_parts(self) -> list[str]:
        """The answer text's pieces so far, in order (read-only: for forwarding)."""
        return self._text

    @property
    def reasoning_parts(self) -> list[str]:
        """The reasoning text's pieces so far, in order (read-only: for forwarding)."""
        return self._reasoning

    @property
    def tool_call_count(self) -> int:
        """Tool calls opened so far."""
        return self._calls.call_count

    @property
    def first_token_seen(self) -> bool:
        """True once any answer text, reasoning text or tool call has arrived."""
        return bool(self._text or self._reasoning) or not self._calls.is_empty

    @property
    def answer_token_seen(self) -> bool:
        """True once answer text or a tool call has arrived (reasoning is not an answer)."""
        return bool(self._text) or not self._calls.is_empty


class TurnAssembler(TurnProgress):
    """Folds the JSON payloads of one streamed chat completion into an `AssembledTurn`.

    Feed each SSE data payload with `feed` (or a batch of decoded events with
    `feed_events`), then call `finish` once. For heartbeats, `output_chars`,
    `tool_call_count` and `first_token_seen` are cheap to read at any point.
    Chunk shapes are learned only from the decoder's raw batches (`MessageData`);
    `shape_cache=False` parses every chunk whole (for comparison: same result).
    """

    _calls: ToolCallAccumulator

    __slots__ = (
        "_calls",
        "_chunks",
        "_finish_reason",
        "_ignored_choices",
        "_learns",
        "_meta_pending",
        "_model",
        "_reasoning",
        "_reasoning_sink",
        "_response_id",
        "_shape_cache",
        "_signals",
        "_stdlib_parsed",
        "_template",
        "_text",
        "_text_sink",
        "_unread_parts",
        "_usage",
        "_wants_json",
        "saw_done",
    )

    def __init__(
        self, *, mint_prefix: str = "call_sl", wants_json: bool = False, shape_cache: bool = True
    ) -> None:
        self._calls = ToolCallAccumulator(mint_prefix)
        self._wants_json = wants_json
        self._text: list[str] = []
        # The text and the reasoning as one-entry maps, so a learned shape names its list
        # as (map, key) whether it feeds either of them or a tool call's fragments.
        self._text_sink: Mapping[int, list[str]] = {0: self._text}
        self._reasoning: list[str] = []
        self._reasoning_sink: Mapping[int, list[str]] = {0: self._reasoning}
        self._shape_cache = shape_cache
        self._template: _Template | None = None
        self._learns = 0
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._response_id: str | None = None
        self._meta_pending = True
        self._chunks = 0
        self._ignored_choices = 0
        self._unread_parts: dict[str, int] = {}  # content parts neither text nor reasoning
        self._stdlib_parsed = False
        self._signals = 0  # chunks that carried usage or a finish reason
        self._counted_chars = 0
        self._counted_text = 0
        self._counted_reasoning = 0
        self.saw_done = False

    @property
    def content_mark(self) -> int:
        """A count that grows whenever a chunk carries content: answer or reasoning text,
        a tool-call fragment, usage or a finish reason. Keep-alives (an empty payload,
        an empty delta, `choices: []` without usage) leave it as it was, so a stream that
        only pings does not look alive to the stall watchdog. Cheap: read once a read."""
        return len(self._text) + len(self._reasoning) + self._calls.deltas_seen + self._signals

    @property
    def may_hold_surrogates(self) -> bool:
        """Whether text so far may hold lone UTF-16 surrogates (from JSON escapes).

        Only the stdlib parser produces them (`orjson` refuses such payloads), so this is
        False on a clean stream and forwarding can skip looking for them.
        """
        return self._stdlib_parsed

    @property
    def reported_completion_tokens(self) -> int | None:
        """The provider's `usage.completion_tokens` so far (a running or final count), or
        None before any usage (most providers send it only at the end): a token budget
        reads it mid-stream (`steadyloop._stops.budget`)."""
        usage = self._usage
        if usage.__class__ is not dict:
            return None
        assert usage is not None
        return count_of(usage.get("completion_tokens"))

    @property
    def finish_reason_seen(self) -> bool:
        """True once a chunk carried a finish reason."""
        return self._finish_reason is not None

    @property
    def calls(self) -> ToolCallAccumulator:
        """The tool-call accumulator, for reading progress mid-stream (never feed it)."""
        return self._calls

    @property
    def chunks(self) -> int:
        """Payloads received so far, `[DONE]` excluded (one that raised is counted)."""
        return self._chunks

    # -- input -------------------------------------------------------------------------
    #
    # `_fold_payloads` runs once per token, and every bytecode it executes is a
    # measurable share of the per-token budget, so its shape test is written out inline
    # (no call per token) and checks nothing twice. A chunk whose only choice is choice
    # 0 (`index == 0`) with a null finish reason takes the fast path when its delta is
    # one of the shapes nearly every token has:
    #
    # - a non-empty string `content`, alone or beside `role` (Ollama repeats the role
    #   on every chunk): the text is appended;
    # - no tool calls, an empty `content` and a string `reasoning_content` or
    #   `reasoning` (a reasoning model's thinking): the reasoning is appended, the one
    #   thing `_choice` does with such a delta, whatever else it holds;
    # - a lone `tool_calls` list: handed to the accumulator, except its commonest delta,
    #   a bare argument fragment `{"index": i, "function": {"arguments": a}}` (nothing
    #   else in either object, `i` an `int` the accumulator has a call for, `a` a
    #   non-empty string), which is appended to `calls.parts_by_index[i]`, exactly what
    #   `observe` would do with it (see `ToolCallAccumulator.parts_by_index`).
    #
    # Every other chunk, and any chunk whose members have unexpected types (the
    # subscripts raise, and nothing has changed yet), goes to `_fold`, which validates
    # everything. Not read on the fast path, by design: the `error` and `usage` members.
    # Providers put a stream error in a chunk with no choices or beside a finish reason
    # (OpenRouter: `finish_reason: "error"`), and the final usage in a chunk with no
    # choices or beside the finish reason, all of which `_fold` reads. (vLLM's per-chunk
    # `continuous_usage_stats` is running usage; the final figure arrives on those same
    # slow-path chunks.)

    def feed_events(self, events: Sequence[ServerSentEvent | str | bytes]) -> bool:
        """Fold the data of decoded SSE events, in order; True once `[DONE]` was seen.

        Takes what `SSEDecoder.feed` or `SSEDecoder.feed_data` returns (a `MessageData`
        is read as its raw bytes); a string or bytes item is the data of a plain
        `message` event. Events after `[DONE]` are not read. An event of type `error` is
        a provider failure whatever its data says (`stream_error`); an empty payload is a
        keep-alive and is skipped; any other event type is folded like a message.
        """
        if events.__class__ is MessageData:
            return self._fold_payloads(events.raw, self._shape_cache)
        payloads, error_event = _payloads_of(events)
        if self._fold_payloads(payloads, False):
            return True
        if error_event is not None:
            self._chunks += 1  # the failing payload counts as received
            raise _event_error(error_event.data)
        return False

    def feed(self, data: str | bytes) -> None:
        """Fold one SSE data payload (one chat-completion chunk, as JSON text)."""
        self._fold_payloads((data,), False)

    def _fold_payloads(self, payloads: Sequence[Any], templated: bool) -> bool:
        """Fold JSON payloads in order; True once `[DONE]` was seen (see above).

        `templated`: the payloads are bytes, and a learned chunk shape may be used.
        """
        text_append = self._text.append
        reasoning_append = self._reasoning.append
        calls = self._calls
        parts_by_index = calls.parts_by_index
        fold = self._fold
        meta_pending = self._meta_pending
        # Locals: a global or builtin lookup per token adds up.
        loads, len_, int_, str_ = _loads, len, int, str
        template = self._template if templated else None
        if template is not None:
            prefix, suffix, start, stop, middle, sink, key = template
        learns_left = self._learn_allowance() if templated else 0
        data: Any = None
        try:
            for data in payloads:
                if template is not None and data.startswith(prefix) and data.endswith(suffix):
                    # The learned shape, byte for byte, around one JSON value (and a
                    # padding string): when that value is a non-empty string, the chunk is
                    # the learned one with other text (see `_learn`), and folding it is
                    # appending the text.
                    try:
                        if middle is None:
                            value = loads(data[start:stop])
                        else:
                            # Any cut leaving one string on each side is the parse.
                            cut = data.find(middle, start)
                            padding = loads(data[cut + len_(middle) : stop]) if cut > 0 else None
                            value = loads(data[start:cut]) if padding.__class__ is str_ else None
                        if value and value.__class__ is str_:
                            sink[key].append(value)
                            continue
                    except (ValueError, KeyError, RecursionError):
                        pass
                try:
                    chunk = loads(data)
                    (choice,) = chunk["choices"]
                    if choice["index"] == 0 and choice["finish_reason"] is None:
                        delta = choice["delta"]
                        if "tool_calls" in delta:
                            if len_(delta) == 1:
                                if meta_pending:
                                    self._read_meta(chunk)
                                    meta_pending = self._meta_pending
                                tool_calls = delta["tool_calls"]
                                (call,) = tool_calls
                                if len_(call) == 2:
                                    function = call["function"]
                                    index = call["index"]
                                    # `is int`: True and 1.0 are malformed (rule 9).
                                    if index.__class__ is int_ and len_(function) == 1:
                                        arguments = function["arguments"]
                                        if arguments and arguments.__class__ is str_:
                                            parts_by_index[index].append(arguments)
                                            if learns_left:
                                                learns_left -= 1
                                                template = self._learn(
                                                    chunk,
                                                    data,
                                                    function,
                                                    "arguments",
                                                    parts_by_index,
                                                    index,
                                                )
                                                if template is not None:
                                                    (prefix, suffix, start, stop) = template[:4]
                                                    middle, sink, key = template[4:]
                                            continue
                                if tool_calls.__class__ is list:
                                    calls.observe(tool_calls)
                                    continue
                        else:
                            content = delta.get("content")
                            if (
                                content
                                and content.__class__ is str_
                                and (len_(delta) == 1 or (len_(delta) == 2 and "role" in delta))
                            ):
                                if meta_pending:
                                    self._read_meta(chunk)
                                    meta_pending = self._meta_pending
                                text_append(content)
                                if learns_left:
                                    learns_left -= 1
                                    template = self._learn(
                                        chunk, data, delta, "content", self._text_sink, 0
                                    )
                                    if template is not None:
                                        prefix, suffix, start, stop = template[:4]
                                        middle, sink, key = template[4:]
                                continue
                            if not content:
                                # A reasoning token: what `_choice` does with a delta whose
                                # content is empty and that has no tool calls.
                                field = "reasoning_content"
                                reasoning = delta.get(field)
                                if not reasoning:
                                    field = "reasoning"
                                    reasoning = delta.get(field)
                                if reasoning and reasoning.__class__ is str_:
                                    if meta_pending:
                                        self._read_meta(chunk)
                                        meta_pending = self._meta_pending
                                    reasoning_append(reasoning)
                                    # Gateways that send the text under both names repeat
                                    # it: a shape with one hole never fits them.
                                    if learns_left and not (
                                        "reasoning" in delta and "reasoning_content" in delta
                                    ):
                                        learns_left -= 1
                                        template = self._learn(
                                            chunk, data, delta, field, self._reasoning_sink, 0
                                        )
                                        if template is not None:
                                            prefix, suffix, start, stop = template[:4]
                                            middle, sink, key = template[4:]
                                    continue
                except _OrjsonDecodeError:
                    # `[DONE]` and keep-alives are not JSON: they land here, instead of
                    # costing a comparison on every chunk.
                    chunk = self._parse_refused(data)
                    if chunk is _DONE:
                        break
                    if chunk is _BLANK:
                        continue
                except (KeyError, TypeError, IndexError, ValueError, AttributeError):
                    pass
                fold(chunk, data)
                meta_pending = self._meta_pending
            else:
                self._chunks += len(payloads)
                return False
        except BaseException:
            # The failing payload counts as received.
            self._chunks += _position(payloads, data) + 1
            raise
        # `[DONE]`: counted like any payload above, and taken back by `_parse_refused`.
        self._chunks += _position(payloads, data) + 1
        return True

    # -- learned chunk shapes ----------------------------------------------------------
    #
    # Within one stream a server sends thousands of chunks that differ in one string:
    # the token, or the argument fragment. Everything around it (id, created, model,
    # fingerprint, the choice's other members) repeats byte for byte, and parsing all of
    # that again per token is most of the cost. So after the fast path above has folded
    # a chunk, `_learn` serializes that chunk with a sentinel in place of its text and,
    # when the result equals the payload around the text (the server writes compact JSON
    # as `orjson` does, as OpenAI, vLLM, Ollama and llama.cpp do), keeps the bytes before
    # and after it. A later payload that starts and ends with exactly those bytes and
    # holds exactly one JSON string between them is that same chunk with other text: a
    # string literal is one token, so the rest of the document parses as before. Its
    # string is appended where the fast path would append it: the answer text, or
    # `parts_by_index[i]` looked up afresh (so a new call claiming the index is
    # followed). Anything else (an empty string, a number, two values, lone surrogates,
    # a shorter payload) is parsed whole, as if nothing had been learned.
    #
    # OpenAI ends every chunk with `"obfuscation": "<random padding>"`, so no two chunks
    # share their last bytes. When the chunk's last member is a string, the shape may
    # have a second hole there: the payload must then be prefix, a string, the bytes
    # between, a string, the end; any cut that makes both pieces one string each is the
    # only parse there is. That is learned only once the id and model are known, because
    # the hole might be one of them and the fast path reads them until then.
    #
    # One shape is kept at a time, replaced when the fast path folds a chunk the shape
    # did not match. Learning costs about one serialization; a stream whose chunks never
    # repeat (a timestamp per chunk) would pay it per token, so eight attempts are free
    # and after that one per 64 chunks received.

    def _learn_allowance(self) -> int:
        """How many shapes this batch may try to learn (see above)."""
        if self._learns < 8:
            return 8 - self._learns
        return 1 if self._learns * 64 <= self._chunks else 0

    def _learn(
        self,
        chunk: Any,
        data: bytes,
        holder: Any,
        field: str,
        sink: Mapping[int, list[str]],
        key: int,
    ) -> _Template | None:
        """The shape of `chunk` around `holder[field]`, kept when the payload fits it.

        A one-hole shape is tried first, unless the shape it would replace had the same
        bytes before the text: then what changed lies after it, and the padding hole is
        tried first.
        """
        self._learns += 1
        text = holder[field]
        holder[field] = _SENTINEL
        try:
            prefix, found, suffix = orjson.dumps(chunk).partition(_SENTINEL_JSON)
            one_hole = bool(found) and _SENTINEL_JSON not in suffix and _fits(data, prefix, suffix)
            previous = self._template
            if one_hole and (previous is None or previous[0] != prefix or previous[4] is not None):
                template: _Template = (prefix, suffix, len(prefix), -len(suffix), None, sink, key)
            else:
                shape = self._padded_shape(chunk, data)
                if shape is not None:
                    prefix, middle, end = shape
                    template = (prefix, end, len(prefix), -len(end), middle, sink, key)
                elif one_hole:
                    template = (prefix, suffix, len(prefix), -len(suffix), None, sink, key)
                else:
                    return previous
        except orjson.JSONEncodeError:
            return self._template
        finally:
            holder[field] = text
        self._template = template
        return template

    def _padded_shape(self, chunk: Any, data: bytes) -> tuple[bytes, bytes, bytes] | None:
        """Bytes before the text, between it and the padding, and after: when the chunk
        (its text already replaced) ends with a string member and the payload fits."""
        last = next(reversed(chunk))
        padding = chunk[last]
        if padding.__class__ is not str or self._meta_pending:
            return None
        chunk[last] = _PAD_SENTINEL
        try:
            serialized = orjson.dumps(chunk)
        finally:
            chunk[last] = padding
        prefix, found, rest = serialized.partition(_SENTINEL_JSON)
        middle, padded, end = rest.partition(_PAD_SENTINEL_JSON)
        if (
            not found
            or not padded
            or _SENTINEL_JSON in rest
            or _PAD_SENTINEL_JSON in end
            or not _fits(data, prefix, end)
            or middle not in data
        ):
            return None
        return prefix, middle, end

    def _fold(self, chunk: Any, data: str | bytes) -> None:
        """Every chunk the fast shape test did not take, validated member by member."""
        if chunk.__class__ is not dict:
            raise invalid_chunk(data, "a stream chunk is JSON but not an object")
        error = chunk.get("error")
        if error is not None and error is not False:
            raise provider_error(data, error)
        if self._meta_pending:
            self._read_meta(chunk)
        try:
            choices = chunk.get("choices")
            if choices:
                if choices.__class__ is not list:
                    raise TypeError(f"choices is {type(choices).__name__}, not a list")
                for position, choice in enumerate(choices):
                    self._choice(choice, position, chunk)
            elif chunk.get("object") == "error":
                raise provider_error(data, chunk)
            usage = chunk.get("usage")
            if usage:
                self._usage = usage
                self._signals += 1
        except (AttributeError, TypeError, KeyError) as err:
            raise invalid_chunk(data, f"a stream chunk has an unexpected shape ({err})") from None

    def _choice(self, choice: Any, position: int, chunk: dict[str, Any]) -> None:
        if choice.__class__ is not dict:
            raise TypeError(f"a choice is {type(choice).__name__}, not an object")
        index = choice.get("index")
        if index is None:
            index = position  # no index: list position decides
        if index != 0:  # the same test as the fast path (`0.0` and `false` equal 0)
            self._ignored_choices += 1
            return
        delta = choice.get("delta")
        if delta:
            if delta.__class__ is not dict:
                raise TypeError(f"delta is {type(delta).__name__}, not an object")
            content = delta.get("content")
            if content:
                if content.__class__ is str:
                    self._text.append(content)
                elif content.__class__ is list:
                    self._content_parts(content)
                else:
                    raise TypeError(f"delta.content is {type(content).__name__}, not a string")
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                self._calls.observe(tool_calls)
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                if reasoning.__class__ is not str:
                    raise TypeError(f"reasoning is {type(reasoning).__name__}, not a string")
                self._reasoning.append(reasoning)
        finish_reason = choice.get("finish_reason")
        if finish_reason:
            self._finish_reason = finish_reason
            self._signals += 1
            groq = chunk.get("x_groq")
            if groq.__class__ is dict and groq.get("usage"):
                self._usage = groq["usage"]  # Groq reports usage beside the final chunk

    def _content_parts(self, parts: list[Any]) -> None:
        """`delta.content` given as typed parts (see the module docstring): `text` parts
        are answer text, `thinking` parts reasoning; any other part is counted by its type
        for a note, never a refused chunk."""
        for part in parts:
            kind = part.get("type") if part.__class__ is dict else None
            if kind == "text":
                text = part.get("text")
                if text.__class__ is str:
                    if text:
                        self._text.append(text)
                    continue
            elif kind == "thinking":
                thinking = part.get("thinking")
                if thinking.__class__ is str:
                    if thinking:
                        self._reasoning.append(thinking)
                    continue
                if thinking.__class__ is list:
                    for inner in thinking:
                        text = inner.get("text") if inner.__class__ is dict else None
                        if text.__class__ is str and inner.get("type") == "text":
                            if text:
                                self._reasoning.append(text)
                        else:
                            self._part_not_read(inner, "thinking/")
                    continue
            self._part_not_read(part, "")

    def _part_not_read(self, part: Any, within: str) -> None:
        """Count a content part that is neither text nor reasoning, by its type (a few
        distinct types are named, the rest counted together) for the turn's note."""
        if part.__class__ is not dict:
            label = within + "not an object"
        else:
            kind = part.get("type")
            if kind.__class__ is not str or not kind:
                label = within + "without a type"
            elif kind in ("text", "thinking"):
                label = f"{within}{kind} (malformed)"
            else:
                label = within + kind[:40]
        counts = self._unread_parts
        if label not in counts and len(counts) >= _UNREAD_PART_KINDS:
            label = "other"
        counts[label] = counts.get(label, 0) + 1

    def _read_meta(self, chunk: dict[str, Any]) -> None:
        if self._response_id is None:
            response_id = chunk.get("id")
            if response_id and response_id.__class__ is str:
                self._response_id = response_id
        if self._model is None:
            model = chunk.get("model")
            if model and model.__class__ is str:
                self._model = model
        self._meta_pending = self._response_id is None or self._model is None

    def _parse_refused(self, data: str | bytes) -> Any:
        """A payload `orjson` refused: the end marker, a keep-alive, lone surrogates, or
        not JSON (raised as `invalid_chunk`)."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        stripped = text.strip()
        if stripped.startswith("[DONE]"):
            self.saw_done = True
            self._chunks -= 1
            return _DONE
        if not stripped:
            # `data:` with nothing after it: some proxies' keep-alive, not a chunk.
            self._chunks -= 1
            return _BLANK
        try:
            # The stdlib parser accepts escapes of unpaired surrogates, which providers
            # send when a tokenizer splits an astral character across two chunks.
            chunk = stdlib_event(text)
        except (ValueError, RecursionError):
            raise invalid_chunk(data, "a stream chunk is not valid JSON") from None
        self._stdlib_parsed = True
        return chunk

    # -- output ------------------------------------------------------------------------

    def finish(self) -> AssembledTurn:
        """The assembled turn: text, reasoning, calls, finish reason, usage, defects, stats.

        `stats` carries what the payloads show (chunks, ignored choices, dropped deltas,
        malformed aliases, whether `[DONE]` was seen); the caller adds what only the
        transport knows (bytes, events, timings).
        """
        text = "".join(self._text)
        reasoning = "".join(self._reasoning)
        model, response_id, finish_reason = self._model, self._response_id, self._finish_reason
        if finish_reason is not None and finish_reason.__class__ is not str:
            finish_reason = str(finish_reason)
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
        defects = detect_completion_defects(
            text=text,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            dropped_deltas=calls.dropped_deltas,
            wants_json=self._wants_json,
        )
        notes: list[str] = []
        if self._unread_parts:
            counted = ", ".join(f"{kind} x{n}" for kind, n in self._unread_parts.items())
            add_note(notes, f"content parts not read as text or reasoning: {counted}")
        return AssembledTurn(
            text=text,
            reasoning=reasoning,
            tool_calls=tool_calls,
            finish_reason=reported_finish_reason(finish_reason, bool(tool_calls), notes),
            usage=_usage(self._usage),
            model=model,
            response_id=response_id,
            defects=defects,
            stats=StreamStats(
                chunks=self._chunks,
                saw_done=self.saw_done,
                dropped_deltas=calls.dropped_deltas,
                malformed_aliases=calls.malformed_aliases,
                ignored_choices=self._ignored_choices,
                notes=notes,
            ),
        )


# -- helpers -------------------------------------------------------------------------------


def _fits(data: bytes, prefix: bytes, suffix: bytes) -> bool:
    """`data` starts with `prefix`, ends with `suffix`, and has bytes between them."""
    return (
        len(data) > len(prefix) + len(suffix) and data.startswith(prefix) and data.endswith(suffix)
    )


def _position(payloads: Sequence[str | bytes], payload: str | bytes | None) -> int:
    """Where `payload` sits in `payloads` (by identity): the payloads folded before it."""
    for position, candidate in enumerate(payloads):
        if candidate is payload:
            return position
    return 0


def _payloads_of(
    events: Sequence[ServerSentEvent | str | bytes],
) -> tuple[Sequence[str | bytes], ServerSentEvent | None]:
    """The data of `events` up to the first `event: error`, and that event (or None).

    Any other event type is folded like a message, as the openai client does: gateways
    label chunks freely, and an unknown label is no reason to drop a token.
    """
    payloads: list[str | bytes] = []
    for event in events:
        if event.__class__ is str or event.__class__ is bytes:
            payloads.append(event)
        elif event.event == "error":  # type: ignore[union-attr]
            return payloads, event  # type: ignore[return-value]
        else:
            payloads.append(event.data)  # type: ignore[union-attr]
    return payloads, None


# No real token count comes near this; a bigger one (1e300, a 5,000-digit integer, both
# legal JSON) would overflow float arithmetic downstream (pricing, in workflow code).
_MAX_COUNT = 10**12


def count_of(value: Any) -> int | None:
    """A usage count, or None for a value that is not one (negative, fractional, NaN,
    infinite, absurdly large): a broken measurement is left out, never passed on."""
    if value.__class__ is int and 0 <= value <= _MAX_COUNT:
        return int(value)
    if value.__class__ is float and 0 <= value <= _MAX_COUNT and value.is_integer():
        return int(value)
    return None


def _usage(raw: Any) -> Usage | None:
    if raw.__class__ is not dict:
        return None
    prompt = count_of(raw.get("prompt_tokens")) or 0
    completion = count_of(raw.get("completion_tokens")) or 0
    total = count_of(raw.get("total_tokens"))
    completion_details = raw.get("completion_tokens_details")
    prompt_details = raw.get("prompt_tokens_details")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        reasoning_tokens=(
            count_of(completion_details.get("reasoning_tokens"))
            if completion_details.__class__ is dict
            else None
        ),
        cached_tokens=(
            count_of(prompt_details.get("cached_tokens"))
            if prompt_details.__class__ is dict
            # DeepSeek reports cache hits at the top level.
            else count_of(raw.get("prompt_cache_hit_tokens"))
        ),
    )


def _text_of(value: Any) -> str | None:
    """A provider field as text that can be serialized (lone surrogates replaced)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return rejoin_surrogates(text, json_escape=False)


def _event_error(data: str) -> StreamFailed:
    """An `event: error` is a provider failure whatever its data says."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        return provider_error(data, data.strip() or None)
    if body.__class__ is dict:
        error = body.get("error")
        return provider_error(data, error if error not in (None, False) else body)
    return provider_error(data, body)


# Longer integer literals are read as the float they denote (`stdlib_event`).
_INT_DIGITS = 4_000


def _event_int(literal: str) -> int | float:
    return int(literal) if len(literal) <= _INT_DIGITS else float(literal)


def stdlib_event(text: str) -> Any:
    """A payload orjson refused, read by the stdlib parser (which takes escapes of lone
    surrogates); ValueError or RecursionError when it is not JSON.

    An integer literal past `_INT_DIGITS` digits (Python refuses to make an int of one
    over 4,300) is read as its float, infinite here, as orjson reads a long one: it is
    valid JSON, and every count read from it is then out of range and left out
    (`count_of`), as `1e400` is, instead of the event being refused as not JSON.
    """
    return json.loads(text, parse_int=_event_int)


def invalid_chunk(data: str | bytes, message: str) -> StreamFailed:
    return StreamFailed(
        StreamFailure(kind="invalid_chunk", message=message, body_excerpt=excerpt(data))
    )


def provider_error(data: str | bytes, error: Any) -> StreamFailed:
    """`stream_error` from an `error` member (object or string) or an error-shaped chunk."""
    message: str | None = None
    code: str | None = None
    error_type: str | None = None
    if isinstance(error, dict):
        message = _text_of(error.get("message"))
        code = _text_of(error.get("code"))
        error_type = _text_of(error.get("type"))
    elif isinstance(error, str):
        message = _text_of(error)
    else:
        message = _text_of(error)
    return StreamFailed(
        StreamFailure(
            kind="stream_error",
            message=message or "the provider reported an error inside the stream",
            provider_code=code,
            provider_type=error_type,
            body_excerpt=excerpt(data),
        )
    )
