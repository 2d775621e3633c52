"""The wire-shape suite: every shape in `wire_shapes` must dispatch exactly its calls.

Each case asserts what decides the outcome downstream: the calls and their order, every
id answerable and unique (exact where the wire id must be kept, minted and never a wire
id otherwise), every arguments string parsing alone, and the dropped-delta count and
defects the turn's retry decision reads. The same shapes run as dicts, as attribute
objects and as the `openai` client's models, mid-stream and twice (determinism).
"""

from __future__ import annotations

import json
from collections import Counter
from types import MappingProxyType
from typing import Any

import pytest
from assembly_assertions import (
    DEFAULT_MINT_PREFIX,
    as_attribute_objects,
    as_openai_models,
    assert_arguments_self_contained,
    assert_calls_exactly,
    assert_ids_usable,
    assert_minted,
    run_chunks,
    wire_ids_seen,
)
from wire_shapes import (
    UNDECIDABLE_SHAPES,
    WIRE_SHAPES,
    Chunk,
    UndecidableShape,
    WireShape,
    one,
    tc,
)

from steadyloop._chat import ToolCall
from steadyloop._stream.accumulator import AssemblyDefect, ToolCallAccumulator
from steadyloop._stream.defects import detect_completion_defects

DEFECT_KINDS = {
    "dropped_delta",
    "malformed_index",
    "malformed_id",
    "malformed_name",
    "malformed_arguments",
}

shapes = pytest.mark.parametrize("shape", WIRE_SHAPES, ids=[s.case for s in WIRE_SHAPES])
undecidable = pytest.mark.parametrize(
    "shape", UNDECIDABLE_SHAPES, ids=[s.case for s in UNDECIDABLE_SHAPES]
)


def assert_shape_outcome(
    acc: ToolCallAccumulator, shape: WireShape, mint_prefix: str = DEFAULT_MINT_PREFIX
) -> list[ToolCall]:
    calls = acc.assembled()
    assert_calls_exactly(
        calls, shape.calls, wire_ids=wire_ids_seen(shape.chunks), mint_prefix=mint_prefix
    )
    assert acc.dropped_deltas == shape.dropped
    kinds = [defect.kind for defect in acc.defects]
    assert Counter(kinds) == Counter(shape.defects), kinds
    for defect in acc.defects:
        assert isinstance(defect, AssemblyDefect)
        assert defect.kind in DEFECT_KINDS
        assert isinstance(defect.detail, str) and defect.detail.strip(), defect
    if shape.malformed_aliases is not None:
        assert acc.malformed_aliases == shape.malformed_aliases
    assert acc.call_count == len(shape.calls)
    assert acc.is_empty is (len(shape.calls) == 0)
    return calls


# ---------------------------------------------------------------- the evidence itself


def test_the_suite_holds_at_least_sixty_cited_shapes() -> None:
    assert len(WIRE_SHAPES) >= 60
    cases = [s.case for s in WIRE_SHAPES] + [s.case for s in UNDECIDABLE_SHAPES]
    assert len(set(cases)) == len(cases)
    sources = [s.source for s in WIRE_SHAPES] + [s.source for s in UNDECIDABLE_SHAPES]
    for case, source in zip(cases, sources, strict=True):
        assert source.strip(), case


@shapes
def test_wire_shape_dispatches_exactly_its_calls(shape: WireShape) -> None:
    assert_shape_outcome(run_chunks(shape.chunks), shape)


@shapes
def test_wire_shape_as_attribute_objects(shape: WireShape) -> None:
    acc = run_chunks(as_attribute_objects(chunk) for chunk in shape.chunks)
    assert_shape_outcome(acc, shape)


@shapes
def test_wire_shape_as_openai_client_models(shape: WireShape) -> None:
    acc = run_chunks(as_openai_models(chunk) for chunk in shape.chunks)
    assert_shape_outcome(acc, shape)


@shapes
def test_wire_shape_with_a_custom_mint_prefix(shape: WireShape) -> None:
    acc = run_chunks(shape.chunks, mint_prefix="turn7")
    assert_shape_outcome(acc, shape, mint_prefix="turn7")


@shapes
def test_wire_shape_is_deterministic(shape: WireShape) -> None:
    first = run_chunks(shape.chunks).assembled()
    second = run_chunks(shape.chunks).assembled()
    assert first == second


