"""`qualify_reused_call_ids`: only ids the transcript holds change, and none collide."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop.chat import ChatMessage, ToolCall
from steadyloop.history.call_ids import qualify_reused_call_ids


def turn_of(*ids: str) -> list[ChatMessage]:
    calls = [ToolCall(id=i, name="f", arguments="{}") for i in ids]
    return [
        ChatMessage(role="assistant", tool_calls=calls),
        *(ChatMessage(role="tool", tool_call_id=i, content="ok") for i in ids),
    ]


def calls_of(*ids: str) -> list[ToolCall]:
    return [ToolCall(id=i, name="g", arguments='{"n":1}') for i in ids]


def test_ids_the_transcript_does_not_hold_are_kept_as_they_are() -> None:
    calls = calls_of("call_a", "call_b")
    out, renames = qualify_reused_call_ids(calls, turn_of("call_0"), 2)
    assert out == calls and renames == []


def test_a_reused_id_keeps_the_wire_id_and_gains_the_turn() -> None:
    out, renames = qualify_reused_call_ids(calls_of("call_0", "call_1"), turn_of("call_0"), 2)
    assert [c.id for c in out] == ["call_0_t2", "call_1"]
    assert renames == [("call_0", "call_0_t2")]
    assert [(c.name, c.arguments) for c in out] == [("g", '{"n":1}')] * 2


def test_an_id_only_an_answer_holds_counts_as_held() -> None:
    transcript = [ChatMessage(role="tool", tool_call_id="call_0", content="late")]
    out, _ = qualify_reused_call_ids(calls_of("call_0"), transcript, 3)
    assert [c.id for c in out] == ["call_0_t3"]


def test_a_qualified_form_that_is_taken_gets_a_counter() -> None:
    held = turn_of("call_0", "call_0_t2")
    out, _ = qualify_reused_call_ids(calls_of("call_0", "call_0_t2_2"), held, 2)
    assert [c.id for c in out] == ["call_0_t2_3", "call_0_t2_2"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["call_0", "call_1", "call_0_t2", "x"]), max_size=6),
    st.lists(
        st.sampled_from(["call_0", "call_1", "call_0_t2", "call_0_t2_2", "y"]),
        max_size=5,
        unique=True,
    ),
)
def test_no_id_of_the_turn_is_one_the_transcript_holds_or_another_call_keeps(
    earlier: list[str], now: list[str]
) -> None:
    transcript = turn_of(*dict.fromkeys(earlier))
    out, renames = qualify_reused_call_ids(calls_of(*now), transcript, 2)
    held = {c.id for m in transcript for c in m.tool_calls}
    ids = [c.id for c in out]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & held
    assert [old for old, _ in renames] == [i for i in now if i in held]
    assert [c.id for c, i in zip(out, now, strict=True) if i not in held] == [
        i for i in now if i not in held
    ]
