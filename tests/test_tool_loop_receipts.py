"""Receipts in the loop: a repeated call replays its answer instead of repeating the effect.

Time-skipping test server, real HTTP to the scripted provider. Each test counts the side
effects the tools performed and asserts the exact number.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from loop_harness import assert_every_call_answered, run_input, running_loop, tool_messages
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from steadyloop._chat import ChatMessage
from steadyloop._receipts.decision import receipt_key
from steadyloop._receipts.ledger import (
    AmbiguityResolution,
    DidNotHappen,
    GiveUp,
    Happened,
    PackedLedger,
    ReceiptLedger,
)
from steadyloop._run.models import (
    AmbiguousCall,
    CarriedState,
    ResolveReceipt,
    RunProgress,
    RunStats,
)
from steadyloop.client import RunHandle
from steadyloop.events import DecisionEvent, TimelineEntryEvent
from steadyloop.testing import (
    ScriptedCall,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


async def test_a_call_asked_again_next_turn_replays_instead_of_repeating_the_effect() -> None:
    # The spelling differs: identity is the parsed arguments, not their text.
    script = [
        tool_calls_response(ScriptedCall("note", '{"text": "ship it"}', id="n1")),
        tool_calls_response(ScriptedCall("note", '{ "text":"ship\\u0020it" }', id="n2")),
        text_response("noted"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        progress = await handle.query("progress", result_type=RunProgress)
        notes = list(loop.effects.notes)
    assert notes == ["ship it"]
    first, second = tool_messages(result.transcript)
    assert (first.tool_call_id, second.tool_call_id) == ("n1", "n2")
    assert first.content == second.content == "noted 'ship it'"
    assert result.stats.tool_replays == 1
    assert progress.receipts == 1 and progress.receipts_bytes > 0


async def test_the_same_call_twice_in_one_batch_runs_once_and_is_answered_twice() -> None:
    script = [
        tool_calls_response(
            ScriptedCall("note", {"text": "once"}, id="a"),
            ScriptedCall("note", {"text": "other"}, id="b"),
            ScriptedCall("note", {"text": "once"}, id="c"),
        ),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        result = await handle.result()
        history = await handle.fetch_history()
        notes = sorted(loop.effects.notes)
    assert notes == ["once", "other"]
    # The repeat waited for the first call of its batch, not for a lease to run out.
    assert not [e for e in history.events if e.HasField("timer_started_event_attributes")]
    assert_every_call_answered(result.transcript)
    by_id = {m.tool_call_id: m.content for m in tool_messages(result.transcript)}
    assert by_id == {"a": "noted 'once'", "b": "noted 'other'", "c": "noted 'once'"}


async def test_a_tool_error_the_model_saw_is_replayed_not_rerun() -> None:
    script = [
        tool_calls_response(ScriptedCall("boom", {"reason": "disk full"}, id="b1")),
        tool_calls_response(ScriptedCall("boom", {"reason": "disk full"}, id="b2")),
        text_response("gave up"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        started = loop.effects.started["boom"]
    assert started == 1
    first, second = tool_messages(result.transcript)
    assert first.content == second.content and "disk full" in (first.content or "")


async def wait_for_ambiguous(handle: WorkflowHandle[Any, Any]) -> list[AmbiguousCall]:
    for _ in range(200):
        open_calls: list[AmbiguousCall] = await handle.query(
            "ambiguous_receipts", result_type=list[AmbiguousCall]
        )
        if open_calls:
            return open_calls
        await asyncio.sleep(0.05)
    raise AssertionError("no call became ambiguous")


@pytest.mark.parametrize(
    ("resolutions", "answer_text", "runs", "said"),
    [
        (
            [Happened(result="paid: ref 42")],
            "paid: ref 42",
            1,
            ["replayed, not run: a person resolved an earlier attempt as done"],
        ),
        (
            [GiveUp(note="checked by hand")],
            "abandoned",
            1,
            ["given up by a person after attempt 1, not run: checked by hand"],
        ),
        # "It did not happen, run it": a second attempt, lost again, then given up.
        (
            [DidNotHappen(), GiveUp()],
            "abandoned",
            2,
            [
                "a person resolved attempt 1 as not done: it runs again",
                "given up by a person after attempt 2, not run",
            ],
        ),
    ],
)
async def test_an_opaque_call_lost_mid_attempt_is_suspended_until_a_person_resolves_it(
    resolutions: list[AmbiguityResolution], answer_text: str, runs: int, said: list[str]
) -> None:
    # The attempt times out with its outcome unknown (it finishes later, in the
    # background). The call waits out its lease in workflow time, then is suspended as
    # ambiguous: never run again unless a person says it did not happen.
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s1")),
        text_response("ok"),
    ]
    seen: list[AmbiguousCall] = []
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        for resolution in resolutions:
            (suspended,) = await wait_for_ambiguous(handle)
            seen.append(suspended)
            progress = await handle.query("progress", result_type=RunProgress)
            assert progress.ambiguous == 1 and progress.phase == "awaiting a person"
            update = ResolveReceipt(key=suspended.key, resolution=resolution)
            applied = await handle.execute_update("resolve_receipt", update, result_type=str)
            assert resolution.kind in applied
        result = await handle.result()
        started = loop.effects.started["slow_note"]
        log = [e async for e in RunHandle(loop.client, handle.id).events()]
    assert started == runs
    assert [(c.tool, c.arguments, c.call_ids, c.attempt) for c in seen] == [
        ("slow_note", {"text": "pay invoice"}, ["s1"], attempt) for attempt in range(1, runs + 1)
    ]
    assert all("opaque" in c.reason for c in seen)
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    (only,) = tool_messages(result.transcript)
    assert answer_text in (only.content or "")
    # What the person decided is on the log, for the call's answer (`show` prints it); a
    # give-up is not a replay of anything. A resolution naming its kind alone says
    # nothing more (a `happened` answer's replay says it).
    notes = [
        e.detail if isinstance(e, DecisionEvent) else e.text
        for e in log
        if (isinstance(e, DecisionEvent) and e.detail not in ("happened", "did_not_happen"))
        or (isinstance(e, TimelineEntryEvent) and e.call_id == "s1" and e.kind == "replay")
    ]
    assert notes == said
    assert result.stats.tool_replays == (1 if isinstance(resolutions[0], Happened) else 0)


async def test_a_lost_call_asked_again_after_resolution_replays() -> None:
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "x"}, id="s1")),
        tool_calls_response(ScriptedCall("slow_note", {"text": "x"}, id="s2")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        (suspended,) = await wait_for_ambiguous(handle)
        update = ResolveReceipt(key=suspended.key, resolution=Happened(result="written"))
        await handle.execute_update("resolve_receipt", update)
        result = await handle.result()
        started = loop.effects.started["slow_note"]
    assert started == 1
    assert [m.content for m in tool_messages(result.transcript)] == ["written", "written"]


async def test_resolving_an_unknown_key_is_refused_and_changes_nothing() -> None:
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "x"}, id="s1")),
        text_response("stopped"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        (suspended,) = await wait_for_ambiguous(handle)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(
                "resolve_receipt", ResolveReceipt(key="nope", resolution=DidNotHappen())
            )
        still_open = await handle.query("ambiguous_receipts", result_type=list[AmbiguousCall])
        await handle.execute_update(
            "resolve_receipt", ResolveReceipt(key=suspended.key, resolution=GiveUp())
        )
        await handle.result()
    assert [c.key for c in still_open] == [suspended.key]


async def test_different_arguments_are_different_calls() -> None:
    script = [
        tool_calls_response(ScriptedCall("note", {"text": "a"}, id="x")),
        tool_calls_response(ScriptedCall("note", {"text": "b"}, id="y")),
        text_response("two notes"),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
        notes = list(loop.effects.notes)
    assert notes == ["a", "b"]
    assert result.stats.tool_replays == 0


async def test_receipts_transcript_and_stats_survive_continue_as_new() -> None:
    script = [
        tool_calls_response(ScriptedCall("note", {"text": "carried"}, id="n1")),
        tool_calls_response(ScriptedCall("note", {"text": "carried"}, id="n2")),
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="a1")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input(continue_as_new_after_turns=1))
        result = await handle.result()
        history = await handle.fetch_history()  # the last run of the chain
        notes = list(loop.effects.notes)
        fourth_request = loop.server.requests[3].json
    assert notes == ["carried"]
    assert result.stop_reason == "final_answer"
    assert result.stats.turns == 4 and result.stats.tool_calls == 3
    assert result.stats.tool_replays == 1
    assert_every_call_answered(result.transcript)
    assert [m.content for m in tool_messages(result.transcript)] == [
        "noted 'carried'",
        "noted 'carried'",
        "3.0",
    ]
    # Three hand-overs: the last run started from carried state, not from the prompt.
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id
    assert isinstance(fourth_request, dict)
    assert [m["role"] for m in fourth_request["messages"]].count("tool") == 3


async def test_a_suspended_call_holds_no_pool_slot_so_the_rest_of_its_batch_runs() -> None:
    script = [
        tool_calls_response(
            ScriptedCall("slow_note", {"text": "unknown outcome"}, id="s1"),
            ScriptedCall("note", {"text": "runs meanwhile"}, id="n1"),
        ),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input(tool_concurrency=1))
        (suspended,) = await wait_for_ambiguous(handle)
        notes_while_suspended = list(loop.effects.notes)
        update = ResolveReceipt(key=suspended.key, resolution=GiveUp())
        await handle.execute_update("resolve_receipt", update)
        result = await handle.result()
    assert "runs meanwhile" in notes_while_suspended
    assert_every_call_answered(result.transcript)


async def test_a_call_the_last_execution_left_running_is_ambiguous_at_once_with_no_timer() -> None:
    """Continued as new with an opaque call's receipt still running (its lease far off):
    the attempt can never report to this execution, so the call is listed ambiguous from
    the start and, asked again, waits for a person, not for a lease timer."""
    workflow_id = "carried-running-receipt"
    key = receipt_key("default", workflow_id, "note", {"text": "x"})
    ledger = ReceiptLedger()
    assert ledger.claim(key, 1, datetime(2999, 1, 1, tzinfo=UTC)).applied
    start = run_input("note x")
    carried = CarriedState(
        transcript=[
            ChatMessage(role="system", content="You are a test agent."),
            ChatMessage(role="user", content="note x"),
        ],
        packed_receipts=PackedLedger.pack(ledger, []),
        stats=RunStats(),
        turn=1,
    )
    script = [
        tool_calls_response(ScriptedCall("note", {"text": "x"}, id="n1")),
        text_response("left alone"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(start.model_copy(update={"carried": carried}), workflow_id)
        listed = await wait_for_ambiguous(handle)
        await handle.execute_update(
            "resolve_receipt", ResolveReceipt(key=key.text, resolution=GiveUp())
        )
        result = await handle.result()
        history = await handle.fetch_history()
        notes = list(loop.effects.notes)
    assert [c.key for c in listed] == [key.text]
    assert notes == []  # never run again
    assert not [e for e in history.events if e.HasField("timer_started_event_attributes")]
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
