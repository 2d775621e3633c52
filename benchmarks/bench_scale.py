"""Scale: many concurrent runs on one worker process and on two, per CPU-second.

Run: `.venv/bin/python benchmarks/bench_scale.py` (1,000 concurrent 4-turn runs on one
worker, then on two; several minutes on 2 shared cores), `--runs N` for fewer.

One local dev server (in memory, started with `dev_server_args()`), the scripted
provider of `bench_loop.py` in this process (a tool call of `--call-chars` characters a
turn for 4 turns, then a final answer), and one or two worker *processes* built exactly
as `steadyloop worker` builds them (`steadyloop._worker.process.running_worker`: the
loop, its output host, the endpoint-health entities, the sandbox and heartbeat settings),
each on the same task queue. All runs are started at once, then awaited.

It prints, per worker count: runs completed with a final answer and every call
answered (anything else is a failure, and the exit status is 1), the wall time, CPU
seconds of the worker processes and of the server (from /proc), runs per CPU-second of
each, and the worker's memory per run in flight (the rise of its resident set from
idle to its peak while the runs were in flight, divided by the most runs in flight).
CPU and memory are read from /proc (Linux). Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop import (
    ENDPOINT,
    PROMPT,
    SYSTEM_PROMPT,
    TOOL_NAME,
    Provider,
    Script,
    build_tools,
    dev_server_pid,
    final_answer_text,
    process_cpu_s,
    start_dev_server,
    versions,
)

from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop._temporal_binaries import dev_server_args
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing._scripted_server import ScriptedServer

RUNS = 1_000
TURNS = 4
CALL_CHARS = 256
READY = "bench-scale worker ready"
GUARD_S = 1_800.0  # a guard against a hang, not a measure


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return 0
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


# -- a worker process --------------------------------------------------------------------


async def worker_main(address: str, task_queue: str, provider_url: str) -> None:
    """What `steadyloop worker` runs, pointed at the scripted provider."""
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    endpoints = EndpointRegistry([EndpointConfig(name=ENDPOINT, base_url=provider_url)])
    options = WorkerOptions(task_queue=task_queue, endpoints=endpoints, tools=build_tools())
    async with running_worker(client, options):
        print(READY, flush=True)
        await asyncio.get_running_loop().create_future()  # until the driver kills it


# -- the driver ----------------------------------------------------------------------------


@dataclass
class Outcome:
    workers: int
    runs: int
    completed: int
    failures: list[str]
    wall_s: float
    worker_cpu_s: float
    server_cpu_s: float
    idle_rss: int
    peak_rss: int
    peak_in_flight: int

    def report(self) -> None:
        per_worker = (self.peak_rss - self.idle_rss) / max(1, self.peak_in_flight)
        print(
            f"\n   {self.workers} worker process{'es' if self.workers > 1 else ''}: "
            f"{self.completed} of {self.runs} runs completed with a final answer, "
            f"{len(self.failures)} failed; wall {self.wall_s:.1f} s"
        )
        print(
            f"     worker CPU {self.worker_cpu_s:7.1f} s   {self.runs / self.worker_cpu_s:7.1f} "
            f"runs per worker CPU-second ({1000 * self.worker_cpu_s / self.runs:.0f} ms a run)"
        )
        print(
            f"     server CPU {self.server_cpu_s:7.1f} s   {self.runs / self.server_cpu_s:7.1f} "
            f"runs per server CPU-second ({1000 * self.server_cpu_s / self.runs:.0f} ms a run)"
        )
        both = self.worker_cpu_s + self.server_cpu_s
        print(f"     both       {both:7.1f} s   {self.runs / both:7.1f} runs per CPU-second")
        print(
            f"     worker memory: {self.idle_rss / 1e6:.0f} MB idle, {self.peak_rss / 1e6:.0f} MB "
            f"at peak with up to {self.peak_in_flight} runs in flight: "
            f"{per_worker / 1e6:.2f} MB per run in flight (summed over the workers)"
        )
        for failure in self.failures[:5]:
            print(f"     FAILED: {failure}")


async def start_workers(
    count: int, address: str, task_queue: str, provider_url: str
) -> list[asyncio.subprocess.Process]:
    workers = []
    for _ in range(count):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--worker",
            address,
            task_queue,
            provider_url,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 120)
        if line.decode().strip() != READY:
            raise RuntimeError(f"a worker did not start: {line!r}")
        # Keep reading what it prints: a pipe nobody reads fills up, and the worker then
        # blocks on its next write (a log line) with every workflow slot held.
        DRAINS.add(asyncio.create_task(_drain(process.stdout)))
        workers.append(process)
    return workers


DRAINS: set[asyncio.Task[None]] = set()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


def check(result: RunResult, turns: int) -> str | None:
    if result.stop_reason != "final_answer" or result.final_answer != final_answer_text(turns):
        return f"stopped {result.stop_reason!r}: {result.detail}"
    answered = [m for m in result.transcript if m.role == "tool"]
    if result.stats.tool_calls != turns or len(answered) != turns:
        return f"{result.stats.tool_calls} tool calls, {len(answered)} tool messages"
    return None


async def measure(
    client: Client,
    server_pid: int | None,
    address: str,
    provider_url: str,
    *,
    workers: int,
    runs: int,
    script: Script,
) -> Outcome:
    task_queue = f"bench-scale-{uuid.uuid4()}"
    processes = await start_workers(workers, address, task_queue, provider_url)
    pids = [p.pid for p in processes]
    try:
        await asyncio.sleep(2)  # settle: pollers up, imports done
        idle = sum(rss_bytes(pid) for pid in pids)
        cpu0 = sum(process_cpu_s(pid) for pid in pids), process_cpu_s(server_pid)
        peak = idle
        in_flight = peak_in_flight = 0
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, sum(rss_bytes(pid) for pid in pids))
                await asyncio.sleep(0.2)

        run = RunInput(
            endpoint=ENDPOINT,
            model=script.model,
            prompt=PROMPT,
            system_prompt=SYSTEM_PROMPT,
            tools=[TOOL_NAME],
            limits=RunLimits(max_turns=script.turns + 1),
        )
        gate = asyncio.Semaphore(64)  # starts in flight at once, not runs

        async def one(index: int) -> str | None:
            nonlocal in_flight, peak_in_flight
            async with gate:
                handle = await client.start_workflow(
                    ToolLoopWorkflow.run,
                    run,
                    id=f"bench-scale-{index}-{uuid.uuid4()}",
                    task_queue=task_queue,
                )
            in_flight += 1
            peak_in_flight = max(peak_in_flight, in_flight)
            try:
                result = await handle.result()
            except Exception as error:  # reported, never raised: the figure is the count
                return f"{type(error).__name__}: {error}"
            finally:
                in_flight -= 1
            return check(result, script.turns)

        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        outcomes = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(runs))), GUARD_S)
        wall = time.perf_counter() - started
        done.set()
        await sampler
        cpu1 = sum(process_cpu_s(pid) for pid in pids), process_cpu_s(server_pid)
    finally:
        for process in processes:
            process.kill()
            await process.wait()
    failures = [o for o in outcomes if o is not None]
    return Outcome(
        workers=workers,
        runs=runs,
        completed=runs - len(failures),
        failures=failures,
        wall_s=wall,
        worker_cpu_s=cpu1[0] - cpu0[0],
        server_cpu_s=cpu1[1] - cpu0[1],
        idle_rss=idle,
        peak_rss=peak,
        peak_in_flight=peak_in_flight,
    )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--call-chars", type=int, default=CALL_CHARS)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    script = Script(turns=args.turns, call_chars=args.call_chars)
    provider = Provider(fragment_chars=64)
    provider.prepare(script)
    print("\nsteadyloop scale benchmark")
    print(f"   {versions()}")
    print(
        f"   {args.runs:,} concurrent runs of {args.turns} tool turns + a final answer, "
        f"{args.call_chars} chars of tool-call text a turn; local dev server (in memory, "
        f"{' '.join(dev_server_args())});\n   worker processes as `steadyloop worker` "
        f"builds them; load average before: {os.getloadavg()[0]:.2f}"
    )
    outcomes: list[Outcome] = []
    async with ScriptedServer(provider) as server:
        env = await start_dev_server(quiet=True)
        async with env:
            address = env.client.service_client.config.target_host
            server_pid = dev_server_pid()
            for workers in args.workers:
                outcome = await measure(
                    env.client,
                    server_pid,
                    address,
                    server.base_url,
                    workers=workers,
                    runs=args.runs,
                    script=script,
                )
                outcome.report()
                outcomes.append(outcome)
                server.exchanges.clear()
    print(
        f"\n   load average after: {os.getloadavg()[0]:.2f}. Absolute figures hold only "
        "for this machine and its load."
    )
    return 1 if any(o.failures for o in outcomes) else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        asyncio.run(worker_main(*sys.argv[2:]))
    else:
        sys.exit(asyncio.run(main()))
