"""Tools declared `approval=True`: the call waits for a person, the rest of its batch runs,
and an approved call runs under its receipt (once, however often it is asked for).

Time-skipping test server, real HTTP to the scripted provider, real tool activities.
"""

from __future__ import annotations

import pytest
from loop_harness import (
    assert_every_call_answered,
    running_loop,
    tool_messages,
)
from steering_harness import people_run, progress, shown, wait_for_approvals
from temporalio.client import WorkflowUpdateFailedError

from steadyloop._run.steering import ApprovalDecision, PendingApproval
from steadyloop.testing import ScriptedCall, text_response, tool_calls_response
from steadyloop.tools import tool

pytestmark = pytest.mark.slow

TRANSFER = ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x1")


async def test_an_approved_call_runs_once_while_the_rest_of_its_batch_went_on() -> None:
    script = [
        tool_calls_response(TRANSFER, ScriptedCall("note", {"text": "meanwhile"}, id="n1")),
        # Asked again next turn: the receipt replays it, so nobody is asked again.
        tool_calls_response(ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x2")),
        text_response("sent"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(people_run())
        (waiting,) = await wait_for_approvals(handle)
        notes_while_waiting = list(loop.effects.notes)
        waiting_progress = await progress(handle)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("approve_call", ApprovalDecision(call_id="nope"))
        said = await handle.execute_update(
            "approve_call", ApprovalDecision.for_call(waiting), result_type=str
        )
        result = await handle.result()
        after = await handle.query("pending_approvals", result_type=list[PendingApproval])
        printed = await shown(loop.client, handle)
    assert (waiting.call_id, waiting.tool, waiting.arguments, waiting.turn) == (
        "x1",
        "transfer",
        {"amount": 5, "to": "ana"},
        1,
    )
    assert notes_while_waiting == ["meanwhile"]  # the call needing no approval ran
    assert waiting_progress.pending_approvals == 1
    assert said == "approved 'transfer' call 'x1'"
    assert result.stop_reason == "final_answer" and after == []
    assert loop.effects.notes == ["meanwhile", "transfer 5 to ana"]  # once, not twice
    assert_every_call_answered(result.transcript)
    by_id = {m.tool_call_id: m.content for m in tool_messages(result.transcript)}
    assert by_id == {"x1": "sent 5 to ana", "n1": "noted 'meanwhile'", "x2": "sent 5 to ana"}
    assert result.stats.tool_replays == 1
    # `show` of the ended run says who decided: the run's event log kept the decision.
    assert "turn 1  <- transfer (approved by a person): sent 5 to ana" in printed, printed


async def test_a_rejected_call_never_runs_and_the_model_reads_the_reason() -> None:
    async with running_loop([tool_calls_response(TRANSFER), text_response("understood")]) as loop:
        handle = await loop.start(people_run())
        (waiting,) = await wait_for_approvals(handle)
        decision = ApprovalDecision.for_call(
            waiting, approved=False, reason="over this month's budget"
        )
        said = await handle.execute_update("approve_call", decision, result_type=str)
        result = await handle.result()
        second = loop.server.requests[1].json
        printed = await shown(loop.client, handle)
    assert said == "rejected 'transfer' call 'x1'"
    assert loop.effects.notes == []
    (rejection,) = tool_messages(result.transcript)
    assert rejection.content == (
        "Not run: a person rejected this call of 'transfer'. Their reason: over this month's budget"
    )
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "x1",
        "content": rejection.content,
    }
    assert any(
        line.startswith("turn 1  <- transfer (rejected by a person: over this month's budget)")
        for line in printed
    ), printed


async def test_a_decision_is_bound_to_the_call_reviewed_not_to_a_reused_call_id() -> None:
    """llama.cpp-style servers number calls per turn: `call_0` in turn 1 and in turn 2."""
    script = [
        tool_calls_response(ScriptedCall("transfer", {"amount": 100, "to": "acme"}, id="call_0")),
        tool_calls_response(ScriptedCall("transfer", {"amount": 999, "to": "evil"}, id="call_0")),
        text_response("done"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(people_run())
        (reviewed,) = await wait_for_approvals(handle)
        await handle.execute_update("approve_call", ApprovalDecision.for_call(reviewed))
        (now_waiting,) = await wait_for_approvals(handle)
        # The wire id turn 1 used is qualified as turn 2 enters the transcript.
        assert now_waiting.turn == 2 and now_waiting.call_id == f"{reviewed.call_id}_t2"
        # A second person who reviewed turn 1's call approves "call_0" again: no call
        # holds that id now, and the refusal names the one waiting.
        with pytest.raises(WorkflowUpdateFailedError) as gone:
            await handle.execute_update("approve_call", ApprovalDecision.for_call(reviewed))
        # Turn 1's decision under the id that waits now: bound to what was reviewed.
        turn_one = ApprovalDecision.for_call(reviewed).model_copy(
            update={"call_id": now_waiting.call_id}
        )
        with pytest.raises(WorkflowUpdateFailedError) as stale:
            await handle.execute_update("approve_call", turn_one)
        # A decision naming only the call id binds nothing and is refused too.
        with pytest.raises(WorkflowUpdateFailedError) as unbound:
            await handle.execute_update(
                "approve_call", ApprovalDecision(call_id=now_waiting.call_id)
            )
        still = await handle.query("pending_approvals", result_type=list[PendingApproval])
        await handle.signal("interrupt", "checked")
        result = await handle.result()
    assert reviewed.arguments_sha256 != now_waiting.arguments_sha256
    assert len(reviewed.arguments_sha256) == 64
    for refused in (stale, unbound):
        text = str(refused.value.cause)
        assert '{"amount": 999, "to": "evil"} (turn 2' in text, text
    assert "another call than the one waiting" in str(stale.value.cause)
    assert "no call 'call_0' is waiting" in str(gone.value.cause)
    assert "waiting: call_0_t2" in str(gone.value.cause)
    assert "must name the tool, arguments_sha256 and turn" in str(unbound.value.cause)
    assert still == [now_waiting]
    assert loop.effects.notes == ["transfer 100 to acme"]  # the 999 never ran
    assert result.stop_reason == "interrupted"
    # One answer per call (the helper for that refuses ids repeated across turns).
    first, second = tool_messages(result.transcript)
    assert (first.tool_call_id, second.tool_call_id) == ("call_0", "call_0_t2")
    assert first.content == "sent 100 to acme" and "interrupted" in (second.content or "")


async def test_an_interrupt_answers_a_call_still_waiting_for_approval() -> None:
    async with running_loop([tool_calls_response(TRANSFER)]) as loop:
        handle = await loop.start(people_run())
        await wait_for_approvals(handle)
        await handle.signal("interrupt", "going home")
        result = await handle.result()
    assert result.stop_reason == "interrupted" and loop.effects.notes == []
    assert_every_call_answered(result.transcript)
    (answer_,) = tool_messages(result.transcript)
    assert answer_.content == (
        "Not run: this call of 'transfer' was waiting for a person's approval when the run "
        "was interrupted (going home)."
    )


async def test_nobody_deciding_before_the_deadline_stops_the_run_at_it() -> None:
    async with running_loop([tool_calls_response(TRANSFER)]) as loop:
        handle = await loop.start(people_run(deadline_s=3600))
        await wait_for_approvals(handle)
        result = await handle.result()  # workflow time skips to the deadline
    assert result.stop_reason == "deadline" and loop.effects.notes == []
    (answer_,) = tool_messages(result.transcript)
    assert "the run's deadline passed" in (answer_.content or "")


def test_approval_is_declared_on_the_tool_and_described_to_the_workflow() -> None:
    @tool(approval=True)
    async def wire(amount: float) -> str:
        """Wire money."""
        return "wired"

    @tool
    async def look() -> str:
        """Look around."""
        return "nothing"

    assert wire.describe().approval and not look.describe().approval
    with pytest.raises(ValueError, match="approval must be True or False"):
        tool(approval="yes")(look.fn)  # type: ignore[call-overload]
