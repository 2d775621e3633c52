"""Many SSE clients on one `steadyloop serve` process: loss, memory, latency, Temporal cost.

Run: `.venv/bin/python benchmarks/bench_web_fanout.py` (about a minute on 2 cores;
`--quick`: 4 runs, fewer clients).

Temporal's local dev server (in memory, with its Prometheus endpoint), one worker and a
scripted provider run in this process; `steadyloop serve` runs as its own process, the
one measured. Two rounds of `--runs` runs each (20), every run streaming `--tokens`
distinct tokens (40), `--gap` seconds apart (0.05), after a pause that lets every
client connect first:

- round A: one SSE client per run;
- round B: `--clients` SSE clients in all (200), spread evenly over the runs.

Each run is also read in this process by the client API's own iterator
(`RunHandle.events`), the baseline. It prints, per round:

1. the events each SSE client read against the iterator's: every client must read
   exactly the iterator's cursors, in order (no miss, no repeat);
2. the server process's memory: resident set at its peak during the round, minus just
   before the round's clients connected, per client;
3. latency from the provider writing a token to its arrival (p50, p95), at the SSE
   clients and at the iterator, and their ratio;
4. the Temporal requests the round cost per run (the dev server's `service_requests`
   by operation): the fan-out holds one subscription per run per process, so round B's
   count per run should match round A's although it has ten times the clients.

A failed check is printed and the exit status is 1. Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from steadyloop._chains.search_attributes import CHAIN_SEARCH_ATTRIBUTE_KEYS
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.dev_server import free_port
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop.client import RunHandle, SteadyloopClient
from steadyloop.testing._chunks import Chunk, finish_chunk, text_chunks
from steadyloop.testing._scripted_server import (
    Pause,
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    sse_response,
)
from steadyloop.tools.examples import example_registry

TOKEN = "bench-token"
CONNECT_PAUSE_S = 2.0
OPERATIONS = (
    "UpdateWorkflowExecution",
    "PollWorkflowExecutionUpdate",
    "QueryWorkflow",
    "DescribeWorkflowExecution",
    "SignalWorkflowExecution",
)


@dataclass
class Reader:
    """What one consumer of a run saw: (cursor, arrival time, text) per event."""

    run: str
    seen: list[tuple[str, float, str]] = field(default_factory=list)


@dataclass
class Round:
    name: str
    clients: int
    readers: list[Reader] = field(default_factory=list)
    iterators: dict[str, Reader] = field(default_factory=dict)
    rss_before_kb: int = 0
    rss_peak_kb: int = 0
    requests: Counter[str] = field(default_factory=Counter)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def scrape(http: httpx.AsyncClient, url: str) -> Counter[str]:
    text = (await http.get(url)).text
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("service_requests{"):
            continue
        operation = re.search(r'operation="([^"]+)"', line)
        if operation and operation.group(1) in OPERATIONS:
            found[operation.group(1)] += int(float(line.rsplit(" ", 1)[1]))
    return found


async def sse_reader(http: httpx.AsyncClient, url: str, reader: Reader) -> None:
    frame: dict[str, str] = {}
    async with http.stream("GET", url, timeout=120) as answer:
        async for line in answer.aiter_lines():
            if line.startswith(("id: ", "event: ", "data: ")):
                name, _, value = line.partition(": ")
                frame[name] = value
            elif not line and frame:
                data = json.loads(frame["data"])
                reader.seen.append((frame["id"], time.time(), data.get("text", "")))
                frame = {}
                if data["type"] == "stop":
                    return


async def one_round(
    name: str,
    clients: int,
    args: argparse.Namespace,
    base: str,
    server_pid: int,
    sl: SteadyloopClient,
    metrics: str,
) -> Round:
    result = Round(name, clients)
    limits = httpx.Limits(max_connections=clients + 50, max_keepalive_connections=clients + 50)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits) as http:
        before = await scrape(http, metrics)
        runs: list[tuple[str, str]] = []
        for index in range(args.runs):
            made = await http.post("/v1/threads", json={"thread_id": f"{name}-{index}"})
            thread = made.json()["thread_id"]
            # The prompt names the thread, so the provider knows whose answer it writes.
            started = await http.post(
                f"/v1/threads/{thread}/runs", json={"prompt": f"{name}-{index}"}
            )
            assert started.status_code == 201, started.text
            runs.append((thread, started.json()["run_id"]))
        result.rss_before_kb = rss_kb(server_pid)
        tasks = []
        for index in range(clients):
            thread, run = runs[index % len(runs)]
            reader = Reader(thread)
            result.readers.append(reader)
            url = f"/v1/threads/{thread}/runs/{run}/events"
            tasks.append(asyncio.create_task(sse_reader(http, url, reader)))
        for thread, run in runs:
            reader = Reader(thread)
            result.iterators[thread] = reader
            handle = sl.run(f"web/bench/{thread.rpartition('~')[0]}/{run}")
            tasks.append(asyncio.create_task(iterate(handle, reader)))

        async def sample() -> None:
            while True:
                result.rss_peak_kb = max(result.rss_peak_kb, rss_kb(server_pid))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        await asyncio.gather(*tasks)
        sampler.cancel()
        after = await scrape(http, metrics)
    result.requests = Counter({op: after[op] - before[op] for op in OPERATIONS})
    return result


async def iterate(handle: RunHandle, reader: Reader) -> None:
    async for event in handle.events():
        reader.seen.append((event.cursor, time.time(), getattr(event, "text", "")))


def emitted(args: argparse.Namespace, starts: dict[str, float]) -> dict[tuple[str, int], float]:
    """When the provider wrote token i of each thread's run: the responder's call time,
    the connect pause, then one token per gap (a write, then a `Pause`)."""
    return {
        (run, i): started + CONNECT_PAUSE_S + i * args.gap
        for run, started in starts.items()
        for i in range(args.tokens)
    }


def latencies(readers: list[Reader], emit: dict[tuple[str, int], float]) -> list[float]:
    out = []
    for reader in readers:
        for _, arrived, text in reader.seen:
            match = re.search(r"w(\d+)", text)
            if match and (reader.run, int(match.group(1))) in emit:
                out.append(arrived - emit[(reader.run, int(match.group(1)))])
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.clients, args.tokens = 4, 20, 20
    workdir = Path(tempfile.mkdtemp(prefix="bench-web-"))
    starts: dict[str, float] = {}

    def model(request: RecordedRequest) -> ScriptedResponse:
        starts[str(request.json["messages"][-1]["content"])] = time.time()
        words = [f"w{i} " for i in range(args.tokens)]
        parts: list[Chunk | str | bytes | Pause] = [Pause(CONNECT_PAUSE_S)]
        for chunk in text_chunks(words):
            parts += [chunk, Pause(args.gap)]
        return sse_response([*parts[:-1], finish_chunk("stop")])

    metrics_port = free_port()
    failures: list[str] = []
    async with ScriptedServer(model) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(),
            data_converter=steadyloop_data_converter(workdir / "blobs"),
            search_attributes=CHAIN_SEARCH_ATTRIBUTE_KEYS,
            dev_server_extra_args=[*dev_server_args(), "--metrics-port", str(metrics_port)],
        )
        async with env:
            task_queue = f"bench-web-{uuid.uuid4().hex[:6]}"
            options = WorkerOptions(
                task_queue=task_queue,
                endpoints=EndpointRegistry(
                    [EndpointConfig(name="scripted", base_url=provider.base_url, model="m")]
                ),
                tools=example_registry(),
            )
            config = workdir / "web.toml"
            config.write_text(
                "[web.tenants.bench]\ntoken_env = 'BENCH_TOKEN'\nmax_active_runs = 1000\n"
                "max_started_runs = 10000\nmax_streams = 10000\n"
            )
            ready = workdir / "ready"
            address = env.client.service_client.config.target_host
            server = subprocess.Popen(
                [sys.executable, "-m", "steadyloop", "serve", "--address", address,
                 "--task-queue", task_queue, "--port", "0", "--ready-file", str(ready),
                 "--config", str(config), "--model", "m", "--tool", "add"],
                env={**os.environ, "BENCH_TOKEN": TOKEN, "STEADYLOOP_ENDPOINT": "scripted",
                     "STEADYLOOP_BLOB_DIR": str(workdir / "blobs")},
            )  # fmt: skip
            try:
                async with running_worker(env.client, options):
                    for _ in range(200):
                        if ready.exists():
                            break
                        await asyncio.sleep(0.1)
                    base = ready.read_text().strip()
                    sl = SteadyloopClient(env.client, task_queue=task_queue)
                    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
                    rounds = []
                    for name, clients in (("A", args.runs), ("B", args.clients)):
                        starts.clear()
                        rounds.append(
                            await one_round(name, clients, args, base, server.pid, sl, metrics)
                        )
                        rounds[-1].name = name
                        emit_starts = dict(starts)
                        report(rounds[-1], args, emit_starts, failures)
                    compare(rounds, args, failures)
            finally:
                server.terminate()
                server.wait(timeout=30)
    for problem in failures:
        print(f"   FAILED CHECK: {problem}")
    return 1 if failures else 0


def report(
    result: Round, args: argparse.Namespace, starts: dict[str, float], failures: list[str]
) -> None:
    print(f"\nround {result.name}: {args.runs} runs, {result.clients} SSE clients")
    bad = 0
    for reader in result.readers:
        mine = [cursor for cursor, _, _ in reader.seen]
        theirs = [cursor for cursor, _, _ in result.iterators[reader.run].seen]
        if mine != theirs:
            bad += 1
    events = sum(len(r.seen) for r in result.readers)
    print(f"   1. events read by the SSE clients: {events}; clients whose cursors differ from "
          f"the iterator's: {bad}")  # fmt: skip
    if bad:
        failures.append(f"round {result.name}: {bad} clients missed or repeated events")
    grown = max(0, result.rss_peak_kb - result.rss_before_kb)
    before, peak = result.rss_before_kb / 1024, result.rss_peak_kb / 1024
    per_client = grown / result.clients
    print(f"   2. server memory: {before:.1f} MB before, peak {peak:.1f} MB: "
          f"{per_client:.1f} KB per client")  # fmt: skip
    emit = emitted(args, {thread: starts[thread.rpartition("~")[0]] for thread in result.iterators})
    sse = latencies(result.readers, emit)
    base = latencies(list(result.iterators.values()), emit)
    p50, p95 = percentile(sse, 0.5), percentile(sse, 0.95)
    b50, b95 = percentile(base, 0.5), percentile(base, 0.95)
    print(f"   3. latency, provider write to arrival: SSE clients p50 {p50 * 1000:.0f} ms, "
          f"p95 {p95 * 1000:.0f} ms; client API iterator p50 {b50 * 1000:.0f} ms, "
          f"p95 {b95 * 1000:.0f} ms; ratio p50 {p50 / b50:.2f}x, p95 {p95 / b95:.2f}x")  # fmt: skip
    per_run = {op: n / args.runs for op, n in result.requests.items() if n}
    shown = ", ".join(f"{op} {n:.1f}" for op, n in sorted(per_run.items()))
    print(f"   4. Temporal requests per run (server, worker and iterator together): {shown}")


# What reading a run's log costs: its polls (updates) and queries. Describes are counted
# apart: readers describe the run and its log host while waiting for the host to start,
# so their count follows timing. The server describes a run once per process (its
# tenancy check and its readers share the answer), so they do not follow the clients.
READS = ("UpdateWorkflowExecution", "PollWorkflowExecutionUpdate", "QueryWorkflow")


def compare(rounds: list[Round], args: argparse.Namespace, failures: list[str]) -> None:
    a, b = rounds
    reads_a = sum(a.requests[op] for op in READS) / args.runs
    reads_b = sum(b.requests[op] for op in READS) / args.runs
    print(f"\nTemporal updates and queries per run: round A {reads_a:.1f} ({a.clients} "
          f"clients), round B {reads_b:.1f} ({b.clients} clients): {reads_b / reads_a:.2f}x "
          f"for {b.clients / a.clients:.0f}x the clients")  # fmt: skip
    # Long polls answer by time as well as by event, so a run that lasts longer (a loaded
    # machine, a quick round of few runs) costs more of them whatever the clients: the
    # full run's figure decides; a quick round only prints it.
    if reads_b > reads_a * 1.5 and not args.quick:
        failures.append("the Temporal updates and queries per run grew with the clients")
    op = "DescribeWorkflowExecution"
    described_a, described_b = a.requests[op] / args.runs, b.requests[op] / args.runs
    print(f"Temporal describes per run: round A {described_a:.1f}, round B {described_b:.1f}: "
          f"{described_b / max(described_a, 1e-9):.2f}x for {b.clients / a.clients:.0f}x the "
          "clients")  # fmt: skip


if __name__ == "__main__":
    code = asyncio.run(main())
    sys.stdout.flush()
    os._exit(code)  # skip finalization: a Temporal client can abort there (sdk-python#300)
