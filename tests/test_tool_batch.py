"""The tool batch's decisions over the receipt ledger, without a server: what a call
that cannot run is answered, how an attempt's end settles its receipt (cancelled,
failed, timed out), which calls run locally, and which open calls a person is shown
before the model asks again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._receipts.decision import Execute, ReceiptKey, receipt_key
from steadyloop._run.models import RunInput, RunPlugins
from steadyloop._workflows import tool_attempt
from steadyloop._workflows.run_state import RunState
from steadyloop._workflows.tool_batch import ToolBatch
from steadyloop.events import TimelineEntryEvent
from steadyloop.tools._disclosure import PluginDisclosure
from steadyloop.tools._payloads import (
    DescribeToolsResult,
    ToolDescription,
    ToolInvocation,
    ToolOutcome,
)

NOW = datetime(2026, 1, 2, tzinfo=UTC)
RUN = RunInput(endpoint="e", model="m", prompt="go")


def noted_timeline(state: RunState) -> list[TimelineEntryEvent]:
    """The timeline entries the parts noted on the run's event log, not yet published."""
    return [e for e in state.events._pending if isinstance(e, TimelineEntryEvent)]


def _tool(name: str, effect: str = "opaque", timeout_s: float = 30) -> ToolDescription:
    return ToolDescription(
        name=name,
        description=name,
        parameters={"type": "object", "properties": {}},
        effect=effect,
        timeout_s=timeout_s,
    )


def _state() -> RunState:
    state = RunState()
    state.receipt_scope = "run-1"
    return state


def _claimed(state: RunState, tool: str, arguments: dict[str, object]) -> ReceiptKey:
    key = receipt_key(state.tenant, state.receipt_scope, tool, arguments)
    assert state.receipts.claim(key, 1, NOW + timedelta(minutes=1)).applied
    return key


def _ended(cause: BaseException) -> ActivityError:
    error = ActivityError(
        "activity ended",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="run_tool",
        activity_id="1",
        retry_state=None,
    )
    error.__cause__ = cause
    return error


def _invocation(key: ReceiptKey) -> ToolInvocation:
    return ToolInvocation(
        tool=key.tool,
        arguments={},
        call_id="c1",
        workflow_id="run-1",
        tenant_id=key.tenant,
        idempotency_key=key.text,
    )


@pytest.mark.parametrize(
    ("call", "status", "error_type"),
    [
        (ToolCall(id="c1", name="nope", arguments="{}"), "unknown_tool", "UnknownTool"),
        (ToolCall(id="c1", name="pay", arguments="{not json"), "invalid_arguments", "unparseable"),
        (ToolCall(id="c1", name="pay", arguments="[1]"), "invalid_arguments", "unparseable"),
    ],
)
async def test_a_call_that_cannot_run_is_answered_and_counted_without_a_receipt(
    call: ToolCall, status: str, error_type: str | None
) -> None:
    state = RunState()
    answer = await ToolBatch(state).read(RUN, {"pay": _tool("pay")}, 0, call)
    assert isinstance(answer, ToolOutcome)
    assert (answer.status, answer.error_type) == (status, error_type)
    assert state.stats.tool_calls == 1 and len(state.receipts) == 0


async def test_after_an_interrupt_no_call_of_the_batch_runs() -> None:
    state = RunState()
    state.steering.interrupt("enough")
    call = ToolCall(id="c1", name="pay", arguments="{}")
    answer = await ToolBatch(state).read(RUN, {"pay": _tool("pay")}, 0, call)
    assert isinstance(answer, ToolOutcome)
    assert answer.error_type == "NotRun" and "enough" in answer.content


@pytest.mark.parametrize(("effect", "status"), [("pure", "failed"), ("opaque", "running")])
async def test_a_cancelled_attempt_fails_only_a_pure_receipt(effect: str, status: str) -> None:
    state = _state()
    state.steering.interrupt("stop now")
    key = _claimed(state, "pay", {})
    answer = await ToolBatch(state).attempts._without_outcome(
        _tool("pay", effect),
        _invocation(key),
        key,
        Execute(attempt=1, reclaimed=False),
        _ended(CancelledError()),
    )
    assert isinstance(answer, ToolOutcome) and answer.error_type == "Interrupted"
    receipt = state.receipts.get(key)
    assert receipt is not None and receipt.status == status


