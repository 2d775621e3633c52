"""A steadyloop worker as its own process, for the chaos suite (`chaos_harness`).

    python tests/chaos_worker_main.py --address 127.0.0.1:7233 --task-queue q \\
        --base-url http://127.0.0.1:8000/v1 --effects /tmp/effects.jsonl \\
        --blob-dir /tmp/blobs [--cache-off]

It serves what `steadyloop worker` serves for a run (`RUN_WORKFLOWS` in the project's
sandbox, the model activity, the endpoint-health activities) plus the chaos tools
(`chaos_plan` describes them), prints `READY` once it polls, stops on SIGTERM, and
exits when the process that started it is gone (so a killed harness leaves no worker
behind). The harness kills it with SIGKILL and stops it with SIGSTOP.

Every tool writes one JSON line per step to `--effects` (one `O_APPEND` write each, so
lines from several processes never interleave): `start` when an attempt begins,
`effect` for each side effect, `refused` for a charge past its deadline, `end` when it
returns. Each line names the call (`ref`, the receipt key, the call id), the attempt,
the process and the wall-clock time: the facts the checker reads, outside every worker.

`--cache-off` runs the worker with `max_cached_workflows=0`: every activation replays
the run's whole history, so code that decides differently live and on replay fails at
once rather than after a cache eviction. `--log-delay S` makes it a busy worker: the
event log's local activities take S seconds, so queries and signals land while one runs.

`STEADYLOOP_CHAOS_MUTANT=reclaim-opaque` breaks the lease rule on purpose: an opaque
call whose lease expired is run again (as a resumable one would be) instead of being
held as ambiguous for a person. The decision is replaced where the ledger calls it,
and the workflows run unsandboxed so no re-imported copy keeps the real rule; the
worker checks the ledger now decides the mutant way and prints `MUTANT ...` before
`READY`. The suite must then report opaque effects that ran twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from busy_worker import slowed_event_log
from chaos_plan import (
    CHARGE_DEADLINE_MARGIN_S,
    CHARGE_TIMEOUT_S,
    DELIVER_HEARTBEAT_TIMEOUT_S,
    DELIVER_ITEM_S,
    DELIVER_TIMEOUT_S,
    LOOKUP_TIMEOUT_S,
)
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner

import steadyloop._receipts.decision as decision_module
import steadyloop._receipts.ledger as ledger_module
from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._activities.worker_description import WorkerDescriptionActivities
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._receipts.decision import Ambiguous, Execute, Receipt, ReceiptDecision, receipt_key
from steadyloop._receipts.ledger import ReceiptLedger
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS, workflow_runner
from steadyloop._worker.sandbox import SERVING_WORKFLOWS
from steadyloop.tools import ToolRegistry, current_invocation, current_progress, tool

READY = "READY"
ENDPOINT = "scripted"
MUTANT_ENV = "STEADYLOOP_CHAOS_MUTANT"
MUTANTS = ("reclaim-opaque",)
PARENT_POLL_S = 0.5
CONNECT_WAIT_S = 30.0

_effects_path: Path | None = None


def write_line(kind: str, **fields: Any) -> None:
    """One line in the effects file: what this attempt of this call did, and when."""
    assert _effects_path is not None
    invocation = current_invocation()
    line = {
        "kind": kind,
        "tool": invocation.tool,
        "ref": invocation.arguments.get("ref", ""),
        "attempt": invocation.attempt,
        "pid": os.getpid(),
        "t": time.time(),
        "workflow_id": invocation.workflow_id,
        "call_id": invocation.call_id,
        "key": invocation.idempotency_key or "",
        **fields,
    }
    fd = os.open(_effects_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


@tool(effect="pure", timeout=timedelta(seconds=LOOKUP_TIMEOUT_S))
async def lookup(ref: str, query: str) -> str:
    """Look something up (no side effect: it may run any number of times)."""
    write_line("start")
    await asyncio.sleep(0.05)
    write_line("end")
    return f"{query}: fine"


@tool(
    effect="resumable",
    timeout=timedelta(seconds=DELIVER_TIMEOUT_S),
    heartbeat_timeout=timedelta(seconds=DELIVER_HEARTBEAT_TIMEOUT_S),
)
async def deliver(ref: str, items: list[str]) -> str:
    """Deliver each item (one side effect each), skipping what earlier attempts recorded."""
    progress = current_progress()
    write_line("start", trail=list(progress.previous))
    done_now: list[str] = []
    for item in items:
        if progress.done(item):
            continue
        write_line("effect", item=item)
        progress.record(item)
        done_now.append(item)
        await asyncio.sleep(DELIVER_ITEM_S)
    write_line("end")
    return f"delivered {len(items)} items of {ref} ({len(done_now)} on attempt {progress.attempt})"


@tool(effect="opaque", timeout=timedelta(seconds=CHARGE_TIMEOUT_S))
async def charge(ref: str, cents: int, stall_s: float = 0.0, effect_first: bool = False) -> str:
    """Charge once (one opaque side effect, no trail). A first attempt may stall past its
    timeout, before or after its effect; past its deadline it refuses to charge."""
    started = time.monotonic()
    write_line("start")
    stall = stall_s if current_invocation().attempt == 1 else 0.0
    if stall and not effect_first:
        await asyncio.sleep(stall)
    if time.monotonic() - started < CHARGE_TIMEOUT_S - CHARGE_DEADLINE_MARGIN_S:
        write_line("effect", item=ref)
        charged = True
    else:  # what a payment service does with a request whose deadline passed
        write_line("refused")
        charged = False
    await asyncio.sleep(stall if stall and effect_first else 0.1)
    write_line("end")
    return f"charged {cents} for {ref}" if charged else f"not charged: {ref} came too late"


TOOLS = ToolRegistry([lookup, deliver, charge])


# -- a busy worker -------------------------------------------------------------------

_log_delay_s = 0.0


# -- the mutant ----------------------------------------------------------------------


def reclaim_opaque(
    real: Callable[..., ReceiptDecision],
) -> Callable[..., ReceiptDecision]:
    """The decision with the lease rule broken: an ambiguous opaque call is reclaimed."""

    def mutant(*args: Any, **kwargs: Any) -> ReceiptDecision:
        decided = real(*args, **kwargs)
        if isinstance(decided, Ambiguous):
            return Execute(attempt=decided.attempt + 1, reclaimed=True)
        return decided

    return mutant


def apply_mutant(name: str) -> None:
    """Install mutant `name` and prove the ledger now decides with it."""
    if name != "reclaim-opaque":
        raise SystemExit(f"unknown {MUTANT_ENV}={name!r}; known: {', '.join(MUTANTS)}")
    mutant = reclaim_opaque(decision_module.decide_tool_call_receipt)
    decision_module.decide_tool_call_receipt = mutant
    # The ledger imported the name: replace it where the ledger looks it up.
    ledger_module.decide_tool_call_receipt = mutant  # type: ignore[attr-defined]
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    key = receipt_key("default", "mutant-check", "charge", {"ref": "x"})
    ledger = ReceiptLedger(
        receipts={key.text: Receipt(status="running", attempt=1, lease_expires_at=long_ago)}
    )
    decided = ledger.decide(key, "opaque", datetime.now(UTC))
    if not isinstance(decided, Execute):
        raise SystemExit(f"mutant {name} did not take effect: the ledger decided {decided}")
    print(f"MUTANT {name}: an expired opaque lease is reclaimed, not ambiguous", flush=True)


# -- serving -------------------------------------------------------------------------


async def exit_when_orphaned(parent: int) -> None:
    """End this process once the harness that started it is gone."""
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL_S)
    os._exit(3)


async def connect(address: str, converter: DataConverter) -> Client:
    """The client, once the server answers: a worker restarted while the harness has the
    dev server down waits for it (bounded), as a deployed worker's supervisor would."""
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        try:
            return await Client.connect(address, data_converter=converter)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


