"""`EventPrinter`: a run's event log as the lines `steadyloop run` and `show` print, with
no server. What it must get right: a call's notes (a replay and why, a person's decision
first) land on its answer's line, so a replayed answer never reads as a call that ran;
a waiting call names the command that decides it, with the arguments it was asked with;
notes whose answer never came are still printed; the status says what waits."""

from __future__ import annotations

from steadyloop._cli.progress import EventPrinter
from steadyloop.events import (
    AmbiguousReceiptEvent,
    ApprovalWaitingEvent,
    DecisionEvent,
    TextDeltaEvent,
    TimelineEntryEvent,
    ToolCallEvent,
    ToolResultEvent,
)


def call(call_id: str, arguments: str = '{"a":2,"b":3}', turn: int = 1) -> ToolCallEvent:
    return ToolCallEvent(turn=turn, call_id=call_id, name="add", arguments=arguments, sha="ab")


def result(call_id: str, text: str = "5", turn: int = 1) -> ToolResultEvent:
    return ToolResultEvent(turn=turn, call_id=call_id, name="add", text=text)


def note(seq: int, text: str, call_id: str | None, phase: str = "tools") -> TimelineEntryEvent:
    return TimelineEntryEvent.model_validate(
        {"seq": seq, "turn": 1, "phase": phase, "kind": "replay", "text": text, "call_id": call_id}
    )


def test_a_replay_is_said_on_its_answer_and_a_decision_comes_first() -> None:
    printer = EventPrinter("run-1")
    lines = [
        *printer.lines(TextDeltaEvent(turn=1, attempt=1, text="Adding.")),
        *printer.lines(call("a")),
        *printer.lines(note(1, "replayed, not run: same call twice", "a")),
        *printer.lines(DecisionEvent(turn=1, decision="approved", call_id="a")),
        *printer.lines(result("a")),
    ]
    assert lines == [
        'turn 1  -> add {"a":2,"b":3}',
        "turn 1  <- add (approved by a person; replayed, not run: same call twice): 5",
    ]


def test_a_rejection_says_its_reason_and_a_waiting_call_names_its_command() -> None:
    printer = EventPrinter("run-1")
    printer.lines(call("a"))
    waiting = printer.lines(ApprovalWaitingEvent(turn=1, call_id="a", tool="add", sha="ab"))
    assert waiting == [
        'turn 1  ? add {"a":2,"b":3} waits for approval: steadyloop approve run-1 a '
        "[--reject REASON]"
    ]
    assert "1 awaiting approval" in printer.status()
    printer.lines(DecisionEvent(turn=1, decision="rejected", call_id="a", detail="too much"))
    assert "awaiting approval" not in printer.status()
    assert printer.lines(result("a", "rejected")) == [
        "turn 1  <- add (rejected by a person: too much): rejected"
    ]


def test_an_ended_run_offers_no_command_for_what_waited() -> None:
    printer = EventPrinter("run-1", steering=False)
    printer.lines(call("a"))
    assert printer.lines(ApprovalWaitingEvent(turn=1, call_id="a", tool="add", sha="ab")) == []


def test_model_events_print_at_once() -> None:
    printer = EventPrinter("run-1")
    assert printer.lines(note(1, "attempt 1 failed", None, phase="model")) == [
        "turn 1  ! attempt 1 failed"
    ]
    assert printer.lines(note(2, "breaker opened", None, phase="model")) == [
        "turn 1  ! breaker opened"
    ]


def test_a_resolution_lands_on_the_calls_of_its_receipt_and_unanswered_notes_flush() -> None:
    printer = EventPrinter("run-1")
    printer.lines(call("a"))
    printer.lines(
        AmbiguousReceiptEvent(
            turn=1, key="k1", tool="add", attempt=1, reason="lost", call_ids=["a"]
        )
    )
    assert "1 ambiguous call awaiting a person: steadyloop receipts run-1" in printer.status()
    printer.lines(
        DecisionEvent(turn=1, decision="resolved", key="k1", detail="given up by a person")
    )
    assert "ambiguous" not in printer.status()
    printer.lines(DecisionEvent(turn=1, decision="resolved", key="k1", detail="happened"))
    printer.lines(note(3, "timed out after 5 s", "b"))  # a call whose answer never comes
    assert printer.lines(result("a", "given up")) == [
        "turn 1  <- add (given up by a person): given up"
    ]
    assert printer.flush() == ["turn 1  ! timed out after 5 s"]
    assert printer.flush() == []
