"""Assembling streamed tool calls from `choices[0].delta.tool_calls`, whatever the gateway.

The obvious implementation keys a dict by the delta's `index` and concatenates into
the slot. It is wrong, silently, in each of these ways:

- Ollama labels every call of a turn `index: 0`: keyed by index, read/write/read
  become one call whose arguments are `{"path":"a"}{"path":"b"}...`, and the other
  two calls vanish. Keying by `id` instead reproduces the same merge, because
  gateways repeat ids across calls and send `""` for absent.
- `index` or `id` may be missing on continuations, or arrive only on a later delta.
- Names are split across deltas (`read` + `_file`), or repeated in full on every one.
- A missing, blank or repeated wire id cannot address a tool message.
- Sorting by an index that is missing or repeated scrambles the batch.

So nothing is keyed. Records live in creation order; each learns the *aliases* the
wire uses for it (`index`, and `id`) separately from the id we emit. Blank (None,
`""`, whitespace only) means absent, for `id` and `name` alike; so does the id `"null"`,
the text of an absent value (GLM behind Mistral sends it on every continuation, and
Mistral's API refuses it as an id). How one delta is resolved (`_resolve`):

1. Scan records newest-first. A record whose alias contradicts the delta is skipped;
   one that never saw an alias the delta carries is not contradicted by it; at least
   one alias must actually match. The first such record is the *claimant*.
2. If the claimant already has argument text and the delta names a different tool,
   the delta starts a new call: the scan does not go on to an older record whose
   claim the claimant superseded (Ollama's read/write/read needs exactly this).
3. An alias first seen on a continuation is learned by the record it resolved to.
4. A delta that resolves to nothing starts a new call when it carries a name. One
   fallback: when exactly one call exists and no alias the delta carries disagrees
   with it, the delta continues that call. A nameless delta that carries an alias no
   call holds (an `id`, or an `index`) opens a nameless call, with its argument text
   if it has some: providers send the name after the arguments, and the name fills the
   call when it comes. A call still nameless when the stream ends is the defect
   (`unnamed_tool_call`, `steadyloop._stream.defects`), never its fragments.
4a. Before that, a nameless fragment continues the *open call*: the newest, when its
   arguments are not yet a finished JSON value and no older call's text is, unless a
   label positively names a different call (an id or index another call holds; a new
   index together with a new id; a new index while the open call has no text yet).
   Without this, LM Studio serving Gemma 4 (a new id on every fragment, same index) and
   a DeepSeek gateway (a second call's tail one index up, no id, no name) end in
   nameless calls and are refused every time. The labels such a fragment carried are
   remembered for that call (`_absorb`): the next fragment with them follows it, and a
   later delta that uses one to name another call while the guess can still be wrong
   counts as a dropped delta, so the turn is retried rather than dispatched.
5. Anything else with argument text (no alias at all, several calls open or none)
   cannot be attributed without guessing: it is not absorbed, it is counted in
   `dropped_deltas` and recorded as a defect, so the turn is retried instead of
   dispatching a partial batch.
6. Argument fragments are concatenated verbatim (`""` stays `""`). A name fills a
   call that has none; a name equal to the call's name is a restatement; a different
   one is appended while the call has no argument text yet (split names).
7. Ids: the wire id when usable; else (absent, blank, or already emitted for an
   earlier call of the turn) a minted id, `{mint_prefix}_{n}`, never equal to any id
   seen on the wire this turn. The wire id stays an alias either way.
8. Order: by `index` only when every call has an integer index and they are unique;
   otherwise creation order.
9. An `index` that is not a non-negative integer (`-1`, `1.5`, `"0"`, `true`) is
   ignored as an alias and counted; the delta resolves by its other aliases.

Text split inside a UTF-16 surrogate pair across deltas is re-joined at assembly
(`steadyloop._stream.surrogates`, the one rule every caller uses). What
`assembled()` returns always serializes: a surrogate left unpaired in a name, an id or
a type becomes U+FFFD, and in the arguments its JSON escape (so they parse to the value
the model sent; the argument reader decides what to do with it).

Shapes no reader of the wire can decide, and what happens to each (never a silent
loss, never two calls with one id):

- An alias claimed by two open calls, a continuation carrying only that alias
  (interleaved): the fragment goes to the newest claimant. Both calls are kept, the
  text is misplaced, their arguments fail to parse, and the turn is flagged
  `truncated_tool_call`.
- A second call repeating the first's only alias and its exact name: read as a
  restatement, so one call whose arguments are two objects run together, flagged
  `truncated_tool_call`.
- A nameless continuation whose aliases contradict every call, when rule 4a does not
  take it (the open call finished, or two unfinished): a new, nameless call (rule 4).
  Unless a name follows, the turn is `unnamed_tool_call` and retried, as it was when
  such a fragment was dropped; with a name it is the call the provider meant.
- A nameless fragment one index up from an unfinished call, with no id (rule 4a reads
  it as that call's tail, as a DeepSeek gateway sends it), that was really the head of
  a call whose name comes later: the name at that index while the guess is unfinished
  refuses the turn (dropped delta); if no name ever comes, the text joined to the open
  call rarely parses, and the argument reader answers it with the parse error.
- A named delta whose aliases contradict every call (an id that drifts mid-call):
  a new call. That is the price of never merging on a guess.
- Two zero-argument calls with one index, no ids and no argument text: the second
  delta's name is either a restatement (same name: one call, silently) or the rest of
  a split name (`get_time` then `get_date`: one call named `get_timeget_date`, which
  the loop answers as an unknown tool). Nothing on the wire tells these apart; servers
  that send `"{}"` for an empty call (Ollama does) never produce them.

`type` is the wire's own when a delta names one (else `function`), so the argument
reader can refuse a call of a type nothing here can run instead of running it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter

from steadyloop._chat import ToolCall
from steadyloop._stream.surrogates import rejoin_surrogates

DefectKind = Literal[
    "dropped_delta", "malformed_index", "malformed_id", "malformed_name", "malformed_arguments"
]


@dataclass(frozen=True, slots=True)
class AssemblyDefect:
    """Something on the wire that assembly had to refuse or repair, as a value."""

    kind: DefectKind
    detail: str
    delta_number: int


class _Record:
    """One call as it is being assembled. `index`/`wire_id` are aliases, not identity."""

    __slots__ = ("done", "done_at", "index", "name", "ordinal", "parts", "type", "wire_id")

    def __init__(self, ordinal: int) -> None:
        # Aliases and name are learned from the delta that opens the record, by the
        # same step that learns them from continuations.
        self.ordinal = ordinal
        self.index: int | None = None
        self.wire_id: str | None = None
        self.name = ""
        self.parts: list[str] = []  # non-empty fragments only: "has argument text" is `parts`
        self.type: str | None = None
        # `arguments_complete` memo: the verdict for the first `done_at` fragments.
        self.done = False
        self.done_at = -1

    def arguments_complete(self) -> bool:
        """Whether the argument text so far is one finished JSON value (rule 4a).

        No text is not finished: a call opened by its name waits for its arguments. An
        object (the only thing a call's arguments may be) that does not end in `}` yet is
        unfinished without parsing it, so a stream that reaches rule 4a on every fragment
        (LM Studio's new id per fragment) costs one look at the ends per fragment.
        """
        parts = self.parts
        if self.done_at == len(parts):
            return self.done
        done = False
        head = next((p for p in parts if not p.isspace()), None)
        if head is not None:
            tail = next(p for p in reversed(parts) if not p.isspace())
            if not (head.lstrip()[0] == "{" and tail.rstrip()[-1] != "}"):
                try:
                    json.loads("".join(parts))
                    done = True
                except (ValueError, RecursionError):
                    done = False
        self.done, self.done_at = done, len(parts)
        return done


def _field(obj: Any, key: str) -> Any:
    if obj.__class__ is dict or isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


_TOOL_CALLS = TypeAdapter(list[ToolCall])

# Ids that are the text of an absent value, not a label: GLM behind Mistral sends the
# string "null" as the id of every continuation (langchain-ai/langchainjs#11505), and
# Mistral's own API refuses "null" as a tool call id (zed-industries/zed#54058).
_ABSENT_IDS = frozenset({"null"})


def _blank(value: str) -> bool:
    return not value or value.isspace()


class ToolCallAccumulator:
    """Folds the `delta.tool_calls` of one streamed turn into finished tool calls.

    `observe` never raises on wire content; what it could not use is counted
    (`dropped_deltas`, `malformed_aliases`) and described (`defects`). `assembled()`
    may be called at any point, mid-stream included.
    """

    def __init__(self, mint_prefix: str = "call_sl") -> None:
        if _blank(mint_prefix):
            raise ValueError("mint_prefix must be a non-blank string")
        self._mint_prefix = mint_prefix
        self._records: list[_Record] = []
        # The newest record claiming each index: what the scan finds for an index-only
        # delta; and that record's fragment list, where a bare fragment for it goes.
        self._by_index: dict[int, _Record] = {}
        self._parts_by_index: dict[int, list[str]] = {}
        self._wire_ids: set[str] = set()
        # Labels a call learned by rule 4a that are not its own aliases (`_absorb`).
        self._absorbed_ids: dict[str, _Record] = {}
        self._absorbed_indices: dict[int, _Record] = {}
        self._minted: set[str] = set()  # ids `assembled()` minted (`was_minted`)
        # Deltas that took the full path, and the fragments they appended. Every other
        # delta was a bare fragment that appended exactly one (see `parts_by_index`),
        # so the count of all deltas is derived, never kept per token.
        self._deltas = 0
        self._parts_appended = 0
        # Every record's fragment list, for counting them all without a Python loop.
        self._part_lists: list[list[str]] = []
        self.dropped_deltas = 0
        self.malformed_aliases = 0
        self.defects: list[AssemblyDefect] = []

    @property
    def is_empty(self) -> bool:
        return not self._records

    @property
    def call_count(self) -> int:
        return len(self._records)

    @property
    def deltas_seen(self) -> int:
        """Tool-call deltas folded so far (bare fragments appended by a caller included):
        it grows whenever a chunk carried a tool-call fragment (stall detection)."""
        return self._deltas + sum(map(len, self._part_lists)) - self._parts_appended

    @property
    def records(self) -> Sequence[_Record]:
        """The calls being assembled, in creation order. Read-only: the runaway guard
        counts their argument fragments (`parts`) after each network read."""
        return self._records

    def observe(self, deltas: Sequence[Any] | None) -> None:
        """Fold one chunk's `choices[0].delta.tool_calls` (None and [] are no-ops)."""
        if deltas.__class__ is not list:
            if not deltas:
                return
            if not isinstance(deltas, list | tuple):
                self._defect("dropped_delta", f"tool_calls is not a list: {deltas!r:.80}")
                self.dropped_deltas += 1
                return
        parts_by_index = self._parts_by_index
        for delta in deltas:
            # Fast path for the commonest delta of all, a bare argument fragment
            # `{"index": i, "function": {"arguments": "..."}}` (see `parts_by_index`).
            if delta.__class__ is dict and len(delta) == 2:
                function = delta.get("function")
                index = delta.get("index")
                # `is int`: True and 1.0 hash like 1 but are malformed aliases (rule 9).
                if index.__class__ is int and function.__class__ is dict and len(function) == 1:
                    arguments = function.get("arguments")
                    parts = parts_by_index.get(index)
                    if parts is not None and arguments and arguments.__class__ is str:
                        parts.append(arguments)
                        continue
            self._observe_one(delta)

    @property
    def parts_by_index(self) -> Mapping[int, list[str]]:
        """Index -> the argument fragments of the newest call claiming that index.

        The commonest delta of all is a bare fragment `{"index": i, "function":
        {"arguments": a}}`, nothing else in either object. With `i` an `int` found here,
        rules 1 and 2 resolve it to exactly that call, so when `a` is a non-empty string
        the whole of folding it is appending `a` to this list. `observe` does just that,
        and so may a caller that inlines it (`TurnAssembler`, once per token); the
        accumulator counts such deltas from the lists themselves. Anything else,
        an empty `a` included, goes to `observe`.
        """
        return self._parts_by_index

    # -- one delta -----------------------------------------------------------------

    def _defect(self, kind: DefectKind, detail: str) -> None:
        # The bare fragments appended through `parts_by_index` are deltas too.
        number = self.deltas_seen
        self.defects.append(AssemblyDefect(kind=kind, detail=detail, delta_number=number))

    def _observe_one(self, delta: Any) -> None:
        if delta is None or isinstance(delta, str | bytes | int | float | list):
            self._deltas += 1
            self._defect("dropped_delta", f"a tool-call delta is not an object: {delta!r:.80}")
            self.dropped_deltas += 1
            return
        function = _field(delta, "function")
        name: Any = None
        arguments: Any = None
        if function is not None:
            name = _field(function, "name")
            arguments = _field(function, "arguments")
        self.observe_members(
            _field(delta, "index"), _field(delta, "id"), name, arguments, _field(delta, "type")
        )

    def observe_members(
        self, index: Any, wire_id: Any, name: Any, arguments: Any, call_type: Any = None
    ) -> None:
        """Fold one delta given by its members (`index`, `id`, `function.name`,
        `function.arguments`, `type`; None for one it lacks), exactly as `observe` folds
        the delta that holds them: for a caller that reads them from another shape (the
        Messages wire's `content_block_start`) and need not build the delta to be read."""
        self._deltas += 1
        if index is not None and (type(index) is not int or index < 0):
            self.malformed_aliases += 1
            self._defect("malformed_index", f"index {index!r:.40} is not a non-negative integer")
            index = None
        if wire_id is not None:
            if not isinstance(wire_id, str):
                self.malformed_aliases += 1
                self._defect("malformed_id", f"id {wire_id!r:.40} is not a string")
                wire_id = None
            elif _blank(wire_id) or wire_id in _ABSENT_IDS:
                wire_id = None
            else:
                self._wire_ids.add(wire_id)
        if name is not None:
            if not isinstance(name, str):
                self._defect("malformed_name", f"name {name!r:.40} is not a string")
                name = None
            elif _blank(name):
                name = None
        if arguments is not None and not isinstance(arguments, str):
            if isinstance(arguments, Mapping):
                self._defect("malformed_arguments", "arguments arrived as an object, not a string")
                arguments = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
            else:
                self._defect(
                    "malformed_arguments", f"arguments {arguments!r:.40} is not a string; ignored"
                )
                arguments = None
        if not isinstance(call_type, str) or _blank(call_type):
            call_type = None

        record = self._resolve(index, wire_id, name, arguments)
        if record is None:
            return
        if index is not None and record.index is None:
            record.index = index
            claimant = self._by_index.get(index)
            if claimant is None or claimant.ordinal < record.ordinal:
                self._by_index[index] = record
                self._parts_by_index[index] = record.parts
        if wire_id is not None and record.wire_id is None:
            record.wire_id = wire_id
        if call_type is not None and record.type is None:
            record.type = call_type
        if name is not None and name != record.name:
            if not record.name:
                record.name = name
            elif not record.parts:
                record.name += name
        if arguments:
            record.parts.append(arguments)
            self._parts_appended += 1

    def _resolve(
        self, index: int | None, wire_id: str | None, name: str | None, arguments: str | None
    ) -> _Record | None:
        """The record this delta continues, a new record, or None (ignored or dropped)."""
        records = self._records
        if index is not None or wire_id is not None:
            for record in reversed(records):
                if index is not None and record.index is not None and record.index != index:
                    continue
                if wire_id is not None and record.wire_id is not None and record.wire_id != wire_id:
                    continue
                if (index is not None and record.index == index) or (
                    wire_id is not None and record.wire_id == wire_id
                ):
                    if name is not None and record.parts and record.name and name != record.name:
                        break  # the claimant's call is finished: this names a new one
                    return record
        # A label a continuation taught a call on rule 4a's reading (`_absorb`).
        absorber = None
        if wire_id is not None:
            absorber = self._absorbed_ids.get(wire_id)
        if absorber is None and index is not None:
            absorber = self._absorbed_indices.get(index)
        if name is not None:
            if absorber is not None:
                by_id = wire_id is not None and self._absorbed_ids.get(wire_id) is absorber
                new_id = wire_id is not None and not by_id and wire_id != absorber.wire_id
                if name == absorber.name and not new_id:
                    return absorber  # a restatement of the call the label was read as
                if by_id or not absorber.arguments_complete():
                    # The label rule 4a read as the absorber's now names another call: the
                    # fragments it carried may belong to that call. Keep both, refuse the turn.
                    self.dropped_deltas += 1
                    self._defect(
                        "dropped_delta",
                        f"a label (index={index!r}, id={wire_id!r}) read as a continuation of "
                        f"call {absorber.ordinal} now names another call ({name!r:.40})",
                    )
            return self._open()
        if absorber is not None:
            return absorber
        if len(records) == 1:
            lone = records[0]
            if not (
                (index is not None and lone.index is not None and lone.index != index)
                or (wire_id is not None and lone.wire_id is not None and lone.wire_id != wire_id)
            ):
                return lone
        if records:
            open_call = self._open_call(index, wire_id)
            if open_call is not None:
                self._absorb(open_call, index, wire_id)
                return open_call
        if index is not None or wire_id is not None:
            # An alias no call holds is a new identity, named now or later (rule 4): the
            # name may follow the arguments, and a call still nameless at the end of the
            # stream is the defect (`unnamed_tool_call`), not this fragment.
            return self._open()
        if not arguments:
            return None  # carries nothing: nothing to lose
        self.dropped_deltas += 1
        self._defect(
            "dropped_delta",
            f"an argument fragment ({len(arguments)} chars) names no tool and matches no "
            f"call unambiguously (index={index!r}, id={wire_id!r}, {len(records)} calls open)",
        )
        return None

    def _open_call(self, index: int | None, wire_id: str | None) -> _Record | None:
        """Rule 4a: the call a nameless fragment no label attributes continues, if any.

        That is the newest call, when its arguments are unfinished, every older call with
        argument text has finished it (one with none is a zero-argument call as far as
        anything shows: `""` is one), and no label the fragment carries names a different
        call: an id another call holds. (An index another call holds, without an id
        contradicting it, resolved the delta to that call in the scan already.) An index
        the newest call does not hold is accepted only without an id and when the call
        already has argument text (a DeepSeek gateway's tail one index up): a new index
        with a new id is two labels for a new call, and a call opened with no text may be
        a finished zero-argument call; either way the fragment more likely opens a call
        whose name comes after its arguments.
        """
        records = self._records
        newest = records[-1]
        if newest.arguments_complete():
            return None
        if (
            index is not None
            and newest.index != index
            and (not newest.parts or wire_id is not None)
        ):
            return None
        if (
            wire_id is not None
            and wire_id != newest.wire_id
            and any(record.wire_id == wire_id for record in records)
        ):
            return None
        for record in records[:-1]:
            if record.parts and not record.arguments_complete():
                return None  # two unfinished calls: which one is a guess
        return newest

    def _absorb(self, record: _Record, index: int | None, wire_id: str | None) -> None:
        """Remember the labels a rule-4a continuation carried that `record` does not hold,
        so the next fragment with them follows it, and a later delta that names another
        call with one refuses the turn instead of dispatching calls assembled on a guess."""
        if index is not None and record.index is not None and index != record.index:
            self._absorbed_indices[index] = record
            self._by_index[index] = record
            self._parts_by_index[index] = record.parts
        if wire_id is not None and record.wire_id is not None and wire_id != record.wire_id:
            self._absorbed_ids[wire_id] = record

    def _open(self) -> _Record:
        record = _Record(len(self._records))
        self._records.append(record)
        self._part_lists.append(record.parts)
        return record

    # -- output --------------------------------------------------------------------

    def assembled(self) -> list[ToolCall]:
        """The calls so far, with usable unique ids, in the order rule 8 gives."""
        emitted: set[str] = set()
        fields: list[dict[str, str]] = []
        records = self._records
        for record in records:
            call_id = record.wire_id
            if call_id is not None and not call_id.isascii():
                # Lone surrogates replaced (so it serializes); still checked against the
                # ids emitted before it, so two wire ids that differ only there stay two.
                call_id = rejoin_surrogates(call_id, json_escape=False)
            if call_id is None or call_id in emitted:
                call_id = self._mint(record.ordinal, emitted)
                self._minted.add(call_id)
            emitted.add(call_id)
            # ASCII text is returned as it is by `rejoin_surrogates`: not called for it.
            name = record.name
            if not (name.__class__ is str and name.isascii()):
                name = rejoin_surrogates(name, json_escape=False)
            arguments = "".join(record.parts)
            if not arguments.isascii():
                arguments = rejoin_surrogates(arguments, json_escape=True)
            call_type = record.type
            call_type = (
                "function" if call_type is None else rejoin_surrogates(call_type, json_escape=False)
            )
            fields.append({"id": call_id, "name": name, "arguments": arguments, "type": call_type})
        calls = _TOOL_CALLS.validate_python(fields)  # one validation for the batch
        if len(calls) > 1:
            indices = [record.index for record in records]
            if None not in indices and len(set(indices)) == len(indices):
                by_index = {index or 0: call for index, call in zip(indices, calls, strict=True)}
                calls = [by_index[index] for index in sorted(by_index)]
        return calls

    def was_minted(self, call_id: str) -> bool:
        """Whether `assembled()` minted this id (a wire id whose lone surrogates were
        replaced was repaired, not minted)."""
        return call_id in self._minted

    def _mint(self, ordinal: int, emitted: set[str]) -> str:
        candidate = f"{self._mint_prefix}_{ordinal}"
        suffix = 0
        while candidate in self._wire_ids or candidate in emitted:
            suffix += 1
            candidate = f"{self._mint_prefix}_{ordinal}_{suffix}"
        return candidate
