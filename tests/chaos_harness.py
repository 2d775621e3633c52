"""The chaos suite's harness: a dev server on a SQLite file, several worker processes,
a scripted provider, seeded runs with followers, faults, a person, and the facts.

`run_chaos(config, workdir)` deals the seeded plan (`chaos_plan`) to real processes:

- a Temporal dev server (`temporal server start-dev --db-filename`), SIGKILLed and
  started again on the same file and port, under `parent_watch` so it dies with this
  process whatever happens;
- `shape.workers` worker processes (`chaos_worker_main.py`), SIGKILLed and restarted
  after a seeded pause, one SIGSTOPped and later SIGCONTed; `cache_off_slots` run with
  the workflow cache off, so every activation replays; a worker that dies by itself is
  restarted too, and counted;
- runs started through the client API (`SteadyloopClient.thread(...).start`, under a
  key, so a start retried across a server outage starts one run), each with a follower
  reading `RunHandle.events()`;
- a person who watches runs whose calls are slow (querying their ambiguous calls as a
  page refreshing would, so queries land while the run waits), lists ambiguous calls
  (the run's snapshot, and the follower's `ambiguous_receipt` events), looks in the
  effects file whether the call's effect happened, and resolves it as happened or not;
- busy workers: the event log's local activities take `log_delay_s`, so those queries
  land while one runs (what moved a patch check or a clock reading to another workflow
  task live than on replay).

When the chaos window is over every worker is resumed and restarted, the runs get
`settle_s` to end (a run still running then is wedged), and the facts are collected:
each run's end, the followers' reads and a fresh read of each final log, every history
in the namespace (event types, `WorkflowTaskFailed` messages, and a replay under
`temporalio.worker.Replayer` with the project's workflows and sandbox), and the
effects file. `chaos_checker.check` turns them into counted verdicts. The workdir keeps
what a failure is read from: `chaos.log` (what was dealt, when), `report.txt`,
`facts.json`, the effects file, each worker's log and the server's database. Every
process it started is stopped in a `finally`; every wait is bounded; only 127.0.0.1 is
used.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from chaos_checker import (
    AmbiguousSeen,
    ChaosFacts,
    ChaosReport,
    FaultFact,
    FollowerFacts,
    HistoryFacts,
    ResolutionFact,
    ResolutionKind,
    RunFacts,
    answers_by_ref,
    check,
    parse_effects,
    ref_of,
)
from chaos_plan import LOOKUP_TIMEOUT_S, ChaosPlan, FaultStep, PlanShape, RunPlan, make_plan
from chaos_worker_main import MUTANT_ENV
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.worker import Replayer

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._receipts.ledger import DidNotHappen, Happened
from steadyloop._run.models import AmbiguousCall, RunLimits, RunResult
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.dev_server import _is_free, free_port
from steadyloop._worker.process import RUN_WORKFLOWS, workflow_runner
from steadyloop._worker.sandbox import SERVING_WORKFLOWS
from steadyloop.client import RunHandle, RunOptions, SteadyloopClient
from steadyloop.testing import (
    Pause,
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    finish_chunk,
    sse_response,
    text_chunks,
    tool_call_chunks,
)

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
WORKER_SCRIPT = HERE / "chaos_worker_main.py"
PARENT_WATCH = Path(sys.modules["steadyloop"].__file__ or "").parent / "_worker" / "parent_watch.py"
ENDPOINT = "scripted"
MODEL = "scripted-model"
HOST = "127.0.0.1"
PROMPT_PREFIX = "chaos run "

SERVER_START_S = 30.0  # a dev server answers within this, or the run is abandoned
WORKER_START_S = 45.0  # a worker prints READY within this (imports on a busy machine)
STOP_GUARD_S = 10.0
START_RETRY_S = 60.0  # a run's start is retried (same key) for this long
CRASH_LIMIT = 20  # restarts of workers that died by themselves, before giving up
MAX_FOLLOW_RESUMES = 5
STREAM_PAUSE_S = 0.05  # between a scripted stream's chunks, so kills land mid-stream
# Before a stream's first chunk: a worker lost then has forwarded nothing, so its turn is
# retried (a loss after the first text stops a forwarded run `output_interrupted`).
FIRST_TOKEN_S = 0.3


@dataclass(frozen=True)
class ChaosConfig:
    """A chaos run: the seed, the plan's shape, and the harness's bounds."""

    seed: int
    shape: PlanShape = field(default_factory=PlanShape)
    cache_off_slots: tuple[int, ...] = (0,)
    mutant: str | None = None
    settle_s: float = 90.0  # after the window, runs still running this long are wedged
    follower_bound_s: float = 20.0
    person_poll_s: float = 1.0
    # A person also reads every running run's snapshot this often (besides when a
    # follower sees an ambiguous call): a follower may miss events, the person must not;
    # and queries arriving while workers die are part of the storm.
    person_sweep_s: float = 2.0
    # Before resolving a call, the person watches the run for this long, reading its
    # snapshot every `person_watch_every_s` (a page refreshing while they check the
    # ledger): queries land while the run waits, as they do in production.
    person_think_s: float = 2.0
    person_watch_every_s: float = 0.1
    # A call running this long catches the person's eye: they watch the run (its
    # ambiguous calls read every `person_watch_every_s`) for up to `person_watch_s`.
    person_notice_s: float = 1.0
    person_watch_s: float = 20.0
    # The event log's local activities take this long on every worker (a busy worker),
    # so those queries land while one runs.
    log_delay_s: float = 0.3


def run_limits() -> RunLimits:
    """Bounds that let a run recover from lost workers in seconds, not minutes: a lost
    model attempt is noticed by its heartbeat timeout and retried."""
    return RunLimits(
        max_turns=12,
        model_timeout_s=30.0,
        model_heartbeat_timeout_s=4.0,
        model_attempts=8,
        model_retry_initial_s=0.5,
    )


# -- the scripted model ---------------------------------------------------------------


def responder(plan: ChaosPlan) -> Callable[[RecordedRequest], ScriptedResponse]:
    """Answers each request from the run's script: the run is named by its prompt, the
    turn is the number of assistant messages so far (so a retried turn gets the same
    answer); after a pause, a few words of text before the calls, then the calls; after
    the last turn, the answer."""
    runs = {run.name: run for run in plan.runs}

    def respond(request: RecordedRequest) -> ScriptedResponse:
        body = request.json
        messages: list[dict[str, Any]] = body["messages"]
        prompt = next(str(m["content"]) for m in messages if m.get("role") == "user")
        run = runs[prompt.removeprefix(PROMPT_PREFIX)]
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < len(run.turns):
            calls = [
                ScriptedCall(call.tool, call.arguments(), id=call.call_id)
                for call in run.turns[turn]
            ]
            return sse_response(
                [
                    Pause(FIRST_TOKEN_S),
                    *text_chunks(f"Turn {turn}: on it."),
                    Pause(STREAM_PAUSE_S),
                    *tool_call_chunks(calls, role=False),
                    finish_chunk("tool_calls"),
                ]
            )
        answer = _paced(text_chunks(run.answer))
        return sse_response([Pause(FIRST_TOKEN_S), *answer, finish_chunk("stop")])

    return respond


def _paced(chunks: list[Any]) -> list[Any]:
    paced: list[Any] = []
    for chunk in chunks:
        paced += [chunk, Pause(STREAM_PAUSE_S)]
    return paced


# -- processes ------------------------------------------------------------------------


class DevServer:
    """`temporal server start-dev` on a SQLite file and a fixed port, killable and
    restartable on the same file and port."""

    def __init__(self, workdir: Path) -> None:
        self.db = workdir / "temporal.sqlite"
        self.log = workdir / "temporal.log"
        self.port = free_port(HOST)
        self.address = f"{HOST}:{self.port}"
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self) -> None:
        args = [
            "-I",
            str(PARENT_WATCH),
            str(os.getpid()),
            dev_server_path(),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db),
            "--ip",
            HOST,
            "--port",
            str(self.port),
            "--headless",
            "--log-level",
            "error",
            *dev_server_args(),
        ]
        with self.log.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, *args, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL
            )
        self.starts += 1
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if self.process.returncode is not None:
                raise RuntimeError(f"the dev server exited: {self.log.read_text()[-2000:]}")
            try:
                client = await Client.connect(self.address)
                await client.workflow_service.get_system_info(GetSystemInfoRequest())
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def kill(self) -> None:
        """SIGKILL (the server dies with its watcher, by the kernel's death signal)."""
        if self.process is None:
            return
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), STOP_GUARD_S)
        deadline = time.monotonic() + STOP_GUARD_S
        # The port can be bound again once the killed server let it go.
        while not _is_free(HOST, self.port) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), STOP_GUARD_S)
            except TimeoutError:
                await self.kill()


