"""Resumable tools' context: what a reclaimed attempt knows, and what each attempt heartbeats.

Run through Temporal's `ActivityEnvironment`, which captures every heartbeat. The
property that matters downstream: the *last* heartbeat of any attempt carries every
sub-operation done so far (the workflow stores exactly that in the receipt and hands it
back to the attempt that reclaims the call), and the reclaimed attempt skips them.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel, JsonValue
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._receipts.canonical_json import MAX_DEPTH, CanonicalJsonError, canonical_json
from steadyloop._receipts.decision import receipt_key
from steadyloop._receipts.ledger import DEFAULT_PROGRESS_LIMIT_BYTES, ReceiptLedger, WriteIgnored
from steadyloop.tools import (
    ProgressTooLarge,
    ToolInvocation,
    ToolProgress,
    ToolRegistry,
    current_progress,
    tool,
)
from steadyloop.tools._payloads import ToolDescription, ToolOutcome

performed: list[str] = []


class Killed(Exception):
    """Stands in for a worker dying mid-tool: the attempt ends without an outcome."""


@tool(effect="resumable", heartbeat_timeout=timedelta(seconds=2))
async def three_steps(steps: list[str], die_after: int | None = None) -> dict[str, Any]:
    """Perform each step once, recording it; optionally die after `die_after` of them."""
    progress = current_progress()
    for step in steps:
        if progress.done(step):
            continue
        performed.append(step)
        progress.record(step)
        if die_after is not None and len(progress.recorded) >= die_after:
            raise Killed
    return {
        "attempt": progress.attempt,
        "key": progress.idempotency_key,
        "reclaimed": progress.reclaimed,
        "previous": progress.previous,
    }


@tool(effect="resumable")
async def records(step: JsonValue) -> str:
    current_progress().record(step)
    return "recorded"


@tool(effect="resumable")
async def records_a_tuple() -> str:
    current_progress().record(("a", 1))  # type: ignore[arg-type]
    return "unreachable"


@tool(effect="opaque")
async def opaque_asks_for_progress() -> str:
    current_progress()
    return "unreachable"


@tool(effect="pure")
async def pure_tool() -> str:
    return "pure"


REGISTRY = ToolRegistry(
    [three_steps, records, records_a_tuple, opaque_asks_for_progress, pure_tool]
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    performed.clear()


def invocation(name: str, arguments: dict[str, Any], **extra: Any) -> ToolInvocation:
    return ToolInvocation(
        tool=name,
        arguments=arguments,
        call_id="call_1",
        workflow_id="wf-1",
        tenant_id="acme",
        idempotency_key='["acme","wf-1","three_steps","ab"]',
        **extra,
    )


async def run(call: ToolInvocation) -> tuple[ToolOutcome, list[list[JsonValue]]]:
    """The outcome and every heartbeat's details (one argument each: the full list)."""
    environment = ActivityEnvironment()
    environment.payload_converter = pydantic_data_converter.payload_converter
    beats: list[list[JsonValue]] = []

    def on_heartbeat(*details: Any) -> None:
        assert len(details) == 1, details
        beats.append(details[0])

    environment.on_heartbeat = on_heartbeat
    outcome = await environment.run(ToolActivities(REGISTRY).run_tool, call)
    assert isinstance(outcome, ToolOutcome)
    return outcome, beats


async def test_each_record_heartbeats_every_step_done_so_far() -> None:
    outcome, beats = await run(invocation("three_steps", {"steps": ["a", "b", "c"]}))
    assert outcome.status == "ok"
    assert performed == ["a", "b", "c"]
    assert beats == [["a"], ["a", "b"], ["a", "b", "c"]]


async def test_a_reclaimed_attempt_skips_what_the_lost_attempt_recorded() -> None:
    # Attempt 1 dies after two of three steps; its last heartbeat is the trail.
    lost, beats = await run(invocation("three_steps", {"steps": ["a", "b", "c"], "die_after": 2}))
    assert lost.status == "tool_error" and "Killed" in lost.content
    trail = beats[-1]
    assert trail == ["a", "b"]
    # The workflow hands the trail back on attempt 2, reclaimed.
    performed.clear()
    outcome, beats = await run(
        invocation(
            "three_steps",
            {"steps": ["a", "b", "c"]},
            attempt=2,
            reclaimed=True,
            previous_progress=trail,
        )
    )
    assert performed == ["c"]
    # The trail is heartbeated before the tool runs, then extended.
    assert beats == [["a", "b"], ["a", "b", "c"]]
    assert outcome.status == "ok"
    assert json.loads(outcome.content) == {
        "attempt": 2,
        "key": '["acme","wf-1","three_steps","ab"]',
        "reclaimed": True,
        "previous": ["a", "b"],
    }


