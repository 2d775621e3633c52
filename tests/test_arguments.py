"""Every outcome of reading a tool call's arguments, each a value with a usable detail.

The detail is read by the model (it is the tool message's content), so each refusal
must name what was wrong; these tests check the kind *and* that the detail says so.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)

import steadyloop
from steadyloop.arguments import (
    EXCERPT_CHARS,
    ParsedArguments,
    UnparseableArguments,
    UnsupportedToolCallType,
    parse_tool_call_arguments,
    tool_call_arguments_absent,
)
from steadyloop.chat import ToolCall


def wire(arguments: Any, call_type: Any = "function") -> dict[str, Any]:
    return {
        "id": "call_1",
        "type": call_type,
        "function": {"name": "f", "arguments": arguments},
    }


def call(arguments: str, call_type: str = "function") -> ToolCall:
    return ToolCall(id="call_1", name="f", arguments=arguments, type=call_type)


def unparseable(value: Any) -> str:
    """The detail of an UnparseableArguments reading (fails the test otherwise)."""
    reading = parse_tool_call_arguments(value)
    assert isinstance(reading, UnparseableArguments), reading
    assert reading.kind == "unparseable"
    assert reading.detail.strip()
    return reading.detail


def parsed(value: Any) -> dict[str, Any]:
    reading = parse_tool_call_arguments(value)
    assert isinstance(reading, ParsedArguments), reading
    assert reading.kind == "parsed"
    return reading.arguments


# ---------------------------------------------------------------- zero-argument calls


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n"])
def test_empty_or_whitespace_is_a_zero_argument_call(text: str) -> None:
    assert parsed(call(text)) == {}
    assert parsed(wire(text)) == {}


def test_absent_arguments_is_a_zero_argument_call() -> None:
    assert parsed({"type": "function", "function": {"name": "f"}}) == {}
    assert parsed(wire(None)) == {}


@pytest.mark.parametrize(
    ("text", "absent"),
    [(None, True), ("", True), ("  \n", True), ("{}", False), (" {} ", False), ("x", False)],
)
def test_the_one_emptiness_predicate(text: str | None, absent: bool) -> None:
    assert tool_call_arguments_absent(text) is absent


def test_reader_and_defect_detection_share_the_predicate() -> None:
    import steadyloop.defects as defects

    assert vars(defects)["tool_call_arguments_absent"] is tool_call_arguments_absent
    assert steadyloop.tool_call_arguments_absent is tool_call_arguments_absent


# ---------------------------------------------------------------- parsed


def test_empty_object() -> None:
    assert parsed(call("{}")) == {}


def test_nested_object_parses_exactly() -> None:
    value = {"a": 1.5, "b": [1, {"c": None, "d": True}], "é": "ünï 😀", "n": -3}
    assert parsed(call(json.dumps(value))) == value
    assert parsed(call(json.dumps(value, ensure_ascii=False, indent=2))) == value


def test_surrounding_whitespace_is_fine() -> None:
    assert parsed(call('  {"a": 1}\n')) == {"a": 1}


# ---------------------------------------------------------------- not an object


@pytest.mark.parametrize(
    ("text", "kind_words"),
    [
        ("null", "null"),
        ("[]", "an array"),
        ('[{"a": 1}]', "an array"),
        ("42", "a number"),
        ("4.5", "a number"),
        ('"x"', "a string"),
        ("true", "a boolean"),
        ("false", "a boolean"),
    ],
)
def test_json_that_is_not_an_object_is_refused(text: str, kind_words: str) -> None:
    detail = unparseable(call(text))
    assert f"must be a JSON object of named parameters, got {kind_words}." in detail
    assert text in detail  # the model sees what it sent


def test_double_encoded_object_is_refused_as_a_string() -> None:
    text = json.dumps(json.dumps({"path": "a"}))
    detail = unparseable(call(text))
    assert "got a string" in detail


# ---------------------------------------------------------------- refused literals


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literals_are_refused(literal: str) -> None:
    detail = unparseable(call(f'{{"x": {literal}}}'))
    assert f"{literal} is not valid JSON" in detail  # the reason, not only the excerpt
    assert "refused" in detail


def test_non_finite_literal_nested_is_refused() -> None:
    detail = unparseable(call('{"a": {"b": [1, NaN]}}'))
    assert "NaN" in detail


def test_duplicate_top_level_key_is_refused() -> None:
    detail = unparseable(call('{"path": "a", "path": "b"}'))
    assert "'path'" in detail
    assert "more than once" in detail


def test_duplicate_nested_key_is_refused() -> None:
    detail = unparseable(call('{"outer": {"k": 1, "k": 2}}'))
    assert "'k'" in detail
    assert "more than once" in detail


def test_same_key_in_sibling_objects_is_not_a_duplicate() -> None:
    assert parsed(call('{"a": {"k": 1}, "b": {"k": 2}}')) == {"a": {"k": 1}, "b": {"k": 2}}


# ---------------------------------------------------------------- not JSON at all


@pytest.mark.parametrize(
    "text",
    [
        '{"path": "a',  # truncated mid-string
        '{"path": ',  # truncated after a key
        "{",
        '{"path":"a"}{"path":"b"}',  # two calls merged into one
        "{'path': 'a'}",  # Python repr, not JSON
        '{"a": 1} trailing',
    ],
)
def test_text_that_is_not_json_is_unparseable(text: str) -> None:
    detail = unparseable(call(text))
    assert "not valid JSON" in detail
    assert text in detail


def test_pathologically_deep_nesting_is_a_value_not_a_crash() -> None:
    detail = unparseable(call("[" * 100_000))
    assert "not valid JSON" in detail


def test_long_input_is_excerpted_in_the_detail() -> None:
    text = '{"a": "' + "x" * 500
    detail = unparseable(call(text))
    assert text[:EXCERPT_CHARS] in detail
    assert text not in detail
    assert f"({len(text)} characters in all)" in detail


def test_input_of_exactly_the_excerpt_length_is_quoted_whole() -> None:
    text = '{"a": "' + "x" * (EXCERPT_CHARS - 7)
    assert len(text) == EXCERPT_CHARS
    detail = unparseable(call(text))
    assert text in detail
    assert "characters in all" not in detail
    longer = text + "y"
    assert f"({EXCERPT_CHARS + 1} characters in all)" in unparseable(call(longer))


# ---------------------------------------------------------------- unsupported type


@pytest.mark.parametrize("call_type", ["custom", "code_interpreter", ""])
def test_a_type_other_than_function_is_unsupported(call_type: str) -> None:
    for value in (wire('{"a": 1}', call_type), call('{"a": 1}', call_type)):
        reading = parse_tool_call_arguments(value)
        assert isinstance(reading, UnsupportedToolCallType), reading
        assert reading.kind == "unsupported_type"
        assert reading.type == call_type
        assert repr(call_type) in reading.detail
        assert "function" in reading.detail


def test_unsupported_type_wins_over_bad_arguments() -> None:
    assert isinstance(parse_tool_call_arguments(wire("{", "custom")), UnsupportedToolCallType)


@pytest.mark.parametrize("value", [wire("{}", None), {"function": {"arguments": "{}"}}])
def test_missing_or_null_type_reads_as_function(value: dict[str, Any]) -> None:
    assert parsed(value) == {}


# ---------------------------------------------------------------- input forms


def test_wire_dict_and_tool_call_read_alike() -> None:
    text = '{"path": "a", "n": 2}'
    assert parsed(wire(text)) == parsed(call(text)) == {"path": "a", "n": 2}


def test_flat_dict_with_top_level_arguments() -> None:
    assert parsed({"type": "function", "arguments": '{"a": 1}'}) == {"a": 1}


def test_wire_dict_whose_function_is_not_an_object_falls_back_to_flat_arguments() -> None:
    assert parsed({"function": "junk", "arguments": '{"a": 1}'}) == {"a": 1}


def test_openai_client_tool_call_model() -> None:
    model = ChatCompletionMessageFunctionToolCall(
        id="call_1", type="function", function=Function(name="f", arguments='{"a": [1]}')
    )
    assert parsed(model) == {"a": [1]}


def test_attribute_object_with_function_member() -> None:
    obj = SimpleNamespace(type="function", function=SimpleNamespace(arguments='{"a": 1}'))
    assert parsed(obj) == {"a": 1}
    obj_none_type = SimpleNamespace(type=None, function=SimpleNamespace(arguments=""))
    assert parsed(obj_none_type) == {}
    custom = SimpleNamespace(type="custom", function=SimpleNamespace(arguments="{}"))
    assert isinstance(parse_tool_call_arguments(custom), UnsupportedToolCallType)


def test_attribute_object_without_a_type_attribute_reads_as_function() -> None:
    assert parsed(SimpleNamespace(function=SimpleNamespace(arguments='{"a": 1}'))) == {"a": 1}
    assert parsed(SimpleNamespace(arguments='{"a": 2}')) == {"a": 2}


def test_attribute_object_whose_function_has_no_arguments_falls_back_to_flat_arguments() -> None:
    obj = SimpleNamespace(type="function", function=SimpleNamespace(name="f"), arguments='{"a": 1}')
    assert parsed(obj) == {"a": 1}
    junk_function = SimpleNamespace(type="function", function="junk", arguments='{"a": 2}')
    assert parsed(junk_function) == {"a": 2}


def test_attribute_object_with_no_arguments_anywhere_is_a_zero_argument_call() -> None:
    assert parsed(SimpleNamespace(type="function", function=SimpleNamespace(name="f"))) == {}
    assert parsed(SimpleNamespace(type="function")) == {}
    assert parsed(SimpleNamespace()) == {}


@pytest.mark.parametrize(
    ("arguments", "type_name"),
    [({"a": 1}, "dict"), (42, "int"), (["a"], "list"), (True, "bool"), (1.5, "float")],
)
def test_non_string_arguments_are_unparseable(arguments: Any, type_name: str) -> None:
    detail = unparseable(wire(arguments))
    assert f"must be a JSON object encoded as a string, got a {type_name}." in detail
    obj = SimpleNamespace(type="function", function=SimpleNamespace(arguments=arguments))
    assert unparseable(obj) == detail


def test_readings_are_immutable_values() -> None:
    reading = parse_tool_call_arguments(call("{}"))
    with pytest.raises(AttributeError):
        reading.kind = "unparseable"  # type: ignore[misc]


def test_exported_at_the_package_top_level() -> None:
    assert steadyloop.parse_tool_call_arguments is parse_tool_call_arguments
    assert steadyloop.ParsedArguments is ParsedArguments
    assert steadyloop.UnparseableArguments is UnparseableArguments
    assert steadyloop.UnsupportedToolCallType is UnsupportedToolCallType


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.from_regex(r"[\[\]{}\":,0-9a-zA-Z \\-]{0,40}", fullmatch=True))
def test_any_text_reads_to_a_value_never_an_exception(text: str) -> None:
    reading = parse_tool_call_arguments(call(text))
    assert isinstance(reading, ParsedArguments | UnparseableArguments)
    if isinstance(reading, ParsedArguments):
        assert isinstance(reading.arguments, dict)
    else:
        assert reading.detail.strip()


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.text(max_size=8)
            | st.floats(allow_nan=False, allow_infinity=False),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=6,
        ),
        max_size=5,
    )
)
def test_every_json_object_round_trips(value: dict[str, Any]) -> None:
    assert parsed(call(json.dumps(value))) == value


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e309"])
def test_a_number_too_large_for_a_float_is_refused_like_infinity(number: str) -> None:
    reading = parse_tool_call_arguments(
        {"type": "function", "function": {"arguments": f'{{"x": {number}}}'}}
    )
    assert reading.kind == "unparseable"
    assert "too large" in reading.detail


def test_large_but_finite_numbers_still_parse() -> None:
    reading = parse_tool_call_arguments(
        {"function": {"arguments": '{"x": 1e300, "n": 123456789012345678901234567890}'}}
    )
    assert reading.kind == "parsed"
    assert reading.arguments == {"x": 1e300, "n": 123456789012345678901234567890}


def test_an_overflowing_number_is_echoed_to_the_model_in_40_characters_at_most() -> None:
    number = "1" * 45 + "e400"
    arguments = f'{{"x": {number}}}'
    reading = parse_tool_call_arguments({"function": {"arguments": arguments}})
    assert reading.kind == "unparseable"
    assert f"the number {number[:40]} is too large" in reading.detail