@dataclass
class WorkerSlot:
    """One worker's place: the process in it now, and how it is started."""

    number: int
    cache_off: bool
    process: asyncio.subprocess.Process | None = None
    lines: list[str] = field(default_factory=list)
    expected_exit: bool = False
    stopped: bool = False  # SIGSTOPped now
    starts: int = 0

    @property
    def pid(self) -> int | None:
        if self.process is None or self.process.returncode is not None:
            return None
        return self.process.pid


class Chaos:
    """Everything one chaos run holds while it runs."""

    def __init__(self, config: ChaosConfig, workdir: Path) -> None:
        self.config = config
        self.plan = make_plan(config.seed, config.shape)
        self.workdir = workdir
        self.effects = workdir / "effects.jsonl"
        self.blobs = workdir / "blobs"
        self.server = DevServer(workdir)
        self.task_queue = f"chaos-{uuid.uuid4().hex[:8]}"
        self.slots = [
            WorkerSlot(n, cache_off=n in config.cache_off_slots)
            for n in range(config.shape.workers)
        ]
        self.faults: list[FaultFact] = []
        self.ambiguous: list[AmbiguousSeen] = []
        self.resolutions: list[ResolutionFact] = []
        self.handles: dict[str, RunHandle] = {}
        self.followers: dict[str, asyncio.Task[FollowerFacts]] = {}
        self.follower_reads: dict[str, list[str]] = {}
        self.hinted: set[str] = set()  # runs whose follower saw an ambiguous call
        self.over: set[str] = set()  # runs seen to have stopped: the person skips them
        self.resolving: set[str] = set()  # runs the person is looking at now
        # Per run, the calls its follower saw asked and not yet answered (call id: when).
        self.pending: dict[str, dict[str, float]] = {}
        self.start_errors: dict[str, str] = {}
        self.background: set[asyncio.Task[Any]] = set()
        self.provider: ScriptedServer | None = None
        self.client: Client | None = None
        self.sl: SteadyloopClient | None = None
        self.crashes = 0
        self.closing = False
        self.log_lines: list[str] = []

    def note(self, text: str) -> None:
        self.log_lines.append(f"{time.strftime('%H:%M:%S')} {text}")

    def spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # -- workers -------------------------------------------------------------------

    async def start_worker(self, slot: WorkerSlot) -> None:
        assert self.provider is not None
        args = [
            str(WORKER_SCRIPT),
            "--address",
            self.server.address,
            "--task-queue",
            self.task_queue,
            "--base-url",
            self.provider.base_url,
            "--effects",
            str(self.effects),
            "--blob-dir",
            str(self.blobs),
            "--parent-pid",
            str(os.getpid()),
        ]
        if slot.cache_off:
            args.append("--cache-off")
        if self.config.log_delay_s:
            args += ["--log-delay", str(self.config.log_delay_s)]
        env = dict(os.environ)
        env.pop(MUTANT_ENV, None)
        if self.config.mutant:
            env[MUTANT_ENV] = self.config.mutant
        log = self.workdir / f"worker-{slot.number}.log"
        with log.open("ab") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
            )
        slot.process = process
        slot.expected_exit = False
        slot.stopped = False
        slot.starts += 1
        ready = asyncio.Event()
        self.spawn(self._read_worker(slot, process, ready))
        self.spawn(self._supervise(slot, process))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ready.wait(), WORKER_START_S)
        self.note(f"worker {slot.number} started (pid {process.pid}, cache_off={slot.cache_off})")

    async def _read_worker(
        self, slot: WorkerSlot, process: asyncio.subprocess.Process, ready: asyncio.Event
    ) -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            slot.lines.append(line)
            if line == "READY":
                ready.set()
        ready.set()

    async def _supervise(self, slot: WorkerSlot, process: asyncio.subprocess.Process) -> None:
        """A worker that exits by itself is a fault too: counted, and restarted."""
        code = await process.wait()
        if slot.process is not process or slot.expected_exit or self.closing:
            return
        self.crashes += 1
        now = time.time()
        self.faults.append(FaultFact("crash", now, now, process.pid))
        self.note(f"worker {slot.number} (pid {process.pid}) exited by itself: {code}")
        if self.crashes > CRASH_LIMIT:
            return
        await asyncio.sleep(1.0)
        if not self.closing and slot.process is process:
            await self.start_worker(slot)

    async def kill_worker(self, slot: WorkerSlot, hold_s: float) -> None:
        process = slot.process
        if process is None or process.returncode is not None:
            return
        slot.expected_exit = True
        t = time.time()
        process.send_signal(signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_GUARD_S)
        self.note(f"killed worker {slot.number} (pid {process.pid}), restart in {hold_s:.1f} s")
        await asyncio.sleep(hold_s)
        self.faults.append(FaultFact("kill", t, time.time(), process.pid))
        if not self.closing:
            await self.start_worker(slot)

    async def stall_worker(self, slot: WorkerSlot, hold_s: float) -> None:
        process = slot.process
        if process is None or process.returncode is not None or slot.stopped:
            return
        t = time.time()
        slot.stopped = True
        process.send_signal(signal.SIGSTOP)
        self.note(f"stopped worker {slot.number} (pid {process.pid}) for {hold_s:.1f} s")
        await asyncio.sleep(hold_s)
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
        slot.stopped = False
        self.faults.append(FaultFact("stall", t, time.time(), process.pid))

    async def restart_server(self, hold_s: float) -> None:
        t = time.time()
        await self.server.kill()
        self.note(f"killed the dev server, restart in {hold_s:.1f} s")
        await asyncio.sleep(hold_s)
        await self.server.start()
        self.faults.append(FaultFact("server", t, time.time(), None))
        self.note("dev server back")

    async def live_slot(self, planned: int) -> WorkerSlot | None:
        """The planned slot if its worker runs (not stopped, not restarting), else the
        next one that does, waiting a little for one (bounded): a fault in the plan is
        dealt, not skipped because an earlier one is still being repaired."""
        deadline = time.monotonic() + WORKER_START_S
        while time.monotonic() < deadline:
            for offset in range(len(self.slots)):
                slot = self.slots[(planned + offset) % len(self.slots)]
                if slot.pid is not None and not slot.stopped and not slot.expected_exit:
                    return slot
            await asyncio.sleep(0.2)
        return None

    async def deal(self, step: FaultStep) -> None:
        if step.kind == "server":
            await self.restart_server(step.hold_s)
            return
        assert step.slot is not None
        slot = await self.live_slot(step.slot)
        if slot is None:
            self.note(f"no live worker for the {step.kind} at {step.at_s:.1f} s")
            return
        if step.kind == "kill":
            await self.kill_worker(slot, step.hold_s)
        else:
            await self.stall_worker(slot, step.hold_s)

    # -- runs ----------------------------------------------------------------------

    async def start_run(self, run: RunPlan) -> None:
        assert self.sl is not None
        options = RunOptions(
            endpoint=ENDPOINT,
            model=MODEL,
            tools=["lookup", "deliver", "charge"],
            limits=run_limits(),
            forwarding=ForwardingOptions(enabled=run.forwarded),
            local_pure_tools_s=LOOKUP_TIMEOUT_S if run.local_pure else None,
        )
        thread = self.sl.thread(run.name)
        deadline = time.monotonic() + START_RETRY_S
        while True:
            try:
                handle = await thread.start(
                    PROMPT_PREFIX + run.name, options=options, key=f"start-{run.name}"
                )
                break
            except Exception as error:  # a server outage: the same key starts one run
                if time.monotonic() > deadline:
                    self.start_errors[run.name] = repr(error)[:300]
                    return
                await asyncio.sleep(0.5)
        self.handles[handle.workflow_id] = handle
        self.followers[handle.workflow_id] = asyncio.ensure_future(self.follow(handle))
        self.note(
            f"started {handle.workflow_id} (forwarded={run.forwarded}, local pure={run.local_pure})"
        )

    async def follow(self, handle: RunHandle) -> FollowerFacts:
        """Read the run's events as they come, resuming after the last one read when a
        read fails (the server went away), as a client following a run does."""
        events = self.follower_reads.setdefault(handle.workflow_id, [])
        pending = self.pending.setdefault(handle.workflow_id, {})
        cursor: str | None = None
        error: str | None = None
        resumed = 0
        ended = False
        while True:
            try:
                async for event in handle.events(after=cursor):
                    events.append(event.model_dump_json())
                    cursor = event.cursor
                    if event.type == "tool_call":
                        pending[event.call_id] = time.time()
                    elif event.type == "tool_result":
                        pending.pop(event.call_id, None)
                    if event.type == "ambiguous_receipt":
                        self.hinted.add(handle.workflow_id)
                        self.ambiguous.append(
                            AmbiguousSeen(
                                handle.workflow_id,
                                ref_of(event.arguments),
                                event.tool,
                                event.attempt,
                                time.time(),
                                source="event",
                            )
                        )
                    if event.type == "stop":
                        ended = True
                        self.over.add(handle.workflow_id)
                break
            except Exception as failure:
                error = f"{type(failure).__name__}: {failure}"[:300]
                if resumed >= MAX_FOLLOW_RESUMES:
                    break
                resumed += 1
                await asyncio.sleep(1.0)
        return FollowerFacts(
            handle.workflow_id, tuple(events), ended=ended, error=error, resumed=resumed
        )

    async def person(self) -> None:
        """Resolve ambiguous calls from the effects file, until told to stop: a run the
        follower hinted at (or, every sweep, any run still going) is looked at, watched a
        while if it waits on a call, and its calls resolved; one look per run at a time."""
        tick = 0
        sweep_every = max(1, round(self.config.person_sweep_s / self.config.person_poll_s))
        while True:
            await asyncio.sleep(self.config.person_poll_s)
            tick += 1
            sweep = tick % sweep_every == 0
            for workflow_id, handle in list(self.handles.items()):
                if workflow_id in self.over or workflow_id in self.resolving:
                    continue
                if sweep or workflow_id in self.hinted or self.slow_calls(workflow_id):
                    self.resolving.add(workflow_id)
                    self.spawn(self._resolve_run(workflow_id, handle))

    def slow_calls(self, workflow_id: str) -> bool:
        """Whether the follower shows a call of the run running for a while (a person
        watching the run's page would notice it)."""
        started = self.pending.get(workflow_id, {}).values()
        return any(time.time() - t >= self.config.person_notice_s for t in started)

    async def _resolve_run(self, workflow_id: str, handle: RunHandle) -> None:
        """Look at a run: while a call of it is slow, watch it (its ambiguous calls read
        every `person_watch_every_s`, as a page refreshing would); once it waits on
        ambiguous calls, watch a while longer, check the effects file, and resolve."""
        try:
            snapshot = await handle.snapshot()
            watch_until = time.monotonic() + self.config.person_watch_s
            while snapshot.status == "running" and not snapshot.ambiguous_receipts:
                if not self.slow_calls(workflow_id) or time.monotonic() > watch_until:
                    self.hinted.discard(workflow_id)
                    return
                await asyncio.sleep(self.config.person_watch_every_s)
                waiting = await handle.temporal_handle.query(
                    "ambiguous_receipts", result_type=list[AmbiguousCall]
                )
                if waiting:
                    snapshot = await handle.snapshot()
            if snapshot.status != "running":
                self.hinted.discard(workflow_id)
                self.over.add(workflow_id)
                return
            now = time.time()
            for call in snapshot.ambiguous_receipts:
                ref = ref_of(call.arguments)
                self.ambiguous.append(AmbiguousSeen(workflow_id, ref, call.tool, call.attempt, now))
            think_until = time.monotonic() + self.config.person_think_s
            while time.monotonic() < think_until:
                await asyncio.sleep(self.config.person_watch_every_s)
                snapshot = await handle.snapshot()
            for call in snapshot.ambiguous_receipts:
                await self._resolve(workflow_id, handle, call)
        except Exception:
            return  # no worker answered now (killed, stopped, server away): next time
        finally:
            self.resolving.discard(workflow_id)

    async def _resolve(self, workflow_id: str, handle: RunHandle, call: AmbiguousCall) -> None:
        ref = ref_of(call.arguments)
        now = time.time()
        effects = parse_effects(self.effects.read_text()) if self.effects.exists() else []
        happened = any(
            line.kind == "effect" and line.ref == ref and line.workflow_id == workflow_id
            for line in effects
        )
        resolution: Happened | DidNotHappen = (
            Happened(result=f"charged for {ref} (a person checked the ledger)")
            if happened
            else DidNotHappen()
        )
        try:
            await handle.resolve_receipt(
                call, resolution, key=f"resolve-{ref}-{call.attempt}"[:200]
            )
        except Exception as error:
            self.note(f"resolving {ref} attempt {call.attempt} failed: {error!r}"[:300])
            return
        kind: ResolutionKind = "happened" if happened else "did_not_happen"
        self.resolutions.append(ResolutionFact(workflow_id, ref, call.attempt, kind, now))
        self.note(f"resolved {ref} attempt {call.attempt}: {kind}")

    # -- collecting ----------------------------------------------------------------

    async def run_facts(self, run: RunPlan) -> RunFacts:
        workflow_id = f"{run.name}/1"
        handle = self.handles.get(workflow_id)
        if handle is None:
            detail = self.start_errors.get(run.name, "never started")
            return RunFacts(workflow_id, run.forwarded, "not_started", detail=detail)
        status = await _retrying(handle.status)
        if status != "completed":
            detail = ""
            if status != "running":
                try:
                    await handle.result()
                except Exception as error:
                    detail = str(error)
            return RunFacts(workflow_id, run.forwarded, status, detail=detail)
        result: RunResult = await _retrying(handle.result)
        return RunFacts(
            workflow_id,
            run.forwarded,
            status,
            stop_reason=result.stop_reason,
            detail=result.detail or "",
            answers=answers_by_ref(result.transcript),
        )

    async def follower_facts(self, workflow_id: str, ended_run: bool) -> FollowerFacts:
        task = self.followers[workflow_id]
        try:
            read = await asyncio.wait_for(
                asyncio.shield(task), self.config.follower_bound_s if ended_run else 0.1
            )
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            events = tuple(self.follower_reads.get(workflow_id, []))
            read = FollowerFacts(workflow_id, events, ended=False, error="still reading")
        final: tuple[str, ...] | None = None
        final_error: str | None = None
        if ended_run:
            assert self.client is not None
            fresh = SteadyloopClient(self.client, task_queue=self.task_queue)
            try:
                final = await asyncio.wait_for(
                    _read_all(fresh.run(workflow_id)), self.config.follower_bound_s
                )
            except Exception as error:
                final_error = f"{type(error).__name__}: {error}"[:300]
        return FollowerFacts(
            workflow_id,
            read.events,
            ended=read.ended,
            error=read.error,
            resumed=read.resumed,
            final=final,
            final_error=final_error,
        )

    async def histories(self) -> list[HistoryFacts]:
        assert self.client is not None
        replayer = Replayer(
            workflows=[*RUN_WORKFLOWS, *SERVING_WORKFLOWS],
            data_converter=steadyloop_data_converter(self.blobs),
            workflow_runner=workflow_runner(),
        )
        facts: list[HistoryFacts] = []
        async for execution in self.client.list_workflows():
            handle = self.client.get_workflow_handle(execution.id, run_id=execution.run_id)
            history = await _retrying(handle.fetch_history)
            failures = tuple(
                e.workflow_task_failed_event_attributes.failure.message
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            )
            replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            failure = None if replay.replay_failure is None else repr(replay.replay_failure)
            facts.append(
                HistoryFacts(
                    execution.id,
                    execution.run_id,
                    execution.workflow_type,
                    len(history.events),
                    failures,
                    failure,
                )
            )
        return facts


