"""What a person's requests and their consequences say to the model: pure, no server."""

from __future__ import annotations

import pytest

from steadyloop._run.steering import (
    MAX_USER_MESSAGE_BYTES,
    UserMessage,
    interrupted_outcome,
    rejected_outcome,
    unapproved_outcome,
)


@pytest.mark.parametrize("effect", ["opaque", "resumable"])
def test_a_call_with_a_side_effect_cut_off_is_never_reported_as_not_run(effect: str) -> None:
    outcome = interrupted_outcome("pay", effect, "stop")  # type: ignore[arg-type]
    assert outcome.status == "tool_error" and outcome.error_type == "Interrupted"
    assert "Not run" not in outcome.content
    assert "may or may not have taken effect" in outcome.content and "(stop)" in outcome.content


def test_a_pure_call_cut_off_says_nothing_needs_undoing() -> None:
    outcome = interrupted_outcome("add", "pure", "stop")
    assert "no side effect" in outcome.content and "may or may not" not in outcome.content


def test_a_rejection_carries_the_reason_or_says_there_was_none() -> None:
    assert rejected_outcome("pay", " too much ").content.endswith("Their reason: too much")
    assert rejected_outcome("pay", "  ").content.endswith("(no reason given)")
    assert rejected_outcome("pay", None).error_type == "Rejected"
    assert unapproved_outcome("pay", "the run's deadline passed").content == (
        "Not run: this call of 'pay' was waiting for a person's approval when the run's "
        "deadline passed."
    )


def test_a_message_must_say_something_and_fit_in_every_later_request() -> None:
    assert UserMessage(content="ok").content == "ok"
    with pytest.raises(ValueError, match="blank"):
        UserMessage(content="\n\t ")
    UserMessage(content="é" * (MAX_USER_MESSAGE_BYTES // 2))  # bytes are counted, not chars
    with pytest.raises(ValueError, match="over the"):
        UserMessage(content="é" * (MAX_USER_MESSAGE_BYTES // 2 + 1))
