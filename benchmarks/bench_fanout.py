"""What N followers of one run in one process cost in Temporal requests.

Run: `.venv/bin/python benchmarks/bench_fanout.py` (about a minute on 2 cores; `--quick`
for N = 1 and 4 and a shorter answer, about 20 seconds).

Everything runs in one process: Temporal's local dev server (in memory), one worker
(what `steadyloop worker` runs), a scripted OpenAI-compatible provider on loopback that
streams an answer of W words, one every 50 ms, and N followers of that run started at
the same moment, each reading `handle.events()` from the first event to the stop.

The followers' Temporal client counts every request it sends (a client interceptor):
updates (the event log's long polls), queries, describes and history reads. Each N is
measured twice, back to back, on a run of its own:

- `shared`: the N followers use one `SteadyloopClient`, so they share one reader of the
  run's log (`steadyloop.client._fanout`): what a web server with N tabs on a run pays;
- `private`: each follower has a reader of its own (the baseline: what N separate
  readers in the same process would cost).

It prints, per N and mode, the requests per run and their ratio to N = 1 of the same
mode. Every run is checked: each follower read every text delta of the answer once, in
order, and then the stop; in `shared` mode one reader served them all. A failed check is
printed and the exit status is 1. Nothing asserts a count; `tests/test_bench_fanout.py`
runs `--quick`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import (
    Client,
    DescribeWorkflowInput,
    FetchWorkflowHistoryEventsInput,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    StartWorkflowUpdateInput,
    WorkflowHistoryEventAsyncIterator,
    WorkflowUpdateHandle,
)

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop.client import RunHandle, RunOptions, SteadyloopClient
from steadyloop.client._fanout import EventFanout
from steadyloop.events import RunEventItem, StopEvent, TextDeltaEvent
from steadyloop.testing._chunks import chunk, finish_chunk, role_chunk
from steadyloop.testing._scripted_server import Pause, ScriptedServer, sse_response
from steadyloop.tools import ToolRegistry

WORD_GAP_S = 0.05


class Counted(Interceptor):
    """Counts the requests a client sends that reach a workflow, by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Counting(next, self.counts)


class _Counting(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, counts: Counter[str]) -> None:
        super().__init__(next)
        self.counts = counts

    async def start_workflow_update(
        self, input: StartWorkflowUpdateInput
    ) -> WorkflowUpdateHandle[Any]:
        self.counts["updates"] += 1
        return await super().start_workflow_update(input)

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        self.counts["queries"] += 1
        return await super().query_workflow(input)

    async def describe_workflow(self, input: DescribeWorkflowInput) -> Any:
        self.counts["describes"] += 1
        return await super().describe_workflow(input)

    def fetch_workflow_history_events(
        self, input: FetchWorkflowHistoryEventsInput
    ) -> WorkflowHistoryEventAsyncIterator:
        self.counts["history reads"] += 1
        return super().fetch_workflow_history_events(input)


def answer_words(words: int) -> list[str]:
    return [f"w{n} " for n in range(words)]


@dataclass
class Measured:
    followers: int
    mode: str
    counts: Counter[str]
    readers_seen: int
    problems: list[str]

    @property
    def requests(self) -> int:
        return sum(self.counts.values())


async def follow(handle: RunHandle) -> list[RunEventItem]:
    return [event async for event in handle.events()]


def check(read: Sequence[list[RunEventItem]], words: int) -> list[str]:
    """Every follower read the whole answer once, in order, then the stop."""
    problems = []
    expected = "".join(answer_words(words))
    for number, events in enumerate(read):
        text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
        if text != expected:
            problems.append(f"follower {number} read {text[:60]!r}..., not the answer")
        if not events or not isinstance(events[-1], StopEvent):
            problems.append(f"follower {number} did not end with the stop")
        cursors = [e.cursor for e in events]
        if cursors != sorted(set(cursors)):
            problems.append(f"follower {number} read a cursor twice or out of order")
    return problems


