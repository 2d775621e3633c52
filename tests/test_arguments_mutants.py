"""Reading arguments: what mutation testing found no test noticed.

Each test was written against a mutant of `steadyloop._stream.arguments` that survived
`test_arguments.py`: a bound moved by one, a detail that lost the parser's reason or its
advice, a text made only of brackets inside a string that made the depth count raise.
What decides the outcome downstream is that the reader never raises and that the
detail (the tool message the model reads next) says what to fix.
"""

from __future__ import annotations

import pytest

from steadyloop._chat import ToolCall
from steadyloop._stream.arguments import (
    MAX_ARGUMENT_DEPTH,
    UnparseableArguments,
    parse_tool_call_arguments,
)


def detail_of(arguments: str) -> str:
    reading = parse_tool_call_arguments(
        ToolCall(id="call_1", name="f", arguments=arguments, type="function")
    )
    assert isinstance(reading, UnparseableArguments), reading
    return reading.detail


@pytest.mark.parametrize(
    "arguments",
    [
        '"' + "[" * (MAX_ARGUMENT_DEPTH + 1) + '"',  # a string, no container at all
        '"' + "{" * (MAX_ARGUMENT_DEPTH + 5) + '"',
    ],
)
def test_brackets_only_inside_a_string_are_not_nesting(arguments: str) -> None:
    # More brackets than the limit, none outside the string: the depth is 0 and the
    # reading is "not an object", never an exception from counting an empty sequence.
    detail = detail_of(arguments)
    assert "must be a JSON object" in detail and "a string" in detail


def test_invalid_json_says_where_the_parser_stopped() -> None:
    detail = detail_of('{"a": }')
    assert "not valid JSON (Expecting value: line 1 column 7 (char 6))" in detail


def test_a_too_long_integer_is_quoted_by_its_first_40_digits_only() -> None:
    digits = "9" * 40 + "1" * 5_000
    detail = detail_of('{"n": ' + digits + "}")
    assert f"the integer {'9' * 40}... has 5040 digits" in detail


@pytest.mark.parametrize("length", [39, 40])
def test_a_duplicate_key_up_to_40_characters_is_quoted_whole(length: int) -> None:
    key = "k" * length
    detail = detail_of(f'{{"{key}": 1, "{key}": 2}}')
    assert f"the key {key!r} appears more than once" in detail


def test_a_long_duplicate_key_is_cut_at_40_characters_and_says_how_long() -> None:
    key = "a" * 40 + "b" * 60
    detail = detail_of(f'{{"{key}": 1, "{key}": 2}}')
    assert f"the key {'a' * 40!r}... (100 characters) appears more than once" in detail


@pytest.mark.parametrize(("length", "more"), [(40, ""), (41, "...")])
def test_a_path_key_is_cut_only_past_40_characters(length: int, more: str) -> None:
    key = "-" * length  # not an identifier: spelled as ["..."]
    detail = detail_of(f'{{"{key}": "\\ud83d"}}')
    assert f'the string at $["{"-" * 40}"{more}] holds a lone surrogate' in detail


def test_a_lone_surrogate_refusal_explains_it_and_says_what_to_send() -> None:
    detail = detail_of('{"k": "\\ud83d"}')
    assert "(half of a character such as an emoji" in detail
    assert "; send whole characters." in detail


def test_depth_is_counted_back_down_exactly_after_a_closed_sibling() -> None:
    # Closed containers before a deep one must not lower its count: this is
    # MAX_ARGUMENT_DEPTH + 1 levels ("{" and the brackets of "b"), and must be refused.
    deep = "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH
    detail = detail_of('{"a": [[], [[]]], "b": ' + deep + "}")
    assert f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in detail
