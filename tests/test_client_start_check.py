"""A run is held to the tools its worker serves before it starts, by every starter, and a
follower of a run that failed (or of one that ended) reads what decides what it does next:
why the run failed, and which waiting calls were already decided. On a real dev server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from client_harness import MODEL, ClientEnv, client_env

from steadyloop._serving import WorkerDescription
from steadyloop._web.backend import RunClosed, RunRequest
from steadyloop._web.client_backend import BadName, ClientBackend, RunDefaults
from steadyloop._worker.serving import _anyone_polls
from steadyloop.client import RunEventItem, RunFailed, ToolsNotServed
from steadyloop.events import ApprovalWaitingEvent, DecisionEvent, StopEvent, TextDeltaEvent

pytestmark = pytest.mark.slow
TRANSFER = 'CALL transfer {"amount":100,"to":"acme"}'


async def polled(env: ClientEnv) -> None:
    """Until the server lists the worker as a poller of the queue (a worker started a
    moment ago is not listed yet, and a start then is not checked: the run waits)."""
    async with asyncio.timeout(30):
        while not await _anyone_polls(env.client.temporal, env.client.task_queue):
            await asyncio.sleep(0.1)


async def test_a_start_naming_a_tool_the_worker_lacks_is_refused_before_any_run(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        await polled(env)
        thread = env.client.thread("unserved")
        with pytest.raises(ToolsNotServed) as refused:
            await thread.start("hi", options=env.options(tools=["note", "refund_order"]))
        latest = await thread.latest()
        # The same client's next start reuses the worker's answer, and goes through.
        ok = await thread.start("hi", options=env.options(tools=["note"]))
        result = await ok.result()
    error = refused.value
    assert latest is None  # nothing was started
    assert error.tools == ["refund_order"] and error.plugins == []
    assert error.served_tools == ["note", "slow_note", "transfer"]
    assert "refund_order" in str(error) and "note, slow_note, transfer" in str(error)
    assert error.workflow_id == "unserved/1"
    assert result.final_answer == "echo: hi"


async def test_the_web_server_refuses_the_same_start_by_name(tmp_path: Path) -> None:
    async with client_env(tmp_path) as env:
        await polled(env)
        backend = ClientBackend(
            env.client, defaults=RunDefaults(endpoint="scripted", model=MODEL, tools=["refnd"])
        )
        thread = await backend.create_thread("acme", "orders")
        with pytest.raises(BadName) as refused:
            await backend.start("acme", thread, RunRequest(prompt="go"), "k-1")
        latest = await env.client.thread("web/acme/orders").latest()
    assert latest is None
    assert "refnd" in str(refused.value) and "transfer" in str(refused.value)


async def test_a_follower_of_a_run_that_failed_is_told_why_not_that_its_log_is_gone(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        # An answer from before the worker lost a tool: the start goes through, and the
        # run's own first task refuses it.
        env.client.served.description = WorkerDescription(tools=["note", "refund_order"])
        backend = ClientBackend(
            env.client,
            defaults=RunDefaults(endpoint="scripted", model=MODEL, tools=["refund_order"]),
        )
        thread = await backend.create_thread("acme", "orders")
        await backend.start("acme", thread, RunRequest(prompt="go"), "k-1")
        run = env.client.thread("web/acme/orders").run(1)
        with pytest.raises(RunFailed) as followed:
            async with asyncio.timeout(60):
                _ = [event async for event in run.events()]
        with pytest.raises(RunFailed) as awaited:
            await run.result()
        with pytest.raises(RunClosed) as streamed:  # the web server's stream says it too
            async for _ in backend.events("acme", thread, "1", None):
                pass
    assert followed.value.status == "failed"
    assert "refund_order" in followed.value.cause
    assert "does not have" in followed.value.cause
    assert followed.value.cause == awaited.value.cause
    assert "refund_order" in str(streamed.value)


async def test_following_an_ended_run_again_reads_its_whole_log_with_decided_calls(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        run = await env.client.thread("again").start(TRANSFER, options=env.options())
        live: list[RunEventItem] = []
        async with asyncio.timeout(60):
            async for event in run.events():
                live.append(event)
                if isinstance(event, ApprovalWaitingEvent) and event.decided is None:
                    await run.approve(event.call_id, event.sha, key=f"approve-{event.call_id}")
        await run.result()
        first = [event async for event in run.events()]
        second = [event async for event in run.events()]
        approved_again = [
            e for e in second if isinstance(e, ApprovalWaitingEvent) and e.decided is None
        ]
    assert env.transfers == ["100 to acme"]
    # A follow of the ended run reads every event the live follower read, in order.
    assert [e.cursor for e in first] == [e.cursor for e in live]
    assert [e.cursor for e in second] == [e.cursor for e in live]
    assert "".join(e.text for e in second if isinstance(e, TextDeltaEvent)) == "".join(
        e.text for e in live if isinstance(e, TextDeltaEvent)
    )
    assert isinstance(second[-1], StopEvent)
    # The live follower saw the call waiting, then the decision; a follower of the
    # ended run reads that the call was decided, so code approving on it does not.
    (waiting_live,) = [e for e in live if isinstance(e, ApprovalWaitingEvent)]
    (waiting_again,) = [e for e in second if isinstance(e, ApprovalWaitingEvent)]
    assert waiting_live.decided is None
    assert any(isinstance(e, DecisionEvent) and e.decision == "approved" for e in live)
    assert waiting_again.decided == "approved" and approved_again == []


async def test_a_follower_of_a_run_terminated_mid_way_reads_its_events_then_why(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        run = await env.client.thread("cut").start(TRANSFER, options=env.options())
        read: list[RunEventItem] = []
        with pytest.raises(RunFailed) as followed:
            async with asyncio.timeout(60):
                async for event in run.events():
                    read.append(event)
                    if isinstance(event, ApprovalWaitingEvent):
                        await run.temporal_handle.terminate("an operator stopped it")
    assert [e.type for e in read] == ["tool_call", "approval_waiting"]
    assert followed.value.status == "terminated"
    assert "terminated" in followed.value.cause
    assert env.transfers == []
