"""`steadyloop demo --scenario tour`: the people-in-the-loop commands, keyless, one stop at a time.

The plain demo shows a run that needs nobody. This one stops three times and waits for
*you* to type a command in another terminal, printing the exact command at each stop,
against the same embedded dev server, scripted provider (`demo_tour_conversation`) and
tools (`demo_tour_tools`):

1. An approval: `refund` is declared `approval=True`; the run waits. You `send` the
   agent a message while it waits, then `approve` the call (`--reject` works too).
2. An interrupt and a resume: a report streams slowly; you `interrupt` it, and the text
   already shown is kept as the run's partial answer; you `resume` it, and the new run
   carries on from the shown text instead of writing it again.
3. An ambiguous call after a worker crash: the run's worker is a real `steadyloop
   worker` process; `charge` takes effect and the process is SIGKILLed before it can
   report. A new worker takes over; the charge is opaque, so steadyloop does not guess:
   the call is ambiguous until you `receipts --resolve` it.

Nothing waits on a timer for you: the tour polls the run until it sees your command's
effect (a message queued, the approval decided, the run stopped, the resumed run
ended). Ctrl-C ends it, and the dev server with it.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._cli.demo import _environment, _wait_for_stop_signal, _workspace
from steadyloop._cli.demo_tour_conversation import (
    CHARGE_PROMPT,
    REFUND_PROMPT,
    REPORT_PROMPT,
    TourProvider,
)
from steadyloop._cli.demo_tour_tools import CHARGES_FILE, CRASH_ENV, REFUNDS_FILE, registry
from steadyloop._cli.invocation import program_name
from steadyloop._cli.progress import arguments_text, one_line
from steadyloop._cli.receipts import short_key
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import AmbiguousCall, RunInput, RunLimits, RunProgress, RunResult
from steadyloop._run.steering import PendingApproval
from steadyloop._stops.stop_text import stop_reason_text
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.events._publishing import log_mode_memo
from steadyloop.testing._scripted_server import ScriptedServer
from steadyloop.tools.examples import OUTBOX_DIR_ENV

TOUR_ENDPOINT = "tour"
TOUR_MODEL = "scripted-model"
TOOLS_SPEC = "steadyloop._cli.demo_tour_tools:registry"
POLL_S = 0.2
WORKER_READY = "Ctrl-C to stop."
SENT_EXAMPLE = "Also email Ana a prepaid return label."
HAPPENED_EXAMPLE = "charged 2999 cents on B-02 (checked with the bank)"

T = TypeVar("T")
# The workers' output readers, kept referenced until they end.
tour_tasks: set[asyncio.Task[None]] = set()
RunHandle = WorkflowHandle[ToolLoopWorkflow, RunResult]


@dataclass
class Tour:
    """What every stop needs: where to print, the server, and how to spell a command."""

    out: TextIO
    client: Client
    address: str
    namespace: str
    provider: ScriptedServer
    outbox: Path
    workdir: Path
    prog: str
    task_queue: str = field(default_factory=lambda: f"steadyloop-tour-{uuid.uuid4().hex[:8]}")

    def say(self, line: str = "") -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def command(self, *words: str) -> str:
        """A command for another terminal, exactly as it is to be typed."""
        tail = ["--address", self.address]
        if self.namespace != "default":
            tail += ["--namespace", self.namespace]
        return f"{self.prog} {shlex.join([*words, *tail])}"

    def next(self, intro: str, *commands: str) -> None:
        self.say(f"  {intro}")
        for command in commands:
            self.say(f"    $ {command}")
        self.say("  (the tour waits for you; Ctrl-C ends it)")

    def lines_in(self, name: str) -> list[str]:
        path = self.outbox / name
        return path.read_text(encoding="utf-8").splitlines() if path.is_file() else []

    async def start(self, run: RunInput, stem: str, task_queue: str | None = None) -> RunHandle:
        workflow_id = f"tour-{stem}-{uuid.uuid4().hex[:6]}"
        return await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=workflow_id,
            task_queue=task_queue or self.task_queue,
            memo=log_mode_memo(run),
        )


def run_input(prompt: str, tools: list[str], *, forwarding: bool = False) -> RunInput:
    return RunInput(
        endpoint=TOUR_ENDPOINT,
        model=TOUR_MODEL,
        prompt=prompt,
        system_prompt="You are steadyloop's tour agent.",
        tools=tools,
        limits=RunLimits(max_turns=6),
        forwarding=ForwardingOptions(enabled=forwarding),
    )


async def until(probe: Callable[[], Awaitable[T | None]]) -> T:
    """Poll until `probe` returns something (the user's pace: no time limit)."""
    while True:
        value = await probe()
        if value is not None:
            return value
        await asyncio.sleep(POLL_S)


async def run_tour(
    out: TextIO,
    *,
    workdir: Path | None = None,
    pace_s: float = 0.02,
    report_pace_s: float = 0.25,
    prog: str | None = None,
    keep_running: bool = False,
) -> int:
    """Run the tour, writing to `out`; 0 when every stop ended as the tour expects.
    `keep_running`: leave the dev server up afterwards, until Ctrl-C."""
    with (
        _workspace(workdir) as (sandbox, outbox),
        _environment({OUTBOX_DIR_ENV: str(outbox)}),
    ):
        root = sandbox.parent
        provider_script = TourProvider(pace_s=pace_s, report_pace_s=report_pace_s)
        async with (
            ScriptedServer(provider_script) as provider,
            dev_server(data_converter=steadyloop_data_converter(root / "blobs")) as server,
        ):
            tour = Tour(
                out=out,
                client=server.client,
                address=server.address,
                namespace=server.namespace,
                provider=provider,
                outbox=outbox,
                workdir=root,
                prog=prog or program_name(),
            )
            tour.say("steadyloop demo --scenario tour: people in the loop, all on this machine")
            tour.say(f"  Temporal dev server  {server.address} (UI {server.ui_url})")
            tour.say(f"  scripted provider    {provider.base_url}")
            tour.say(f"  outbox               {outbox} (every side effect is a line here)")
            tour.say("  Each stop prints the command to type in another terminal; the venv's")
            tour.say("  steadyloop works there as here.")
            options = WorkerOptions(
                task_queue=tour.task_queue,
                endpoints=EndpointRegistry([provider.endpoint(TOUR_ENDPOINT)]),
                tools=registry,
            )
            ok = True
            async with running_worker(server.client, options):
                ok &= await approval_stop(tour)
                ok &= await interrupt_stop(tour)
            ok &= await crash_stop(tour)
            tour.say()
            tour.say(
                "Tour done: send, approve, interrupt, resume and receipts --resolve, each "
                "on a real run."
            )
            if keep_running:
                tour.say("The dev server and its UI stay up until you press Ctrl-C.")
                await _wait_for_stop_signal()
            else:
                tour.say("The dev server stops now (--keep-running keeps it and its UI up).")
            return 0 if ok else 1


# -- 1. an approval (and a message) ------------------------------------------------------


async def approval_stop(tour: Tour) -> bool:
    tour.say()
    tour.say("[1/3] A call that waits for a person's approval")
    handle = await tour.start(run_input(REFUND_PROMPT, ["refund"]), "refund")
    tour.say(f"  run {handle.id}: {REFUND_PROMPT!r}")

    async def waiting() -> PendingApproval | None:
        calls = await handle.query(ToolLoopWorkflow.pending_approvals)
        return calls[0] if calls else None

    call = await until(waiting)
    tour.say(
        f"  the model asks: {call.tool} {arguments_text(call.arguments)}. `{call.tool}` is "
        "declared approval=True,"
    )
    tour.say(f"  so the call waits for you; {REFUNDS_FILE} is empty: nothing has moved.")
    tour.next(
        "Tell the agent something while it waits:",
        tour.command("send", handle.id, SENT_EXAMPLE),
    )

    async def message_or_decision() -> RunProgress | None:
        progress = await handle.query(ToolLoopWorkflow.progress)
        done = progress.pending_messages or not progress.pending_approvals
        return progress if done else None

    await until(message_or_decision)
    tour.say("  the message waits for the run's next model request (never between a call")
    tour.say("  and its answer). Now list the waiting call and approve the one you read:")
    tour.next(
        "(--sha binds the decision to these arguments; --reject REASON refuses it)",
        tour.command("approve", handle.id),
        tour.command("approve", handle.id, call.call_id, "--sha", call.arguments_sha256[:12]),
    )
    result = await handle.result()
    tour.say(f"  run ended: {result.stop_reason}")
    tour.say(f"  answer: {one_line(result.final_answer or '', 160)}")
    refunds = tour.lines_in(REFUNDS_FILE)
    tour.say(f"  {REFUNDS_FILE}: {len(refunds)} line(s) {refunds}")
    return result.stop_reason == "final_answer" and len(refunds) <= 1


# -- 2. an interrupt, then a resume ------------------------------------------------------


async def interrupt_stop(tour: Tour) -> bool:
    tour.say()
    tour.say("[2/3] Interrupt a run mid-answer, then resume it")
    handle = await tour.start(run_input(REPORT_PROMPT, [], forwarding=True), "report")
    tour.say(f"  run {handle.id}: {REPORT_PROMPT!r}")
    tour.say("  the model streams a long report, slowly. Watch it if you like:")
    tour.say(f"      {tour.command('show', handle.id)}")

    async def streaming() -> bool | None:
        return True if tour.provider.requests else None

    await until(streaming)
    tour.next("Then stop it mid-answer:", tour.command("interrupt", handle.id))
    result = await handle.result()
    shown = result.partial.text if result.partial is not None else ""
    tour.say(f"  run stopped: {one_line(stop_reason_text(result), 140)}")
    if result.stop_reason != "interrupted":
        tour.say("  (the report ended before an interrupt came; on to the next stop)")
        return result.stop_reason == "final_answer"
    tour.say(
        f"  {len(shown.split())} words had been shown; they are kept as the run's partial "
        f"answer, ending ...{shown[-40:]!r}"
    )
    resumed_id = f"{handle.id}-resumed-1"
    tour.next(
        "Resume it: a new run carries on from the shown text instead of writing it again:",
        tour.command("resume", handle.id),
    )
    resumed: RunHandle = tour.client.get_workflow_handle_for(ToolLoopWorkflow.run, resumed_id)

    async def started() -> bool | None:
        try:
            await resumed.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return True

    await until(started)
    after = await resumed.result()
    tour.say(f"  run {resumed_id} ended: {after.stop_reason}")
    tour.say(f"  it wrote only the rest: {one_line(after.final_answer or '', 100)!r}")
    return after.stop_reason == "final_answer"


# -- 3. an ambiguous call after a worker crash --------------------------------------------


@dataclass
class WorkerProcess:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line == WORKER_READY:
                self.ready.set()
        self.ready.set()


async def start_worker(tour: Tour, task_queue: str, *, crash: bool, number: int) -> WorkerProcess:
    """A real `steadyloop worker` process serving the tour's tools on `task_queue`."""
    environment = dict(os.environ)
    environment[OUTBOX_DIR_ENV] = str(tour.outbox)
    environment["STEADYLOOP_BLOB_DIR"] = str(tour.workdir / "blobs")
    environment.pop(CRASH_ENV, None)
    if crash:
        environment[CRASH_ENV] = "1"
    arguments = [
        "-m",
        "steadyloop",
        "worker",
        "--address",
        tour.address,
        "--namespace",
        tour.namespace,
        "--task-queue",
        task_queue,
        "--endpoint",
        f"{TOUR_ENDPOINT}={tour.provider.base_url},model={TOUR_MODEL}",
        "--tools",
        TOOLS_SPEC,
        "--graceful-shutdown",
        "1",
    ]
    log = tour.workdir / f"worker-{number}.log"
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *arguments,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=environment,
        )
    worker = WorkerProcess(process)
    reader = asyncio.ensure_future(worker.read())
    tour_tasks.add(reader)
    reader.add_done_callback(tour_tasks.discard)
    await worker.ready.wait()
    if process.returncode is not None:
        raise RuntimeError(f"the tour's worker did not start; see {log}")
    return worker


