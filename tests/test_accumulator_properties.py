"""Property tests: valid streams split at random points and relabelled the way gateways do.

A stream is generated from 1-6 calls with random names and JSON-object arguments, the
arguments text cut at random points (optionally inside UTF-16 surrogate pairs), and then
labelled in one of the gateway styles the evidence shows:

- `openai`: a unique index per call, id only on the first delta, continuations with the
  id absent, null, blank or repeated; fragments of different calls interleaved freely and
  calls started in any order (the order that comes out must be index order);
- `index0_ids`: Ollama's every call `index: 0` (or a few labels reused), each delta
  carrying its call's distinct id (interleaving stays decidable);
- `index0_no_ids`: Ollama without ids, sequential only, where it is decidable: adjacent
  calls have different names and every call but the last has argument text;
- `lone`: one call whose continuations carry no index (bare fragments, id-only, null);
- `gemma`: LM Studio serving Gemma 4, a new unique id on every fragment of a call, one
  index for every call, empty names (accumulator rule 4a);
- `deepseek`: a DeepSeek gateway, each call after the first opening at the index of the
  call before it and streaming its tail one index up, with no id and no name.

Across modes: an id may be the string `"null"` (GLM behind Mistral), the
`openai` indices may have gaps, and a call may be restated after its arguments with its
labels and an empty fragment (vLLM's finish chunk).

Names may be split across the first two deltas (a first delta that carries no argument
text) or repeated in full on every delta; blank names may appear on continuations.

Every property asserts what decides the outcome: the same number of calls, in order, names
exact, arguments exactly the original text (so it parses alone to the original object),
ids answerable and unique (the wire id kept where one was sent), nothing dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from assembly_assertions import (
    DEFAULT_MINT_PREFIX,
    assert_arguments_self_contained,
    assert_ids_usable,
    assert_minted,
    run_chunks,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steadyloop._stream.accumulator import ToolCallAccumulator
from steadyloop._stream.arguments import ParsedArguments, parse_tool_call_arguments

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
ARGUMENT_OBJECTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{1,11}", fullmatch=True)
BLANKS: tuple[Any, ...] = (None, "", " ", "\t\n")
# Ids that say "no id": blank, or the text of an absent value (GLM behind Mistral).
NO_IDS: tuple[Any, ...] = (*BLANKS, "null")

MODES = ("openai", "index0_ids", "index0_no_ids", "lone", "gemma", "deepseek")


@dataclass(frozen=True)
class Call:
    name: str
    obj: dict[str, Any] | None  # None: a zero-argument call streamed as ""
    text: str  # the arguments text as the model produced it


@dataclass
class Plan:
    calls: list[Call]
    chunks: list[list[dict[str, Any]] | None]
    expected_order: list[int]  # positions into `calls`, in the order they must come out
    wire_ids: dict[int, str]  # call position -> the wire id it must keep


def utf16_units(text: str) -> str:
    """The text with each astral character as its two surrogate code points."""
    raw = text.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    return "".join(chr(u) for u in units)


@st.composite
def calls_strategy(draw: st.DrawFn, *, max_calls: int = 6) -> list[Call]:
    n = draw(st.integers(min_value=1, max_value=max_calls))
    out: list[Call] = []
    for _ in range(n):
        name = draw(NAMES)
        if draw(st.integers(0, 5)) == 0:
            out.append(Call(name, None, ""))
            continue
        obj = draw(ARGUMENT_OBJECTS)
        text = json.dumps(
            obj,
            ensure_ascii=draw(st.booleans()),
            separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])),
        )
        out.append(Call(name, obj, text))
    return out


@st.composite
def fragments_of(draw: st.DrawFn, text: str) -> list[str]:
    """The text cut at random points; inside surrogate pairs when astral chars occur."""
    units = utf16_units(text) if draw(st.booleans()) else text
    if not units:
        return [""]
    cuts = sorted(set(draw(st.lists(st.integers(0, len(units)), max_size=6))))
    pieces: list[str] = []
    start = 0
    for cut in [*cuts, len(units)]:
        pieces.append(units[start:cut])
        start = cut
    return pieces


def _delta(
    *, index: Any = ..., id: Any = ..., name: Any = ..., arguments: Any = ...
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if index is not ...:
        out["index"] = index
    if id is not ...:
        out["id"] = id
    fn: dict[str, Any] = {}
    if name is not ...:
        fn["name"] = name
    if arguments is not ...:
        fn["arguments"] = arguments
    if fn:
        out["function"] = fn
    return out


@st.composite
def call_deltas(
    draw: st.DrawFn,
    call: Call,
    *,
    index: Any,
    first_id: Any,
    continuation_ids: st.SearchStrategy[Any],
    continuation_index: st.SearchStrategy[Any],
    may_split_name: bool,
    named_continuations: bool = True,
) -> list[dict[str, Any]]:
    """One call's deltas, in order, labelled as asked.

    `named_continuations=False` where continuations carry no alias of the call: a named
    delta that resolves to nothing starts a new call (rule 4), so only blank names may
    ride on such continuations.
    """
    frags = draw(fragments_of(call.text))
    namings = ["first_only", "blank_after"]
    if named_continuations:
        namings += ["repeat_full", "split"]
    naming = draw(st.sampled_from(namings))
    if naming == "split" and not may_split_name:
        naming = "first_only"
    out: list[dict[str, Any]] = []
    if naming == "split":
        k = draw(st.integers(1, len(call.name) - 1))
        head, tail = call.name[:k], call.name[k:]
        if head == tail:  # a fragment equal to the name so far reads as a restatement
            naming = "first_only"
        else:
            out.append(_delta(index=index, id=first_id, name=head, arguments=""))
            out.append(
                _delta(
                    index=draw(continuation_index),
                    id=draw(continuation_ids),
                    name=tail,
                    arguments=frags[0],
                )
            )
    if naming != "split":
        out.append(_delta(index=index, id=first_id, name=call.name, arguments=frags[0]))
    for frag in frags[1:]:
        name: Any = ...
        if naming == "repeat_full":
            name = call.name
        elif naming == "blank_after":
            name = draw(st.sampled_from(BLANKS))
        out.append(
            _delta(
                index=draw(continuation_index), id=draw(continuation_ids), name=name, arguments=frag
            )
        )
    return out


@st.composite
def interleave(
    draw: st.DrawFn, per_call: dict[int, list[dict[str, Any]]]
) -> list[tuple[int, dict[str, Any]]]:
    """Merge the calls' deltas in a random schedule that keeps each call's own order."""
    pending = {who: list(deltas) for who, deltas in per_call.items()}
    out: list[tuple[int, dict[str, Any]]] = []
    while any(pending.values()):
        live = [who for who, deltas in pending.items() if deltas]
        pick = live[draw(st.integers(0, len(live) - 1))]
        out.append((pick, pending[pick].pop(0)))
    return out


@st.composite
def chunked(draw: st.DrawFn, deltas: list[dict[str, Any]]) -> list[list[dict[str, Any]] | None]:
    """Group consecutive deltas into chunks of 1-3, with empty chunks sprinkled in."""
    out: list[list[dict[str, Any]] | None] = []
    i = 0
    while i < len(deltas):
        if draw(st.integers(0, 6)) == 0:
            out.append(None)
        size = draw(st.integers(1, 3))
        out.append(deltas[i : i + size])
        i += size
    return out


def _first_appearance(owners: list[int]) -> list[int]:
    seen: list[int] = []
    for who in owners:
        if who not in seen:
            seen.append(who)
    return seen


@st.composite
def plans(draw: st.DrawFn, mode: str) -> Plan:
    calls = draw(calls_strategy(max_calls=1 if mode == "lone" else 6))
    n = len(calls)
    wire_ids: dict[int, str] = {}
    per_call: list[list[dict[str, Any]]] = []

    if mode == "openai":
        # Unique indices, with gaps where the gateway skips numbers.
        gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
        labels = [sum(gaps[: i + 1]) - 1 for i in range(n)]
        for i, call in enumerate(calls):
            has_id = draw(st.booleans()) or draw(st.booleans())
            # Some wire ids look exactly like the ids steadyloop would mint.
            spelled = draw(
                st.sampled_from([f"call_{i}_{draw(st.integers(0, 99))}", f"call_sl_{i}"])
            )
            first_id: Any = spelled if has_id else draw(st.sampled_from([*NO_IDS, ...]))
            if has_id:
                wire_ids[i] = first_id
            repeat = st.just(first_id) if has_id else st.sampled_from([*NO_IDS, ...])
            deltas = draw(
                call_deltas(
                    call,
                    index=labels[i],
                    first_id=first_id,
                    continuation_ids=st.sampled_from([*NO_IDS, ...]) | repeat,
                    continuation_index=st.just(labels[i]),
                    may_split_name=True,
                )
            )
            if draw(st.booleans()):  # vLLM's finish chunk: the labels restated, no text
                deltas.append(_delta(index=labels[i], id=first_id, name=call.name, arguments=""))
            per_call.append(deltas)
        # Start calls in any order, and interleave their fragments freely.
        order = draw(st.permutations(range(n)))
        stream = [d for _, d in draw(interleave({i: per_call[i] for i in order}))]
        expected = list(range(n))  # unique integer indices, increasing: index order
    elif mode == "index0_ids":
        # Ollama labels every call 0; some gateways reuse a few labels. Either way each
        # delta carries its call's distinct id, which keeps interleaving decidable.
        reuse = draw(st.booleans())
        labels = [draw(st.integers(0, 1)) if reuse else 0 for _ in calls]
        for i, call in enumerate(calls):
            wid = f"ollama_{i}"
            wire_ids[i] = wid
            per_call.append(
                draw(
                    call_deltas(
                        call,
                        index=labels[i],
                        first_id=wid,
                        continuation_ids=st.just(wid),
                        continuation_index=st.just(labels[i]),
                        may_split_name=True,
                    )
                )
            )
        order = draw(st.permutations(range(n)))
        tagged = draw(interleave({i: per_call[i] for i in order}))
        stream = [d for _, d in tagged]
        if len(set(labels)) == n:  # unique after all (one or two calls): index order
            expected = sorted(range(n), key=lambda i: labels[i])
        else:  # a repeated index orders nothing: creation order
            expected = _first_appearance([who for who, _ in tagged])
    elif mode == "index0_no_ids":
        # Decidable only sequentially, adjacent names distinct, args present but last.
        fixed: list[Call] = []
        for i, call in enumerate(calls):
            name = call.name
            if fixed and name == fixed[-1].name:
                name = name + "_x"
            text = call.text
            obj = call.obj
            if i < n - 1 and text == "":
                obj, text = {}, "{}"
            fixed.append(Call(name, obj, text))
        calls = fixed
        for i, call in enumerate(calls):
            prev = calls[i - 1].name if i else None
            deltas = draw(
                call_deltas(
                    call,
                    index=0,
                    first_id=draw(st.sampled_from([*NO_IDS, ...])),
                    continuation_ids=st.sampled_from([*NO_IDS, ...]),
                    continuation_index=st.just(0),
                    may_split_name=True,
                )
            )
            opening = deltas[0]["function"]["name"]
            if prev is not None and (opening == prev or prev.startswith(opening)):
                deltas = draw(
                    call_deltas(
                        call,
                        index=0,
                        first_id=...,
                        continuation_ids=st.just(...),
                        continuation_index=st.just(0),
                        may_split_name=False,
                    )
                )
            per_call.append(deltas)
        stream = [d for deltas in per_call for d in deltas]
        expected = list(range(n))
    elif mode == "gemma":
        # LM Studio + Gemma 4: the opening delta names the call with `arguments: ""`, then
        # every fragment carries an id never seen before and an empty name, all calls on
        # one index; calls follow each other (rule 4a continues the open call).
        for i, call in enumerate(calls):
            wid = f"{700 + i}"
            wire_ids[i] = wid
            deltas = [_delta(index=0, id=wid, name=call.name, arguments="")]
            # An empty fragment after the call's arguments are whole, with a new id, reads
            # as a call opened by its id before its name (rule 4): out of this mode.
            frags = draw(fragments_of(call.text))
            while len(frags) > 1 and not frags[-1]:
                frags.pop()
            for k, frag in enumerate(frags):
                deltas.append(_delta(index=0, id=f"tool-call-{i}-{k}", name="", arguments=frag))
            per_call.append(deltas)
        stream = [d for deltas in per_call for d in deltas]
        expected = list(range(n))  # one index for all: creation order
    elif mode == "deepseek":
        # Call k > 0 opens (id, name, the head of its arguments) at the index of call k-1
        # and streams its tail at index k with no id and no name. Decidable when the head
        # is text but not the whole arguments (rule 4a continues only an unfinished call
        # that has text).
        fixed = []
        for call in calls:
            text = call.text if len(call.text) >= 2 else "{}"
            fixed.append(Call(call.name, call.obj if call.text == text else {}, text))
        calls = fixed
        for i, call in enumerate(calls):
            wid = f"call_{i}"
            wire_ids[i] = wid
            cut = draw(st.integers(1, len(call.text) - 1))
            head, tail = call.text[:cut], call.text[cut:]
            tails = draw(fragments_of(tail))
            opening = max(i - 1, 0)
            deltas = [_delta(index=opening, id=wid, name=call.name, arguments=head)]
            deltas += [_delta(index=i, arguments=frag) for frag in tails]
            per_call.append(deltas)
        stream = [d for deltas in per_call for d in deltas]
        expected = list(range(n))
    else:  # lone
        [call] = calls
        has_id = draw(st.booleans())
        first_id = "call_lone" if has_id else ...
        if has_id:
            wire_ids[0] = first_id
        first_index = draw(st.sampled_from([0, 5, None, ...]))
        per_call.append(
            draw(
                call_deltas(
                    call,
                    index=first_index,
                    first_id=first_id,
                    continuation_ids=st.sampled_from([*NO_IDS, ...]),
                    continuation_index=st.sampled_from([None, ...]),
                    may_split_name=True,
                    named_continuations=False,
                )
            )
        )
        stream = per_call[0]
        expected = [0]

    return Plan(
        calls=calls, chunks=draw(chunked(stream)), expected_order=expected, wire_ids=wire_ids
    )


def assert_plan_outcome(plan: Plan, acc: ToolCallAccumulator) -> None:
    calls = acc.assembled()
    assert acc.dropped_deltas == 0, acc.defects
    assert acc.defects == []
    assert len(calls) == len(plan.calls), calls
    all_wire_ids = set(plan.wire_ids.values())
    for got, position in zip(calls, plan.expected_order, strict=True):
        want = plan.calls[position]
        assert got.name == want.name
        assert got.arguments == want.text
        reading = parse_tool_call_arguments(got)
        assert isinstance(reading, ParsedArguments), reading
        assert reading.arguments == (want.obj if want.obj is not None else {})
        if position in plan.wire_ids:
            assert got.id == plan.wire_ids[position]
        else:
            assert_minted(got.id, wire_ids=all_wire_ids, mint_prefix=DEFAULT_MINT_PREFIX)
    assert_ids_usable(calls)
    assert_arguments_self_contained(calls)


PROPERTY_SETTINGS = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(st.data())
def test_openai_labelled_streams_in_any_order_and_interleaving(data: st.DataObject) -> None:
    plan = data.draw(plans("openai"))
    assert_plan_outcome(plan, run_chunks(plan.chunks))


@PROPERTY_SETTINGS
@given(st.data())
def test_all_index0_with_distinct_ids(data: st.DataObject) -> None:
    plan = data.draw(plans("index0_ids"))
    assert_plan_outcome(plan, run_chunks(plan.chunks))


@PROPERTY_SETTINGS
@given(st.data())
def test_all_index0_without_ids_sequential(data: st.DataObject) -> None:
    plan = data.draw(plans("index0_no_ids"))
    assert_plan_outcome(plan, run_chunks(plan.chunks))


@PROPERTY_SETTINGS
@given(st.data())
def test_lone_call_with_unlabelled_continuations(data: st.DataObject) -> None:
    plan = data.draw(plans("lone"))
    assert_plan_outcome(plan, run_chunks(plan.chunks))


@PROPERTY_SETTINGS
@given(st.data())
def test_lmstudio_gemma4_new_id_on_every_fragment(data: st.DataObject) -> None:
    plan = data.draw(plans("gemma"))
    assert_plan_outcome(plan, run_chunks(plan.chunks))


@PROPERTY_SETTINGS
@given(st.data())
def test_deepseek_gateway_tails_one_index_up(data: st.DataObject) -> None:
    plan = data.draw(plans("deepseek"))
    assert_plan_outcome(plan, run_chunks(plan.chunks))


@PROPERTY_SETTINGS
@given(st.data(), st.sampled_from(MODES))
def test_reading_mid_stream_changes_nothing_and_ids_stay_usable(
    data: st.DataObject, mode: str
) -> None:
    plan = data.draw(plans(mode))
    acc = ToolCallAccumulator()
    for chunk in plan.chunks:
        acc.observe(chunk)
        mid = acc.assembled()
        assert_ids_usable(mid)
        for call in mid:
            call.arguments.encode("utf-8")
            call.name.encode("utf-8")
    assert_plan_outcome(plan, acc)


# ---------------------------------------------------------------- junk never raises

JUNK_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(alphabet=st.characters(categories=["Cs", "Ll", "Zs", "Nd"]), max_size=6)
)
JUNK = st.recursive(
    JUNK_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)
LABELS = st.sampled_from(["", " ", "a", "b", "call_sl_1", "call_sl_2"])
NAMEISH = st.sampled_from(["", " ", "f", "g", "f_g", "\ud83d", "\ude00"])
ARGISH = st.sampled_from(["", "{", "}", '{"a":1}', '"\ud83d', "\ude00"])

JUNK_FUNCTION = st.fixed_dictionaries(
    {},
    optional={"name": JUNK | NAMEISH, "arguments": JUNK | ARGISH},
)
JUNK_DELTA = st.fixed_dictionaries(
    {},
    optional={
        "index": JUNK | st.integers(-2, 3),
        "id": JUNK | LABELS,
        "type": JUNK | st.just("function"),
        "function": JUNK | JUNK_FUNCTION,
    },
)


def _maybe_object(value: Any, as_object: bool) -> Any:
    if as_object and isinstance(value, dict):
        fields = {str(k): v for k, v in value.items() if str(k).isidentifier()}
        if isinstance(fields.get("function"), dict):
            fn = fields["function"]
            fields["function"] = SimpleNamespace(
                **{str(k): v for k, v in fn.items() if str(k).isidentifier()}
            )
        return SimpleNamespace(**fields)
    return value


JUNK_CHUNK = st.one_of(
    st.none(),
    st.lists(
        st.tuples(JUNK_DELTA | JUNK, st.booleans()).map(lambda p: _maybe_object(*p)),
        max_size=4,
    ),
    JUNK,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JUNK_CHUNK, max_size=12))
def test_observe_never_raises_and_assembled_ids_stay_unique(chunks: list[Any]) -> None:
    acc = ToolCallAccumulator()
    for chunk in chunks:
        acc.observe(chunk)
        calls = acc.assembled()
        assert_ids_usable(calls)
        assert len(calls) == acc.call_count
        assert acc.is_empty is (acc.call_count == 0)
        for call in calls:
            assert isinstance(call.name, str) and isinstance(call.arguments, str)
            # The issue says type == "function"; the module passes a wire `type` through
            # (so the argument reader can refuse it). Either way it must be usable text.
            assert isinstance(call.type, str) and call.type.strip() != ""
            call.name.encode("utf-8")  # no raw surrogate survives into a payload
            call.arguments.encode("utf-8")
    assert isinstance(acc.dropped_deltas, int) and acc.dropped_deltas >= 0
    assert isinstance(acc.malformed_aliases, int) and acc.malformed_aliases >= 0
    assert acc.dropped_deltas == sum(1 for d in acc.defects if d.kind == "dropped_delta")
    for defect in acc.defects:
        assert defect.kind in {
            "dropped_delta",
            "malformed_index",
            "malformed_id",
            "malformed_name",
            "malformed_arguments",
        }


@settings(max_examples=200, deadline=None)
@given(st.lists(JUNK_CHUNK, max_size=8))
def test_assembly_is_deterministic_for_the_same_delta_sequence(chunks: list[Any]) -> None:
    assert run_chunks(chunks).assembled() == run_chunks(chunks).assembled()
