"""What a run carries across continue-as-new and `steadyloop resume`.

Time-skipping test server, real HTTP to the scripted provider. Item 9: the receipt ledger
kept a second copy of every tool result beside the transcript and continue-as-new
carried both unchecked, so with payloads inline and 16 KB results the carried state
passed 2 MB near turn 65 and the workflow task failed forever. Item 10: a resumed run
started with no receipts, so a call its predecessor completed ran again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loop_harness import (
    Loop,
    assert_every_call_answered,
    files_run,
    run_input,
    running_loop,
    tool_messages,
)
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._receipts.ledger import GiveUp, Happened, ReceiptLedger
from steadyloop._run.models import (
    AmbiguousCall,
    ResolveReceipt,
    RunResult,
    RunStats,
)
from steadyloop._run.resume import resume_input
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

RESULT_CHARS = 16_000  # under the ledger's 16 KiB bound: every result stored whole


def reads(turns: int) -> list[ScriptedResponse]:
    """One `read_scratch` of a distinct file a turn, then a final answer."""
    script = [
        tool_calls_response(ScriptedCall("read_scratch", {"path": f"f{turn}"}, id=f"r{turn}"))
        for turn in range(turns)
    ]
    return [*script, text_response("read them all")]


def scratch_files(loop: Loop, turns: int, chars: int = RESULT_CHARS) -> None:
    for turn in range(turns):
        loop.effects.files[f"f{turn}"] = f"{turn:05d}" + "x" * (chars - 5)


async def chain_histories(loop: Loop, workflow_id: str, first_run_id: str) -> list[Any]:
    """Every execution's history of a run, first to last, following continue-as-new."""
    histories = []
    run_id: str | None = first_run_id
    while run_id:
        history = await loop.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return histories


