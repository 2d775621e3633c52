"""Compaction: old tool results elided with their calls still answered, or a compactor's
output healed; which happened is recorded."""

from __future__ import annotations

import pytest
from loop_harness import assert_every_call_answered
from pydantic import ValidationError

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.compaction import (
    ELIDED_MARK,
    CompactionPolicy,
    adopt_compacted,
    compact_transcript,
    elide_tool_results,
    needs_compaction,
    transcript_chars,
)
from steadyloop._history.healing import NO_RESULT


def turn(n: int, size: int) -> list[ChatMessage]:
    """One tool-call turn whose answer is `size` characters."""
    call = ToolCall(id=f"c{n}", name="read_file", arguments=f'{{"path": "f{n}"}}')
    return [
        ChatMessage(role="assistant", tool_calls=[call]),
        ChatMessage(role="tool", content=f"file {n}: " + "x" * size, tool_call_id=f"c{n}"),
    ]


def transcript(turns: int, size: int = 1000) -> list[ChatMessage]:
    out = [ChatMessage(role="system", content="s"), ChatMessage(role="user", content="go")]
    for n in range(turns):
        out += turn(n, size)
    return out


def test_under_the_limit_nothing_happens() -> None:
    messages = transcript(3)
    policy = CompactionPolicy(max_chars=transcript_chars(messages))
    assert not needs_compaction(messages, policy)
    assert compact_transcript(messages, policy) == (messages, None)
    assert not needs_compaction(messages, None)


def test_old_results_are_elided_oldest_first_with_every_call_still_answered() -> None:
    messages = transcript(6)
    policy = CompactionPolicy(max_chars=5000, target_chars=4000, keep_recent_turns=2)
    compacted, record = compact_transcript(messages, policy)
    assert record is not None and record.kind == "elided"
    assert_every_call_answered(compacted)
    assert [m.tool_call_id for m in compacted] == [m.tool_call_id for m in messages]
    elided = [m.tool_call_id for m in compacted if (m.content or "").startswith(ELIDED_MARK)]
    # Oldest first, and no more than it takes to get under the target.
    assert elided == record.elided_call_ids == ["c0", "c1", "c2", "c3"]
    assert record.before_chars == transcript_chars(messages)
    assert record.after_chars == transcript_chars(compacted) <= 4000
    one_fewer, _ = elide_tool_results(messages, policy.model_copy(update={"target_chars": 4400}))
    assert transcript_chars(one_fewer) > 4000


def test_the_elided_answer_says_what_was_elided_and_how_to_get_it_back() -> None:
    messages = transcript(4)
    compacted, _ = elide_tool_results(messages, CompactionPolicy(max_chars=100))
    note = compacted[3].content or ""
    assert "'read_file'" in note and "1,008 characters" in note
    assert "It began: file 0: xxx" in note and "Call the tool again" in note


def test_the_latest_turns_and_short_results_are_never_elided() -> None:
    messages = transcript(4) + turn(9, 10)
    compacted, record = elide_tool_results(
        messages, CompactionPolicy(max_chars=10, keep_recent_turns=2, min_result_chars=400)
    )
    assert record.elided_call_ids == ["c0", "c1", "c2"]
    assert record.detail == "still over target: nothing more to elide"
    untouched = {"c3", "c9"}  # the latest two tool-call turns, and c9 is short anyway
    for before, after in zip(messages, compacted, strict=True):
        if before.tool_call_id in untouched:
            assert after is before


def test_keep_zero_turns_still_protects_nothing_after_the_last_call_turn() -> None:
    messages = transcript(2)
    _, record = elide_tool_results(messages, CompactionPolicy(max_chars=10, keep_recent_turns=0))
    assert record.elided_call_ids == ["c0", "c1"]


def test_eliding_twice_does_not_elide_an_elided_result_again() -> None:
    policy = CompactionPolicy(max_chars=10, keep_recent_turns=0, min_result_chars=10)
    once, _ = elide_tool_results(transcript(3), policy)
    twice, record = elide_tool_results(once, policy)
    assert twice == once and record.elided_call_ids == []


def test_a_compactor_that_breaks_pairing_is_healed_before_use() -> None:
    messages = transcript(3)

    def careless(ms: list[ChatMessage]) -> list[ChatMessage]:
        # Keeps the last call turn but drops its answer; keeps an answer without its call.
        return [ms[0], ChatMessage(role="user", content="summary: read three files"), ms[3], ms[6]]

    compacted, record = compact_transcript(messages, CompactionPolicy(max_chars=10), careless)
    assert record is not None and record.kind == "custom"
    assert_every_call_answered(compacted)
    assert compacted[-1].content == NO_RESULT
    assert sorted(record.healed) == ["missing_answer_added", "orphan_answer_dropped"]


def test_adopting_a_clean_compaction_records_sizes_and_no_healing() -> None:
    messages = transcript(2)
    short = [messages[0], ChatMessage(role="user", content="summary")]
    compacted, record = adopt_compacted(messages, short)
    assert compacted == short
    assert (record.before_chars, record.after_chars, record.healed) == (
        transcript_chars(messages),
        len("s") + len("summary"),
        [],
    )


def test_a_target_above_the_limit_is_refused() -> None:
    with pytest.raises(ValidationError, match="target_chars"):
        CompactionPolicy(max_chars=100, target_chars=200)
    assert CompactionPolicy(max_chars=100).target == 75
