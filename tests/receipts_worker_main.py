"""A steadyloop worker as its own process, for the receipts end-to-end tests.

    python tests/receipts_worker_main.py --address 127.0.0.1:7233 --task-queue q \\
        --base-url http://127.0.0.1:8000/v1 --effects /tmp/effects.jsonl [--hang deliver:2]

It serves `ToolLoopWorkflow`, the model activity (one endpoint, `scripted`, at
`--base-url`) and the tools below against the Temporal server at `--address`, prints
`READY` once it polls, and stops on SIGTERM. A test kills it with SIGKILL to lose a
worker mid-tool.

Each tool writes one JSON line per side effect to `--effects` (one `O_APPEND` write, so
lines from two worker processes never interleave): the counter the tests read, outside
every worker. `--hang TOOL[:N]` makes TOOL stop forever in this process right after its
N-th recorded sub-operation (resumable) or after its effect (opaque), so the test can
kill the worker at exactly that point.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop.tools import ToolRegistry, current_invocation, current_progress, tool

READY = "READY"
ENDPOINT = "scripted"
DELIVER_HEARTBEAT_TIMEOUT = timedelta(seconds=2)
CHARGE_TIMEOUT = timedelta(seconds=3)

_effects_path: Path | None = None
_hang: dict[str, int] = {}


def write_effect(tool_name: str, item: str, attempt: int) -> None:
    """One side effect, as one line in the effects file."""
    assert _effects_path is not None
    line = json.dumps(
        {
            "tool": tool_name,
            "item": item,
            "attempt": attempt,
            "pid": os.getpid(),
            "call_id": current_invocation().call_id,
        }
    )
    fd = os.open(_effects_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


async def hang_forever(keep_alive: bool) -> None:
    """Stop making progress until the process is killed (heartbeating if asked)."""
    print(f"HUNG {current_invocation().tool}", flush=True)
    while True:
        if keep_alive:
            current_progress().keep_alive()  # only the kill may lose this attempt
        await asyncio.sleep(0.25)


@tool(
    effect="resumable",
    timeout=timedelta(seconds=30),
    heartbeat_timeout=DELIVER_HEARTBEAT_TIMEOUT,
)
async def deliver(recipients: list[str]) -> str:
    """Deliver one parcel to each recipient (one side effect each), resumably."""
    progress = current_progress()
    delivered: list[str] = []
    for recipient in recipients:
        if progress.done(recipient):
            continue
        write_effect("deliver", recipient, progress.attempt)
        progress.record(recipient)
        delivered.append(recipient)
        if _hang.get("deliver") == len(progress.recorded):
            await hang_forever(keep_alive=True)
    skipped = len(recipients) - len(delivered)
    return f"delivered to {delivered} on attempt {progress.attempt}; {skipped} done before"


@tool(effect="opaque", timeout=CHARGE_TIMEOUT)
async def charge(account: str, cents: int) -> str:
    """Charge an account (one opaque side effect)."""
    write_effect("charge", f"{account}:{cents}", current_invocation().attempt)
    if "charge" in _hang:
        await hang_forever(keep_alive=False)
    return f"charged {cents} to {account}"


@tool(effect="opaque")
async def notify(text: str) -> str:
    """Send a notification (one opaque side effect)."""
    write_effect("notify", text, current_invocation().attempt)
    return f"notified {text!r}"


TOOLS = ToolRegistry([deliver, charge, notify])


def parse_hang(values: list[str]) -> dict[str, int]:
    hang: dict[str, int] = {}
    for value in values:
        name, _, count = value.partition(":")
        hang[name] = int(count or "1")
    return hang


async def serve(args: argparse.Namespace) -> None:
    client = await Client.connect(args.address, data_converter=pydantic_data_converter)
    endpoints = EndpointRegistry([EndpointConfig(name=ENDPOINT, base_url=args.base_url)])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with ModelActivities(endpoints, environ={}) as model:
        worker = Worker(
            client,
            task_queue=args.task_queue,
            workflows=RUN_WORKFLOWS,
            activities=[
                *model.activities(),
                *ToolActivities(TOOLS).activities(),
                *EndpointHealthActivities(client, task_queue=args.task_queue).activities(),
            ],
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            # A killed worker's sticky queue holds the run's next workflow task until
            # this runs out; the default (10 s) would only slow the test down.
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        )
        async with worker:
            print(READY, flush=True)
            await stop.wait()


def main(argv: list[str] | None = None) -> None:
    global _effects_path, _hang
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--effects", required=True, type=Path)
    parser.add_argument("--hang", action="append", default=[])
    args = parser.parse_args(argv)
    _effects_path = args.effects
    _hang = parse_hang(args.hang)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main(sys.argv[1:])
