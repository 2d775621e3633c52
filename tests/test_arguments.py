"""Every outcome of reading a tool call's arguments, each a value with a usable detail.

The detail is read by the model (it is the tool message's content), so each refusal
must name what was wrong; these tests check the kind *and* that the detail says so.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)

from steadyloop._chat import ToolCall
from steadyloop._stream.arguments import (
    EXCERPT_CHARS,
    MAX_ARGUMENT_DEPTH,
    ParsedArguments,
    UnparseableArguments,
    UnsupportedToolCallType,
    parse_tool_call_arguments,
    tool_call_arguments_absent,
)


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
    import steadyloop._stream.defects as defects

    assert vars(defects)["tool_call_arguments_absent"] is tool_call_arguments_absent


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
    assert f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in detail


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


# ---------------------------------------------------------------- lone surrogates


def test_the_issue_repro_a_lone_high_surrogate_is_refused_with_its_path() -> None:
    """`{"key": "half \ud83d"}` is valid JSON; the parsed string cannot be encoded, and
    sent on to a tool it would kill the run with the call unanswered."""
    detail = unparseable(call('{"key": "half \\ud83d"}'))
    assert detail.startswith("Tool arguments were refused: the string at $.key holds a lone ")
    assert "lone surrogate \\ud83d at character 5" in detail
    assert "send whole characters" in detail
    assert '{"key": "half \\ud83d"}' in detail  # the model sees what it sent
    detail.encode("utf-8")  # the detail itself goes into a tool message


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"k": "\\udc00"}', "the string at $.k holds a lone surrogate \\udc00 at character 0"),
        ('{"k": "x\\uDBFF"}', "the string at $.k holds a lone surrogate \\udbff at character 1"),
        ('{"k": "\\uDc00y"}', "the string at $.k holds a lone surrogate \\udc00"),
        ('{"k": "\\ude00\\ud83d"}', "the string at $.k holds a lone surrogate \\ude00"),
        ('{"a": ["ok", "\\ud800"]}', "the string at $.a[1] holds"),
        ('{"a": {"b c": "x\\udfff"}}', 'the string at $.a["b c"] holds'),
        ('{"a": [[{"b": ["\\ud800"]}]]}', "the string at $.a[0][0].b[0] holds"),
        ('{"\\ud83dk": 1}', 'the object key $["\\ud83dk"] holds a lone surrogate \\ud83d'),
        ('{"a": [{"\\udfff": 1}]}', 'the object key $.a[0]["\\udfff"] holds'),
        ('{"a": {"\\udc00": {}}}', 'the object key $.a["\\udc00"] holds'),
    ],
)
def test_a_lone_surrogate_is_refused_anywhere_with_its_path(text: str, where: str) -> None:
    detail = unparseable(call(text))
    assert where in detail
    detail.encode("utf-8")


def test_the_first_lone_surrogate_in_document_order_is_named() -> None:
    detail = unparseable(call('{"a": ["x", "\\ud800"], "b": "\\udc00", "\\udc01": 1}'))
    assert "$.a[1]" in detail
    assert "$.b" not in detail and "udc01" not in detail.split("Send one")[0]
    detail = unparseable(call('{"\\udc01": {"x": "\\ud800"}}'))
    assert 'the object key $["\\udc01"]' in detail  # the key before its value


def test_a_raw_surrogate_character_in_the_text_is_refused_too() -> None:
    text = '{"k": "half \ud83d"}'  # the character itself, not its escape
    detail = unparseable(call(text))
    assert "the string at $.k holds a lone surrogate \\ud83d" in detail
    assert '{"k": "half \\ud83d"}' in detail  # quoted with the surrogate escaped
    detail.encode("utf-8")


def test_a_long_key_is_shortened_in_the_path() -> None:
    key = "k" * 30 + " " + "z" * 100
    detail = unparseable(call(json.dumps({key: "\ud800"})))
    assert f'the string at $["{key[:40]}"...] holds' in detail


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"k": "\\ud83d\\ude00"}', "\U0001f600"),  # a whole pair is one character
        ('{"k": "\\uD83D\\uDE00 ok"}', "\U0001f600 ok"),
        ('{"k": "\\\\ud83d"}', "\\ud83d"),  # an escaped backslash, then plain letters
        ('{"k": "caf\\u00e9 \U0001f600"}', "caf\u00e9 \U0001f600"),
    ],
)
def test_whole_characters_pass(text: str, value: str) -> None:
    assert parsed(call(text)) == {"k": value}


@pytest.mark.parametrize("text", ['{"k": "a\\u0000b"}', '{"a\\u0000": "\\u0000"}'])
def test_nul_characters_are_legal_json_and_pass_through(text: str) -> None:
    assert parsed(call(text)) == json.loads(text)


def test_a_duplicate_key_holding_a_surrogate_is_named_encodably() -> None:
    detail = unparseable(call('{"\\ud800": 1, "\\ud800": 2}'))
    assert "'\\ud800' appears more than once" in detail
    detail.encode("utf-8")


# ---------------------------------------------------------------- nesting and long integers


def nested(levels: int, container: str) -> str:
    """An arguments object whose nesting, the object itself included, is `levels` deep
    (with a shallow sibling, so the text holds more brackets than levels)."""
    opener, closer = ("[", "]") if container == "list" else ('{"d": ', "}")
    inner = levels - 1
    return '{"a": ' + opener * inner + "1" + closer * inner + ', "b": [{}, []]}'


@pytest.mark.parametrize("container", ["list", "dict"])
def test_nesting_up_to_the_limit_parses_and_one_level_more_is_refused(container: str) -> None:
    assert parsed(call(nested(MAX_ARGUMENT_DEPTH, container)))
    detail = unparseable(call(nested(MAX_ARGUMENT_DEPTH + 1, container)))
    assert detail.startswith(
        f"Tool arguments were refused: arrays and objects nest deeper than "
        f"{MAX_ARGUMENT_DEPTH} levels."
    )


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    brackets = "[{" * 200 + '\\"' + "}]" * 200
    assert parsed(call(f'{{"a": "{brackets}", "b": "[[[["}}')) == {
        "a": brackets.replace('\\"', '"'),
        "b": "[[[[",
    }


def test_many_shallow_containers_are_not_deep() -> None:
    text = json.dumps({"a": [[1], [2]] * 200, "b": [{"c": {}}] * 200})
    assert parsed(call(text)) == json.loads(text)


def test_the_depth_limit_is_far_below_what_the_data_converter_refuses() -> None:
    assert 10 <= MAX_ARGUMENT_DEPTH <= 150


def test_an_integer_of_readable_length_parses_and_one_digit_more_is_refused() -> None:
    import sys

    digits = sys.get_int_max_str_digits()
    assert parsed(call('{"n": ' + "9" * digits + "}")) == {"n": int("9" * digits)}
    detail = unparseable(call('{"n": ' + "9" * (digits + 1) + "}"))
    assert f"has {digits + 1} digits, too many to read" in detail
    assert detail.startswith("Tool arguments were refused: the integer 9999")


# ---------------------------------------------------------------- the class: what parses can travel


SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"])
HOSTILE_TEXT = st.lists(
    st.text(max_size=4) | SURROGATES | st.sampled_from(["\x00", "\U0001f600", '"', "\\", "["]),
    max_size=4,
).map("".join)
HOSTILE_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**400)
    | st.floats()
    | st.sampled_from([math.nan, math.inf, -math.inf])  # json.dumps: NaN, Infinity
    | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3),
    max_leaves=8,
)


def arguments_texts() -> st.SearchStrategy[str]:
    def wrap(value: Any, depth: int, ascii_only: bool) -> str:
        text = json.dumps(value, ensure_ascii=ascii_only)
        return '{"v": ' + "[" * depth + text + "]" * depth + "}"

    depths = st.integers(0, 3) | st.integers(MAX_ARGUMENT_DEPTH - 5, MAX_ARGUMENT_DEPTH + 20)
    return st.builds(wrap, HOSTILE_VALUES, depths, st.booleans()) | st.builds(
        lambda v: json.dumps(v), st.dictionaries(HOSTILE_TEXT, HOSTILE_VALUES, max_size=4)
    )


@settings(max_examples=300, deadline=None)
@given(arguments_texts())
def test_parsed_arguments_can_always_be_keyed_and_sent_to_a_tool(text: str) -> None:
    """The property the workflow relies on: whatever the reader lets through, the receipt
    key and the activity input can be built from it (no exception to kill the run), and
    the tool receives exactly the value parsed; whatever it refuses has a detail that can
    itself be sent."""
    from temporalio.contrib.pydantic import pydantic_data_converter

    from steadyloop._receipts.canonical_json import canonical_json
    from steadyloop.tools._payloads import ToolInvocation

    reading = parse_tool_call_arguments(call(text))
    if isinstance(reading, UnparseableArguments):
        reading.detail.encode("utf-8")
        return
    assert isinstance(reading, ParsedArguments)
    canonical_json(reading.arguments)
    invocation = ToolInvocation(
        tool="f", arguments=reading.arguments, call_id="c", workflow_id="w", tenant_id="t"
    )
    converter = pydantic_data_converter.payload_converter
    [received] = converter.from_payloads(converter.to_payloads([invocation]), [ToolInvocation])
    assert received.arguments == reading.arguments
