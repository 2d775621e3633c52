"""Threads of the client API on a real dev server: first runs, follow-ups, idempotent
starts, one run at a time (also under a race), and a reused thread id that neither
repeats an effect nor shows another run's output."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from client_harness import client_env

from steadyloop.client import (
    RunOptions,
    ThreadBusy,
    ThreadCannotContinue,
    ThreadMemo,
)
from steadyloop.client._threads import THREAD_MEMO
from steadyloop.events import RunEventItem, StopEvent, TextDeltaEvent

pytestmark = pytest.mark.slow


async def test_a_thread_starts_its_first_run_then_a_follow_up_that_inherits_it(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        thread = env.client.thread("chat-1")
        first = await thread.start("hello", options=env.options(), key="k1")
        first_result = await first.result()
        second = await thread.start("and again", key="k2")  # the last run's options
        second_result = await second.result()
        latest = await thread.latest()
    assert (first.workflow_id, first.origin) == ("chat-1/1", "started")
    assert (second.workflow_id, second.origin) == ("chat-1/2", "started")
    assert first_result.final_answer == "echo: hello"
    assert second_result.final_answer == "echo: and again"
    # The follow-up's request carried the whole conversation, once, in order.
    sent = [(m["role"], m.get("content")) for m in env.request_messages()[-1]]
    assert sent == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "and again"),
    ]
    assert latest is not None and latest.workflow_id == "chat-1/2"


async def test_a_retried_start_attaches_to_the_run_it_started_even_after_newer_runs(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        thread = env.client.thread("chat-2")
        first = await thread.start("one", options=env.options(), key="k1")
        await first.result()
        again = await thread.start("one", key="k1")  # the same request, retried
        second = await thread.start("two", key="k2")
        await second.result()
        late = await env.client.thread("chat-2").start("one", key="k1")  # a fresh client
        requests = len(env.provider.requests)
    assert (again.workflow_id, again.origin) == ("chat-2/1", "attached")
    assert (late.workflow_id, late.origin) == ("chat-2/1", "attached")
    assert requests == 2  # two runs, one model request each: no retry ran again


async def test_a_start_while_a_run_is_in_flight_is_refused_naming_it_or_steers_it(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        thread = env.client.thread("chat-3")
        running = await thread.start("WAIT slow one", options=env.options(), key="k1")
        with pytest.raises(ThreadBusy) as busy:
            await thread.start("interrupting", key="k2")
        steered = await thread.start("also this", key="k3", steer=True)
        again = await thread.start("also this", key="k3", steer=True)  # a double click
        env.release.set()
        result = await running.result()
    assert busy.value.workflow_id == "chat-3/1" and "chat-3/1" in str(busy.value)
    assert (steered.workflow_id, steered.origin) == ("chat-3/1", "steered")
    assert again.workflow_id == "chat-3/1"
    users = [m.content for m in result.transcript if m.role == "user"]
    assert users == ["WAIT slow one", "also this"]  # the steered message, once


async def test_concurrent_starts_on_one_thread_never_run_two_runs_at_once(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        first = await env.client.thread("race").start("seed", options=env.options(), key="s")
        await first.result()
        # Ten clients start a follow-up at the same moment, five of them with one key
        # (a request and its retries) and five with keys of their own.
        keys = ["same"] * 5 + [f"own-{n}" for n in range(5)]
        outcomes = await asyncio.gather(
            *(env.client.thread("race").start(f"WAIT from {key}", key=key) for key in keys),
            return_exceptions=True,
        )
        env.release.set()
        started = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        results = [await handle.result() for handle in started]
        runs = [
            w async for w in env.server.client.list_workflows("WorkflowType='ToolLoopWorkflow'")
        ]
    assert all(isinstance(r, ThreadBusy) for r in refused), refused
    # One follow-up started; every other start attached to it (its key) or was refused.
    assert {h.workflow_id for h in started} == {"race/2"}
    assert {h.origin for h in started} <= {"started", "attached"}
    assert sum(h.origin == "started" for h in started) == 1
    winner = next(h for h in started if h.origin == "started")
    assert all(isinstance(r, ThreadBusy) for r in refused)
    assert len(refused) == 10 - len(started)
    assert results[0].stop_reason == "final_answer"
    assert sorted(r.id for r in runs) == ["race/1", "race/2"]
    # The same key's retries attached rather than being refused.
    same = [h for h, k in zip(outcomes, keys, strict=True) if k == "same"]
    if winner in same:
        assert all(not isinstance(h, BaseException) for h in same)


async def test_a_reused_thread_id_neither_repeats_an_effect_nor_mixes_runs(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        thread = env.client.thread("reuse")
        call = 'CALL note {"text":"dup?"}'
        first = await thread.start(call, options=env.options(), key="k1")
        first_result = await first.result()
        # The same thread id again, the same call asked for: it replays from the
        # inherited receipt instead of writing the note a second time.
        second = await env.client.thread("reuse").start(call, key="k2")
        second_result = await second.result()
        memo = await (await second.temporal_handle.describe()).memo_value(THREAD_MEMO)
    assert env.notes == ["dup?"]
    assert first_result.final_answer == "done: noted dup?"
    assert second_result.final_answer == "done: noted dup?"
    assert second_result.stats.tool_replays == 1
    assert second.workflow_id != first.workflow_id
    assert ThreadMemo.model_validate(memo) == ThreadMemo(
        thread="reuse", run=2, key="k2", earlier={"k1": 1}
    )


async def test_a_thread_whose_last_run_was_terminated_is_not_continued(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        thread = env.client.thread("broken")
        run = await thread.start("WAIT never", options=env.options(), key="k1")
        await run.temporal_handle.terminate("operator")
        with pytest.raises(ThreadCannotContinue) as refused:
            await thread.start("go on", key="k2")
    assert refused.value.workflow_id == "broken/1"
    assert "terminated" in str(refused.value)


def test_run_options_refuse_what_no_run_could_carry() -> None:
    with pytest.raises(ValueError, match="endpoint and a model"):
        RunOptions(tools=["note"])
    with pytest.raises(ValueError, match="tool_choice"):
        RunOptions(endpoint="e", model="m", tool_choice="nosuch")


async def test_a_start_that_lost_the_race_to_a_run_already_ended_follows_that_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Client A reads "the last run is 1" just before client B starts run 2, which ends
    # at once; A then asks for id 2 too. It must not start a second run 2 (that would
    # drop B's run from the conversation): it follows run 2 as run 3.
    async with client_env(tmp_path) as env:
        first = await env.client.thread("cas").start("one", options=env.options(), key="a0")
        await first.result()
        a = env.client.thread("cas")
        stale = await a._latest()
        two = await env.client.thread("cas").start("two", key="b")
        await two.result()
        real = a._latest
        reads = iter([stale])

        async def stale_first() -> object:
            return next(reads, None) or await real()

        monkeypatch.setattr(a, "_latest", stale_first)
        three = await a.start("three", key="a1")
        result = await three.result()
        executions = [
            w.id async for w in env.server.client.list_workflows("WorkflowType='ToolLoopWorkflow'")
        ]
    assert three.workflow_id == "cas/3"
    assert sorted(executions) == ["cas/1", "cas/2", "cas/3"]
    users = [m.content for m in result.transcript if m.role == "user"]
    assert users == ["one", "two", "three"]


async def test_each_run_of_a_thread_has_its_own_events_read_on_from_any_cursor(
    tmp_path: Path,
) -> None:
    async with client_env(tmp_path) as env:
        thread = env.client.thread("events")
        first = await thread.start("alpha", options=env.options(), key="k1")
        first_events = [e async for e in first.events()]
        second = await thread.start("beta", key="k2")
        second_events = [e async for e in second.events()]
        after_third = [e async for e in second.events(after=second_events[2].cursor)]
        snapshot = await second.snapshot()
        after_snapshot = [e async for e in second.events(after=snapshot.cursor)]

    def text(events: list[RunEventItem]) -> str:
        return "".join(e.text for e in events if isinstance(e, TextDeltaEvent))

    assert text(first_events) == "echo: alpha"
    # The same thread id again: its events are the new run's alone.
    assert text(second_events) == "echo: beta"
    assert isinstance(second_events[-1], StopEvent)
    assert second_events[-1].final_answer == "echo: beta"
    assert after_third == second_events[3:]
    assert snapshot.cursor == second_events[-1].cursor and after_snapshot == []


async def test_a_start_right_after_the_stop_event_is_the_follow_up_not_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stop is the run's last event, published just before its workflow closes: a
    # person who read it and answers at once goes on, rather than hearing "busy". The
    # start is made to see the run still running (as it does in that moment).
    async with client_env(tmp_path) as env:
        thread = env.client.thread("quick")
        first = await thread.start("turn 1", options=env.options(), key="k1")
        read = [event async for event in first.events()]  # to its stop
        assert read[-1].type == "stop"
        seen = await thread._latest()
        assert seen is not None
        await first.result()
        real = thread._latest
        reads = iter([replace(seen, status="running")])

        async def still_running() -> object:
            return next(reads, None) or await real()

        monkeypatch.setattr(thread, "_latest", still_running)
        second = await thread.start("turn 2", key="k2")
        result = await second.result()
    assert (second.workflow_id, second.origin) == ("quick/2", "started")
    assert [m.content for m in result.transcript if m.role == "user"] == ["turn 1", "turn 2"]


async def test_starts_racing_runs_that_end_at_once_make_one_chain_with_no_overlap(
    tmp_path: Path,
) -> None:
    # Eight clients start follow-ups together, on runs that answer at once: some starts
    # follow a run that ended a moment ago, some lose the race for an id. Whatever won,
    # the thread's runs are one chain: each began after the one before it closed, and
    # each carried all of it (no follow-up of an older run, dropping a newer one).
    async with client_env(tmp_path) as env:
        seed = await env.client.thread("chain").start("seed", options=env.options(), key="s")
        await seed.result()
        outcomes = await asyncio.gather(
            *(env.client.thread("chain").start(f"p{n}", key=f"k{n}") for n in range(8)),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if not isinstance(outcome, BaseException):
                await outcome.result()
        latest = await env.client.thread("chain").latest()
        assert latest is not None and latest.number is not None
        runs = [env.client.thread("chain").run(n) for n in range(1, latest.number + 1)]
        described = [await run.temporal_handle.describe() for run in runs]
        transcripts = [(await run.result()).transcript for run in runs]
    assert all(isinstance(o, ThreadBusy) for o in outcomes if isinstance(o, BaseException))
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    assert {o.origin for o in started} == {"started"} and len(started) == len(runs) - 1
    for before, after in itertools.pairwise(described):
        assert before.close_time is not None and before.close_time <= after.start_time
    for earlier, later in itertools.pairwise(transcripts):
        assert later[: len(earlier)] == earlier


async def test_concurrent_first_starts_of_a_new_thread_start_one_run(tmp_path: Path) -> None:
    async with client_env(tmp_path) as env:
        keys = ["same"] * 4 + ["other-1", "other-2"]
        outcomes = await asyncio.gather(
            *(
                env.client.thread("fresh").start("WAIT first", options=env.options(), key=key)
                for key in keys
            ),
            return_exceptions=True,
        )
        env.release.set()
        started = [o for o in outcomes if not isinstance(o, BaseException)]
        await started[0].result()
    assert {h.workflow_id for h in started} == {"fresh/1"}
    assert sorted(h.origin for h in started).count("started") == 1
    winner = next(
        k for k, o in zip(keys, outcomes, strict=True) if getattr(o, "origin", "") == "started"
    )
    # The winner's key attached everywhere it was retried; every other key was refused.
    for key, outcome in zip(keys, outcomes, strict=True):
        if key == winner:
            assert not isinstance(outcome, BaseException)
        else:
            assert isinstance(outcome, ThreadBusy), (key, outcome)