@shapes
def test_wire_shape_is_safe_to_read_mid_stream(shape: WireShape) -> None:
    """assembled() after every chunk: usable ids, and reading changes nothing."""
    acc = ToolCallAccumulator()
    for chunk in shape.chunks:
        acc.observe(chunk)
        calls = acc.assembled()
        assert_ids_usable(calls)
        assert len(calls) == acc.call_count
    assert_shape_outcome(acc, shape)


@shapes
def test_completion_defects_agree_with_the_assembly(shape: WireShape) -> None:
    """What the turn's retry decision reads: only the defects the shape really has."""
    acc = run_chunks(shape.chunks)
    calls = acc.assembled()
    found = detect_completion_defects(
        text="", tool_calls=calls, finish_reason="tool_calls", dropped_deltas=acc.dropped_deltas
    )
    want: Counter[str] = Counter()
    if shape.dropped:
        want["dropped_deltas"] += 1
    want["unnamed_tool_call"] += sum(1 for c in shape.calls if not c.name.strip())
    if not shape.calls:
        want["empty_completion"] += 1
    assert Counter(d.kind for d in found) == want, found


# ---------------------------------------------------------------- undecidable shapes


@undecidable
def test_undecidable_shape_never_loses_a_call_silently(shape: UndecidableShape) -> None:
    acc = run_chunks(shape.chunks)
    calls = acc.assembled()
    assert_ids_usable(calls)
    found = detect_completion_defects(
        text="", tool_calls=calls, finish_reason="tool_calls", dropped_deltas=acc.dropped_deltas
    )
    if not found:
        # Nothing flagged: then every intended call must be there (arguments may be
        # misplaced between calls; that is the documented price of these shapes).
        assert len(calls) == len(shape.intended), (calls, shape.intended)
        assert sorted(c.name for c in calls) == sorted(c.name for c in shape.intended)
        assert_arguments_self_contained(calls)
    else:
        # Flagged: the turn will be retried, not dispatched as a partial batch.
        assert acc.dropped_deltas > 0 or any(
            d.kind in ("truncated_tool_call", "unnamed_tool_call") for d in found
        )


@undecidable
def test_undecidable_shape_mid_stream_ids_stay_unique(shape: UndecidableShape) -> None:
    acc = ToolCallAccumulator()
    for chunk in shape.chunks:
        acc.observe(chunk)
        assert_ids_usable(acc.assembled())


# ---------------------------------------------------------------- the API itself


@pytest.mark.parametrize("chunk", [None, [], [{}], [{"type": "function"}]])
def test_nothing_observed_is_empty(chunk: Any) -> None:
    acc = ToolCallAccumulator()
    acc.observe(chunk)
    assert acc.is_empty
    assert acc.call_count == 0
    assert acc.assembled() == []
    assert acc.dropped_deltas == 0
    assert acc.defects == []
    assert acc.malformed_aliases == 0


def test_one_call_makes_it_non_empty_before_any_argument_text() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", name="get_time"))
    assert not acc.is_empty
    assert acc.call_count == 1
    assert acc.assembled() == [ToolCall(id="call_a", name="get_time", arguments="")]


def test_reading_mid_stream_does_not_change_the_outcome() -> None:
    shape = next(
        s for s in WIRE_SHAPES if s.case == "late_id_then_id_only_continuation_two_calls_open"
    )
    reader = ToolCallAccumulator()
    for chunk in shape.chunks:
        reader.observe(chunk)
        reader.assembled()
    assert reader.assembled() == run_chunks(shape.chunks).assembled()


def test_order_rule_holds_mid_stream() -> None:
    """Contract ext (g): calls present so far are index-sorted whenever they qualify."""
    shape = next(s for s in WIRE_SHAPES if s.case == "five_calls_arrival_unlike_index_order")
    acc = ToolCallAccumulator()
    arrived: list[tuple[int, str]] = []
    for chunk in shape.chunks:
        acc.observe(chunk)
        assert chunk is not None
        arrived.append((chunk[0]["index"], chunk[0]["function"]["name"]))
        assert [c.name for c in acc.assembled()] == [name for _, name in sorted(arrived)]


def test_order_mid_stream_falls_back_to_creation_order_once_an_index_is_missing() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=2, id="c2", name="two", arguments="{}"))
    acc.observe(one(index=0, id="c0", name="zero", arguments="{}"))
    assert [c.name for c in acc.assembled()] == ["zero", "two"]
    acc.observe(one(id="cx", name="none", arguments="{}"))
    assert [c.name for c in acc.assembled()] == ["two", "zero", "none"]


