"""`validate_and_heal`: every healing rule, and every profile against its provider's rules.

The provider rules live in `provider_transcript_rules.py`, each quoted from the
provider's own 400; the property tests run arbitrary broken transcripts through the
healer and then through those checkers.
"""

from __future__ import annotations

from collections import Counter
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_transcript_rules import CHECKERS, object_arguments

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.healing import (
    ASSISTANT_TURN_PLACEHOLDER,
    EMPTY_TOOL_RESULT,
    NO_RESULT,
    TRANSCRIPT_PROFILES,
    USER_TURN_PLACEHOLDER,
    Healing,
    TranscriptRules,
    tool_call_id_ok,
    validate_and_heal,
)


def system(text: str) -> ChatMessage:
    return ChatMessage(role="system", content=text)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def said(text: str | None) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def calls(*ids: str, text: str | None = None) -> ChatMessage:
    return ChatMessage(
        role="assistant",
        content=text,
        tool_calls=[ToolCall(id=i, name=f"t{n}", arguments="{}") for n, i in enumerate(ids)],
    )


def answer(call_id: str | None, text: str = "ok") -> ChatMessage:
    return ChatMessage(role="tool", content=text, tool_call_id=call_id)


def kinds(healings: list[Healing]) -> list[str]:
    return [h.kind for h in healings]


def shape(messages: list[ChatMessage]) -> list[str]:
    out = []
    for m in messages:
        if m.role == "tool":
            out.append(f"tool:{m.tool_call_id}")
        elif m.tool_calls:
            out.append("calls:" + ",".join(c.id for c in m.tool_calls))
        else:
            out.append(m.role)
    return out


# -- pairing -------------------------------------------------------------------------


def test_a_valid_transcript_comes_back_as_the_same_objects_with_nothing_healed() -> None:
    messages = [system("s"), user("u"), calls("a", "b"), answer("a"), answer("b"), said("done")]
    healed, healings = validate_and_heal(messages)
    assert healings == []
    assert all(h is m for h, m in zip(healed, messages, strict=True))


def test_an_unanswered_call_gets_an_explicit_no_result_answer_right_after_it() -> None:
    healed, healings = validate_and_heal([user("u"), calls("a", "b"), answer("a"), user("next")])
    assert shape(healed) == ["user", "calls:a,b", "tool:a", "tool:b", "user"]
    assert healed[3].content == NO_RESULT
    assert kinds(healings) == ["missing_answer_added"]
    assert healings[0].call_id == "b" and healings[0].index is None


def test_an_orphan_answer_is_dropped() -> None:
    healed, healings = validate_and_heal([user("u"), answer("ghost"), said("hi")])
    assert shape(healed) == ["user", "assistant"]
    assert healings == [
        Healing(
            kind="orphan_answer_dropped",
            index=1,
            call_id="ghost",
            detail="tool message answers no earlier call",
        )
    ]


def test_a_second_answer_to_one_call_is_dropped_and_the_first_kept() -> None:
    messages = [user("u"), calls("a"), answer("a", "first"), answer("a", "second")]
    healed, healings = validate_and_heal(messages)
    assert [m.content for m in healed if m.role == "tool"] == ["first"]
    assert kinds(healings) == ["duplicate_answer_dropped"]


def test_a_late_answer_moves_up_to_its_call_instead_of_being_lost() -> None:
    messages = [user("u"), calls("a", "b"), answer("a"), user("meanwhile"), answer("b", "late")]
    healed, healings = validate_and_heal(messages)
    assert shape(healed) == ["user", "calls:a,b", "tool:a", "tool:b", "user"]
    assert healed[3].content == "late"
    assert kinds(healings) == ["answer_moved"]


def test_answers_are_put_in_call_order() -> None:
    messages = [user("u"), calls("a", "b"), answer("b"), answer("a")]
    healed, healings = validate_and_heal(messages)
    assert shape(healed) == ["user", "calls:a,b", "tool:a", "tool:b"]
    assert kinds(healings) == ["answers_reordered"]