async def measure(
    starter: SteadyloopClient,
    followers_client: Client,
    counter: Counted,
    options: RunOptions,
    *,
    followers: int,
    mode: str,
    words: int,
) -> Measured:
    run = await starter.thread().start("stream", options=options)
    fanout = EventFanout()
    handles = [
        RunHandle(
            followers_client,
            run.workflow_id,
            first_execution_run_id=await run.first_execution_run_id(),
            fanout=fanout if mode == "shared" else EventFanout(),
        )
        for _ in range(followers)
    ]
    counter.counts.clear()
    tasks = [asyncio.create_task(follow(handle)) for handle in handles]
    readers_seen = 0
    while not all(task.done() for task in tasks):
        readers_seen = max(
            readers_seen, fanout.readers(run.workflow_id, await run.first_execution_run_id())
        )
        await asyncio.sleep(0.05)
    counts = Counter(counter.counts)
    read = [task.result() for task in tasks]
    problems = check(read, words)
    if mode == "shared" and readers_seen != 1:
        problems.append(f"{readers_seen} readers served the shared followers, not 1")
    await run.result()
    return Measured(followers, mode, counts, readers_seen, problems)


def table(rows: list[Measured]) -> list[str]:
    lines = [
        f"{'followers':>9}  {'mode':<8} {'requests':>8} {'x N=1':>6}  "
        f"{'updates':>7} {'queries':>7} {'describes':>9} {'history':>7}"
    ]
    base = {r.mode: r.requests for r in rows if r.followers == 1}
    for r in rows:
        ratio = r.requests / base[r.mode] if base.get(r.mode) else float("nan")
        lines.append(
            f"{r.followers:>9}  {r.mode:<8} {r.requests:>8} {ratio:>6.2f}  "
            f"{r.counts['updates']:>7} {r.counts['queries']:>7} "
            f"{r.counts['describes']:>9} {r.counts['history reads']:>7}"
        )
    return lines


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1 and 4, a shorter answer")
    parser.add_argument("--verbose", action="store_true", help="server and SDK warnings too")
    args = parser.parse_args(argv)
    if not args.verbose:
        logging.disable(logging.WARNING)
    sizes = [1, 4] if args.quick else [1, 2, 4, 8, 16]
    words = 20 if args.quick else 60
    parts: list[Any] = [role_chunk()]
    for word in answer_words(words):
        parts += [Pause(WORD_GAP_S), chunk({"content": word})]
    answer = sse_response([*parts, finish_chunk("stop")])

    with tempfile.TemporaryDirectory() as blobs:
        converter = steadyloop_data_converter(Path(blobs))
        async with (
            dev_server(ui=False, data_converter=converter) as server,
            ScriptedServer(lambda _request: answer) as provider,
        ):
            queue = f"bench-fanout-{uuid.uuid4().hex[:8]}"
            options = WorkerOptions(
                task_queue=queue,
                endpoints=EndpointRegistry([provider.endpoint("scripted")]),
                tools=ToolRegistry([]),
            )
            counter = Counted()
            followers_client = await Client.connect(
                server.address, data_converter=converter, interceptors=[counter]
            )
            starter = SteadyloopClient(server.client, task_queue=queue)
            run_options = RunOptions(endpoint="scripted", model="scripted-model")
            rows: list[Measured] = []
            async with running_worker(server.client, options):
                for size in sizes:
                    for mode in ("shared", "private"):
                        rows.append(
                            await measure(
                                starter,
                                followers_client,
                                counter,
                                run_options,
                                followers=size,
                                mode=mode,
                                words=words,
                            )
                        )
    print(f"N followers of one run in one process: {words} words, one every {WORD_GAP_S:g} s")
    print("requests the followers' client sent while they read the run (per run):")
    for line in table(rows):
        print("  " + line)
    failed = [f"N={r.followers} {r.mode}: {p}" for r in rows for p in r.problems]
    for problem in failed:
        print(f"FAILED CHECK: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