def test_lone_surrogate_in_arguments_is_re_escaped_and_parses_to_the_same_value() -> None:
    """Contract ext (h): a lone surrogate is kept as JSON escape text, not raw."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_s", name="echo", arguments='{"text":"a\ud83d'))
    acc.observe(one(index=0, arguments='b"}'))
    [call] = acc.assembled()
    call.arguments.encode("utf-8")  # no raw surrogate left to break UTF-8 payloads
    assert "\\ud83d" in call.arguments.lower()
    assert json.loads(call.arguments) == {"text": "a\ud83db"}


def test_lone_low_surrogate_in_arguments_is_re_escaped() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_s", name="echo", arguments='{"t":"\ude00"}'))
    [call] = acc.assembled()
    call.arguments.encode("utf-8")
    assert json.loads(call.arguments) == {"t": "\ude00"}


def test_lone_surrogate_in_a_name_becomes_the_replacement_character() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_s", name="note_\ud83d", arguments="{}"))
    [call] = acc.assembled()
    assert call.name == "note_\ufffd"


def test_surrogate_pair_split_mid_stream_reads_whole_once_completed() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_s", name="echo", arguments='{"e":"\ud83d'))
    acc.assembled()[0].arguments.encode("utf-8")  # mid-stream read is still encodable
    acc.observe(one(index=0, arguments='\ude00"}'))
    assert acc.assembled()[0].arguments == '{"e":"\U0001f600"}'


def test_arguments_object_is_serialized_compactly() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", name="f", arguments={"a": [1, 2], "b": {"c": None}}))
    [call] = acc.assembled()
    assert call.arguments == json.dumps({"a": [1, 2], "b": {"c": None}}, separators=(",", ":"))
    assert [d.kind for d in acc.defects] == ["malformed_arguments"]


def test_many_minted_ids_are_unique_and_avoid_every_wire_id() -> None:
    wire = [f"call_sl_{n}" for n in range(12)] + [f"call_sl_{n}_1" for n in range(12)]
    chunks: list[Chunk] = [one(index=i, name=f"t{i}", arguments="{}") for i in range(12)]
    chunks += [one(index=12 + i, id=w, name=f"w{i}", arguments="{}") for i, w in enumerate(wire)]
    acc = run_chunks(chunks)
    calls = acc.assembled()
    assert len(calls) == 12 + len(wire)
    assert_ids_usable(calls)
    for call in calls[:12]:
        assert_minted(call.id, wire_ids=set(wire), mint_prefix=DEFAULT_MINT_PREFIX)
    assert [c.id for c in calls[12:]] == wire


def test_minted_id_never_equals_a_wire_id_seen_later_in_the_turn() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, name="first", arguments="{}"))
    early = acc.assembled()[0].id
    acc.observe(one(index=1, id=early, name="second", arguments="{}"))
    calls = acc.assembled()
    assert calls[1].id == early
    assert_minted(calls[0].id, wire_ids={early}, mint_prefix=DEFAULT_MINT_PREFIX)
    assert_ids_usable(calls)


def test_dropped_delta_is_not_absorbed_anywhere() -> None:
    """Rule 5: the undecidable fragment's text appears in no call."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="read_file", arguments='{"path":"a"}'))
    acc.observe(one(index=1, id="b", name="read_file", arguments='{"path":"b"}'))
    acc.observe(one(arguments="MARKER"))
    assert all("MARKER" not in c.arguments for c in acc.assembled())
    assert acc.dropped_deltas == 1
    [defect] = acc.defects
    assert defect.kind == "dropped_delta"


@pytest.mark.parametrize("junk", [{"not": "a list"}, "tool_calls", 3, [None, 7, "x", [1]]])
def test_non_list_or_junk_chunks_never_raise(junk: Any) -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="f", arguments="{}"))
    acc.observe(junk)
    calls = acc.assembled()
    assert_ids_usable(calls)
    assert [c.name for c in calls] == ["f"]


def test_assembled_calls_are_the_payload_type_with_function_type() -> None:
    acc = run_chunks([[tc(index=0, id="a", type="function", name="f", arguments="{}")]])
    [call] = acc.assembled()
    assert isinstance(call, ToolCall)
    assert call.to_wire() == {
        "id": "a",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }


def test_type_is_the_wires_own_so_the_reader_can_refuse_it() -> None:
    from steadyloop._stream.arguments import parse_tool_call_arguments

    acc = ToolCallAccumulator()
    acc.observe([{"index": 0, "type": "custom", "function": {"name": "f", "arguments": "{}"}}])
    acc.observe([{"index": 1, "function": {"name": "g", "arguments": "{}"}}])
    custom, plain = acc.assembled()
    assert (custom.type, plain.type) == ("custom", "function")
    assert parse_tool_call_arguments(custom).kind == "unsupported_type"
    assert parse_tool_call_arguments(plain).kind == "parsed"


