"""An in-memory `RunBackend` for the HTTP layer's tests: threads, runs and their logs.

It keeps what a real backend keeps in Temporal (runs by tenant and thread, each run's
event log, decisions by idempotency key) so the routes can be driven without a server;
the real flow runs in `test_web_devserver.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from steadyloop._web.backend import (
    BadCursor,
    CursorTooOld,
    Decision,
    NotTheCall,
    RunClosed,
    RunInFlight,
    RunRequest,
    Started,
    StreamEvent,
    ThreadNotFound,
    TooManyRuns,
    UnknownCall,
    UnknownRun,
    WaitingForWorker,
)


def cursor(n: int) -> str:
    return f"000000-{n:012d}"


@dataclass
class FakeRun:
    run_id: str
    prompt: str
    events: list[StreamEvent] = field(default_factory=list)
    oldest: int = 0  # events before this index are no longer retained
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    pending: dict[str, str] = field(default_factory=dict)  # call id -> sha
    decisions: dict[str, Decision] = field(default_factory=dict)  # idempotency key -> it
    decided: list[tuple[str, bool]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    reads: int = 0  # subscriptions opened on the log
    # Seconds each read of the log waits before handing over an event (a reader that
    # gets the log in separate polls).
    read_gap_s: float = 0.0

    def publish(self, event_type: str, /, **data: Any) -> StreamEvent:
        event = StreamEvent(
            cursor=cursor(len(self.events)), type=event_type, data={"type": event_type, **data}
        )
        self.events.append(event)
        if event_type == "stop":
            self.ended = True
        self.changed.set()
        return event


@dataclass
class FakeBackend:
    threads: dict[tuple[str, str], list[FakeRun]] = field(default_factory=dict)
    starts: dict[tuple[str, str, str], str] = field(default_factory=dict)
    worker_up: bool = True
    # Set: every new run is refused by the tenant's limits (seconds to retry after).
    refuse_runs: float | None = None
    # Called with each run it starts (a test publishes the run's events there).
    on_start: Callable[[FakeRun], None] | None = None
    # Called with each run a decision was recorded on (the run goes on there).
    on_decide: Callable[[FakeRun], None] | None = None
    minted: int = 0
    calls: int = 0
    open_reads: int = 0  # reads of a run's log not yet closed

    def run(self, tenant: str, thread_id: str, run_id: str) -> FakeRun:
        runs = self.threads.get((tenant, thread_id))
        if runs is None:
            raise ThreadNotFound(f"no thread {thread_id!r}")
        for run in runs:
            if run.run_id == run_id:
                return run
        raise UnknownRun(f"no run {run_id!r} on thread {thread_id!r}")

    async def create_thread(self, tenant: str, thread_id: str | None) -> str:
        self.calls += 1
        if thread_id is None:
            self.minted += 1
            thread_id = f"thread-{self.minted}"
        self.threads.setdefault((tenant, thread_id), [])
        return thread_id

    async def thread(self, tenant: str, thread_id: str) -> dict[str, Any]:
        runs = self.threads.get((tenant, thread_id))
        if runs is None:
            raise ThreadNotFound(f"no thread {thread_id!r}")
        return {
            "thread_id": thread_id,
            "runs": [r.run_id for r in runs],
            "last_run_id": runs[-1].run_id if runs else None,
        }

    async def start(
        self, tenant: str, thread_id: str, request: RunRequest, idempotency_key: str | None
    ) -> Started:
        self.calls += 1
        runs = self.threads.get((tenant, thread_id))
        if runs is None:
            raise ThreadNotFound(f"no thread {thread_id!r}")
        if idempotency_key is not None and (tenant, thread_id, idempotency_key) in self.starts:
            run_id = self.starts[(tenant, thread_id, idempotency_key)]
            return Started(thread_id=thread_id, run_id=run_id, outcome="attached")
        if runs and not runs[-1].ended:
            if request.steer:
                runs[-1].messages.append(request.prompt)
                return Started(thread_id=thread_id, run_id=runs[-1].run_id, outcome="steered")
            raise RunInFlight(f"run {runs[-1].run_id} is in flight", runs[-1].run_id)
        if self.refuse_runs is not None:
            raise TooManyRuns("the tenant has too many runs active", self.refuse_runs)
        run = FakeRun(run_id=f"{thread_id}-run-{len(runs) + 1}", prompt=request.prompt)
        runs.append(run)
        if idempotency_key is not None:
            self.starts[(tenant, thread_id, idempotency_key)] = run.run_id
        if self.on_start is not None:
            self.on_start(run)
        return Started(thread_id=thread_id, run_id=run.run_id, outcome="started")

    async def check_run(self, tenant: str, thread_id: str, run_id: str) -> None:
        self.run(tenant, thread_id, run_id)

    async def events(
        self, tenant: str, thread_id: str, run_id: str, after: str | None
    ) -> AsyncGenerator[StreamEvent, None]:
        run = self.run(tenant, thread_id, run_id)
        run.reads += 1
        if after is None:
            index = 0
        else:
            if not after.startswith("000000-") or not after[7:].isdigit():
                raise BadCursor(f"invalid event cursor {after!r}")
            index = int(after[7:]) + 1
        if index < run.oldest:
            raise CursorTooOld(f"events after {after} are gone", cursor(run.oldest))
        self.open_reads += 1  # reads of a log not yet closed (a stream let go closes it)
        try:
            while True:
                while index < len(run.events):
                    if run.read_gap_s:
                        await asyncio.sleep(run.read_gap_s)
                    yield run.events[index]
                    index += 1
                if run.ended:
                    return
                run.changed.clear()
                await run.changed.wait()
        finally:
            self.open_reads -= 1

    async def snapshot(self, tenant: str, thread_id: str, run_id: str) -> dict[str, Any]:
        run = self.run(tenant, thread_id, run_id)
        return {
            "run_id": run.run_id,
            "cursor": run.events[-1].cursor if run.events else None,
            "pending_approvals": [
                {"call_id": c, "arguments_sha256": s} for c, s in run.pending.items()
            ],
            "stop": next((e.data for e in run.events if e.type == "stop"), None),
        }

    async def decide(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        call_id: str,
        *,
        approved: bool,
        sha256: str,
        reason: str | None,
        idempotency_key: str | None,
        tool: str | None = None,
        turn: int | None = None,
    ) -> Decision:
        self.calls += 1
        run = self.run(tenant, thread_id, run_id)
        if idempotency_key in run.decisions:
            return run.decisions[idempotency_key]
        if run.ended:
            raise RunClosed(f"run {run_id} has ended")
        if call_id not in run.pending:
            raise UnknownCall(f"no call {call_id!r} waits for a decision")
        if run.pending[call_id] != sha256:
            raise NotTheCall(
                f"call {call_id!r} waits with other arguments",
                [{"call_id": call_id, "sha256": run.pending[call_id]}],
            )
        if not self.worker_up:
            raise WaitingForWorker("no worker accepted the decision yet; it is kept")
        del run.pending[call_id]
        run.decided.append((call_id, approved))
        decision = Decision(status="recorded")
        if idempotency_key is not None:
            run.decisions[idempotency_key] = decision
        if self.on_decide is not None:
            self.on_decide(run)
        return decision

    async def steer(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        action: Literal["interrupt", "pause", "unpause", "send"],
        text: str | None,
        idempotency_key: str | None,
    ) -> Decision:
        self.calls += 1
        run = self.run(tenant, thread_id, run_id)
        if run.ended:
            raise RunClosed(f"run {run_id} has ended")
        if action == "send" and text is not None:
            run.messages.append(text)
        return Decision(status="recorded", detail=action)

    async def resolve_receipt(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        key: str,
        resolution: dict[str, Any],
        idempotency_key: str | None,
    ) -> Decision:
        self.calls += 1
        self.run(tenant, thread_id, run_id)
        raise UnknownCall(f"no ambiguous receipt {key!r}")