async def test_an_attempt_that_dies_before_recording_still_hands_the_trail_on() -> None:
    # Attempt 2 reclaims with ["a", "b"] and dies before its first record: its last
    # heartbeat must still carry ["a", "b"], or attempt 3 would redo them.
    _, beats = await run(
        invocation(
            "three_steps",
            {"steps": ["a", "b"], "die_after": 99},
            attempt=2,
            reclaimed=True,
            previous_progress=["a", "b"],
        )
    )
    assert performed == []
    assert beats == [["a", "b"]]


async def test_a_first_attempt_and_non_resumable_tools_do_not_heartbeat_unasked() -> None:
    _, beats = await run(invocation("three_steps", {"steps": []}))
    assert beats == []
    outcome, beats = await run(invocation("pure_tool", {}, previous_progress=["x"], attempt=2))
    assert (outcome.content, beats) == ("pure", [])


async def test_steps_are_compared_by_canonical_json_not_by_spelling_or_python_equality() -> None:
    previous: list[JsonValue] = [{"b": 2, "a": 1}, 1, "x"]
    progress = ToolProgress(invocation("records", {}, previous_progress=previous), lambda _: None)
    assert progress.done({"a": 1, "b": 2})
    assert progress.done(1)
    assert not progress.done(1.0)  # a tool receiving 1.0 is not one receiving 1
    assert not progress.done(True)  # and True is not 1
    assert not progress.done("y")
    assert progress.previous == previous and progress.previous is not progress.previous


def test_recording_a_step_twice_keeps_one_and_still_heartbeats() -> None:
    beats: list[list[JsonValue]] = []
    progress = ToolProgress(invocation("records", {}, previous_progress=["a"]), beats.append)
    progress.record("a")
    progress.record({"k": [1, 2]})
    progress.record({"k": [1, 2]})
    assert beats == [["a"], ["a", {"k": [1, 2]}], ["a", {"k": [1, 2]}]]
    assert progress.previous == ["a"]
    assert progress.recorded == ["a", {"k": [1, 2]}]


def nested(depth: int, *, dicts: bool) -> Any:
    """`depth` containers, lists or objects, each the only element of the one above."""
    value: Any = {} if dicts else []
    for _ in range(depth - 1):
        value = {"a": value} if dicts else [value]
    return value


@pytest.mark.parametrize(
    "step",
    [
        math.nan,
        math.inf,
        ("a", "b"),
        {1: "x"},
        {"a"},
        b"bytes",
        object(),
        "half \ud83d",
        {"k\udcff": 1},
        nested(MAX_DEPTH, dicts=False),  # the trail around it would be MAX_DEPTH + 1
        nested(MAX_DEPTH, dicts=True),
        nested(300, dicts=True),
        nested(1000, dicts=False),
    ],
    ids=[
        "nan",
        "inf",
        "tuple",
        "int-key",
        "set",
        "bytes",
        "object",
        "lone-surrogate",
        "surrogate-key",
        "lists-at-limit",
        "dicts-at-limit",
        "dicts-300",
        "lists-1000",
    ],
)
def test_a_step_the_receipt_cannot_store_is_refused_before_any_heartbeat(step: Any) -> None:
    beats: list[list[JsonValue]] = []
    progress = ToolProgress(invocation("records", {}), beats.append)
    with pytest.raises(CanonicalJsonError):
        progress.record(step)
    assert beats == [] and progress.recorded == []


def test_the_deepest_step_the_receipt_can_store_is_recorded() -> None:
    beats: list[list[JsonValue]] = []
    progress = ToolProgress(invocation("records", {}), beats.append)
    for dicts in (False, True):
        progress.record(nested(MAX_DEPTH - 1, dicts=dicts))
    ledger = ReceiptLedger()
    key = receipt_key("acme", "wf", "records", {})
    ledger.claim(key, 1, datetime(2026, 1, 2, tzinfo=UTC), now=datetime(2026, 1, 1, tzinfo=UTC))
    assert ledger.record_progress(key, 1, beats[-1]).applied  # what the workflow stores