# ---------------------------------------------------------------- pinned by mutation testing


def as_read_only_mappings(chunk: Chunk) -> Any:
    """The chunk's deltas as `Mapping`s that are not dicts (an SDK's read-only views)."""
    if chunk is None:
        return None
    out: list[Any] = []
    for delta in chunk:
        fields = dict(delta)
        function = fields.get("function")
        if isinstance(function, dict):
            fields["function"] = MappingProxyType(function)
        out.append(MappingProxyType(fields))
    return out


@shapes
def test_wire_shape_as_read_only_mappings(shape: WireShape) -> None:
    """Any `Mapping` is read by key, not only a dict (and never by attribute)."""
    acc = run_chunks(as_read_only_mappings(chunk) for chunk in shape.chunks)
    assert_shape_outcome(acc, shape)


@pytest.mark.parametrize("prefix", ["", " ", "\t\n"])
def test_a_blank_mint_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="mint_prefix must be a non-blank"):
        ToolCallAccumulator(prefix)


def test_a_chunk_that_is_not_a_list_is_one_dropped_delta_each() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="f", arguments="{}"))
    not_a_list: Any = {"index": 0, "function": {"arguments": "x"}}
    acc.observe(not_a_list)
    acc.observe("tool_calls")
    assert acc.dropped_deltas == 2
    assert [d.kind for d in acc.defects] == ["dropped_delta", "dropped_delta"]
    assert all("not a list" in d.detail for d in acc.defects), acc.defects
    assert acc.assembled() == [ToolCall(id="a", name="f", arguments="{}")]


def test_a_delta_that_is_not_an_object_is_dropped_and_counted() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="f", arguments="{}"))
    junk: list[Any] = [None, 7, 1.5, "x", b"y", [1]]
    acc.observe(junk)
    assert acc.dropped_deltas == len(junk)
    assert [d.kind for d in acc.defects] == ["dropped_delta"] * len(junk)
    assert all("not an object" in d.detail for d in acc.defects), acc.defects
    assert [d.delta_number for d in acc.defects] == [2, 3, 4, 5, 6, 7]
    assert acc.malformed_aliases == 0
    assert acc.assembled() == [ToolCall(id="a", name="f", arguments="{}")]


def test_defects_are_numbered_by_the_delta_they_describe() -> None:
    """`delta_number` counts every delta of the turn from 1, bare fragments included."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="lookup", arguments='{"q":'))  # 1
    acc.observe(one(index=0, arguments='"v'))  # 2: a bare fragment
    acc.observe(one(index=0, arguments=""))  # 3: an empty bare fragment
    acc.observe([tc(index=0, arguments='"'), tc(index=0, arguments="}")])  # 4, 5
    acc.observe(one(index=-1))  # 6: malformed index
    acc.observe(one(index=0, id=99))  # 7: malformed id
    assert [(d.kind, d.delta_number) for d in acc.defects] == [
        ("malformed_index", 6),
        ("malformed_id", 7),
    ]
    assert acc.assembled() == [ToolCall(id="a", name="lookup", arguments='{"q":"v"}')]


def test_fragments_appended_through_parts_by_index_are_numbered_deltas() -> None:
    """A caller that inlines the bare-fragment path (`TurnAssembler`) appends to
    `parts_by_index` and nothing else; the fragments still count as deltas."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="lookup", arguments='{"q":'))  # 1
    acc.parts_by_index[0].append('"v"')  # 2
    acc.observe(one(index=0, arguments=""))  # 3
    acc.parts_by_index[0].append("}")  # 4
    acc.observe(one(index=-1))  # 5: malformed index
    acc.observe(one(index=1, id="b", name="other", arguments="{}"))  # 6
    acc.parts_by_index[1].append(" ")  # 7
    acc.observe(one(index=0, id=99))  # 8: malformed id
    assert [(d.kind, d.delta_number) for d in acc.defects] == [
        ("malformed_index", 5),
        ("malformed_id", 8),
    ]
    assert [c.arguments for c in acc.assembled()] == ['{"q":"v"}', "{} "]


