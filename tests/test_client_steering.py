"""Steering a run through the client API on a real dev server: approvals bound to the
call reviewed, each request idempotent under its key (a double click records one
decision), and a typed error for each way a request can fail."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from client_harness import ClientEnv, client_env

from steadyloop._receipts.ledger import GiveUp
from steadyloop.client import (
    NotTheCallReviewed,
    NoWorkerAnswered,
    RequestRefused,
    RunEnded,
    RunHandle,
    RunNotFound,
    RunSnapshot,
)

pytestmark = pytest.mark.slow
GUARD_S = 60.0
TRANSFER = 'CALL transfer {"amount":100,"to":"acme"}'


async def until(handle: RunHandle, what: str) -> RunSnapshot:
    """Poll the run's snapshot until `what` ("approval", "ambiguous", "paused") holds."""
    deadline = asyncio.get_running_loop().time() + GUARD_S
    while asyncio.get_running_loop().time() < deadline:
        snapshot = await handle.snapshot()
        if what == "approval" and snapshot.pending_approvals:
            return snapshot
        if what == "ambiguous" and snapshot.ambiguous_receipts:
            return snapshot
        if what == "paused" and snapshot.progress and snapshot.progress.phase == "paused":
            return snapshot
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def waiting_transfer(env: ClientEnv, thread: str) -> tuple[RunHandle, RunSnapshot]:
    run = await env.client.thread(thread).start(TRANSFER, options=env.options(), key="k")
    return run, await until(run, "approval")


async def test_a_double_click_on_approve_records_one_decision(tmp_path: Path) -> None:
    async with client_env(tmp_path) as env:
        run, snapshot = await waiting_transfer(env, "approve")
        (call,) = snapshot.pending_approvals
        first, second = await asyncio.gather(
            run.approve(call, key="click-1"), run.approve(call, key="click-1")
        )
        late = await run.approve(call, key="click-1")  # a retry after the answer
        result = await run.result()
    assert first == second == late == "approved 'transfer' call 'call_0'"
    assert env.transfers == ["100 to acme"]
    assert result.final_answer == "done: sent 100 to acme"
    assert snapshot.status == "running" and snapshot.progress is not None
    assert snapshot.progress.pending_approvals == 1
    assert [m.content for m in snapshot.transcript if m.role == "user"] == [TRANSFER]


