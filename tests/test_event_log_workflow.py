"""One ordered event log per run, read from its output host (time-skipping server, real
HTTP to the scripted provider, real tool activities).

What decides the outcome downstream: a follower reads, with no query of the run, the
text, each tool call once final with the receipt's hash, its one answer (replayed or
not, and why), an approval waiting and the decision, then the stop, in run order; a
follower that reconnects after any event's cursor reads exactly the rest; a workflow id
used again for a new run never shows the old run's text or events.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from loop_harness import run_input, running_loop
from steering_harness import people_run
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from steadyloop._output.forwarding import ForwardingOptions, output_stream_id
from steadyloop._receipts.decision import tool_call_args_hash
from steadyloop._receipts.ledger import Happened
from steadyloop._run.models import AmbiguousCall, ResolveReceipt, RunInput
from steadyloop._run.steering import ApprovalDecision, PendingApproval
from steadyloop.client import StopUnread
from steadyloop.client._event_log import follow_output, latest_cursor, run_events
from steadyloop.events import (
    AmbiguousReceiptEvent,
    ApprovalWaitingEvent,
    DecisionEvent,
    InvalidCursor,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    parse_cursor,
)
from steadyloop.testing import ScriptedCall, text_response, tool_calls_response

pytestmark = pytest.mark.slow

READ_GUARD_S = 30.0


def forwarded(run: RunInput) -> RunInput:
    return run.model_copy(
        update={"forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05)}
    )


async def read_all(
    client: Client, handle: WorkflowHandle[Any, Any], after: str | None = None
) -> list[RunEventItem]:
    assert handle.first_execution_run_id is not None
    events: list[RunEventItem] = []

    async def read() -> None:
        async for event in run_events(
            client, handle.id, handle.first_execution_run_id or "", after, poll_s=0.02
        ):
            events.append(event)

    await asyncio.wait_for(read(), READ_GUARD_S)
    return events


# A call, its answer, the same call again (a timeline line says it is replayed), its answer.
TWO_ROUNDS = ["tool_call", "tool_result", "tool_call", "timeline", "tool_result"]


def assert_resumes_exactly(events: list[RunEventItem], resumed: list[list[RunEventItem]]) -> None:
    """Cursors in order, each once, and a follower back after any of them reads the rest."""
    cursors = [parse_cursor(e.cursor) for e in events]
    assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
    for position, rest in enumerate(resumed):
        assert rest == events[position + 1 :]


def summary(events: list[RunEventItem]) -> list[str]:
    """The events' kinds in order, consecutive text deltas as one."""
    kinds: list[str] = []
    for event in events:
        if kinds and kinds[-1] == event.type == "text_delta":
            continue
        kinds.append(event.type)
    return kinds


async def test_a_follower_reads_text_calls_results_and_the_stop_in_run_order() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c1")),
        # The same call again: answered from its receipt, and the event says why.
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c2")),
        text_response("the sum is five"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(forwarded(run_input("add 2 and 3")))
        result = await handle.result()
        events = await read_all(loop.client, handle)
        # A follower that went away after any event and came back with its cursor.
        resumed = [await read_all(loop.client, handle, event.cursor) for event in events]

    assert result.stop_reason == "final_answer"
    assert summary(events) == [*TWO_ROUNDS, "text_delta", "stop"]
    first_call, second_call = (e for e in events if isinstance(e, ToolCallEvent))
    assert (first_call.call_id, first_call.name, first_call.turn) == ("c1", "add", 1)
    assert first_call.sha == tool_call_args_hash({"a": 2, "b": 3}) == second_call.sha
    first_answer, second_answer = (e for e in events if isinstance(e, ToolResultEvent))
    assert (first_answer.text, first_answer.replayed) == ("5.0", False)
    assert second_answer.replayed and second_answer.text == "5.0"
    assert second_answer.replay_reason is not None and "turn 1" in second_answer.replay_reason
    text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    assert text == "the sum is five" == result.final_answer
    stop = events[-1]
    assert isinstance(stop, StopEvent) and stop.reason == "final_answer"
    assert stop.final_answer == "the sum is five"
    assert_resumes_exactly(events, resumed)


async def test_a_run_not_forwarded_is_followed_from_its_history_in_order() -> None:
    """The log of a run that does not forward is its history (no host): the
    same events in run order, the stop with the answer, and a follower back with any
    event's cursor reads exactly the rest."""
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c1")),
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c2")),
        text_response("the sum is five"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input("add 2 and 3"))
        live = asyncio.ensure_future(read_all(loop.client, handle))
        result = await handle.result()
        events = await live
        resumed = [await read_all(loop.client, handle, event.cursor) for event in events]
        assert handle.first_execution_run_id is not None
        host = loop.client.get_workflow_handle(
            output_stream_id(handle.id, handle.first_execution_run_id)
        )
        with pytest.raises(RPCError):
            await host.describe()  # no host was started

    assert result.stop_reason == "final_answer"
    assert summary(events) == [*TWO_ROUNDS, "stop"]
    stop = events[-1]
    assert isinstance(stop, StopEvent) and stop.final_answer == "the sum is five"
    assert_resumes_exactly(events, resumed)


async def test_a_run_not_forwarded_is_followed_across_continue_as_new() -> None:
    """The history log spans the run's chain: a run that continues as new after each
    turn is read whole, each call once with its one answer, then the stop."""
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 1}, id="c1")),
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 2}, id="c2")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input("add", continue_as_new_after_turns=1))
        result = await handle.result()
        events = await read_all(loop.client, handle)
        first = loop.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
        last = (await first.fetch_history()).events[-1]

    assert result.stop_reason == "final_answer"
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    answered = [(e.type, getattr(e, "call_id", None)) for e in events if e.type != "timeline"]
    assert answered == [
        ("tool_call", "c1"),
        ("tool_result", "c1"),
        ("tool_call", "c2"),
        ("tool_result", "c2"),
        ("stop", None),
    ]