def test_parts_by_index_holds_the_newest_claimant_of_each_index() -> None:
    """Ollama labels every call `index: 0`: a bare fragment goes to the latest one."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c1", name="read", arguments='{"p":"a"}'))
    acc.observe(one(index=0, id="c2", name="write", arguments='{"p":'))
    assert set(acc.parts_by_index) == {0}
    acc.parts_by_index[0].append('"b"}')
    acc.observe(one(index=0, arguments=""))
    assert [(c.name, c.arguments) for c in acc.assembled()] == [
        ("read", '{"p":"a"}'),
        ("write", '{"p":"b"}'),
    ]
    late = ToolCallAccumulator()
    late.observe(one(id="x", name="f", arguments="{"))  # the index arrives later
    assert dict(late.parts_by_index) == {}
    late.observe(one(index=2, id="x", arguments='"'))
    assert late.parts_by_index[2] is late.records[0].parts


def test_non_string_ids_are_counted_as_malformed_aliases() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", name="lookup", arguments='{"q":'))
    acc.observe(one(index=0, id=12345, arguments='"v"'))
    acc.observe(one(index=0, id=["call_a"], arguments="}"))
    assert acc.malformed_aliases == 2
    assert [d.kind for d in acc.defects] == ["malformed_id", "malformed_id"]
    assert acc.assembled() == [ToolCall(id="call_a", name="lookup", arguments='{"q":"v"}')]


@pytest.mark.parametrize("function", ["x", [1], None, 7])
def test_a_function_member_that_is_not_an_object_is_ignored(function: Any) -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="a", name="f", arguments="{}"))
    acc.observe([{"index": 0, "function": function}])
    assert acc.assembled() == [ToolCall(id="a", name="f", arguments="{}")]
    assert acc.dropped_deltas == 0


def test_arguments_object_is_serialized_as_text_not_ascii_escapes() -> None:
    """An arguments object becomes the text a string-sending provider would have sent."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", name="f", arguments={"city": "Zürich", "note": "😀"}))
    [call] = acc.assembled()
    assert call.arguments == '{"city":"Zürich","note":"😀"}'
    [defect] = acc.defects
    assert defect.kind == "malformed_arguments"
    assert "arrived as an object" in defect.detail


@pytest.mark.parametrize("half", ["\ud800", "\udbff", "\udc00", "\udfff"])
def test_every_lone_surrogate_half_is_made_encodable(half: str) -> None:
    """The range ends included: each half left unpaired is escaped (JSON) or replaced."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", name=f"n{half}", arguments=f'{{"t":"{half}"}}'))
    [call] = acc.assembled()
    call.arguments.encode("utf-8")
    assert json.loads(call.arguments) == {"t": half}
    assert call.name == "n\ufffd"


@pytest.mark.parametrize("wire_type", [" ", "", None, 1, {"kind": "function"}])
def test_a_blank_or_non_string_type_reads_as_function(wire_type: Any) -> None:
    acc = ToolCallAccumulator()
    acc.observe([tc(index=0, id="c", type=wire_type, name="f", arguments="{}")])
    [call] = acc.assembled()
    assert call.type == "function"


def test_a_type_first_named_on_a_continuation_is_learned() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", name="f", arguments="{"))
    acc.observe(one(index=0, type="custom", arguments="}"))
    [call] = acc.assembled()
    assert call.type == "custom"


def test_the_first_type_the_wire_names_is_kept() -> None:
    """A later delta restating `function` cannot turn a refused custom call into a runnable one."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", type="custom", name="f", arguments="{"))
    acc.observe(one(index=0, type="function", arguments="}"))
    [call] = acc.assembled()
    assert call.type == "custom"


def test_minted_ids_follow_the_documented_scheme() -> None:
    """`{mint_prefix}_{n}` for the n-th call; on a clash, the smallest free `_{k}` suffix."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, name="first", arguments="{}"))  # call_sl_0 is a wire id below
    acc.observe(one(index=1, id="call_sl_0", name="second", arguments="{}"))
    acc.observe(one(index=2, id="call_sl_0", name="third", arguments="{}"))  # id already used
    acc.observe(one(index=3, id="", name="fourth", arguments="{}"))
    assert [c.id for c in acc.assembled()] == ["call_sl_0_1", "call_sl_0", "call_sl_2", "call_sl_3"]


def test_was_minted_tells_minted_ids_from_wire_ids() -> None:
    """The model activity logs each repaired call once, naming it by this: a wire id
    that was kept is not a repair, every minted one is (even one that looks wire-made)."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_wire", name="first", arguments="{}"))
    acc.observe(one(index=1, id="call_wire", name="second", arguments="{}"))  # reused
    acc.observe(one(index=2, id=" ", name="third", arguments="{}"))  # blank
    calls = acc.assembled()
    assert [acc.was_minted(call.id) for call in calls] == [False, True, True]
