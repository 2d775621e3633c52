"""A tool that runs past its timeout is told apart from a lost worker, and what it returns
late is kept for the person who resolves the call.

The end-to-end test is the issue's own case, scaled down: an opaque tool that writes a
line, then sleeps past its timeout, on a worker that stays up, against a real dev server
(the time-skipping server would skip the timeout that matters here, and may drop
heartbeat details). The rest pins the rules: the words for each way an attempt ends, the
order a late signal and a timeout may arrive in, and hostile late results.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import TimeoutType

from steadyloop._cli.receipts import (
    late_event_lines,
    late_lines,
    list_lines,
    receipt_event_lines,
    waiting_lines,
)
from steadyloop._receipts.decision import Receipt
from steadyloop._receipts.ledger import Happened
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import AmbiguousCall, ResolveReceipt, RunInput, RunResult
from steadyloop._worker.dev_server import DevServer, dev_server
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop._workflows.late_results import LateResults, kept, lost_text
from steadyloop._workflows.tool_attempt import LEASE_MARGIN
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunHandle
from steadyloop.events import AmbiguousReceiptEvent
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)
from steadyloop.tools import ToolRegistry, tool
from steadyloop.tools._definition import DEFAULT_TOOL_TIMEOUT
from steadyloop.tools._payloads import (
    LATE_TOOL_RESULT_SIGNAL,
    LateToolResult,
    ToolDescription,
    ToolOutcome,
)

GUARD_S = 60  # how long a step may hang before the test gives up: a guard, not a measure


def _description(**fields: object) -> ToolDescription:
    base: dict[str, object] = {
        "name": "send",
        "description": "",
        "parameters": {"type": "object", "properties": {}},
        "effect": "opaque",
        "timeout_s": 30.0,
    }
    return ToolDescription.model_validate({**base, **fields})


def _late(key: str = "k", attempt: int = 1, content: str = "sent: 42") -> LateToolResult:
    return LateToolResult(
        key=key,
        attempt=attempt,
        call_id="c1",
        outcome=ToolOutcome(status="ok", content=content),
        overrun_s=0.4,
    )


# -- the words -------------------------------------------------------------------------


def test_the_default_timeout_is_the_30_s_the_words_name() -> None:
    assert timedelta(seconds=30) == DEFAULT_TOOL_TIMEOUT
    assert lost_text(_description(), TimeoutType.START_TO_CLOSE) == (
        "gave no answer within its 30 s timeout: "
        "its worker may have stopped, or may still be running it"
    )


def test_a_heartbeat_timeout_reads_as_a_silent_attempt_not_a_slow_one() -> None:
    resumable = _description(effect="resumable", heartbeat_timeout_s=10.0)
    words = lost_text(resumable, TimeoutType.HEARTBEAT)
    assert words == "sent no heartbeat for 10 s (its worker was lost, or the tool stalled)"
    assert "may still be running it" not in words
    assert "worker may have been lost" in lost_text(_description(), None)


# -- the order things arrive in ----------------------------------------------------------


def _running(attempt: int) -> Receipt:
    return Receipt(status="running", attempt=attempt, lease_expires_at=datetime.now(UTC))


def test_a_late_result_that_comes_before_the_timeout_is_held_until_it() -> None:
    late = LateResults()
    assert late.received(_late(), _running(1)) == "held"  # the timeout is not seen yet
    assert late.timed_out("k", 1, "ran past") == _late()  # noted once it is
    assert late.why("k", 1) == "ran past"


def test_a_late_result_is_kept_only_while_its_attempt_owns_the_receipt() -> None:
    late = LateResults()
    late.timed_out("k", 1, "ran past")
    assert late.received(_late(), _running(1)) == "noted"
    assert late.received(_late(attempt=2, content="other"), _running(1)) == "ignored"
    assert late.result("k", 1) == _late()  # a stale or foreign attempt replaced nothing
    done = Receipt(status="completed", attempt=1, lease_expires_at=datetime.now(UTC), result="sent")
    assert late.received(_late(), done) == "ignored"  # it completed after all
    assert late.received(_late(key="nonsense"), None) == "ignored"
    late.settled("k")  # resolved by a person
    assert late.result("k", 1) is None and late.why("k", 1) is None


def test_a_hostile_late_result_is_kept_encodable_and_bounded() -> None:
    hostile = _late(content="\ud800 evil " + "x" * 200_000)
    safe = kept(hostile)
    safe.model_dump_json()  # a lone surrogate would make every query of the run fail
    assert "\ud800" not in safe.outcome.content
    assert safe.outcome.truncated
    assert len(safe.outcome.content.encode("utf-8")) <= 64 * 1024


# -- the CLI's words -----------------------------------------------------------------------


def _call(**fields: object) -> AmbiguousCall:
    base: dict[str, object] = {
        "key": '["default","r","send","' + "0" * 64 + '"]',
        "tool": "send",
        "arguments": {"to": "bob"},
        "attempt": 1,
        "reason": "why",
        "call_ids": ["c1"],
    }
    return AmbiguousCall.model_validate({**base, **fields})


def test_the_bang_line_says_the_tool_ran_past_its_timeout() -> None:
    lost = (
        "gave no answer within its 30 s timeout: "
        "its worker may have stopped, or may still be running it"
    )
    (line, _) = waiting_lines("r", _call(lost=lost))
    assert f"(attempt 1 {lost})" in line
    (line, _) = waiting_lines("r", _call())  # how it ended is not known: said as before
    assert "(attempt 1 ended with no outcome)" in line


def test_receipts_shows_the_late_result_and_the_command_that_accepts_it() -> None:
    lines = list_lines("r", [_call(late_result=_late(content="sent: 42"))])
    text = "\n".join(lines)
    assert "send finished 0.4 s after its timeout, with this result: sent: 42" in text
    assert "--happened 'sent: 42'" in text
    hostile = list_lines("r", [_call(late_result=_late(content="a\x1b[2Jb; rm -rf ~"))])
    assert "--happened - (the result on standard input)" in "\n".join(hostile)


# -- end to end, on a dev server -------------------------------------------------------


@pytest.fixture
async def temporal() -> AsyncIterator[DevServer]:
    async with dev_server(ui=False) as server:
        yield server


def _registry(notes: Path) -> ToolRegistry:
    @tool(effect="opaque", timeout=timedelta(seconds=1))
    async def slow_note(text: str) -> str:
        """Write a note, then outlast the timeout and the lease after it (so the call is
        ambiguous before the result comes), ignoring the SDK's cancellation on the way,
        as a tool blocked in code that cannot be cancelled would."""
        with notes.open("a", encoding="utf-8") as out:
            out.write(text + "\n")
        until = time.monotonic() + 1 + LEASE_MARGIN.total_seconds() + 4
        while time.monotonic() < until:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(until - time.monotonic())
        return f"noted: {text}"

    @tool(effect="opaque", timeout=timedelta(seconds=1))
    async def stuck_note(text: str) -> str:
        """Write a note, then never return (the SDK cancels it after its timeout)."""
        with notes.open("a", encoding="utf-8") as out:
            out.write(text + "\n")
        await asyncio.sleep(3600)
        return "never"

    return ToolRegistry([slow_note, stuck_note])


def _one_call(tool_name: str) -> list[ScriptedResponse]:
    return [
        tool_calls_response(ScriptedCall(tool_name, {"text": "hi"}, id="n1"), usage=(10, 5)),
        text_response("done", usage=(12, 1)),
    ]


async def _until_ambiguous(
    handle: WorkflowHandle[ToolLoopWorkflow, RunResult], late: bool
) -> AmbiguousCall:
    deadline = asyncio.get_running_loop().time() + GUARD_S
    while True:
        calls = await handle.query(ToolLoopWorkflow.ambiguous_receipts)
        if calls and (calls[0].late_result is not None or not late):
            return calls[0]
        assert asyncio.get_running_loop().time() < deadline, calls
        await asyncio.sleep(0.1)


async def _late_receipt(client: Client, workflow_id: str) -> AmbiguousReceiptEvent:
    """The run's log, read while the call waits: its ambiguous receipt with the late result."""
    async for event in RunHandle(client, workflow_id).events():
        if isinstance(event, AmbiguousReceiptEvent) and event.late is not None:
            return event
    raise AssertionError("the log stopped with no late result on an ambiguous receipt")