async def serve(args: argparse.Namespace, runner: WorkflowRunner) -> None:
    converter = steadyloop_data_converter(args.blob_dir)
    client = await connect(args.address, converter)
    endpoints = EndpointRegistry([EndpointConfig(name=ENDPOINT, base_url=args.base_url)])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    orphaned = asyncio.ensure_future(exit_when_orphaned(args.parent_pid))
    async with ModelActivities(endpoints, environ={}) as model:
        worker = Worker(
            client,
            task_queue=args.task_queue,
            # What `steadyloop worker` serves a run, and what a start asks it first
            # (`DescribeWorkerWorkflow`: the tools it serves).
            workflows=[*RUN_WORKFLOWS, *SERVING_WORKFLOWS],
            activities=[
                *slowed_event_log(model.activities(), _log_delay_s),
                *ToolActivities(TOOLS).activities(),
                *WorkerDescriptionActivities(endpoints, TOOLS).activities(),
                *EndpointHealthActivities(client, task_queue=args.task_queue).activities(),
            ],
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            # A killed worker's sticky queue holds the run's next workflow task until
            # this runs out; the default (10 s) would only slow the suite down.
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
            max_cached_workflows=0 if args.cache_off else 1000,
            workflow_runner=runner,
            graceful_shutdown_timeout=timedelta(seconds=1),
        )
        run = asyncio.ensure_future(worker.run())
        print(READY, flush=True)
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            await worker.shutdown()
        orphaned.cancel()
        await run  # a worker that died by itself exits non-zero, with its error


def main(argv: list[str] | None = None) -> None:
    global _effects_path, _log_delay_s
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--effects", required=True, type=Path)
    parser.add_argument("--blob-dir", required=True, type=Path)
    parser.add_argument("--cache-off", action="store_true")
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    parser.add_argument("--log-delay", type=float, default=0.0, help="slow the event log's LAs")
    args = parser.parse_args(argv)
    _effects_path = args.effects
    _log_delay_s = args.log_delay
    runner: WorkflowRunner = workflow_runner()
    mutant = os.environ.get(MUTANT_ENV, "").strip()
    if mutant:
        apply_mutant(mutant)
        runner = UnsandboxedWorkflowRunner()
    asyncio.run(serve(args, runner))


if __name__ == "__main__":
    main(sys.argv[1:])
