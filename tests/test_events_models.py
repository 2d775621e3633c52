"""The event log's pure parts: the cursor's text and order, the typed events over JSON,
and hostile text made safe (`steadyloop.events`).

What decides the outcome downstream: a cursor read back from its text (an SSE
`Last-Event-ID`) is the same cursor, cursors sort as their text does, and anything this
library did not write is refused by name instead of read as offset 0; every event kind
survives JSON both ways through the one union; text no JSON encoder accepts (a lone
surrogate, NUL) never reaches a publish, and a huge result is cut with a mark.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop._chat import ToolCall
from steadyloop._run.models import AmbiguousCall
from steadyloop._workflows.event_log import EventLog
from steadyloop._workflows.run_events import RunEventNotes
from steadyloop.events import (
    AmbiguousReceiptEvent,
    ApprovalWaitingEvent,
    Cursor,
    CursorExpired,
    DecisionEvent,
    InvalidCursor,
    ReasoningDeltaEvent,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    TimelineEntryEvent,
    ToolCallEvent,
    ToolResultEvent,
    format_cursor,
    parse_cursor,
    parse_event,
)
from steadyloop.events._models import MAX_RESULT_CHARS, bounded
from steadyloop.tools._payloads import LateToolResult, ToolOutcome

EPOCHS = st.integers(0, 999_999)
OFFSETS = st.integers(0, 10**12 - 1)


@given(EPOCHS, OFFSETS)
def test_a_cursor_reads_back_from_its_text(epoch: int, offset: int) -> None:
    cursor = Cursor(epoch, offset)
    text = format_cursor(cursor)
    assert parse_cursor(text) == cursor and str(cursor) == text
    assert not any(c in text for c in ":\r\n \x00")  # safe as an SSE id


@given(EPOCHS, OFFSETS, EPOCHS, OFFSETS)
def test_cursors_sort_as_their_text_does(e1: int, o1: int, e2: int, o2: int) -> None:
    a, b = Cursor(e1, o1), Cursor(e2, o2)
    assert (a < b) == (format_cursor(a) < format_cursor(b))


@pytest.mark.parametrize(
    "garbage",
    ["", "0", "0-0", "000000-00000000000", "-000000-000000000001", "000000_000000000001",
     "000000-000000000001 ", "\ud800", "000000-000000000001\x00", "1e3-1", "x" * 10_000],
)  # fmt: skip
def test_anything_else_is_refused_by_name(garbage: str) -> None:
    with pytest.raises(InvalidCursor, match="invalid event cursor") as raised:
        parse_cursor(garbage)
    assert len(str(raised.value)) < 300  # a 10,000-character id is not echoed whole


def test_a_negative_cursor_cannot_be_made() -> None:
    with pytest.raises(InvalidCursor):
        Cursor(0, -1)


EXAMPLES: list[RunEventItem] = [
    TextDeltaEvent(turn=1, attempt=1, text="hé 日本"),
    ReasoningDeltaEvent(turn=1, attempt=2, text="thinking"),
    ToolCallEvent(turn=1, call_id="c1", name="add", arguments='{"a":1}', sha="ab" * 32),
    ToolResultEvent(turn=1, call_id="c1", name="add", text="2", replayed=True, replay_reason="r"),
    ApprovalWaitingEvent(turn=2, call_id="x1", tool="transfer", sha="cd" * 32),
    AmbiguousReceiptEvent(turn=2, key="k", tool="charge", attempt=1, reason="lost", call_ids=["c"]),
    TimelineEntryEvent(seq=3, turn=2, phase="model", kind="model_retry", text="retried"),
    DecisionEvent(turn=2, decision="approved", call_id="x1"),
    StopEvent(turn=3, reason="output_interrupted", partial="half", shown=True),
]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.type)
def test_every_event_kind_survives_json_through_the_union(event: RunEventItem) -> None:
    stamped = event.model_copy(update={"cursor": "000000-000000000007"})
    wire = stamped.model_dump_json()
    assert json.loads(wire)["type"] == event.type
    assert parse_event(wire) == stamped
    assert parse_event(json.loads(wire)) == stamped


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="type"):
        parse_event('{"type": "nope", "turn": 1}')


def test_text_no_encoder_accepts_is_replaced_before_any_publish() -> None:
    event = ToolResultEvent(turn=1, call_id="c\ud800", name="n", text="a\ud83d\x00b")
    wire = event.model_dump_json()  # would raise for a lone surrogate
    assert "\\u0000" not in wire and parse_event(wire) == event
    assert event.text == "a\ufffd\ufffdb" and event.call_id == "c\ufffd"


def test_a_huge_result_is_cut_with_a_mark() -> None:
    text, cut = bounded("x" * 50_000_000, MAX_RESULT_CHARS)
    assert cut and len(text) == MAX_RESULT_CHARS and text.endswith("...")
    assert bounded("short", MAX_RESULT_CHARS) == ("short", False)


def test_an_expired_cursor_names_the_oldest_held_and_the_snapshot() -> None:
    error = CursorExpired("000000-000000000003", "000000-000000000010")
    assert error.cursor == "000000-000000000003" and error.oldest == "000000-000000000010"
    assert "000000-000000000010" in str(error) and "snapshot" in str(error)
    assert "no event of the run is held" in str(CursorExpired(None, None))


def _noted_receipt(arguments: dict[str, object], late: str) -> AmbiguousReceiptEvent:
    log = EventLog()
    view = AmbiguousCall(
        key="k",
        tool="charge",
        arguments=arguments,
        attempt=1,
        reason="lost",
        call_ids=["c1"],
        lost="ran past its 1 s timeout\ud800",
        late_result=LateToolResult(
            key="k",
            attempt=1,
            call_id="c1",
            outcome=ToolOutcome(status="ok", content=late),
            overrun_s=0.5,
        ),
    )
    RunEventNotes(log).ambiguous(2, view)
    (event,) = log._pending
    assert isinstance(event, AmbiguousReceiptEvent)
    return event


def test_an_ambiguous_receipt_carries_what_resolving_it_needs_hostile_text_replaced() -> None:
    event = _noted_receipt({"to": "ana\ud83d", "n": float("nan")}, "sent\x00" + "x" * 50_000_000)
    wire = event.model_dump_json()  # would raise for a lone surrogate
    assert parse_event(wire) == event
    assert event.arguments == '{"to":"ana\ufffd","n":NaN}' and not event.arguments_truncated
    assert event.lost == "ran past its 1 s timeout\ufffd"
    assert event.late is not None and event.late.returned and event.late.truncated
    assert len(event.late.text) == MAX_RESULT_CHARS and event.late.text.startswith("sent\ufffd")


def test_a_turn_s_text_rides_on_its_first_call_only_bounded() -> None:
    log = EventLog()
    calls = [ToolCall(id=f"c{n}", name="add", arguments="{}") for n in (1, 2)]
    RunEventNotes(log).calls(1, calls, {}, said="Adding\ud800" + "y" * 50_000)
    first, second = log._pending
    assert isinstance(first, ToolCallEvent) and isinstance(second, ToolCallEvent)
    assert first.said is not None and first.said.startswith("Adding\ufffd")
    assert first.said_truncated and len(first.said) == MAX_RESULT_CHARS
    assert second.said is None


@pytest.mark.parametrize("forwarding", [False, True])
@pytest.mark.parametrize("continued", [None, False, True])
def test_where_a_log_is_reads_the_same_from_the_memo_and_from_the_input(
    forwarding: bool, continued: bool | None
) -> None:
    """In history unless the run forwards; a continued execution keeps its predecessor's
    mode. The starters' memo and a follower reading the input apply the loop's one rule."""
    from steadyloop._output.forwarding import ForwardingOptions
    from steadyloop._receipts.ledger import PackedLedger
    from steadyloop._run.models import CarriedState, RunInput, RunStats
    from steadyloop.events._publishing import (
        LOG_MODE_MEMO,
        log_in_history,
        log_mode_memo,
        log_mode_of_input,
    )

    carried = (
        None
        if continued is None
        else CarriedState(
            transcript=[],
            packed_receipts=PackedLedger(),
            stats=RunStats(),
            turn=1,
            log_in_history=continued,
        )
    )
    run = RunInput(
        endpoint="local",
        model="m",
        prompt="hi",
        forwarding=ForwardingOptions(enabled=forwarding),
        carried=carried,
    )
    expected = (not forwarding) if continued is None else continued
    assert log_in_history(forwarding, continued) is expected
    assert log_mode_memo(run) == {LOG_MODE_MEMO: "history" if expected else "host"}
    assert log_mode_of_input(run.model_dump(mode="json")) is expected
    assert log_mode_of_input("not an input") is False