@pytest.mark.slow
async def test_a_tool_past_its_timeout_on_a_live_worker_keeps_its_late_result(
    temporal: DevServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notes = tmp_path / "notes.txt"
    script = _one_call("slow_note")
    caplog.set_level(logging.WARNING, logger="temporalio.activity")
    async with ScriptedServer(script) as provider:
        options = WorkerOptions(
            task_queue=f"timeouts-{uuid.uuid4().hex[:8]}",
            endpoints=EndpointRegistry([provider.endpoint("scripted")]),
            tools=_registry(notes),
        )
        async with running_worker(temporal.client, options):
            handle = await temporal.client.start_workflow(
                ToolLoopWorkflow.run,
                RunInput(endpoint="scripted", model="m", prompt="note hi", tools=["slow_note"]),
                id=f"timeouts-{uuid.uuid4().hex[:8]}",
                task_queue=options.task_queue,
            )
            waiting = await _until_ambiguous(handle, late=False)
            said = (
                "gave no answer within its 1 s timeout: "
                "its worker may have stopped, or may still be running it"
            )
            assert waiting.lost == said
            assert waiting.late_result is None
            assert said in waiting.reason and "opaque" in waiting.reason
            assert "lost its lease" not in waiting.reason  # the words a crash gets
            waiting = await _until_ambiguous(handle, late=True)
            assert waiting.late_result is not None
            assert waiting.late_result.outcome.content == "noted: hi"
            assert waiting.late_result.attempt == 1
            assert "finished after its timeout" in waiting.reason
            shown = "\n".join(list_lines(handle.id, [waiting]))
            assert "slow_note finished" in shown and "with this result: noted: hi" in shown
            # The log says it all before anyone resolves: a follower prints it, no query.
            receipt = await asyncio.wait_for(_late_receipt(temporal.client, handle.id), GUARD_S)
            assert receipt.arguments == '{"text":"hi"}' and receipt.lost == said
            assert receipt_event_lines(handle.id, receipt) == waiting_lines(handle.id, waiting)
            assert late_event_lines(handle.id, receipt) == late_lines(handle.id, waiting)

            # What is not that attempt's, or not encodable, changes nothing or is replaced.
            stale = _late(key=waiting.key, attempt=2, content="not this one")
            await handle.signal(LATE_TOOL_RESULT_SIGNAL, stale)
            await handle.signal(LATE_TOOL_RESULT_SIGNAL, _late(key="nonsense"))
            (still,) = await handle.query(ToolLoopWorkflow.ambiguous_receipts)
            assert still.late_result == waiting.late_result

            accepted = waiting.late_result.outcome.content
            await handle.execute_update(
                ToolLoopWorkflow.resolve_receipt,
                ResolveReceipt(key=waiting.key, resolution=Happened(result=accepted)),
            )
            result = await asyncio.wait_for(handle.result(), GUARD_S)
            events = await RunHandle(temporal.client, handle.id).timeline()
    assert result.stop_reason == "final_answer"
    kinds = [(e.kind, e.call_id) for e in events]
    assert ("tool_timeout", "n1") in kinds and ("tool_late", "n1") in kinds
    (late_event,) = [e for e in events if e.kind == "tool_late"]
    assert "with this result: noted: hi" in late_event.text
    answers = [m.content for m in result.transcript if m.role == "tool"]
    assert answers == ["noted: hi"]
    assert notes.read_text(encoding="utf-8").splitlines() == ["hi"]  # run once, not again
    warned = [r.getMessage() for r in caplog.records if "after its 1 s timeout" in r.getMessage()]
    assert len(warned) == 1 and "tool 'slow_note' finished" in warned[0]
    assert "Activity not found on completion" in warned[0]  # beside the SDK's own warning


@pytest.mark.slow
async def test_a_tool_the_sdk_cancels_after_its_timeout_is_shown_as_never_returned(
    temporal: DevServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    async with ScriptedServer(_one_call("stuck_note")) as provider:
        options = WorkerOptions(
            task_queue=f"timeouts-{uuid.uuid4().hex[:8]}",
            endpoints=EndpointRegistry([provider.endpoint("scripted")]),
            tools=_registry(notes),
        )
        async with running_worker(temporal.client, options):
            handle = await temporal.client.start_workflow(
                ToolLoopWorkflow.run,
                RunInput(endpoint="scripted", model="m", prompt="note", tools=["stuck_note"]),
                id=f"timeouts-{uuid.uuid4().hex[:8]}",
                task_queue=options.task_queue,
            )
            waiting = await _until_ambiguous(handle, late=True)
            receipt = await asyncio.wait_for(_late_receipt(temporal.client, handle.id), GUARD_S)
            await handle.cancel()
    assert receipt.late is not None and not receipt.late.returned
    assert late_event_lines(handle.id, receipt) == late_lines(handle.id, waiting)
    assert waiting.late_result is not None
    assert waiting.late_result.outcome.error_type == "CancelledAfterTimeout"
    assert "cancelled before it returned" in waiting.reason
    shown = "\n".join(list_lines(handle.id, [waiting]))
    assert "stuck_note was cancelled" in shown and "--happened 'Tool" not in shown
