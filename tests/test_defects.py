"""Completion defects: a finished stream whose turn must not be dispatched as it is."""

from __future__ import annotations

from typing import get_args

import pytest

import steadyloop
from steadyloop.chat import ToolCall
from steadyloop.defects import (
    DEFECT_RETRY_BUDGETS,
    LENGTH_FINISH_REASONS,
    CompletionDefect,
    DefectKind,
    detect_completion_defect,
    detect_completion_defects,
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


def test_exported_at_the_package_top_level() -> None:
    assert steadyloop.detect_completion_defect is detect_completion_defect
    assert steadyloop.detect_completion_defects is detect_completion_defects
    assert steadyloop.DEFECT_RETRY_BUDGETS is DEFECT_RETRY_BUDGETS
    assert steadyloop.CompletionDefect is CompletionDefect