def task_failures(histories: list[Any]) -> list[HistoryEvent]:
    return [
        event
        for history in histories
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


def continue_as_new_inputs(histories: list[Any]) -> list[int]:
    """The size of each continue-as-new input, as recorded (inline: no blob storage)."""
    sizes = []
    for history in histories:
        last = history.events[-1]
        if last.HasField("workflow_execution_continued_as_new_event_attributes"):
            attributes = last.workflow_execution_continued_as_new_event_attributes
            sizes.append(sum(p.ByteSize() for p in attributes.input.payloads))
    return sizes


async def test_item_9_a_long_run_with_16kb_results_and_no_blob_storage_keeps_going() -> None:
    # The exact repro: payloads inline, 16 KB tool results, well past turn 65, handing
    # over every 5 turns. Before the fix the carried state passed 2 MB near turn 65 and
    # the run stayed RUNNING, its workflow task failing forever.
    turns = 80
    async with running_loop(reads(turns), blob_storage=False) as loop:
        scratch_files(loop, turns)
        handle = await loop.start(files_run(max_turns=200, continue_as_new_after_turns=5))
        result = await asyncio.wait_for(handle.result(), 90)
        histories = await chain_histories(loop, handle.id, handle.first_execution_run_id or "")

    assert task_failures(histories) == []
    assert result.stop_reason == "final_answer"
    assert result.stats.turns == turns + 1 and result.stats.tool_calls == turns
    assert_every_call_answered(result.transcript)
    assert [len(m.content or "") for m in tool_messages(result.transcript)] == [
        RESULT_CHARS
    ] * turns
    sizes = continue_as_new_inputs(histories)
    assert len(sizes) == sum(result.stats.continued_as_new.values()) >= turns // 5
    assert max(sizes) < MAX_INLINE_PAYLOAD_BYTES
    # Each result is carried once: the last hand-over (at least 75 results in the
    # transcript, 2.4 MB with the ledger's second copies) carries about one copy of each.
    assert sizes[-1] < 1.1 * turns * RESULT_CHARS, sizes[-1]
    # The ledger still holds every result after all those hand-overs: a repeat replays.
    assert result.receipts is not None and len(result.receipts) == turns


async def test_item_9_a_carried_state_that_cannot_fit_stops_with_a_named_reason() -> None:
    # A conversation just under the limit: the first request fits, but with the tool
    # result the turn adds (tools return at most 64 KiB), the state the run would carry
    # to its next execution cannot, whatever the receipts do.
    script = [
        tool_calls_response(ScriptedCall("read_scratch", {"path": "f0"}, id="r0")),
        text_response("never"),
    ]
    async with running_loop(script, blob_storage=False) as loop:
        scratch_files(loop, 1, chars=60_000)
        run = files_run(continue_as_new_after_turns=1)
        big = run.model_copy(update={"prompt": "y" * (MAX_INLINE_PAYLOAD_BYTES - 60_000)})
        handle = await loop.start(big)
        result = await asyncio.wait_for(handle.result(), 120)
        histories = await chain_histories(loop, handle.id, handle.first_execution_run_id or "")
        requests = len(loop.server.requests)

    assert task_failures(histories) == []
    assert len(histories) == 1 and requests == 1
    assert result.stop_reason == "state_too_large"
    assert "over the 1,900,000-byte payload limit" in result.detail
    # The result itself had to fit: without the receipts, and without its oldest messages.
    assert result.receipts is None and "receipts were left out" in result.detail
    assert "oldest message(s) were left out" in result.detail
    assert_every_call_answered(result.transcript)


async def test_item_9_with_external_storage_the_same_state_is_carried_under_its_limit() -> None:
    # The same run with the workers' blob storage on: the worker reports its larger
    # limit, so the state over 2 MB is carried (as a reference) and the run goes on.
    script = [
        tool_calls_response(ScriptedCall("read_scratch", {"path": "f0"}, id="r0")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        scratch_files(loop, 1, chars=60_000)
        run = files_run(continue_as_new_after_turns=1)
        big = run.model_copy(update={"prompt": "y" * (MAX_INLINE_PAYLOAD_BYTES - 60_000)})
        handle = await loop.start(big)
        result = await asyncio.wait_for(handle.result(), 120)
        histories = await chain_histories(loop, handle.id, handle.first_execution_run_id or "")

    assert task_failures(histories) == []
    assert result.stop_reason == "final_answer"
    assert len(histories) == 2 and result.stats.continued_as_new == {"turns": 1}
    assert result.receipts is not None and len(result.receipts) == 1


async def wait_for_ambiguous(handle: Any) -> list[AmbiguousCall]:
    for _ in range(400):
        open_calls: list[AmbiguousCall] = await handle.query(
            "ambiguous_receipts", result_type=list[AmbiguousCall]
        )
        if open_calls:
            return open_calls
        await asyncio.sleep(0.05)
    raise AssertionError("no call became ambiguous")


async def test_item_10_a_resumed_run_replays_what_its_predecessor_completed() -> None:
    # The predecessor performs the opaque effect and stops at max_turns; the resumed
    # run's model asks for the same call: it replays, the effect counter stays 1.
    script = [
        tool_calls_response(ScriptedCall("note", {"text": "pay invoice"}, id="n1")),
        tool_calls_response(ScriptedCall("note", {"text": "pay invoice"}, id="n2")),
        text_response("paid once"),
    ]
    async with running_loop(script) as loop:
        original = run_input(max_turns=1)
        first: RunResult = await loop.run(original)
        assert first.stop_reason == "max_turns"
        again = original.model_copy(update={"limits": run_input().limits})
        resumed = await loop.run(resume_input(again, first))
        notes = list(loop.effects.notes)
    assert notes == ["pay invoice"]
    assert resumed.stop_reason == "final_answer"
    assert resumed.stats.tool_replays == 1
    assert_every_call_answered(resumed.transcript)
    assert [(m.tool_call_id, m.content) for m in tool_messages(resumed.transcript)] == [
        ("n1", "noted 'pay invoice'"),
        ("n2", "noted 'pay invoice'"),
    ]
    # A run resuming the resumed one keeps the first run's key scope.
    assert resumed.receipt_scope == first.receipt_scope


async def test_item_10_an_ambiguous_call_of_the_predecessor_shows_in_the_resumed_run() -> None:
    # The predecessor's opaque call loses its outcome and is suspended as ambiguous;
    # the run is interrupted before anyone resolves it. The resumed run lists it from
    # its start (while its first turn runs another tool, before the model asks again),
    # a person resolves it there, and the model's repeat replays that answer.
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s1")),
        tool_calls_response(ScriptedCall("hold", {"label": "meanwhile"}, id="h1")),
        tool_calls_response(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s2")),
        text_response("ok"),
    ]
    async with running_loop(script) as loop:
        original = run_input()
        handle = await loop.start(original)
        (suspended,) = await wait_for_ambiguous(handle)
        await handle.signal("interrupt", "going home")
        first = await handle.result()
        assert first.stop_reason == "interrupted"
        resumed = await loop.start(resume_input(original, first, prompt="go on"))
        (listed,) = await wait_for_ambiguous(resumed)
        assert (listed.key, listed.tool, listed.arguments, listed.attempt, listed.call_ids) == (
            suspended.key,
            "slow_note",
            {"text": "pay invoice"},
            1,
            [],
        )
        update = ResolveReceipt(key=listed.key, resolution=Happened(result="paid: ref 42"))
        await resumed.execute_update("resolve_receipt", update, result_type=str)
        result = await resumed.result()
        started = loop.effects.started["slow_note"]
        still_open = await resumed.query("ambiguous_receipts", result_type=list[AmbiguousCall])
    assert started == 1
    assert still_open == []
    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    assert tool_messages(result.transcript)[-1].content == "paid: ref 42"
    assert result.stats.tool_replays == 1


async def test_item_10_a_call_interrupted_mid_attempt_is_ambiguous_at_once_after_resume() -> None:
    # The predecessor is interrupted while an opaque call runs (its lease still live).
    # That attempt can never report to the resumed run, so the resumed run does not wait
    # out the lease: the call is listed, resolvable, and not run again.
    script = [
        tool_calls_response(ScriptedCall("long_note", {"text": "wire money"}, id="l1")),
        tool_calls_response(ScriptedCall("long_note", {"text": "wire money"}, id="l2")),
        text_response("ok"),
    ]
    async with running_loop(script) as loop:
        original = run_input().model_copy(update={"tools": ["long_note"]})
        handle = await loop.start(original)
        for _ in range(200):
            if loop.effects.started["long_note"]:
                break
            await asyncio.sleep(0.05)
        await handle.signal("interrupt", "going home")
        first = await handle.result()
        assert first.stop_reason == "interrupted"
        resumed = await loop.start(resume_input(original, first, prompt="go on"))
        (listed,) = await wait_for_ambiguous(resumed)
        assert (listed.tool, listed.attempt) == ("long_note", 1)
        update = ResolveReceipt(key=listed.key, resolution=GiveUp(note="checked the bank"))
        await resumed.execute_update("resolve_receipt", update, result_type=str)
        result = await resumed.result()
        loop.effects.release.set()
        started = loop.effects.started["long_note"]
    assert started == 1
    assert result.stop_reason == "final_answer"
    assert "checked the bank" in (tool_messages(result.transcript)[-1].content or "")


def test_resume_input_carries_the_receipts_and_their_scope() -> None:
    ledger = ReceiptLedger()
    stopped = RunResult(
        final_answer=None,
        stop_reason="max_turns",
        transcript=[],
        stats=RunStats(),
        receipt_scope="first-run",
        receipts=None,
    )
    assert resume_input(run_input(), stopped).inherited is None
    from steadyloop._receipts.ledger import PackedLedger

    packed = PackedLedger.pack(ledger, [])
    carried = resume_input(run_input(), stopped.model_copy(update={"receipts": packed}))
    assert carried.inherited is not None and carried.inherited.scope == "first-run"