async def test_a_refused_step_is_a_tool_error_the_model_reads() -> None:
    outcome, beats = await run(invocation("records_a_tuple", {}))
    assert (outcome.status, outcome.error_type, beats) == ("tool_error", "CanonicalJsonError", [])
    assert "tuple" in outcome.content
    outcome, beats = await run(invocation("records", {"step": {"page": 1}}))
    assert (outcome.status, beats) == ("ok", [[{"page": 1}]])


def test_the_trail_is_bounded_exactly_where_the_receipt_ledger_bounds_it() -> None:
    limit = DEFAULT_PROGRESS_LIMIT_BYTES
    beats: list[list[JsonValue]] = []
    progress = ToolProgress(invocation("records", {}), beats.append)
    # Fill to exactly the limit: `["xxx..."]` steps, the last one sized to fit.
    filler = "x" * 1000
    while len(canonical_json([*progress.recorded, filler + "!"])) <= limit - 1100:
        progress.record(filler + str(len(progress.recorded)))
    room = limit - len(canonical_json(progress.recorded)) - 1 - 2  # a comma and two quotes
    progress.record("y" * room)
    assert len(canonical_json(progress.recorded)) == limit
    with pytest.raises(ProgressTooLarge, match="over the 16384"):
        progress.record("z")
    assert len(beats[-1]) == len(progress.recorded)  # the refused step was not sent

    # The ledger keeps exactly this trail and refuses one byte more.
    key = receipt_key("acme", "wf-1", "records", {})
    ledger = ReceiptLedger()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert ledger.claim(key, 1, now + timedelta(minutes=1), now=now).applied
    assert ledger.record_progress(key, 1, progress.recorded).applied
    too_large = ledger.record_progress(key, 1, [*progress.recorded, "z"])
    assert isinstance(too_large, WriteIgnored) and too_large.refusal == "too_large"


def test_a_custom_limit_is_honoured() -> None:
    progress = ToolProgress(invocation("records", {}), lambda _: None, limit_bytes=10)
    progress.record("abcdef")  # ["abcdef"] is 10 bytes
    with pytest.raises(ProgressTooLarge):
        progress.record(1)


async def test_current_progress_outside_a_resumable_tool_raises_and_says_why() -> None:
    with pytest.raises(RuntimeError, match="only available while a tool call runs"):
        current_progress()
    outcome, beats = await run(invocation("opaque_asks_for_progress", {}))
    assert outcome.status == "tool_error"
    assert "effect='resumable'" in outcome.content
    assert beats == []


async def test_keep_alive_heartbeats_the_trail_without_adding_to_it() -> None:
    beats: list[list[JsonValue]] = []
    progress = ToolProgress(invocation("records", {}, previous_progress=[1]), beats.append)
    progress.keep_alive()
    progress.record(2)
    progress.keep_alive()
    assert beats == [[1], [1, 2], [1, 2]]


@pytest.mark.parametrize(
    "value",
    [
        invocation(
            "three_steps",
            {"steps": ["a"]},
            attempt=3,
            reclaimed=True,
            previous_progress=["a", {"page": 2, "ids": [1, 2.5, None, True]}],
        ),
        three_steps.describe(),
    ],
    ids=lambda value: type(value).__name__,
)
def test_new_fields_round_trip_through_the_pydantic_data_converter(value: BaseModel) -> None:
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([value])
    (back,) = converter.from_payloads([payload], [type(value)])
    assert back == value


def test_description_carries_the_heartbeat_timeout() -> None:
    description = three_steps.describe()
    assert description.heartbeat_timeout_s == 2.0
    assert description.heartbeat_timeout == timedelta(seconds=2)
    assert records.describe().heartbeat_timeout is None
    assert ToolInvocation(tool="t", call_id="c", workflow_id="w", tenant_id="t").reclaimed is False
    with pytest.raises(ValueError):
        ToolDescription(
            name="t",
            description="",
            parameters={},
            effect="resumable",
            timeout_s=1,
            heartbeat_timeout_s=0,
        )
