"""Tests that pin the accumulator's alias rules, one mutant at a time.

Each test kills a mutant that `mutmut run "steadyloop._stream.accumulator*"` left alive in
the alias rules (`_resolve`: an unheld alias opens a nameless call even with arguments) or
the id/type cleaning in `assembled()`. Each asserts what a caller acts on: the
calls dispatched (id, name, arguments, type), the dropped-delta count and the defect
numbering the retry decision and the stall watchdog read.
"""

from __future__ import annotations

import pytest
from wire_shapes import one

from steadyloop._stream.accumulator import ToolCallAccumulator


def test_a_wire_id_with_a_lone_surrogate_is_kept_with_the_replacement_character() -> None:
    """The id is the wire's own (the provider pairs the answer by it), only made
    encodable: U+FFFD, not its JSON escape, and not a minted id."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_\ud83d", name="echo", arguments="{}"))
    [call] = acc.assembled()
    assert call.id == "call_\ufffd"
    call.id.encode("utf-8")


def test_two_wire_ids_differing_only_in_a_lone_surrogate_stay_two_ids() -> None:
    """Both clean to one text: the second is minted so each call keeps its own answer."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_\ud83d", name="a", arguments="{}"))
    acc.observe(one(index=1, id="call_\udc00", name="b", arguments="{}"))
    assert [(c.id, c.name) for c in acc.assembled()] == [
        ("call_\ufffd", "a"),
        ("call_sl_1", "b"),
    ]


def test_a_type_with_a_lone_surrogate_is_replaced_and_an_absent_one_is_function() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", type="fn\ud83d", name="a", arguments="{}"))
    acc.observe(one(index=1, id="call_b", name="b", arguments="{}"))
    assert [c.type for c in acc.assembled()] == ["fn\ufffd", "function"]


def test_a_nameless_fragment_with_an_unheld_index_opens_a_call_the_name_fills() -> None:
    """Rule 4: arguments before the name (several calls open, so no lone fallback)."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", name="a", arguments="{}"))
    acc.observe(one(index=1, id="call_b", name="b", arguments="{}"))
    acc.observe(one(index=2, arguments='{"k":'))
    acc.observe(one(index=2, name="c", arguments="1}"))
    assert [(c.name, c.arguments) for c in acc.assembled()] == [
        ("a", "{}"),
        ("b", "{}"),
        ("c", '{"k":1}'),
    ]
    assert acc.dropped_deltas == 0 and acc.defects == []


def test_a_nameless_fragment_with_an_unheld_id_opens_a_call() -> None:
    """The lone call holds another id: the fragment is a new call, not dropped."""
    acc = ToolCallAccumulator()
    acc.observe(one(id="call_a", name="a", arguments="{}"))
    acc.observe(one(id="call_b", arguments='{"x":1}'))
    acc.observe(one(id="call_b", name="b"))
    assert [(c.id, c.name, c.arguments) for c in acc.assembled()] == [
        ("call_a", "a", "{}"),
        ("call_b", "b", '{"x":1}'),
    ]
    assert acc.dropped_deltas == 0


def test_a_nameless_fragment_without_an_alias_among_several_calls_is_dropped() -> None:
    """Rule 5: no alias, two calls open: counted and numbered, never guessed."""
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", name="a", arguments="{}"))  # delta 1
    acc.observe(one(index=1, id="call_b", name="b", arguments="{}"))  # delta 2
    acc.observe(one(arguments='{"lost":1}'))  # delta 3
    acc.observe(one(arguments=""))  # delta 4: carries nothing, nothing lost
    assert acc.dropped_deltas == 1
    assert [(d.kind, d.delta_number) for d in acc.defects] == [("dropped_delta", 3)]
    assert [c.arguments for c in acc.assembled()] == ["{}", "{}"]


def test_deltas_seen_counts_full_path_deltas_and_bare_fragments_once_each() -> None:
    """The stall watchdog reads this: every delta, bare fragments appended through
    `parts_by_index` by a caller included, counts exactly once."""
    acc = ToolCallAccumulator()
    assert acc.deltas_seen == 0
    acc.observe(one(index=0, id="call_a", name="a", arguments="{"))  # full path, appends
    assert acc.deltas_seen == 1
    acc.observe(one(index=0, arguments='"k"'))  # fast path inside observe
    acc.parts_by_index[0].append(":1")  # a caller's inlined fast path
    assert acc.deltas_seen == 3
    acc.observe(one(index=1, id="call_b", name="b"))  # full path, appends nothing
    acc.parts_by_index[1].append("{}")
    acc.observe(one(index=0, arguments="}"))
    assert acc.deltas_seen == 6
    assert [c.arguments for c in acc.assembled()] == ['{"k":1}', "{}"]


def test_was_minted_is_false_for_every_kept_wire_id() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", name="a", arguments="{}"))
    acc.observe(one(index=1, name="b", arguments="{}"))
    first, second = acc.assembled()
    assert (acc.was_minted(first.id), acc.was_minted(second.id)) == (False, True)


def test_a_wire_id_repaired_of_a_lone_surrogate_was_not_minted() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_\ud83d", name="a", arguments="{}"))
    acc.observe(one(index=1, id="call_\ud83d", name="b", arguments="{}"))  # a repeat
    first, second = acc.assembled()
    assert first.id == "call_\ufffd" and second.id != first.id
    assert (acc.was_minted(first.id), acc.was_minted(second.id)) == (False, True)


def test_a_blank_mint_prefix_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^mint_prefix must be a non-blank string$"):
        ToolCallAccumulator(" ")


def test_arguments_sent_as_an_object_are_kept_as_json_text_and_the_defect_says_so() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="call_a", name="a", arguments={"k": "é"}))
    [call] = acc.assembled()
    assert call.arguments == '{"k":"é"}'
    assert [(d.kind, d.detail) for d in acc.defects] == [
        ("malformed_arguments", "arguments arrived as an object, not a string")
    ]