async def test_a_history_log_riding_on_stored_payloads_is_read_through_the_store() -> None:
    """With external payload storage, a model request over the threshold is a reference
    in history: the follower still reads every event, from the small payload riding
    beside it (what it fetches from the store: `test_history_log_reads.py`)."""
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c1")),
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c2")),
        text_response("the sum is five"),
    ]
    async with running_loop(script, blob_threshold=1_000) as loop:
        handle = await loop.start(run_input("add 2 and 3"))
        await handle.result()
        events = await read_all(loop.client, handle)
        history = await handle.fetch_history()

    stored = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.input.payloads[0].metadata.get("encoding")
        != b"json/plain"
    ]
    assert stored  # the case this test is for: requests out of history
    assert summary(events) == [*TWO_ROUNDS, "stop"]


async def test_an_approval_waiting_and_the_decision_are_read_live() -> None:
    script = [
        tool_calls_response(ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x1")),
        text_response("sent"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(people_run())
        assert handle.first_execution_run_id is not None
        seen: list[RunEventItem] = []
        stream = run_events(loop.client, handle.id, handle.first_execution_run_id, poll_s=0.02)

        async def until_waiting() -> ApprovalWaitingEvent:
            async for event in stream:
                seen.append(event)
                if isinstance(event, ApprovalWaitingEvent):
                    return event
            raise AssertionError(f"no approval waiting in {seen}")

        waiting = await asyncio.wait_for(until_waiting(), READ_GUARD_S)
        newest_while_waiting = await latest_cursor(
            loop.client, handle.id, handle.first_execution_run_id
        )
        (pending,) = await handle.query("pending_approvals", result_type=list[PendingApproval])
        await handle.execute_update("approve_call", ApprovalDecision.for_call(pending))
        rest = await read_all(loop.client, handle, waiting.cursor)
        await stream.aclose()
        newest_at_end = await latest_cursor(loop.client, handle.id, handle.first_execution_run_id)

    assert (waiting.call_id, waiting.tool, waiting.turn) == ("x1", "transfer", 1)
    assert waiting.sha == pending.arguments_sha256  # what a person approving names
    decision = next(e for e in rest if isinstance(e, DecisionEvent))
    assert (decision.decision, decision.call_id) == ("approved", "x1")
    answered = next(e for e in rest if isinstance(e, ToolResultEvent))
    assert answered.call_id == "x1" and answered.text == "sent 5 to ana"
    assert rest.index(decision) < rest.index(answered)
    assert isinstance(rest[-1], StopEvent) and rest[-1].reason == "final_answer"
    assert newest_while_waiting == waiting.cursor  # a snapshot taken then follows from here
    assert newest_at_end == rest[-1].cursor  # the ended host answers from its result


async def test_an_ambiguous_receipt_and_its_resolution_are_read_live() -> None:
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s1")),
        text_response("ok"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        assert handle.first_execution_run_id is not None
        seen: list[RunEventItem] = []
        stream = run_events(loop.client, handle.id, handle.first_execution_run_id, poll_s=0.02)

        async def until_ambiguous() -> AmbiguousReceiptEvent:
            async for event in stream:
                seen.append(event)
                if isinstance(event, AmbiguousReceiptEvent):
                    return event
            raise AssertionError(f"no ambiguous receipt in {seen}")

        waiting = await asyncio.wait_for(until_ambiguous(), READ_GUARD_S)
        (open_call,) = await handle.query("ambiguous_receipts", result_type=list[AmbiguousCall])
        resolution = ResolveReceipt(key=open_call.key, resolution=Happened(result="paid"))
        await handle.execute_update("resolve_receipt", resolution)
        rest = await read_all(loop.client, handle, waiting.cursor)
        await stream.aclose()

    assert (waiting.key, waiting.tool, waiting.call_ids) == (open_call.key, "slow_note", ["s1"])
    assert waiting.attempt == 1 and "opaque" in waiting.reason
    decision = next(e for e in rest if isinstance(e, DecisionEvent))
    assert (decision.decision, decision.key) == ("resolved", open_call.key)
    answered = next(e for e in rest if isinstance(e, ToolResultEvent))
    assert answered.call_id == "s1" and answered.replayed and answered.text == "paid"
    assert rest.index(decision) < rest.index(answered)
    assert isinstance(rest[-1], StopEvent) and rest[-1].reason == "final_answer"


async def test_a_reused_workflow_id_never_shows_the_old_runs_output() -> None:
    """The host and every follower are keyed to the run, not the id."""
    script = [text_response("FIRST alpha"), text_response("SECOND beta")]
    workflow_id = f"reuse-{uuid.uuid4()}"
    async with running_loop(script) as loop:
        first = await loop.start(forwarded(run_input("first")), workflow_id=workflow_id)
        await first.result()
        second = await loop.start(forwarded(run_input("second")), workflow_id=workflow_id)
        followed = [d.text async for d in follow_output(loop.client, workflow_id, poll_s=0.02)]
        await second.result()
        first_events = await read_all(loop.client, first)
        second_events = await read_all(loop.client, second)

    assert first.first_execution_run_id != second.first_execution_run_id
    assert "".join(followed) == "SECOND beta"
    shown = [
        "".join(e.text for e in log if isinstance(e, TextDeltaEvent))
        for log in (first_events, second_events)
    ]
    assert shown == ["FIRST alpha", "SECOND beta"]


async def test_a_cursor_not_written_by_the_library_is_refused_by_name() -> None:
    async with running_loop([text_response("hi")]) as loop:
        handle = await loop.start(forwarded(run_input("hi")))
        await handle.result()
        for garbage in ["", "0", "12-34", "000000-00000000000x", "000000-000000000001\n"]:
            with pytest.raises(InvalidCursor, match="invalid event cursor"):
                await read_all(loop.client, handle, garbage)
        with pytest.raises(InvalidCursor, match="past the host"):
            await read_all(loop.client, handle, "000009-000000000001")


async def test_a_log_in_history_whose_result_left_the_stop_out_raises_naming_why() -> None:
    """A run not forwarded keeps its last events (the stop among them) on its result; a
    result that must leave them out to fit one payload (no blob storage, a 1.2 MB answer
    carried by the transcript and again by the stop) leaves a follower no stop to read:
    it raises `StopUnread` saying so, never ends as if the log were whole."""
    big = "x" * 1_200_000
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="c1")),
        text_response(big),
    ]
    async with running_loop(script, blob_storage=False) as loop:
        handle = await loop.start(run_input("add"))
        result = await handle.result()
        assert handle.first_execution_run_id is not None
        read: list[RunEventItem] = []
        with pytest.raises(StopUnread, match="left its last events out") as raised:
            async for event in run_events(
                loop.client, handle.id, handle.first_execution_run_id, poll_s=0.02
            ):
                read.append(event)
    assert result.final_answer == big and result.log_events == []
    assert read and not any(isinstance(event, StopEvent) for event in read)
    assert raised.value.cursor == read[-1].cursor and "handle.result()" in str(raised.value)
