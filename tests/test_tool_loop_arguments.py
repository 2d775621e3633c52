"""Hostile tool-call arguments through the whole loop: every call answered, no run killed.

Time-skipping test server, real HTTP to a scripted provider (`loop_harness`). Each test
reads the history too: a workflow task that failed would be retried forever, which a
run that still ends can hide.
"""

from __future__ import annotations

import json

import pytest
from loop_harness import Loop, assert_every_call_answered, run_input, running_loop, tool_messages
from temporalio.api.enums.v1 import EventType

from steadyloop._chat import ChatMessage
from steadyloop._run.models import RunInput, RunResult
from steadyloop._stream.arguments import MAX_ARGUMENT_DEPTH
from steadyloop.testing import (
    ScriptedCall,
    sse_response,
    text_response,
    tool_call_chunks,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


async def run_clean(loop: Loop, run: RunInput) -> RunResult:
    """The run's result, after checking that no workflow task of it failed."""
    handle = await loop.start(run)
    result: RunResult = await handle.result()
    history = await handle.fetch_history()
    task_failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    failed = [e for e in history.events if e.event_type == task_failed]
    assert failed == [], failed
    return result


def answers_by_id(transcript: list[ChatMessage]) -> dict[str, str]:
    answered = tool_messages(transcript)
    ids = [m.tool_call_id for m in answered]
    assert len(ids) == len(set(ids)), ids  # exactly one answer per call
    return {str(m.tool_call_id): str(m.content) for m in answered}


async def test_lone_surrogate_in_arguments_is_answered_with_its_path() -> None:
    """`{"key": "half \\ud83d"}` is valid JSON whose lone surrogate no encoder takes: sent
    on to the tool, it would fail the run with `PydanticSerializationError ...
    surrogates not allowed`, the call unanswered."""
    script = [
        tool_calls_response(ScriptedCall("note", '{"key": "half \\ud83d"}', id="c_half")),
        tool_calls_response(ScriptedCall("note", '{"text": "whole \\ud83d\\ude00"}', id="c_whole")),
        text_response("noted", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await run_clean(loop, run_input())
        second_request = loop.server.requests[1].json
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "noted"
    assert_every_call_answered(result.transcript)
    by_id = answers_by_id(result.transcript)
    assert list(by_id) == ["c_half", "c_whole"]
    refused = by_id["c_half"]
    assert refused.startswith("Invalid tool arguments:")
    assert "$.key" in refused and "lone surrogate \\ud83d" in refused
    # The refused call had no effect; the corrected one ran with the whole character.
    assert loop.effects.notes == ["whole \U0001f600"]
    # The model was told, in the request after the refusal.
    assert isinstance(second_request, dict)
    assert "$.key" in str(second_request["messages"][-1]["content"])


async def test_malformed_arguments_are_answered_without_a_fresh_completion() -> None:
    """`{"city": Paris}` with `finish_reason: tool_calls` is the model's mistake, not a
    truncation: read as a defect, it would be retried fresh until the run stopped `failed`."""
    script = [
        tool_calls_response(ScriptedCall("add", '{"city": Paris}', id="c_bad")),
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="c_good")),
        text_response("3", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await run_clean(loop, run_input())
        requests = [r.json for r in loop.server.requests]
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "3"
    assert_every_call_answered(result.transcript)
    by_id = answers_by_id(result.transcript)
    assert list(by_id) == ["c_bad", "c_good"]
    assert "not valid JSON (Expecting value: line 1 column 10 (char 9))" in by_id["c_bad"]
    assert '{"city": Paris}' in by_id["c_bad"]
    assert by_id["c_good"] == "3.0"
    # One completion for the malformed turn, one for the corrected call, one for the answer.
    assert len(requests) == 3
    assert result.stats.defect_retries == {}
    assert result.stats.model_attempts == 3
    second = requests[1]
    assert isinstance(second, dict)
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert "Expecting value" in str(second["messages"][-1]["content"])


async def test_arguments_cut_by_the_stream_end_are_still_retried_fresh() -> None:
    """The other half of item 8: a prefix of a document is a cut, not a mistake."""
    cut = sse_response([*tool_call_chunks([ScriptedCall("add", '{"a": 1, "b": 2')])])
    script = [
        cut,
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="c_ok")),
        text_response("3", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await run_clean(loop, run_input())
        second = loop.server.requests[1].json
    assert result.stop_reason == "final_answer"
    assert result.stats.defect_retries == {"truncated_tool_call": 1}
    assert answers_by_id(result.transcript) == {"c_ok": "3.0"}
    assert isinstance(second, dict)
    assert [m["role"] for m in second["messages"]] == ["system", "user"]


async def test_every_hostile_parsed_value_reaches_the_tool_or_is_refused_cleanly() -> None:
    """NUL and huge integers reach the tool; NaN, `1e400`, over-deep nesting and an
    integer too long to read are refused by name. One batch, one answer per call."""
    deep = "[" * 250 + "]" * 250  # past pydantic's serializer depth (about 250)
    hostile = [
        ScriptedCall("note", {"text": "a\x00b"}, id="c_nul"),
        ScriptedCall("add", '{"a": 123456789012345678901234567890, "b": 0}', id="c_bigint"),
        ScriptedCall("add", '{"a": NaN, "b": 1}', id="c_nan"),
        ScriptedCall("add", '{"a": 1e400, "b": 1}', id="c_inf"),
        ScriptedCall("add", f'{{"a": 1, "b": 1, "c": {deep}}}', id="c_deep"),
        ScriptedCall("add", '{"a": 1' + "0" * 5000 + ', "b": 1}', id="c_digits"),
        ScriptedCall("note", '{"text": "x", "\\udc00": 1}', id="c_key"),
    ]
    async with running_loop(
        [tool_calls_response(*hostile), text_response("done", usage=(10, 5))]
    ) as loop:
        result = await run_clean(loop, run_input())
        requests = len(loop.server.requests)
    assert result.stop_reason == "final_answer"
    assert requests == 2
    assert_every_call_answered(result.transcript)
    by_id = answers_by_id(result.transcript)
    assert list(by_id) == [call.id for call in hostile]
    assert loop.effects.notes == ["a\x00b"]
    assert by_id["c_nul"] == "noted 'a\\x00b'"
    assert json.loads(by_id["c_bigint"]) == float(123456789012345678901234567890)
    assert "NaN is not valid JSON" in by_id["c_nan"]
    assert "too large to represent" in by_id["c_inf"]
    assert f"nest deeper than {MAX_ARGUMENT_DEPTH} levels" in by_id["c_deep"]
    assert "5001 digits, too many to read" in by_id["c_digits"]
    assert 'the object key $["\\udc00"] holds a lone surrogate' in by_id["c_key"]
    for refused in ("c_nan", "c_inf", "c_deep", "c_digits", "c_key"):
        assert by_id[refused].startswith("Invalid tool arguments: Tool arguments were refused")


async def test_arguments_the_converter_cannot_encode_are_answered_not_fatal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The net under the reader: should a value it lets through still be unencodable (here
    a reader that no longer refuses lone surrogates), the call is answered and the run
    goes on, where the PydanticSerializationError would fail the run."""
    import steadyloop._stream.arguments as arguments

    def lenient(call: object) -> arguments.ArgumentsReading:
        return arguments.ParsedArguments(arguments={"key": "half \ud83d"})

    # The sandbox imports the workflow module afresh, from this passed-through module.
    monkeypatch.setattr(arguments, "parse_tool_call_arguments", lenient)
    script = [
        tool_calls_response(ScriptedCall("note", '{"key": "half \\ud83d"}', id="c_half")),
        text_response("ok", usage=(10, 5)),
    ]
    async with running_loop(script) as loop:
        result = await run_clean(loop, run_input())
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    content = answers_by_id(result.transcript)["c_half"]
    assert content.startswith("Invalid tool arguments: they cannot be sent to the tool (")
    assert "surrogates not allowed" in content
    assert loop.effects.notes == []
