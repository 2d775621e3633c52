"""Completion defects: a finished stream whose turn must not be dispatched as it is."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop._chat import ToolCall
from steadyloop._stream.defects import (
    CUT_FINISH_REASONS,
    DEFECT_RETRY_BUDGETS,
    LENGTH_FINISH_REASONS,
    CompletionDefect,
    DefectKind,
    detect_completion_defect,
    detect_completion_defects,
    json_text_shape,
)


def tc(arguments: str, name: str = "read_file", call_id: str = "call_1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def kinds(found: list[CompletionDefect]) -> list[str]:
    return [d.kind for d in found]


# ---------------------------------------------------------------- clean turns


@pytest.mark.parametrize("finish_reason", ["tool_calls", "stop", None])
def test_clean_tool_call_turn_has_no_defect(finish_reason: str | None) -> None:
    calls = [tc('{"path": "a"}'), tc("", name="get_time", call_id="call_2")]
    assert detect_completion_defects(text="", tool_calls=calls, finish_reason=finish_reason) == []
    assert detect_completion_defect(text="", tool_calls=calls, finish_reason=finish_reason) is None


def test_clean_text_answer_has_no_defect() -> None:
    assert detect_completion_defect(text="Paris.", tool_calls=[], finish_reason="stop") is None


# ---------------------------------------------------------------- truncated calls


@pytest.mark.parametrize("finish_reason", ["length", "stop", "tool_calls", None])
def test_arguments_that_do_not_parse_are_truncated(finish_reason: str | None) -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc('{"path": "a')], finish_reason=finish_reason
    )
    assert kinds(found) == ["truncated_tool_call"]
    [defect] = found
    assert defect.tool_call_id == "call_1"
    assert "read_file" in defect.detail
    assert "do not parse" in defect.detail
    assert ("token limit" in defect.detail) is (finish_reason == "length")


def test_merged_calls_read_as_truncated() -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc('{"path":"a"}{"path":"b"}')], finish_reason="tool_calls"
    )
    assert kinds(found) == ["truncated_tool_call"]
    assert "several JSON values run together" in found[0].detail


# ---------------------------------------------------------------- malformed, not truncated


MALFORMED = [
    '{"city": Paris}',  # an unquoted string, with finish_reason tool_calls
    "{'path': 'a'}",
    '{"a": 1,}',
    '{"a": [1, 2,]}',
    '{"a" 1}',
    '{"a": 01}',
    '{"a": 1.e5}',
    '{"a": "x\\q"}',
    '{"a": "line\nbreak"}',  # a raw control character inside a string
    '{"a": trx}',
    '{"a": 1]',
    '{"city": Par',  # not a prefix of any JSON: `P` starts no value
]


@pytest.mark.parametrize("finish_reason", ["tool_calls", "stop", "function_call"])
@pytest.mark.parametrize("arguments", MALFORMED)
def test_a_finished_call_with_malformed_arguments_is_not_a_defect(
    arguments: str, finish_reason: str
) -> None:
    """The model wrote wrong JSON and finished: the argument reader answers the call with
    the parse error. Retrying fresh instead stopped the run after two completions."""
    assert json_text_shape(arguments) == "malformed"
    calls = [tc('{"path": "a"}', call_id="ok"), tc(arguments, call_id="bad")]
    assert detect_completion_defects(text="", tool_calls=calls, finish_reason=finish_reason) == []


@pytest.mark.parametrize(
    ("finish_reason", "why"),
    [
        (None, "the stream ended without a finish reason"),
        ("length", "the completion was cut by the token limit"),
        ("max_tokens", "the completion was cut by the token limit"),
        ("content_filter", "the completion was cut: finish reason 'content_filter'"),
    ],
)
@pytest.mark.parametrize("arguments", ['{"city": Paris}', '{"a": 1}{"a": 2}', '{"a": '])
def test_unparseable_arguments_of_a_cut_completion_are_truncated(
    arguments: str, finish_reason: str | None, why: str
) -> None:
    """Cut output proves nothing about what the model meant: whatever the text looks
    like, the call was not finished, so the turn is sampled again."""
    found = detect_completion_defects(
        text="", tool_calls=[tc(arguments, name="add", call_id="c")], finish_reason=finish_reason
    )
    assert [(d.kind, d.tool_call_id) for d in found] == [("truncated_tool_call", "c")]
    assert found[0].detail == f"the arguments of tool call 'add' do not parse as JSON ({why})."


def test_cut_finish_reasons() -> None:
    assert LENGTH_FINISH_REASONS | {"content_filter"} == CUT_FINISH_REASONS


@pytest.mark.parametrize(
    "arguments", ['{"a": 1', '{"city": "Par', '{"a": [1, {"b": tr', "[" * 5000]
)
def test_a_prefix_of_a_document_is_truncated_even_when_finished(arguments: str) -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc(arguments, name="add")], finish_reason="tool_calls"
    )
    assert kinds(found) == ["truncated_tool_call"]
    assert found[0].detail == (
        "the arguments of tool call 'add' do not parse as JSON: they end before their "
        "JSON value does."
    )


@pytest.mark.parametrize(
    "arguments", ['{"a": 1} {"a": 2}', '{"path":"a"}"b"}', '{"a": 1}}', "{} x"]
)
def test_values_run_together_are_truncated_even_when_finished(arguments: str) -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc(arguments)], finish_reason="tool_calls"
    )
    assert kinds(found) == ["truncated_tool_call"]
    assert "run together" in found[0].detail


def test_deep_but_complete_json_the_stdlib_cannot_read_is_left_to_the_reader() -> None:
    """Neither cut nor merged: the argument reader refuses it with a reason."""
    arguments = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    assert json_text_shape(arguments) == "complete"
    assert (
        detect_completion_defects(text="", tool_calls=[tc(arguments)], finish_reason="tool_calls")
        == []
    )


# ---------------------------------------------------------------- json_text_shape


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ('{"a": "b"}', "complete"),
        (' {"a": [1, -2.5e-3, true, false, null, {}]}\n', "complete"),
        ('{"a": NaN, "b": -Infinity, "c": Infinity}', "complete"),
        ('"x"', "complete"),
        ("42", "complete"),
        ("-0", "complete"),
        ('{"a": 1e400}', "complete"),
        ('{"a": "\\ud83d \\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9"}', "complete"),
        ("{", "prefix"),
        ("[", "prefix"),
        ('{"', "prefix"),
        ('{"a', "prefix"),
        ('{"a"', "prefix"),
        ('{"a":', "prefix"),
        ('{"a": 1', "prefix"),
        ('{"a": 1,', "prefix"),
        ('{"a": 1, "b": [', "prefix"),
        ('{"a": -', "prefix"),
        ('{"a": 1.', "prefix"),
        ('{"a": 1.5e', "prefix"),
        ('{"a": 1e+', "prefix"),
        ('{"a": t', "prefix"),
        ('{"a": nul', "prefix"),
        ('{"a": N', "prefix"),
        ('{"a": -Inf', "prefix"),
        ('{"a": "x\\', "prefix"),
        ('{"a": "x\\u', "prefix"),
        ('{"a": "x\\u00e', "prefix"),
        ("-", "prefix"),
        ('{"a": 1}{', "run_together"),
        ('{"a": 1} 2', "run_together"),
        ("[] []", "run_together"),
        ('"x" "y"', "run_together"),
        ("1 2", "run_together"),
        ('{"a": .5}', "malformed"),
        ('{"a": 1.5e}', "malformed"),
        ('{"a": +1}', "malformed"),
        ('{"a": --1}', "malformed"),
        ('{"a": 00}', "malformed"),
        ('{"a": "x\\u12g4"}', "malformed"),
        ('{"a": "tab\there"}', "malformed"),
        ("\x0b{}", "malformed"),
        ("{,}", "malformed"),
        ('{1: "a"}', "malformed"),
        ("[1}", "malformed"),
        ('{"a": 1]', "malformed"),
        ("]", "malformed"),
        ("}", "malformed"),
        ("nulx", "malformed"),
        ('{"a": None}', "malformed"),
    ],
)
def test_json_text_shape(text: str, shape: str) -> None:
    assert json_text_shape(text) == shape


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def render(value: Any, ascii_only: bool, indent: int | None) -> str:
    return json.dumps(value, ensure_ascii=ascii_only, indent=indent)


DOCUMENTS = st.builds(render, JSON_VALUES, st.booleans(), st.sampled_from([None, 0, 2]))


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS, st.data())
def test_every_document_is_complete_and_every_cut_of_it_a_prefix(
    doc: str, data: st.DataObject
) -> None:
    assert json_text_shape(doc) == "complete"
    cut = data.draw(st.integers(1, len(doc)))
    head = doc[:cut]
    if head.strip() and head.strip() != doc.strip():
        assert json_text_shape(head) in ("prefix", "complete")
        if json_text_shape(head) == "complete":  # `12` is whole, and a prefix of `123`
            json.loads(head)


@settings(max_examples=200, deadline=None)
@given(DOCUMENTS, DOCUMENTS, st.sampled_from(["", " ", "\n"]))
def test_two_documents_run_together(first: str, second: str, between: str) -> None:
    text = first + between + second
    shape = json_text_shape(text)
    if shape == "complete":  # `1` + `2` is the one number `12`
        json.loads(text)
    else:
        assert shape == "run_together"


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet='{}[],:"\\ 0123456789.-+eEtrufalsnNIiy\n\t', max_size=24)
    | st.text(max_size=12)
)
def test_complete_exactly_when_the_stdlib_reads_it(text: str) -> None:
    try:
        json.loads(text)
    except ValueError:
        assert json_text_shape(text) != "complete"
    else:
        assert json_text_shape(text) == "complete"


@pytest.mark.parametrize("finish_reason", sorted(LENGTH_FINISH_REASONS))
@pytest.mark.parametrize("arguments", ["", "  "])
def test_empty_arguments_cut_by_the_token_limit_are_truncated(
    finish_reason: str, arguments: str
) -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc(arguments, name="write_file")], finish_reason=finish_reason
    )
    assert kinds(found) == ["truncated_tool_call"]
    assert "token limit" in found[0].detail
    assert "write_file" in found[0].detail
    assert found[0].tool_call_id == "call_1"


@pytest.mark.parametrize("finish_reason", ["stop", "tool_calls", None, "content_filter"])
@pytest.mark.parametrize("arguments", ["", "  ", "\n\t"])
def test_empty_arguments_otherwise_are_a_zero_argument_call(
    finish_reason: str | None, arguments: str
) -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc(arguments, name="get_time")], finish_reason=finish_reason
    )
    assert found == []


def test_length_finish_reasons_are_the_token_limit_spellings() -> None:
    assert {"length", "max_tokens"} <= LENGTH_FINISH_REASONS
    assert "stop" not in LENGTH_FINISH_REASONS


def test_only_the_broken_call_is_named() -> None:
    calls = [tc('{"a": 1}', call_id="ok"), tc('{"a": ', call_id="bad"), tc("{}", call_id="ok2")]
    found = detect_completion_defects(text="", tool_calls=calls, finish_reason="tool_calls")
    assert [(d.kind, d.tool_call_id) for d in found] == [("truncated_tool_call", "bad")]


# ---------------------------------------------------------------- empty completion


@pytest.mark.parametrize("text", ["", "   \n"])
@pytest.mark.parametrize("finish_reason", ["stop", "length", None])
def test_no_text_and_no_calls_is_an_empty_completion(text: str, finish_reason: str | None) -> None:
    found = detect_completion_defects(text=text, tool_calls=[], finish_reason=finish_reason)
    assert kinds(found) == ["empty_completion"]
    assert found[0].tool_call_id is None


# ---------------------------------------------------------------- unnamed calls


@pytest.mark.parametrize("name", ["", "  "])
def test_a_call_with_no_name_is_a_defect(name: str) -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc("{}", name=name, call_id="call_u")], finish_reason="tool_calls"
    )
    assert kinds(found) == ["unnamed_tool_call"]
    assert found[0].tool_call_id == "call_u"
    assert "no name" in found[0].detail


# ---------------------------------------------------------------- dropped deltas


def test_dropped_deltas_are_a_defect_even_when_every_call_parses() -> None:
    found = detect_completion_defects(
        text="", tool_calls=[tc("{}")], finish_reason="tool_calls", dropped_deltas=2
    )
    assert kinds(found) == ["dropped_deltas"]
    assert "2" in found[0].detail
    assert found[0].tool_call_id is None


def test_dropped_deltas_with_no_calls_left() -> None:
    found = detect_completion_defects(
        text="", tool_calls=[], finish_reason="tool_calls", dropped_deltas=1
    )
    assert kinds(found) == ["dropped_deltas", "empty_completion"]


def test_the_most_fundamental_defect_comes_first() -> None:
    calls = [tc("", name="", call_id="u"), tc('{"a"', call_id="t")]
    found = detect_completion_defects(
        text="", tool_calls=calls, finish_reason="length", dropped_deltas=1
    )
    assert kinds(found) == [
        "dropped_deltas",
        "unnamed_tool_call",
        "truncated_tool_call",
        "truncated_tool_call",
    ]
    first = detect_completion_defect(
        text="", tool_calls=calls, finish_reason="length", dropped_deltas=1
    )
    assert first == found[0]


# ---------------------------------------------------------------- structured output


def test_json_output_that_does_not_parse_is_a_defect() -> None:
    found = detect_completion_defects(
        text='{"answer": ', tool_calls=[], finish_reason="stop", wants_json=True
    )
    assert kinds(found) == ["structured_output_unparseable"]
    assert "JSON" in found[0].detail


@pytest.mark.parametrize("text", ['{"answer": 42}', ' {"a": [1, 2]}\n'])
def test_json_output_that_parses_is_clean(text: str) -> None:
    found = detect_completion_defects(
        text=text, tool_calls=[], finish_reason="stop", wants_json=True
    )
    assert found == []


@pytest.mark.parametrize(
    "arguments", ['{"x": NaN}', '{"x": -Infinity}', '{"x": "\\ud800"}', '{"x": 1e400}']
)
def test_json_that_only_the_stdlib_reads_still_parses(arguments: str) -> None:
    """orjson refuses these and the stdlib reads them: not a truncated call (the argument
    reader judges NaN and the rest), and not an unparseable structured output."""
    found = detect_completion_defects(
        text="", tool_calls=[tc(arguments)], finish_reason="tool_calls"
    )
    assert found == []
    found = detect_completion_defects(
        text=arguments, tool_calls=[], finish_reason="stop", wants_json=True
    )
    assert found == []


def test_unparseable_text_is_fine_when_json_was_not_requested() -> None:
    found = detect_completion_defects(text="plain words", tool_calls=[], finish_reason="stop")
    assert found == []


def test_structured_output_is_not_judged_when_the_turn_called_tools() -> None:
    found = detect_completion_defects(
        text="thinking aloud", tool_calls=[tc("{}")], finish_reason="tool_calls", wants_json=True
    )
    assert found == []


def test_empty_json_output_is_an_empty_completion_not_a_parse_failure() -> None:
    found = detect_completion_defects(text="", tool_calls=[], finish_reason="stop", wants_json=True)
    assert kinds(found) == ["empty_completion"]


# ---------------------------------------------------------------- retry budgets


def test_every_kind_has_a_retry_budget() -> None:
    assert set(DEFECT_RETRY_BUDGETS) == set(get_args(DefectKind))
    for kind, budget in DEFECT_RETRY_BUDGETS.items():
        assert isinstance(budget, int) and budget > 0, kind


def test_each_defect_carries_its_kinds_budget() -> None:
    cases: list[list[CompletionDefect]] = [
        detect_completion_defects(text="", tool_calls=[], finish_reason="stop", dropped_deltas=1),
        detect_completion_defects(
            text="", tool_calls=[tc("{}", name="")], finish_reason="tool_calls"
        ),
        detect_completion_defects(text="", tool_calls=[tc("{")], finish_reason="length"),
        detect_completion_defects(text="x", tool_calls=[], finish_reason="stop", wants_json=True),
    ]
    seen: set[str] = set()
    for found in cases:
        for defect in found:
            assert defect.retry_budget == DEFECT_RETRY_BUDGETS[defect.kind]
            seen.add(defect.kind)
    # The runaway guard's kinds come from `runaway_guard.apply_breach`, not from detection
    # (tests/test_runaway_guard.py checks their budgets).
    guard_kinds = {k for k in get_args(DefectKind) if k.startswith("TOOL_CALL_ARGUMENTS_")}
    assert seen == set(get_args(DefectKind)) - guard_kinds
