"""`qualify_reused_call_ids`: only ids the transcript holds change, and none collide."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall
from steadyloop._history.call_ids import follow_renamed_calls, qualify_reused_call_ids
from steadyloop._history.healing import validate_and_heal


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


def passback(before: str | None, n: int = 1) -> PassbackItem:
    raw = f'{{"type":"thinking","thinking":"t{n}","signature":"s{n}"}}'
    return PassbackItem(
        endpoint="e", wire="anthropic", kind="thinking", raw=raw, before_call=before
    )


def test_a_pass_back_item_follows_its_call_when_the_call_is_renamed() -> None:
    before = calls_of("call_0", "call_1")
    after = [before[0].model_copy(update={"id": "call_0_t2"}), before[1]]
    items = [passback("call_1", 1), passback("call_0", 2), passback(None, 3), passback("x", 4)]
    out = follow_renamed_calls(items, before, after)
    assert [i.before_call for i in out] == ["call_1", "call_0_t2", None, "x"]
    assert [i.raw for i in out] == [i.raw for i in items]  # the bytes are never touched


def test_healing_a_call_id_moves_the_item_that_preceded_the_call() -> None:
    """Healing renames an id the profile refuses (Mistral takes nine alphanumerics); the
    item that preceded the call must still name it, or it goes back before the text."""
    calls = [ToolCall(id="call_0", name="f", arguments="{}")]
    transcript = [
        ChatMessage(role="user", content="go"),
        ChatMessage(role="assistant", tool_calls=calls, passback=[passback("call_0")]),
        ChatMessage(role="tool", tool_call_id="call_0", content="one"),
    ]
    healed, healings = validate_and_heal(transcript, "mistral")
    assert [h.kind for h in healings] == ["call_id_format"]
    [assistant] = [m for m in healed if m.role == "assistant"]
    [call] = assistant.tool_calls
    assert call.id != "call_0"
    assert [i.before_call for i in assistant.passback] == [call.id]