async def test_a_failed_attempt_fails_its_receipt_and_the_model_reads_why() -> None:
    state = _state()
    key = _claimed(state, "pay", {})
    failure = _ended(ApplicationError("card declined", type="Declined"))
    answer = await ToolBatch(state).attempts._without_outcome(
        _tool("pay"), _invocation(key), key, Execute(attempt=1, reclaimed=False), failure
    )
    assert isinstance(answer, ToolOutcome) and answer.error_type == "ToolFailed"
    assert "card declined" in answer.content
    receipt = state.receipts.get(key)
    assert receipt is not None and receipt.status == "failed"


async def test_an_opaque_attempt_that_timed_out_stays_running_with_its_recorded_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lost_spans: list[tuple[int, str]] = []  # the trace's note, outside a workflow
    monkeypatch.setattr(
        tool_attempt, "attempt_lost", lambda attempt, kind, _: lost_spans.append((attempt, kind))
    )
    state = _state()
    key = _claimed(state, "pay", {})
    timeout = TimeoutError(
        "timed out", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[["step 1"]]
    )
    lost = await ToolBatch(state).attempts._without_outcome(
        _tool("pay"), _invocation(key), key, Execute(attempt=1, reclaimed=False), _ended(timeout)
    )
    assert (
        lost
        == "Tool 'pay' timed out: it gave no answer within its 30 s timeout: its worker may "
        "have stopped, or may still be running it."
    )
    receipt = state.receipts.get(key)
    assert receipt is not None and receipt.status == "running"
    assert receipt.recorded_progress == ["step 1"]
    assert [e.kind for e in noted_timeline(state)] == ["tool_timeout"]
    assert state.late.why(key.text, 1) is not None  # a late result for it will be kept
    assert lost_spans == [(1, "start_to_close")]


def test_only_short_pure_tools_run_as_local_activities() -> None:
    attempts = ToolBatch(RunState()).attempts
    assert not attempts.runs_locally(_tool("add", "pure", 1))  # the run did not ask
    attempts.begin_batch(4, 2.0)
    assert attempts.runs_locally(_tool("add", "pure", 1))
    assert not attempts.runs_locally(_tool("add", "pure", 5))
    assert not attempts.runs_locally(_tool("pay", "resumable", 1))


def test_a_repeat_within_the_batch_is_a_replay_that_says_whose_answer_it_is() -> None:
    state = _state()
    key = _claimed(state, "pay", {})
    ToolBatch(state).receipts.replayed("c2", key, twin="c1")
    assert state.stats.tool_replays == 1
    (event,) = noted_timeline(state)
    assert event.call_id == "c2" and "same call twice in this batch (c1's answer)" in event.text


def test_an_opaque_call_left_without_an_outcome_is_shown_to_a_person_before_the_model_asks() -> (
    None
):
    state = _state()
    opaque = _claimed(state, "pay", {"amount": 5})
    pure = _claimed(state, "add", {"a": 1})
    state.receipts.release_leases()  # the execution that ran them is gone
    state.transcript = [
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="c1", name="pay", arguments='{"amount": 5}')],
        )
    ]
    state.disclosure = PluginDisclosure(
        tools=["add"],
        plugins=RunPlugins(),
        described=DescribeToolsResult(
            tools=[_tool("add", "pure")], payload_limit_bytes=MAX_INLINE_PAYLOAD_BYTES
        ),
    )
    ToolBatch(state).receipts.surface_open_calls(RUN)
    assert list(state.ambiguous) == [opaque.text]  # a tool no longer offered counts as opaque
    view = state.ambiguous[opaque.text]
    assert (view.tool, view.arguments, view.attempt) == ("pay", {"amount": 5}, 1)
    assert pure.text not in state.ambiguous