async def _read_all(handle: RunHandle) -> tuple[str, ...]:
    return tuple([event.model_dump_json() async for event in handle.events()])


async def _retrying(probe: Callable[[], Awaitable[T]], attempts: int = 20) -> T:
    """A read retried across a moment without a server (bounded)."""
    for attempt in range(attempts):
        try:
            return await probe()
        except Exception:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


@asynccontextmanager
async def _servers(chaos: Chaos) -> AsyncIterator[None]:
    async with ScriptedServer(responder(chaos.plan)) as provider:
        chaos.provider = provider
        await chaos.server.start()
        try:
            chaos.client = await Client.connect(
                chaos.server.address, data_converter=steadyloop_data_converter(chaos.blobs)
            )
            chaos.sl = SteadyloopClient(chaos.client, task_queue=chaos.task_queue)
            yield
        finally:
            chaos.closing = True
            for task in list(chaos.background) + list(chaos.followers.values()):
                task.cancel()
            for slot in chaos.slots:
                process = slot.process
                if process is not None and process.returncode is None:
                    slot.expected_exit = True
                    process.send_signal(signal.SIGCONT)
                    process.send_signal(signal.SIGKILL)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(process.wait(), STOP_GUARD_S)
            await chaos.server.stop()


async def run_chaos(
    config: ChaosConfig, workdir: Path, *, log: Callable[[str], None] | None = None
) -> tuple[ChaosFacts, ChaosReport]:
    """Deal the plan for `config.seed` to real processes, collect the facts, check them."""
    began = time.monotonic()
    chaos = Chaos(config, workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    chaos.blobs.mkdir(exist_ok=True)
    say = log or (lambda text: None)
    async with _servers(chaos):
        await asyncio.gather(*(chaos.start_worker(slot) for slot in chaos.slots))
        mutants = [line for slot in chaos.slots for line in slot.lines if line.startswith("MUTANT")]
        mutant = f", {mutants[0]}" if mutants else ""
        say(
            f"dev server {chaos.server.address}, {len(chaos.slots)} workers "
            f"({len(config.cache_off_slots)} with the cache off){mutant}"
        )
        person = asyncio.ensure_future(chaos.person())
        zero = time.monotonic()

        async def at(seconds: float, work: Callable[[], Awaitable[None]]) -> None:
            await asyncio.sleep(max(0.0, zero + seconds - time.monotonic()))
            await work()

        starts = [
            asyncio.ensure_future(at(run.start_at_s, functools.partial(chaos.start_run, run)))
            for run in chaos.plan.runs
        ]
        faults = [
            asyncio.ensure_future(at(step.at_s, functools.partial(chaos.deal, step)))
            for step in chaos.plan.faults
        ]
        await asyncio.gather(*starts)
        await asyncio.gather(*faults)
        say(f"chaos window over after {time.monotonic() - zero:.0f} s; settling")
        for slot in chaos.slots:  # every worker back: nothing left stopped or dead
            if slot.pid is None and not chaos.closing:
                await chaos.start_worker(slot)
        settle_until = time.monotonic() + config.settle_s
        ended: dict[str, bool] = {}
        for workflow_id, handle in chaos.handles.items():
            remaining = max(0.1, settle_until - time.monotonic())
            try:
                await asyncio.wait_for(_ended(handle), remaining)
                ended[workflow_id] = True
            except TimeoutError:
                ended[workflow_id] = False
        person.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await person
        say(f"runs settled after {time.monotonic() - zero:.0f} s; collecting")
        runs = [await chaos.run_facts(run) for run in chaos.plan.runs]
        followers = [
            await chaos.follower_facts(workflow_id, ended.get(workflow_id, False))
            for workflow_id in chaos.handles
        ]
        histories = await chaos.histories()
        effects = parse_effects(chaos.effects.read_text()) if chaos.effects.exists() else []
        provider_errors = [repr(e)[:300] for e in (chaos.provider.errors if chaos.provider else [])]
        mutant_seen = [line for slot in chaos.slots for line in slot.lines if "MUTANT" in line]
        if config.mutant and not mutant_seen:
            provider_errors.append(f"mutant {config.mutant} was never reported active")
    facts = ChaosFacts(
        plan=chaos.plan,
        effects=effects,
        faults=chaos.faults,
        runs=runs,
        histories=histories,
        followers=followers,
        ambiguous=chaos.ambiguous,
        resolutions=chaos.resolutions,
        provider_errors=provider_errors,
        mutant=config.mutant,
        wall_s=time.monotonic() - began,
    )
    report = check(facts)
    (workdir / "chaos.log").write_text("\n".join(chaos.log_lines) + "\n")
    (workdir / "report.txt").write_text("\n".join(report.lines(violations=1000)) + "\n")
    (workdir / "facts.json").write_text(json.dumps(dataclasses.asdict(facts), default=str))
    return facts, report


async def _ended(handle: RunHandle) -> None:
    """Returns once the run's workflow is closed (polled by describe: bounded by the
    caller's timeout, and unaffected by a server outage in between)."""
    while True:
        try:
            if (await handle.status()) != "running":
                return
        except Exception:
            pass
        await asyncio.sleep(0.5)