def test_an_answer_pairs_with_the_latest_call_of_its_id_when_a_provider_reuses_ids() -> None:
    # Providers that number calls per turn send `call_0` every turn.
    messages = [
        user("u"),
        calls("call_0"),
        answer("call_0", "turn 1"),
        calls("call_0"),
        answer("call_0", "turn 2"),
    ]
    healed, healings = validate_and_heal(messages)
    assert kinds(healings) == ["call_id_duplicate"]
    first, second = healed[1].tool_calls[0].id, healed[3].tool_calls[0].id
    assert first == "call_0" and second != first
    assert (healed[2].tool_call_id, healed[2].content) == (first, "turn 1")
    assert (healed[4].tool_call_id, healed[4].content) == (second, "turn 2")


def test_two_calls_sharing_an_id_in_one_message_keep_their_answers_in_order() -> None:
    messages = [user("u"), calls("x", "x"), answer("x", "one"), answer("x", "two")]
    healed, healings = validate_and_heal(messages)
    ids = [c.id for c in healed[1].tool_calls]
    assert len(set(ids)) == 2
    assert [(m.tool_call_id, m.content) for m in healed[2:]] == [(ids[0], "one"), (ids[1], "two")]
    assert kinds(healings) == ["call_id_duplicate"]


# -- ids -----------------------------------------------------------------------------


def test_a_blank_id_is_replaced_on_the_call_and_its_answer() -> None:
    healed, healings = validate_and_heal([user("u"), calls(" "), answer(None, "r")])
    new_id = healed[1].tool_calls[0].id
    assert tool_call_id_ok(new_id) and healed[2].tool_call_id == new_id
    assert kinds(healings) == ["call_id_blank"]


def test_an_id_over_forty_characters_or_with_odd_characters_is_replaced() -> None:
    long_id, odd = "call_" + "x" * 40, "call.with:dots"
    healed, healings = validate_and_heal(
        [user("u"), calls(long_id, odd), answer(long_id), answer(odd)]
    )
    ids = [c.id for c in healed[1].tool_calls]
    assert all(tool_call_id_ok(i) for i in ids) and len(set(ids)) == 2
    assert [m.tool_call_id for m in healed[2:]] == ids
    assert kinds(healings) == ["call_id_format", "call_id_format"]


