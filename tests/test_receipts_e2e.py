"""Receipts end to end: a real dev server, a scripted provider over HTTP, and workers as
separate processes that a test kills with SIGKILL.

Every tool writes one line per side effect to a file outside every worker
(`receipts_worker_main.py`); each test asserts the exact count. The scenarios:

1. Killed inside a resumable tool after two of three sub-operations: a new worker
   reclaims it as attempt 2 with the recorded progress and performs only the third.
2. Killed inside an opaque tool after its effect: the call is ambiguous, is not
   re-executed, and resolving it ("it happened") continues the run.
3. The model turn after the tools is retried (its worker killed mid-stream) and asks
   for the same calls again: they are replayed.
4. The same call twice in one batch: one effect, two tool messages.
5. Continue-as-new between two asks of the same call: the receipt survives, it replays.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from loop_harness import assert_every_call_answered, tool_messages
from polling import eventually
from receipts_e2e_harness import (
    e2e_run,
    effect_counts,
    pending_heartbeat,
    read_effects,
    stall,
    tool_answers,
)
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from steadyloop._receipts.ledger import Happened
from steadyloop._run.models import AmbiguousCall, ResolveReceipt
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)
from steadyloop.tools._payloads import RUN_TOOL_ACTIVITY, ToolInvocation

pytestmark = pytest.mark.slow

RESULT_GUARD_S = 45.0


async def run_tool_inputs(client: Client, handle: WorkflowHandle[Any, Any]) -> list[ToolInvocation]:
    """The input of every run-tool activity the run scheduled, in order."""
    history = await handle.fetch_history()
    inputs: list[ToolInvocation] = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name != RUN_TOOL_ACTIVITY:
            continue
        (invocation,) = await client.data_converter.decode(
            attributes.input.payloads, [ToolInvocation]
        )
        inputs.append(invocation)
    return inputs


async def events_of(
    handle: WorkflowHandle[Any, Any], kind: EventType.ValueType
) -> list[HistoryEvent]:
    history = await handle.fetch_history()
    return [event for event in history.events if event.event_type == kind]


# -- 1. resumable: killed after two of three, reclaimed, only the third runs -------------


async def test_a_killed_resumable_tool_is_reclaimed_and_performs_only_what_is_left(
    tmp_path: Path,
) -> None:
    recipients = ["ann", "bob", "cy"]

    def model(request: RecordedRequest) -> ScriptedResponse:
        answers = tool_answers(request)
        if not answers:
            return tool_calls_response(ScriptedCall("deliver", {"recipients": recipients}, id="d1"))
        return text_response(f"done: {answers[-1]['content']}")

    async with e2e_run(model, tmp_path) as e2e:
        first = await e2e.start_worker("deliver:2")
        handle = await e2e.start()

        # Kill only once the server holds both sub-operations as the attempt's last
        # heartbeat: the SDK throttles heartbeats, so "recorded in the tool" and "known
        # to Temporal" are different moments, and the property is about the second.
        async def two_on_the_server() -> list[Any] | None:
            trail = await pending_heartbeat(e2e.client, handle, RUN_TOOL_ACTIVITY)
            return trail if trail == ["ann", "bob"] else None

        await eventually(two_on_the_server, timeout_s=15, what="two recorded deliveries")
        assert "HUNG deliver" in first.lines
        await first.kill()
        assert effect_counts(e2e.effects, "deliver") == Counter({"ann": 1, "bob": 1})

        second = await e2e.start_worker()
        result = await handle.result(rpc_timeout=None)
        inputs = await run_tool_inputs(e2e.client, handle)
        timed_out = await events_of(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)

    # Exactly three deliveries, each once: two by the killed attempt, one by the reclaim.
    effects = read_effects(e2e.effects)
    assert effect_counts(e2e.effects, "deliver") == Counter({"ann": 1, "bob": 1, "cy": 1})
    assert [(e.item, e.attempt, e.pid) for e in effects] == [
        ("ann", 1, first.pid),
        ("bob", 1, first.pid),
        ("cy", 2, second.pid),
    ]
    # Temporal declared attempt 1 lost by its heartbeat timeout, with the trail attached.
    (lost,) = timed_out
    failure = lost.activity_task_timed_out_event_attributes.failure
    assert failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
    # The workflow reclaimed it as attempt 2 with the recorded progress.
    assert [(i.attempt, i.reclaimed, i.previous_progress) for i in inputs] == [
        (1, False, []),
        (2, True, ["ann", "bob"]),
    ]
    assert len({i.idempotency_key for i in inputs}) == 1
    (message,) = tool_messages(result.transcript)
    assert message.content == "delivered to ['cy'] on attempt 2; 2 done before"
    assert result.stop_reason == "final_answer"
    assert result.final_answer == f"done: {message.content}"


# -- 2. opaque: killed after its effect, ambiguous, resolved by a person ---------------------


async def test_a_killed_opaque_tool_is_ambiguous_not_rerun_and_resolving_it_continues(
    tmp_path: Path,
) -> None:
    arguments = {"account": "acct-7", "cents": 500}
    confirmed = "charged 500 to acct-7 (confirmed with the bank by an operator)"

    def model(request: RecordedRequest) -> ScriptedResponse:
        answers = tool_answers(request)
        if not answers:
            return tool_calls_response(ScriptedCall("charge", arguments, id="c1"))
        if "timed out" in answers[-1]["content"]:  # if the loop ever answers it as lost
            return tool_calls_response(ScriptedCall("charge", arguments, id=f"c{len(answers) + 1}"))
        return text_response(f"done: {answers[-1]['content']}")

    async with e2e_run(model, tmp_path) as e2e:
        first = await e2e.start_worker("charge")
        handle = await e2e.start()

        async def charged_once() -> bool | None:
            return True if "HUNG charge" in first.lines else None

        await eventually(charged_once, timeout_s=15, what="the charge")
        await first.kill()
        assert effect_counts(e2e.effects, "charge") == Counter({"acct-7:500": 1})
        await e2e.start_worker()

        async def suspended() -> list[AmbiguousCall] | None:
            open_calls = await handle.query(ToolLoopWorkflow.ambiguous_receipts)
            return open_calls or None

        (ambiguous,) = await eventually(
            suspended, timeout_s=30, what="the call to be suspended as ambiguous", every_s=0.2
        )
        progress = await handle.query(ToolLoopWorkflow.progress)
        # Suspended, not re-executed: still one charge.
        assert effect_counts(e2e.effects, "charge") == Counter({"acct-7:500": 1})
        assert (ambiguous.tool, ambiguous.arguments) == ("charge", arguments)
        assert (ambiguous.attempt, ambiguous.call_ids) == (1, ["c1"])
        assert "opaque" in ambiguous.reason
        assert progress.ambiguous == 1

        answered = await handle.execute_update(
            ToolLoopWorkflow.resolve_receipt,
            ResolveReceipt(key=ambiguous.key, resolution=Happened(result=confirmed)),
        )
        assert answered.startswith("happened")
        result = await handle.result(rpc_timeout=None)
        still_open = await handle.query(ToolLoopWorkflow.ambiguous_receipts)
        inputs = await run_tool_inputs(e2e.client, handle)

    assert effect_counts(e2e.effects, "charge") == Counter({"acct-7:500": 1})
    assert [i.attempt for i in inputs] == [1]  # never scheduled again
    assert still_open == []
    assert_every_call_answered(result.transcript)
    (message,) = tool_messages(result.transcript)
    assert (message.tool_call_id, message.content) == ("c1", confirmed)
    assert (result.stop_reason, result.final_answer) == ("final_answer", f"done: {confirmed}")


# -- 3. the model turn after the tools is retried: the tools replay ---------------------


async def test_a_retried_model_turn_asking_again_replays_each_effect_exactly_once(
    tmp_path: Path,
) -> None:
    turn_two_requests: list[RecordedRequest] = []

    def model(request: RecordedRequest) -> ScriptedResponse:
        answers = tool_answers(request)
        if not answers:
            return tool_calls_response(
                ScriptedCall("notify", {"text": "a"}, id="n1"),
                ScriptedCall("notify", {"text": "b"}, id="n2"),
            )
        if len(answers) == 2:
            turn_two_requests.append(request)
            if len(turn_two_requests) == 1:
                return stall(30)  # the worker streaming this is killed
            # The retried completion asks for the same calls again (new ids, same args).
            return tool_calls_response(
                ScriptedCall("notify", {"text": "b"}, id="n3"),
                ScriptedCall("notify", '{ "text" : "a" }', id="n4"),
            )
        return text_response("both sent")

    async with e2e_run(model, tmp_path) as e2e:
        first = await e2e.start_worker()
        handle = await e2e.start(model_timeout_s=3)

        async def streaming_turn_two() -> bool | None:
            return True if turn_two_requests else None

        await eventually(streaming_turn_two, timeout_s=15, what="the second model turn")
        assert effect_counts(e2e.effects, "notify") == Counter({"a": 1, "b": 1})
        await first.kill()
        await e2e.start_worker()
        result = await handle.result(rpc_timeout=None)
        inputs = await run_tool_inputs(e2e.client, handle)

    assert effect_counts(e2e.effects, "notify") == Counter({"a": 1, "b": 1})
    assert len(inputs) == 2  # the repeated calls were never scheduled
    assert len(turn_two_requests) == 2  # the turn was retried
    assert (
        json.loads(turn_two_requests[0].body)["messages"]
        == json.loads(turn_two_requests[1].body)["messages"]
    )
    assert_every_call_answered(result.transcript)
    by_id = {m.tool_call_id: m.content for m in tool_messages(result.transcript)}
    assert by_id == {
        "n1": "notified 'a'",
        "n2": "notified 'b'",
        "n3": "notified 'b'",
        "n4": "notified 'a'",
    }
    assert result.stats.tool_replays == 2
    assert result.final_answer == "both sent"


# -- 4. the same call twice in one batch ----------------------------------------------------


async def test_the_same_call_twice_in_one_batch_has_one_effect_and_two_answers(
    tmp_path: Path,
) -> None:
    def model(request: RecordedRequest) -> ScriptedResponse:
        if not tool_answers(request):
            return tool_calls_response(
                ScriptedCall("notify", {"text": "x"}, id="a"),
                ScriptedCall("notify", '{"text":  "\\u0078"}', id="b"),  # same value
            )
        return text_response("notified")

    async with e2e_run(model, tmp_path) as e2e:
        await e2e.start_worker()
        handle = await e2e.start()
        result = await handle.result(rpc_timeout=None)
        inputs = await run_tool_inputs(e2e.client, handle)

    assert effect_counts(e2e.effects, "notify") == Counter({"x": 1})
    assert len(inputs) == 1
    assert_every_call_answered(result.transcript)
    messages = tool_messages(result.transcript)
    assert [(m.tool_call_id, m.content) for m in messages] == [
        ("a", "notified 'x'"),
        ("b", "notified 'x'"),
    ]
    assert result.stats.tool_replays == 1


# -- 5. continue-as-new between two asks of the same call -----------------------------------


async def test_receipts_survive_continue_as_new_and_a_repeated_call_replays(
    tmp_path: Path,
) -> None:
    def model(request: RecordedRequest) -> ScriptedResponse:
        answers = tool_answers(request)
        if len(answers) < 2:
            return tool_calls_response(
                ScriptedCall("notify", {"text": "once"}, id=f"c{len(answers) + 1}")
            )
        return text_response("sent once")

    async with e2e_run(model, tmp_path) as e2e:
        await e2e.start_worker()
        handle = await e2e.start(continue_as_new_after_turns=1)
        result = await handle.result(rpc_timeout=None)
        first_run_id = handle.first_execution_run_id
        assert first_run_id is not None
        first_run = e2e.client.get_workflow_handle(handle.id, run_id=first_run_id)
        continued = await events_of(
            first_run, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        )
        latest = e2e.client.get_workflow_handle(handle.id)
        latest_run_id = (await latest.describe()).run_id
        progress = await latest.query(ToolLoopWorkflow.progress)

    assert effect_counts(e2e.effects, "notify") == Counter({"once": 1})
    assert len(continued) == 1 and latest_run_id != first_run_id
    assert_every_call_answered(result.transcript)
    messages = tool_messages(result.transcript)
    assert [(m.tool_call_id, m.content) for m in messages] == [
        ("c1", "notified 'once'"),
        ("c2", "notified 'once'"),
    ]
    assert result.stats.tool_replays == 1
    assert progress.receipts == 1
