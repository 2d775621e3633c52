"""People in the loop: interrupt at each phase, pause and unpause, messages sent mid-run.

Time-skipping test server, real HTTP to the scripted provider, real tool activities. An
interrupt must cancel what is in flight (the model stream's connection is closed; a
tool that heartbeats hears of it) and still answer every call; a tool with a side
effect that was cut off is never reported as "not run".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loop_harness import (
    assert_every_call_answered,
    run_input,
    running_loop,
    tool_messages,
)
from steering_harness import GUARD_S, eventually, people_run, progress, trickle, wait_for_phase
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from steadyloop._history.compaction import CompactionPolicy, CompactionReply, CompactionRequest
from steadyloop._routing.provider_profiles import ProviderProfile
from steadyloop._run.steering import UserMessage
from steadyloop.testing import ScriptedCall, error_response, text_response, tool_calls_response

pytestmark = pytest.mark.slow


def roles(body: object) -> list[str]:
    assert isinstance(body, dict)
    return [m["role"] for m in body["messages"]]


# -- interrupt ---------------------------------------------------------------------------


@pytest.mark.parametrize("deadline_s", [None, 3600.0], ids=["no_deadline", "deadline"])
async def test_interrupt_while_streaming_cancels_the_stream_and_closes_the_connection(
    deadline_s: float | None,
) -> None:
    # With a deadline the model activity is raced against a timer (`before_deadline`);
    # cancelling that race must cancel the activity as well.
    async with running_loop([trickle(400)]) as loop:
        handle = await loop.start(run_input(deadline_s=deadline_s))
        await eventually(lambda: loop.server.exchanges, "the model request arrives")
        await handle.signal("interrupt", "stop streaming")
        result = await handle.result()
        history = await handle.fetch_history()
        exchange = loop.server.exchanges[0]
        await asyncio.wait_for(exchange.ended.wait(), GUARD_S)
    # The run asked for the activity's cancellation (not merely ended around it), and the
    # activity, told at its next heartbeat, closed the connection mid-stream.
    kinds = [event.event_type for event in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
    assert exchange.client_disconnected and not exchange.finished
    assert result.stop_reason == "interrupted"
    assert "stop streaming" in result.detail and "model turn was cancelled" in result.detail
    assert [m.role for m in result.transcript] == ["system", "user"]
    assert len(loop.server.requests) == 1


async def test_interrupt_while_tools_run_answers_each_call_by_what_happened_to_it() -> None:
    # Three calls run (pool of 3) and a fourth waits for a slot. The resumable `ticker`
    # heartbeats, so the cancellation reaches it; `long_hold` (pure) and `long_note`
    # (opaque) never heartbeat, so they run on in the background: the run must not wait
    # for them, and must not tell the model that the opaque one did not happen.
    batch = tool_calls_response(
        ScriptedCall("ticker", {"steps": 1000}, id="t1"),
        ScriptedCall("long_note", {"text": "maybe sent"}, id="o1"),
        ScriptedCall("long_hold", {"label": "x"}, id="p1"),
        ScriptedCall("note", {"text": "queued"}, id="q1"),
    )
    async with running_loop([batch, text_response("never asked")]) as loop:
        handle = await loop.start(people_run(tool_concurrency=3))
        effects = loop.effects
        await eventually(
            lambda: all(effects.started[t] for t in ("ticker", "long_note", "long_hold")),
            "three tools run",
        )
        await handle.signal("interrupt", "enough")
        result = await handle.result()
        notes_at_the_end = list(effects.notes)
        finished_at_the_end = effects.finished["long_hold"]
        await eventually(lambda: effects.cancelled["ticker"], "the ticker hears of the cancel")
        effects.release.set()
        await eventually(lambda: "maybe sent" in effects.notes, "the opaque effect lands")
    assert result.stop_reason == "interrupted"
    assert notes_at_the_end == [] and finished_at_the_end == 0  # the run did not wait
    assert_every_call_answered(result.transcript)
    by_id = {m.tool_call_id: m.content or "" for m in tool_messages(result.transcript)}
    for call_id in ("t1", "o1"):  # a side effect: it may have happened, never "not run"
        assert by_id[call_id].startswith("Interrupted while running"), by_id[call_id]
        assert "may or may not have taken effect" in by_id[call_id]
    assert "no side effect" in by_id["p1"]
    assert by_id["q1"] == "Not run: the run was interrupted: enough."
    assert "queued" not in effects.notes
    assert len(loop.server.requests) == 1


async def test_interrupt_during_a_retry_backoff_stops_without_another_request() -> None:
    overloaded = error_response(503, "overloaded", type="server_error", retry_after=3600)
    async with running_loop([overloaded, text_response("too late")]) as loop:
        handle = await loop.start(run_input())
        await eventually(
            lambda: _events(handle, EventType.EVENT_TYPE_TIMER_STARTED),
            "the run backs off before a retry",
        )
        await handle.signal("interrupt", "not worth the wait")
        result = await handle.result()
        cancelled_timers = await _events(handle, EventType.EVENT_TYPE_TIMER_CANCELED)
    assert result.stop_reason == "interrupted" and "not worth the wait" in result.detail
    assert cancelled_timers == 1  # the backoff was cancelled, not waited out
    assert len(loop.server.requests) == 1


async def _events(handle: WorkflowHandle[Any, Any], kind: EventType.ValueType) -> int:
    history = await handle.fetch_history()
    return sum(1 for event in history.events if event.event_type == kind)


async def test_interrupt_between_turns_while_paused() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1"), pause_s=0.3),
        text_response("3"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        await eventually(lambda: loop.server.exchanges, "turn 1 streams")
        await handle.execute_update("pause", result_type=str)
        await wait_for_phase(handle, "paused")
        await handle.signal("interrupt", "changed my mind")
        result = await handle.result()
    assert result.stop_reason == "interrupted" and result.detail == "changed my mind"
    assert [m.role for m in result.transcript] == ["system", "user", "assistant", "tool"]
    assert tool_messages(result.transcript)[0].content == "3.0"
    assert len(loop.server.requests) == 1


async def test_an_interrupt_during_a_compaction_starts_no_model_turn() -> None:
    # The user's compaction activity holds at the turn-2 boundary until released; the
    # interrupt lands meanwhile, so turn 2's model activity is never even scheduled.
    release = asyncio.Event()
    compactions: list[int] = []

    @activity.defn(name="test.held_summarize")
    async def held_summarize(request: CompactionRequest) -> CompactionReply:
        compactions.append(len(request.messages))
        if len(compactions) > 1:
            await asyncio.wait_for(release.wait(), GUARD_S)
        return CompactionReply(messages=request.messages)

    policy = CompactionPolicy(max_chars=1, keep_recent_turns=0, activity="test.held_summarize")
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1")),
        text_response("3"),
    ]
    async with running_loop(script, [held_summarize]) as loop:
        handle = await loop.start(run_input(compaction=policy))
        await eventually(lambda: len(compactions) == 2, "the turn-2 compaction runs")
        await handle.signal("interrupt", "mid-compaction")
        release.set()
        result = await handle.result()
        model_turns = await _scheduled(handle, "steadyloop.stream_completion")
    assert result.stop_reason == "interrupted"
    assert model_turns == 1 and len(loop.server.requests) == 1
    assert result.stats.model_attempts == 1  # turn 2 never began


async def _scheduled(handle: WorkflowHandle[Any, Any], activity_type: str) -> int:
    history = await handle.fetch_history()
    return sum(
        1
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
        and event.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    )


# -- pause -------------------------------------------------------------------------------


async def test_pause_holds_the_run_at_the_next_boundary_with_nothing_in_flight() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1"), pause_s=0.3),
        text_response("3"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        await eventually(lambda: loop.server.exchanges, "turn 1 streams")
        said = await handle.execute_update("pause", result_type=str)
        again = await handle.execute_update("pause", result_type=str)
        held = await wait_for_phase(handle, "paused")
        description = await handle.describe()
        await asyncio.sleep(0.5)  # a paused run asks nothing more of the provider
        requests_while_paused = len(loop.server.requests)
        resumed = await handle.execute_update("unpause", result_type=str)
        result = await handle.result()
        after = await progress(handle)
    assert said == "pausing at the next turn boundary"
    assert (again, resumed) == ("already paused", "going on")
    assert held.paused and held.turn == 1 and held.tool_calls == 1
    assert not description.raw_description.pending_activities
    assert requests_while_paused == 1
    assert result.stop_reason == "final_answer" and result.final_answer == "3"
    assert len(loop.server.requests) == 2 and not after.paused


async def test_the_deadline_still_fires_while_paused() -> None:
    # Nothing runs while paused, but workflow time does: awaiting the result lets the
    # test server skip an hour to the deadline.
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1"), pause_s=0.3),
        text_response("3"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input(deadline_s=3600))
        await eventually(lambda: loop.server.exchanges, "turn 1 streams")
        await handle.execute_update("pause", result_type=str)
        await wait_for_phase(handle, "paused")
        result = await handle.result()
    assert result.stop_reason == "deadline"
    assert_every_call_answered(result.transcript)
    assert len(loop.server.requests) == 1


# -- messages ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "sent_roles"),
    [
        ("portable", ["system", "user", "assistant", "tool", "user"]),
        # Mistral refuses a user message right after a tool message: healing bridges it.
        ("mistral", ["system", "user", "assistant", "tool", "assistant", "user"]),
    ],
)
async def test_a_message_sent_mid_turn_is_in_the_next_request(
    profile: ProviderProfile, sent_roles: list[str]
) -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1"), pause_s=0.5),
        text_response("ok"),
    ]
    async with running_loop(script) as loop:
        run = run_input().model_copy(update={"provider_profile": profile})
        handle = await loop.start(run)
        await eventually(lambda: loop.server.exchanges, "turn 1 streams")
        queued = await handle.execute_update(
            "send_message", UserMessage(content="also, use base 10"), result_type=str
        )
        result = await handle.result()
        first, second = (r.json for r in loop.server.requests)
    assert queued == "queued for turn 2 (1 waiting)"
    assert roles(first) == ["system", "user"]  # not slipped into the turn in flight
    assert roles(second) == sent_roles
    assert second["messages"][-1]["content"] == "also, use base 10"
    assert result.stop_reason == "final_answer"
    assert [m.role for m in result.transcript][-2:] == ["user", "assistant"]


async def test_a_message_waiting_at_a_hand_over_goes_out_from_the_next_run() -> None:
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1"), pause_s=0.5),
        text_response("ok"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input(continue_as_new_after_turns=1))
        await eventually(lambda: loop.server.exchanges, "turn 1 streams")
        await handle.execute_update("send_message", UserMessage(content="carried over"))
        result = await handle.result()
        history = await handle.fetch_history()  # the last run of the chain
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id  # the message crossed a continue-as-new
    second = loop.server.requests[1].json
    assert second["messages"][-1] == {"role": "user", "content": "carried over"}
    assert result.final_answer == "ok"


async def test_a_message_sent_during_the_final_answer_gets_answered_too() -> None:
    async with running_loop([trickle(20), text_response("second answer")]) as loop:
        handle = await loop.start(run_input())
        await eventually(lambda: loop.server.exchanges, "the answer streams")
        await handle.execute_update("send_message", UserMessage(content="and in French?"))
        result = await handle.result()
    assert result.final_answer == "second answer"
    second = loop.server.requests[1].json
    assert roles(second) == ["system", "user", "assistant", "user"]
    assert second["messages"][-1]["content"] == "and in French?"


async def test_a_message_for_a_stopping_run_is_refused_and_a_blank_one_never_sent() -> None:
    async with running_loop([trickle(400)]) as loop:
        handle = await loop.start(run_input())
        await eventually(lambda: loop.server.exchanges, "the answer streams")
        await handle.signal("interrupt", "stop")
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("send_message", UserMessage(content="too late"))
        result = await handle.result()
    assert "too late" not in [m.content for m in result.transcript]
    with pytest.raises(ValueError, match="blank"):
        UserMessage(content=" \n")


async def test_messages_sent_while_the_run_stops_at_a_limit_are_kept_in_its_transcript() -> None:
    script = [tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1"), pause_s=0.5)]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input(max_turns=1))
        await eventually(lambda: loop.server.exchanges, "turn 1 streams")
        await handle.execute_update("send_message", UserMessage(content="one more thing"))
        result = await handle.result()
    assert result.stop_reason == "max_turns"
    assert result.transcript[-1].role == "user"
    assert result.transcript[-1].content == "one more thing"
