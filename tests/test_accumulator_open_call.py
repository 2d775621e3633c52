"""Rule 4a of the accumulator: a nameless fragment continues the open call.

The wire shapes (`wire_shapes.py`, cases `lmstudio_gemma4_*`, `glm_mistral_*`,
`deepseek_gateway_*`, `name_after_arguments_next_to_*`) hold the shapes themselves; these
tests pin each guard of the rule on its own, by what the turn does downstream: the
calls dispatched and the dropped-delta count the retry decision reads.
"""

from __future__ import annotations

import pytest
from assembly_assertions import assert_ids_usable, run_chunks
from wire_shapes import one

from steadyloop._stream.accumulator import ToolCallAccumulator
from steadyloop._stream.defects import detect_completion_defects


def outcome(acc: ToolCallAccumulator) -> list[tuple[str, str]]:
    calls = acc.assembled()
    assert_ids_usable(calls)
    return [(c.name, c.arguments) for c in calls]


def test_a_label_read_as_a_continuation_that_later_names_another_call_refuses_the_turn() -> None:
    """The fragment at index 1 was read as b's tail; a name at index 1 while b is still
    unfinished says it may have been c's head: the turn is retried, not dispatched."""
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="a", arguments='{"k":1}'),
            one(index=0, id="call_1", name="b", arguments='{"k":'),
            one(index=1, arguments='{"j":2}'),
            one(index=1, name="c"),
        ]
    )
    assert acc.dropped_deltas == 1
    [defect] = acc.defects
    assert defect.kind == "dropped_delta" and "names another call" in defect.detail
    found = detect_completion_defects(
        text="",
        tool_calls=acc.assembled(),
        finish_reason="tool_calls",
        dropped_deltas=acc.dropped_deltas,
    )
    assert "dropped_deltas" in {d.kind for d in found}


def test_an_absorbed_id_that_names_another_call_refuses_the_turn_even_once_finished() -> None:
    """An id is one call's label: a fragment's id read as the open call's, then the same
    id with another name, proves the guess wrong whatever the arguments look like."""
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="a", arguments=""),
            one(index=0, id="tool-call-1", name="", arguments='{"k":1}'),
            one(index=0, id="tool-call-1", name="b"),
        ]
    )
    assert acc.dropped_deltas == 1
    assert outcome(acc) == [("a", '{"k":1}'), ("b", "")]


def test_an_absorbed_label_restating_the_calls_own_name_is_a_restatement() -> None:
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="shell", arguments=""),
            one(index=0, id="tool-call-1", name="", arguments='{"c":'),
            one(index=0, id="tool-call-1", name="shell", arguments='"ls"}'),
        ]
    )
    assert acc.dropped_deltas == 0 and acc.defects == []
    assert outcome(acc) == [("shell", '{"c":"ls"}')]


def test_the_next_call_at_an_absorbed_index_once_the_guess_is_finished_is_a_new_call() -> None:
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="a", arguments='{"k":'),
            one(index=1, arguments="1}"),
            one(index=1, id="call_1", name="b", arguments='{"k":2}'),
        ]
    )
    assert acc.dropped_deltas == 0
    assert outcome(acc) == [("a", '{"k":1}'), ("b", '{"k":2}')]


def test_two_unfinished_calls_leave_a_nameless_fragment_to_rule_4() -> None:
    """Which of two unfinished calls a new-id fragment continues is a guess: it opens a
    nameless call (the turn is `unnamed_tool_call`), it is not glued to the newest."""
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="a", arguments='{"k":'),
            one(index=1, id="call_1", name="b", arguments='{"k":'),
            one(index=1, id="tool-call-9", name="", arguments="2}"),
        ]
    )
    assert outcome(acc) == [("a", '{"k":'), ("b", '{"k":'), ("", "2}")]


def test_an_older_call_that_is_unfinished_is_never_continued() -> None:
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="a", arguments='{"k":'),
            one(index=1, id="call_1", name="b", arguments='{"k":2}'),
            one(index=0, id="tool-call-9", name="", arguments="1}"),
        ]
    )
    assert outcome(acc) == [("a", '{"k":'), ("b", '{"k":2}'), ("", "1}")]


def test_an_id_an_older_call_holds_is_never_absorbed_at_the_open_calls_index() -> None:
    acc = run_chunks(
        [
            one(index=5, id="call_0", name="a", arguments='{"k":1}'),
            one(index=0, id="call_1", name="b", arguments='{"k":'),
            one(index=0, id="call_0", arguments="2}"),
        ]
    )
    assert outcome(acc) == [("a", '{"k":1}'), ("b", '{"k":'), ("", "2}")]


def test_an_id_another_call_holds_is_never_absorbed() -> None:
    """The fragment's id names call_0, its index contradicts call_0: not call_1's text."""
    acc = run_chunks(
        [
            one(index=0, id="call_0", name="a", arguments='{"k":1}'),
            one(index=1, id="call_1", name="b", arguments='{"k":'),
            one(index=2, id="call_0", arguments="2}"),
        ]
    )
    assert outcome(acc)[1] == ("b", '{"k":')


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("", False),
        ("   ", False),
        ('{"k":', False),
        ('{"k":{"j":1}', False),
        ('{"k":1}', True),
        ("  {}  ", True),
        ("[1]", True),
        ("5", True),
        ('{"k":1}{"k":2}', False),
        ("[" * 100_000, False),
    ],
)
def test_arguments_complete_is_one_finished_json_value(text: str, complete: bool) -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", name="f", arguments=text))
    [record] = acc.records
    assert record.arguments_complete() is complete
    assert record.arguments_complete() is complete  # the memo answers the same


def test_a_fragment_for_an_unfinished_call_counts_once_the_memo_is_stale() -> None:
    acc = ToolCallAccumulator()
    acc.observe(one(index=0, id="c", name="f", arguments='{"k":'))
    [record] = acc.records
    assert not record.arguments_complete()
    acc.observe(one(index=0, arguments="1}"))  # the bare-fragment path
    assert record.arguments_complete()