def test_a_minted_id_never_takes_an_id_a_later_call_already_uses() -> None:
    messages = [user("u"), calls("c"), answer("c"), calls("c"), answer("c"), calls("c_2")]
    healed, _ = validate_and_heal([*messages, answer("c_2")])
    ids = [c.id for m in healed for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 3
    assert ids[2] == "c_2"  # the later call keeps its own id


def test_mistral_ids_are_nine_alphanumerics_and_the_same_on_every_healing() -> None:
    messages = [user("u"), calls("call_abc123"), answer("call_abc123")]
    first, _ = validate_and_heal(messages, "mistral")
    again, _ = validate_and_heal(messages, "mistral")
    assert tool_call_id_ok(first[2].tool_call_id, "mistral")
    assert first == again  # deterministic: workflow code runs this


# -- content -------------------------------------------------------------------------


def test_an_empty_assistant_message_is_removed_and_blank_text_beside_calls_is_nulled() -> None:
    healed, healings = validate_and_heal(
        [user("u"), said(""), calls("a", text="  "), answer("a"), said(None)]
    )
    assert shape(healed) == ["user", "calls:a", "tool:a"]
    assert healed[1].content is None
    assert Counter(kinds(healings)) == {
        "empty_assistant_removed": 2,
        "assistant_content_cleared": 1,
    }


def test_blank_user_and_system_messages_are_removed_and_empty_tool_results_filled() -> None:
    healed, healings = validate_and_heal(
        [system(" "), user(""), user("u"), calls("a"), answer("a", "")]
    )
    assert shape(healed) == ["user", "calls:a", "tool:a"]
    assert healed[2].content == EMPTY_TOOL_RESULT
    assert Counter(kinds(healings)) == {"empty_message_removed": 2, "empty_tool_result_filled": 1}


# -- profile rules -------------------------------------------------------------------


def test_system_messages_are_merged_in_order_into_one_at_the_start() -> None:
    messages = [user("u"), system("one"), said("a"), system("two"), user("v")]
    healed, healings = validate_and_heal(messages)
    assert shape(healed) == ["system", "user", "assistant", "user"]
    assert healed[0].content == "one\n\ntwo"
    assert kinds(healings) == ["system_merged"]


def test_the_openai_profile_leaves_system_messages_where_they_are() -> None:
    messages = [user("u"), system("one"), said("a")]
    healed, healings = validate_and_heal(messages, "openai")
    assert healed == messages and healings == []


def test_gemini_merges_assistant_text_into_the_call_turn_after_it() -> None:
    messages = [user("u"), said("thinking"), said("more"), calls("a"), answer("a")]
    healed, healings = validate_and_heal(messages, "gemini")
    assert shape(healed) == ["user", "calls:a", "tool:a"]
    assert healed[1].content == "thinking\n\nmore"
    assert kinds(healings) == ["turns_merged", "turns_merged"]


def test_gemini_and_anthropic_put_a_user_turn_before_a_history_that_starts_with_the_model() -> None:
    for profile in ("gemini", "anthropic"):
        healed, healings = validate_and_heal([system("s"), calls("a"), answer("a")], profile)
        assert shape(healed)[:3] == ["system", "user", "calls:a"]
        assert healed[1].content == USER_TURN_PLACEHOLDER
        assert kinds(healings) == ["user_turn_inserted"]


def test_mistral_splits_text_from_calls_and_bridges_a_user_message_after_tool_answers() -> None:
    messages = [user("u"), calls("abcdefghi", text="let me look"), answer("abcdefghi"), user("v")]
    healed, healings = validate_and_heal(messages, "mistral")
    assert shape(healed) == [
        "user",
        "assistant",
        "calls:abcdefghi",
        "tool:abcdefghi",
        "assistant",
        "user",
    ]
    assert healed[1].content == "let me look" and healed[2].content is None
    assert healed[4].content == ASSISTANT_TURN_PLACEHOLDER
    assert kinds(healings) == ["text_split_from_calls", "assistant_turn_inserted"]


def test_merge_consecutive_joins_user_turns_for_templates_that_need_alternation() -> None:
    rules = TranscriptRules(merge_consecutive=True)
    healed, healings = validate_and_heal([user("a"), user("b"), said("x"), said("y")], rules)
    assert [(m.role, m.content) for m in healed] == [("user", "a\n\nb"), ("assistant", "x\n\ny")]
    assert kinds(healings) == ["turns_merged", "turns_merged"]


def test_rules_that_would_undo_each_other_are_refused() -> None:
    with pytest.raises(ValueError, match="contradict"):
        TranscriptRules(text_apart_from_calls=True, call_turn_after_user=True)


def test_arguments_go_on_the_wire_as_one_json_object_and_the_transcript_keeps_them() -> None:
    sent = ['{"city": "Paris"}', "", " ", '{"city": Paris}', "[1, 2]", '{"a": "\\ud83d"}']
    message = ChatMessage(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id=f"c{n}", name="f", arguments=a) for n, a in enumerate(sent)],
    )
    messages = [user("go"), message, *(answer(f"c{n}") for n in range(len(sent)))]
    healed, healings = validate_and_heal(messages)
    assert healings == [] and healed[1] is message  # what the model sent stays recorded
    wire = [c["function"]["arguments"] for c in healed[1].to_wire()["tool_calls"]]
    assert wire == ['{"city": "Paris"}'] + ["{}"] * 5
    assert object_arguments(healed) == []


def test_the_input_is_never_mutated() -> None:
    messages = [user("u"), calls(" ", "a", text=" "), answer("a", ""), system("late")]
    snapshot = [m.model_copy(deep=True) for m in messages]
    for profile in TRANSCRIPT_PROFILES:
        validate_and_heal(messages, profile)
    assert messages == snapshot


# -- every profile against its provider's rules, on arbitrary broken transcripts ------

_IDS = st.sampled_from(["a", "b", "call_0", "", " ", "x" * 45, "has space", "abcdefghi"])
_TEXT = st.sampled_from(["", "  ", "hello", "more text", None])
_ARGUMENTS = st.sampled_from(
    ["{}", '{"a": 1}', "", "  ", '{"city": Paris}', "[1, 2]", '{"a": "\\ud83d"}', '{"a": NaN}']
)