async def test_approve_by_call_id_needs_the_sha_reviewed_and_names_what_waits(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        run, snapshot = await waiting_transfer(env, "sha")
        (call,) = snapshot.pending_approvals
        with pytest.raises(NotTheCallReviewed) as wrong:
            await run.approve("call_0", "0" * 12, key="wrong")
        with pytest.raises(ValueError, match="SHA"):
            await run.approve("call_0", key="no-sha")
        still = await run.pending_approvals()
        answer = await run.approve("call_0", call.arguments_sha256[:8], key="right")
        await run.result()
    assert wrong.value.waiting == [call] and "transfer" in str(wrong.value)
    assert "you reviewed SHA 000000000000" in str(wrong.value)
    assert still == [call]  # nothing was decided by the refused requests
    assert answer == "approved 'transfer' call 'call_0'"
    assert env.transfers == ["100 to acme"]


async def test_a_rejection_is_read_by_the_model_and_the_call_never_runs(tmp_path: Path) -> None:
    async with client_env(tmp_path) as env:
        run, snapshot = await waiting_transfer(env, "reject")
        (call,) = snapshot.pending_approvals
        answer = await run.reject(call, reason="wrong payee", key="no")
        result = await run.result()
    assert answer == "rejected 'transfer' call 'call_0'"
    assert env.transfers == []
    assert result.final_answer is not None and "wrong payee" in result.final_answer


async def test_a_request_to_an_ended_run_says_how_it_ended(tmp_path: Path) -> None:
    async with client_env(tmp_path) as env:
        run = await env.client.thread("ended").start("hi", options=env.options(), key="k")
        await run.result()
        with pytest.raises(RunEnded) as approve:
            await run.approve("call_0", "a" * 12, key="late")
        with pytest.raises(RunEnded) as send:
            await run.send("anyone?", key="late-send")
        with pytest.raises(RunEnded):
            await run.interrupt("too late")
        snapshot = await run.snapshot()
        with pytest.raises(RunNotFound, match="ended/9"):
            await env.client.thread("ended").run(9).snapshot()
        with pytest.raises(RunNotFound):
            await env.client.run("no-such-run").result()
    assert "final_answer" in approve.value.how and "ended" in str(send.value)
    assert snapshot.status == "completed" and snapshot.result is not None
    assert snapshot.result.final_answer == "echo: hi"


async def test_a_decision_no_worker_accepted_is_not_lost_and_is_applied_once(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path, worker=False) as env:
        env.client.worker_bound = timedelta(seconds=2)
        async with env.worker():
            run, snapshot = await waiting_transfer(env, "no-worker")
        (call,) = snapshot.pending_approvals
        # The worker is gone: the server takes the approval, no worker accepts it.
        with pytest.raises(NoWorkerAnswered) as unanswered:
            await run.approve(call, key="click")
        with pytest.raises(NoWorkerAnswered):
            await run.snapshot()  # its queries need a worker too
        async with env.worker():
            retried = await run.approve(call, key="click")  # the same key, once a worker is back
            result = await run.result()
        ended = await run.snapshot()  # an ended run is read with no worker at all
    assert "not lost" in str(unanswered.value) and unanswered.value.waited_s == 2
    assert ended.status == "completed" and ended.result == result and ended.cursor is not None
    assert retried == "approved 'transfer' call 'call_0'"
    assert env.transfers == ["100 to acme"]
    assert result.final_answer == "done: sent 100 to acme"


async def test_messages_pause_and_unpause_are_idempotent_under_their_keys(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        run = await env.client.thread("steer").start("WAIT hold", options=env.options(), key="k")
        while not env.provider.requests:  # the first turn is in flight: both land after it
            await asyncio.sleep(0.02)
        sent = [await run.send("one more thing", key="m1") for _ in range(2)]
        paused = [await run.pause(key="p1") for _ in range(2)]
        env.release.set()
        held = await until(run, "paused")
        going = await run.unpause(key="u1")
        result = await run.result()
        with pytest.raises(ValueError, match="blank"):
            await run.send("   ")
    users = [m.content for m in result.transcript if m.role == "user"]
    assert users == ["WAIT hold", "one more thing"]  # sent twice under one key: once
    assert sent[0] == sent[1] and paused == ["pausing at the next turn boundary"] * 2
    assert going == "going on" and held.progress is not None and held.progress.turn == 1
    assert result.final_answer == "echo: one more thing" and result.stats.turns == 2


async def test_an_ambiguous_call_is_resolved_once_and_a_stale_key_is_refused(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        start = 'CALL slow_note {"text":"maybe"}'
        run = await env.client.thread("ambiguous").start(start, options=env.options(), key="k")
        snapshot = await until(run, "ambiguous")
        (receipt,) = snapshot.ambiguous_receipts
        resolution = GiveUp(note="checked by hand")
        answers = [await run.resolve_receipt(receipt, resolution, key="r1") for _ in range(2)]
        with pytest.raises(RequestRefused) as stale:
            await run.resolve_receipt(receipt, resolution, key="r2")
        result = await run.result()
    assert answers[0] == answers[1] and answers[0].startswith("give_up: applied to 'slow_note'")
    assert "no ambiguous call" in str(stale.value)
    assert result.stop_reason == "final_answer"


async def test_interrupt_stops_the_run(tmp_path: Path) -> None:
    async with client_env(tmp_path) as env:
        run = await env.client.thread("stop").start("WAIT forever", options=env.options())
        await run.interrupt("enough")
        result = await run.result()
    assert result.stop_reason == "interrupted" and "enough" in result.detail
