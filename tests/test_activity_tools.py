"""A user's own `@activity.defn` functions as tools (`steadyloop.tools.activity_as_tool`).

What each test protects: the run schedules the user's activity by its own type (never
`steadyloop.run_tool`), with the arguments typed as the function declares them; the
receipt path holds (a repeated call answers from the receipt, an opaque call gets one
attempt and goes to a person when lost, a failure is the model's to read); a given task
queue reaches another worker; a result nobody can read becomes a marker, never a failed
workflow task; approval works; what cannot work is refused when the tool is declared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from steadyloop._workflows.activity_tools import call_arguments
from steadyloop.testing import AgentEnv, AgentRun, Happened, ScriptedModel, call
from steadyloop.tools import (
    ToolDefinitionError,
    ToolRegistry,
    ToolWithoutDescription,
    activity_as_tool,
    tool,
)
from steadyloop.tools._content import encode_result
from steadyloop.tools._payloads import ActivityParameter, ActivityTarget

RUN_TOOL = "steadyloop.run_tool"


class Order(BaseModel):
    id: str
    email: str


class ChargeReceipt(BaseModel):
    order_id: str
    charged_cents: int


class Ledger:
    """What the activities did, in real time, as the test sees it."""

    def __init__(self) -> None:
        self.charges: list[tuple[Order, int]] = []
        self.attempts: list[int] = []


LEDGER = Ledger()


@activity.defn
async def charge_card(order: Order, amount_cents: int, note: str = "") -> ChargeReceipt:
    """Charge the order's card once.

    More text the model does not need."""
    LEDGER.charges.append((order, amount_cents))
    return ChargeReceipt(order_id=order.id, charged_cents=amount_cents)


@activity.defn(name="slow_charge")
async def slow_charge(amount_cents: int) -> str:
    """Charge a card through a bank that outlives the timeout."""
    LEDGER.attempts.append(activity.info().attempt)
    await asyncio.sleep(1.0)
    return f"charged {amount_cents}"


@activity.defn
async def flaky_lookup(sku: str) -> str:
    """Look up a price; fails on its first two attempts."""
    LEDGER.attempts.append(activity.info().attempt)
    if activity.info().attempt < 3:
        raise ApplicationError(f"price service busy (attempt {activity.info().attempt})")
    return f"{sku}: 700"


@activity.defn
async def declined(amount_cents: int) -> str:
    """Charge a card that is always declined."""
    raise ApplicationError(f"card declined for {amount_cents}", non_retryable=True)


@activity.defn
async def hostile(kind: str) -> Any:
    """Return something hard to read."""
    values: dict[str, Any] = {
        "nan": math.nan,
        "huge_float": 1e300,
        "surrogate": "half a pair: \ud83d",
        "nul": "a\x00b",
        "big": "x" * (3 * 1024 * 1024),
        "bytes": b"\xff\x00",
        # An encoding the run's converter does not know (a worker with its own converter).
        "foreign": RawValue(Payload(metadata={"encoding": b"x-custom"}, data=b"\x00")),
    }
    return values[kind]


def charge_tool(**options: Any) -> Any:
    return activity_as_tool(charge_card, **options)


def scheduled(events: list[Any]) -> list[Any]:
    """The ActivityTaskScheduled attributes of a history, in order."""
    return [
        event.activity_task_scheduled_event_attributes
        for event in events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def history(env: AgentEnv, run: AgentRun) -> list[Any]:
    fetched = await env.client.get_workflow_handle(run.workflow_id).fetch_history()
    return list(fetched.events)


def tool_messages(run: AgentRun) -> dict[str, str]:
    return {m.tool_call_id or "": str(m.content) for m in run.transcript if m.role == "tool"}


@pytest.fixture(autouse=True)
def fresh_ledger() -> None:
    LEDGER.charges.clear()
    LEDGER.attempts.clear()


# -- declaring ---------------------------------------------------------------------------


def test_the_tool_is_named_described_and_shaped_by_the_activity() -> None:
    described = charge_tool().describe()
    assert (described.name, described.description) == (
        "charge_card",
        "Charge the order's card once.",
    )
    properties = described.parameters["properties"]
    assert list(properties) == ["order", "amount_cents", "note"]
    assert properties["order"]["type"] == "object"  # the model parameter, nested
    assert set(properties["order"]["properties"]) == {"id", "email"}
    assert properties["amount_cents"]["type"] == "integer"
    assert described.parameters["required"] == ["order", "amount_cents"]
    target = described.activity
    assert target is not None
    assert (target.activity_type, target.task_queue, target.maximum_attempts) == (
        "charge_card",
        None,
        1,
    )
    assert described.effect == "opaque"
    assert charge_tool().function is charge_card


def test_a_function_that_is_not_an_activity_is_refused_naming_it_and_the_fix() -> None:
    async def refund(amount_cents: int) -> str:
        return "refunded"

    with pytest.raises(ToolDefinitionError, match=r"refund is not a named activity.*@temporalio"):
        activity_as_tool(refund)
    with pytest.raises(ToolDefinitionError, match="not a named activity"):
        activity_as_tool(tool(refund))


def test_an_opaque_tool_with_retries_is_refused_saying_why() -> None:
    retrying = RetryPolicy(maximum_attempts=3)
    with pytest.raises(ToolDefinitionError, match=r"exactly one attempt.*allows 3.*twice"):
        charge_tool(retry_policy=retrying, schedule_to_close_timeout=timedelta(minutes=1))
    with pytest.raises(ToolDefinitionError, match="allows unlimited"):
        charge_tool(retry_policy=RetryPolicy(), schedule_to_close_timeout=timedelta(minutes=1))
    charge_tool(retry_policy=RetryPolicy(maximum_attempts=1))  # one attempt is fine


def test_other_declarations_that_cannot_work_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="needs schedule_to_close_timeout"):
        activity_as_tool(flaky_lookup, effect="pure", retry_policy=RetryPolicy(maximum_attempts=3))
    with pytest.raises(ToolDefinitionError, match=r"heartbeat_timeout.*shorter"):
        charge_tool(heartbeat_timeout=timedelta(seconds=30))
    bouncing = RetryPolicy(maximum_attempts=2, backoff_coefficient=0.5)
    with pytest.raises(ToolDefinitionError, match="backoff_coefficient"):
        activity_as_tool(
            flaky_lookup,
            effect="pure",
            retry_policy=bouncing,
            schedule_to_close_timeout=timedelta(minutes=1),
        )
    with pytest.raises(ToolDefinitionError, match="effect 'risky'"):
        charge_tool(effect="risky")

    @activity.defn(name="orders.charge")
    async def dotted(amount_cents: int) -> str:
        """Charge."""
        return "ok"

    with pytest.raises(ToolDefinitionError, match=r"'orders\.charge' is not a valid tool name"):
        activity_as_tool(dotted)
    renamed = activity_as_tool(dotted, name="charge").activity
    assert renamed is not None and renamed.activity_type == "orders.charge"


def test_an_activity_without_a_docstring_warns_as_a_tool_does() -> None:
    @activity.defn
    async def silent(amount_cents: int) -> str:
        return "ok"

    with pytest.warns(ToolWithoutDescription, match="'silent' has no description"):
        activity_as_tool(silent)


def test_an_activity_registered_as_it_is_names_activity_as_tool() -> None:
    with pytest.raises(TypeError, match=r"activity_as_tool\(fn\)"):
        ToolRegistry([charge_card])  # type: ignore[list-item]


def test_the_registry_lists_the_activities_its_worker_must_register() -> None:
    registry = ToolRegistry(
        [charge_tool(), activity_as_tool(declined, task_queue="bank"), _balance]
    )
    assert registry.activity_functions() == [charge_card]


@tool(effect="pure")
async def _balance() -> int:
    """The balance."""
    return 100


def target(*parameters: ActivityParameter) -> ActivityTarget:
    return ActivityTarget(activity_type="t", start_to_close_s=1, parameters=list(parameters))


def test_a_calls_arguments_go_by_position_with_defaults_and_nulls_read_as_absent() -> None:
    order = ActivityParameter(name="order", required=True, types=["object"])
    amount = ActivityParameter(name="amount", has_default=True, default=5, types=["integer"])
    note = ActivityParameter(name="note", null_is_absent=True, types=["string"])
    tip = ActivityParameter(name="tip", has_default=True, default=0, types=["number"])
    three = target(order, amount, note)
    assert call_arguments(three, {"order": {}}) == [{}, 5]  # note left to the function
    assert call_arguments(three, {"order": {}, "note": None}) == [{}, 5]  # null: absent
    assert call_arguments(three, {"order": {}, "note": "n", "amount": 2}) == [{}, 2, "n"]
    assert call_arguments(target(order, note, tip), {"order": {}, "tip": 1}) == (
        "argument 'note' must be given when 'tip' is"  # positions cannot skip it
    )
    assert call_arguments(target(order, tip), {"order": {}, "tip": 1}) == [{}, 1]  # int: number
    assert call_arguments(three, {"order": {}, "amount": True}) == (
        "argument 'amount' must be integer, not a boolean"
    )
    assert call_arguments(three, {}) == "missing required argument 'order'"
    one_model = ActivityTarget(
        activity_type="t",
        start_to_close_s=1,
        fields=[ActivityParameter(name="memo", null_is_absent=True)],
    )
    assert call_arguments(one_model, {"memo": None, "id": 1}) == [{"id": 1}]


# -- running -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_the_activity_runs_by_its_own_type_typed_and_a_repeat_answers_from_the_receipt() -> (
    None
):
    registry = ToolRegistry([charge_tool(start_to_close_timeout=timedelta(seconds=7))])
    order = {"id": "o-1", "email": "ana@example.com"}
    model = (
        ScriptedModel()
        .calls("charge_card", order=order, amount_cents=500)
        .calls("charge_card", order=order, amount_cents=500)  # the same call: a replay
        .says("charged")
    )
    async with AgentEnv(registry) as env:
        run = await env.run(model, "charge o-1")
        events = await history(env, run)
    assert LEDGER.charges == [(Order(id="o-1", email="ana@example.com"), 500)]
    assert isinstance(LEDGER.charges[0][0], Order)  # arrived as the model, not a dict
    first, second = run.calls_to("charge_card")
    assert json.loads(first.result or "") == {"order_id": "o-1", "charged_cents": 500}
    assert second.result == first.result
    run.assert_every_call_answered()
    types = [attributes.activity_type.name for attributes in scheduled(events)]
    assert RUN_TOOL not in types
    (charge,) = [a for a in scheduled(events) if a.activity_type.name == "charge_card"]
    assert charge.task_queue.name == env.task_queue
    assert charge.start_to_close_timeout.ToSeconds() == 7
    assert charge.retry_policy.maximum_attempts == 1


@pytest.mark.slow
async def test_a_lost_opaque_call_gets_one_attempt_and_a_person_answers_it() -> None:
    lost = activity_as_tool(slow_charge, start_to_close_timeout=timedelta(milliseconds=300))
    async with AgentEnv(ToolRegistry([lost])) as env:
        running = await env.start(
            ScriptedModel().calls("slow_charge", amount_cents=40).says("done"), "charge 40"
        )
        (ambiguous,) = await running.ambiguous()
        await running.resolve(Happened(result="charged 40 (the bank confirms)"))
        run = await running.result()
        events = await history(env, run)
    assert (ambiguous.tool, ambiguous.arguments) == ("slow_charge", {"amount_cents": 40})
    assert LEDGER.attempts == [1]
    assert len([a for a in scheduled(events) if a.activity_type.name == "slow_charge"]) == 1
    assert run.calls_to("slow_charge")[0].result == "charged 40 (the bank confirms)"
    (receipt,) = run.receipts
    assert (receipt.status, receipt.resolution) == ("completed", "happened")


@pytest.mark.slow
async def test_a_pure_tool_retries_under_its_policy_and_an_opaque_one_never_does() -> None:
    policy = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=10))
    pure = activity_as_tool(
        flaky_lookup,
        effect="pure",
        retry_policy=policy,
        schedule_to_close_timeout=timedelta(minutes=1),
    )
    async with AgentEnv(ToolRegistry([pure])) as env:
        run = await env.run(ScriptedModel().calls("flaky_lookup", sku="A").says("ok"), "price?")
    assert LEDGER.attempts == [1, 2, 3]
    assert run.calls_to("flaky_lookup")[0].result == "A: 700"

    # A description that says opaque with retries (a foreign or older worker's): the
    # workflow still gives it one attempt.
    LEDGER.attempts.clear()
    opaque = dataclasses.replace(pure, effect="opaque")
    async with AgentEnv(ToolRegistry([opaque])) as env:
        run = await env.run(ScriptedModel().calls("flaky_lookup", sku="A").says("ok"), "price?")
    assert LEDGER.attempts == [1]
    assert "price service busy (attempt 1)" in (run.calls_to("flaky_lookup")[0].result or "")


@pytest.mark.slow
async def test_a_failed_activity_answers_its_call_with_the_error_and_fails_the_receipt() -> None:
    registry = ToolRegistry([activity_as_tool(declined)])
    model = (
        ScriptedModel()
        .turn(call("declined", amount_cents=5), call("declined", amount_cents=6))
        .says("both declined")
    )
    async with AgentEnv(registry) as env:
        run = await env.run(model, "charge")
    run.assert_every_call_answered()
    answers = tool_messages(run)
    assert len(answers) == 2
    results = sorted(answers.values())
    assert "card declined for 5" in results[0] and "card declined for 6" in results[1]
    assert {receipt.status for receipt in run.receipts} == {"failed"}
    assert run.stop_reason == "final_answer"


@pytest.mark.slow
async def test_arguments_the_activity_cannot_take_are_the_models_to_correct() -> None:
    async with AgentEnv(ToolRegistry([charge_tool()])) as env:
        model = (
            ScriptedModel()
            .turn(
                call("charge_card", amount_cents=5),  # no order: nothing is scheduled
                call("charge_card", order={"id": "o"}, amount_cents=5, tip=1),  # unknown key
                call("charge_card", order={"id": "o", "email": "e"}, amount_cents="five"),
                call("charge_card", order={"id": "o"}, amount_cents=5),  # the model refuses
            )
            .says("fixed")
        )
        run = await env.run(model, "charge")
        events = await history(env, run)
    first, second, third, fourth = (r.result or "" for r in run.calls_to("charge_card"))
    assert "missing required argument 'order'" in first
    assert "unknown argument(s) 'tip'" in second
    assert "argument 'amount_cents' must be integer, not a string" in third
    # Nested values are the activity's worker's to decode: its error reaches the model.
    assert "email" in fourth and "Field required" in fourth
    assert LEDGER.charges == []
    assert len([a for a in scheduled(events) if a.activity_type.name == "charge_card"]) == 1
    run.assert_every_call_answered()


@pytest.mark.slow
async def test_a_given_task_queue_reaches_the_worker_that_serves_it() -> None:
    registry = ToolRegistry([charge_tool(task_queue="bank-queue")])
    assert registry.activity_functions() == []  # the run's worker does not register it
    order = {"id": "o-2", "email": "bo@example.com"}
    async with AgentEnv(registry) as env:
        async with Worker(env.client, task_queue="bank-queue", activities=[charge_card]):
            run = await env.run(
                ScriptedModel().calls("charge_card", order=order, amount_cents=9).says("ok"),
                "charge",
            )
        events = await history(env, run)
    (charge,) = [a for a in scheduled(events) if a.activity_type.name == "charge_card"]
    assert charge.task_queue.name == "bank-queue"
    assert [amount for _, amount in LEDGER.charges] == [9]
    assert json.loads(run.calls_to("charge_card")[0].result or "")["charged_cents"] == 9


@pytest.mark.slow
async def test_results_nobody_can_read_whole_become_markers_not_a_failed_task() -> None:
    kinds = ["nan", "huge_float", "surrogate", "nul", "big", "bytes", "foreign"]
    async with AgentEnv(ToolRegistry([activity_as_tool(hostile, effect="pure")])) as env:
        model = ScriptedModel().turn(*(call("hostile", kind=k) for k in kinds)).says("read")
        run = await env.run(model, "read them")
    assert run.stop_reason == "final_answer"
    run.assert_every_call_answered()
    results = {
        record.arguments["kind"]: record.result or ""  # type: ignore[index]
        for record in run.calls_to("hostile")
    }
    assert results["nan"] == "null"  # the rule every tool result follows: NaN is not JSON
    assert results["huge_float"] == "1e+300"
    assert results["surrogate"].startswith("[steadyloop: the activity's worker could not encode")
    assert results["nul"] == "a\x00b"
    assert results["big"].endswith("bytes shown]") and len(results["big"]) < 70_000
    assert results["bytes"] == encode_result(b"\xff\x00")  # bytes that are not UTF-8: repr
    assert results["foreign"].startswith(
        "[steadyloop: the activity's result (x-custom) could not be decoded: "
    )
    statuses = {receipt.status for receipt in run.receipts}
    assert statuses == {"completed"}  # each an answer: a repeat would not run it again


@pytest.mark.slow
async def test_an_activity_tool_waits_for_approval_and_a_rejection_runs_nothing() -> None:
    registry = ToolRegistry([charge_tool(approval=True)])
    order = {"id": "o-3", "email": "cy@example.com"}
    async with AgentEnv(registry) as env:
        approved = await env.start(
            ScriptedModel().calls("charge_card", order=order, amount_cents=1).says("ok"), "a"
        )
        await approved.approve()
        approved_run = await approved.result()
        rejected = await env.start(
            ScriptedModel().calls("charge_card", order=order, amount_cents=2).says("ok"), "b"
        )
        await rejected.reject("not this order")
        rejected_run = await rejected.result()
    assert [amount for _, amount in LEDGER.charges] == [1]
    assert json.loads(approved_run.calls_to("charge_card")[0].result or "")["charged_cents"] == 1
    assert "not this order" in (rejected_run.calls_to("charge_card")[0].result or "")