@st.composite
def _message(draw: st.DrawFn) -> ChatMessage:
    role = draw(
        st.sampled_from(["system", "developer", "user", "assistant", "assistant", "tool", "tool"])
    )
    if role == "assistant":
        ids = draw(st.lists(_IDS, max_size=3))
        return ChatMessage(
            role="assistant",
            content=draw(_TEXT),
            tool_calls=[ToolCall(id=i, name="f", arguments=draw(_ARGUMENTS)) for i in ids],
        )
    if role == "tool":
        return ChatMessage(role="tool", content=draw(_TEXT), tool_call_id=draw(_IDS | st.none()))
    return ChatMessage(role=role, content=draw(_TEXT))


_TRANSCRIPTS = st.lists(_message(), max_size=14)


@pytest.mark.parametrize("profile", sorted(TRANSCRIPT_PROFILES))
@settings(max_examples=300, deadline=None)
@given(messages=_TRANSCRIPTS)
def test_every_healed_transcript_passes_its_providers_rules(
    profile: str, messages: list[ChatMessage]
) -> None:
    healed, _ = validate_and_heal(messages, profile)  # type: ignore[arg-type]
    assert CHECKERS[profile](healed) == [], [m.to_wire() for m in healed]


@pytest.mark.parametrize("profile", sorted(TRANSCRIPT_PROFILES))
@settings(max_examples=200, deadline=None)
@given(messages=_TRANSCRIPTS)
def test_healing_a_healed_transcript_changes_nothing(
    profile: str, messages: list[ChatMessage]
) -> None:
    healed, _ = validate_and_heal(messages, profile)  # type: ignore[arg-type]
    again, healings = validate_and_heal(healed, profile)  # type: ignore[arg-type]
    assert healings == [] and again == healed


@settings(max_examples=300, deadline=None)
@given(messages=_TRANSCRIPTS)
def test_nothing_said_is_lost_every_call_survives_and_every_answer_stays_with_its_call(
    messages: list[ChatMessage],
) -> None:
    healed, _ = validate_and_heal(messages)
    # Every non-blank user and assistant text survives (merged system text included).
    everything = "\n".join(m.content or "" for m in healed)
    for m in messages:
        if m.role != "tool" and (m.content or "").strip():
            assert m.content.strip() in everything  # type: ignore[union-attr]
    # Every call survives, in order; each answer kept is one that followed its call.
    original_calls = [(c.name, c.arguments) for m in messages for c in m.tool_calls]
    assert [(c.name, c.arguments) for m in healed for c in m.tool_calls] == original_calls
    answers = {m.tool_call_id: m.content for m in healed if m.role == "tool"}
    assert len(answers) == len(original_calls)
    kept = [
        content for content in answers.values() if content not in (NO_RESULT, EMPTY_TOOL_RESULT)
    ]
    sent = Counter(m.content for m in messages if m.role == "tool")
    assert not Counter(kept) - sent


def test_the_checkers_reject_what_the_healer_fixes() -> None:
    """The property tests prove only what the checkers can fail on."""
    broken = [
        system("s"),
        said("x"),
        calls("a", "a", text=" "),
        answer("zz"),
        user(""),
        system("t"),
    ]
    for profile, checker in CHECKERS.items():
        assert checker(broken), profile
    # What the wire would carry if arguments went out as the model sent them.
    raw = ToolCall(id="a", name="f", arguments='{"city": Paris}')
    malformed = ChatMessage(role="assistant", tool_calls=[raw])
    with patch.object(ToolCall, "to_wire", _verbatim):
        for profile, checker in CHECKERS.items():
            assert checker([user("u"), malformed, answer("a")]), profile
    assert CHECKERS["mistral"]([user("u"), calls("call_1"), answer("call_1")])
    assert CHECKERS["gemini"]([user("u"), said("x"), calls("a"), answer("a")])


def _verbatim(call: ToolCall) -> dict[str, object]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