async def crash_stop(tour: Tour) -> bool:
    tour.say()
    tour.say("[3/3] An ambiguous call after a worker crash")
    task_queue = f"{tour.task_queue}-crash"
    async with AsyncExitStack() as stack:
        first = await start_worker(tour, task_queue, crash=True, number=1)
        stack.push_async_callback(_stop, first)
        tour.say(
            f"  a worker process of its own (pid {first.process.pid}): steadyloop worker "
            f"--task-queue {task_queue} --tools {TOOLS_SPEC}"
        )
        handle = await tour.start(run_input(CHARGE_PROMPT, ["charge"]), "charge", task_queue)
        tour.say(f"  run {handle.id}: {CHARGE_PROMPT!r}")
        code = await first.process.wait()
        charges = tour.lines_in(CHARGES_FILE)
        tour.say(f"  the worker ran charge: {CHARGES_FILE} has {len(charges)} line(s) {charges};")
        tour.say(f"  then it died (exit {code}, SIGKILL) before it could report the charge.")
        second = await start_worker(tour, task_queue, crash=False, number=2)
        stack.push_async_callback(_stop, second)
        tour.say(
            f"  a new worker takes over (pid {second.process.pid}). Once the lost attempt's "
            "timeout and lease run out"
        )
        tour.say(
            "  (about 20 s), the run must decide: `charge` is opaque (one effect, no trail), so"
        )
        tour.say("  steadyloop does not run it again and does not guess; it waits for a person.")

        async def ambiguous() -> AmbiguousCall | None:
            calls = await handle.query(ToolLoopWorkflow.ambiguous_receipts)
            return calls[0] if calls else None

        loop = asyncio.get_running_loop()
        since = loop.time()
        call = await until(ambiguous)
        tour.say(
            f"  ambiguous: {call.tool} {arguments_text(call.arguments)} (attempt {call.attempt}), "
            f"{loop.time() - since:.0f} s after the new worker started"
        )
        tour.say(
            "  (--did-not-happen would run it again; --give-up tells the model it was abandoned)"
        )
        tour.next(
            f"List it, then say what happened ({CHARGES_FILE} shows the card was charged):",
            tour.command("receipts", handle.id),
            tour.command(
                "receipts",
                handle.id,
                "--resolve",
                short_key(call.key),
                "--happened",
                HAPPENED_EXAMPLE,
            ),
        )
        result = await handle.result()
        charges = tour.lines_in(CHARGES_FILE)
        tour.say(f"  run ended: {result.stop_reason}")
        tour.say(f"  answer: {one_line(result.final_answer or '')}")
        tour.say(f"  {CHARGES_FILE}: {len(charges)} line(s): a crash did not make it charge twice")
    return result.stop_reason == "final_answer"


async def _stop(worker: WorkerProcess) -> None:
    if worker.process.returncode is None:
        worker.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(worker.process.wait(), 10)
        except TimeoutError:
            worker.process.kill()
            await worker.process.wait()
