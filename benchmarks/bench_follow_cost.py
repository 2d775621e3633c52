"""What following one ~60-second run costs in Temporal requests: by queries, and by its log.

Run: `.venv/bin/python benchmarks/bench_follow_cost.py` (about two and a half minutes on
2 cores; `--quick` for a run of about 5 seconds, about 30 seconds in all).

Everything runs in one process: Temporal's local dev server (in memory), one worker
(what `steadyloop worker` runs), and a scripted OpenAI-compatible provider on loopback
that streams an answer of W words at an even pace, so the run's model turn lasts about
60 seconds (`--quick`: 5). Two runs are followed from the first event to the end, back
to back, each by a client that counts every request it sends (a client interceptor):

- `queries`: the command line's follower as it was (`follow_by_queries.py`, beside this
  file): the `progress` query about three times a second, the `transcript` and
  `timeline` queries when progress moved, a describe while an activity is in flight,
  and the run's output stream for the text;
- `event log`: the command line's follower now (`steadyloop._cli.follow.follow`), which
  prints the run's ordered event log (`RunHandle.events()`): long polls (updates) on the
  run's output host and describes of the host, no query per poll.

Both print to a `ProgressDisplay`, as `steadyloop run` does.

It prints each follower's requests by kind, its queries per second of run, and the
ratios between the two. Every run is checked: the follower saw the whole answer, once
(and, read again, the event log: every text delta in order, then the stop). A failed check is
printed and the exit status is 1. Nothing asserts a count; `tests/test_bench_follow_cost.py`
runs `--quick`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_fanout import Counted, answer_words
from follow_by_queries import follow as follow_by_queries
from temporalio.client import Client

from steadyloop._cli.follow import follow as follow_the_log_by_cli
from steadyloop._cli.progress import ProgressDisplay
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunResult
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunHandle, RunOptions, SteadyloopClient
from steadyloop.events import RunEventItem, StopEvent, TextDeltaEvent
from steadyloop.testing._chunks import chunk, finish_chunk, role_chunk
from steadyloop.testing._scripted_server import Pause, ScriptedServer, sse_response
from steadyloop.tools import ToolRegistry

KINDS = ("queries", "updates", "describes", "history reads")


@dataclass
class Measured:
    follower: str
    counts: Counter[str]
    seconds: float
    problems: list[str]

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    def per_second(self, kind: str) -> float:
        return self.counts[kind] / self.seconds if self.seconds else float("nan")


def check_events(events: Sequence[RunEventItem], answer: str) -> list[str]:
    """The event log follower read every text delta of the answer once, in order, then
    the stop."""
    problems = []
    text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    if text != answer:
        problems.append(f"the event log follower read {text[:60]!r}..., not the answer")
    if not events or not isinstance(events[-1], StopEvent):
        problems.append("the event log follower did not end with the stop")
    cursors = [e.cursor for e in events]
    if cursors != sorted(set(cursors)):
        problems.append("the event log follower read a cursor twice or out of order")
    return problems


def check_printed(printed: str, result: RunResult, answer: str) -> list[str]:
    """The query follower printed the whole answer, once, and the run ended with it."""
    problems = []
    if result.final_answer != answer:
        problems.append(f"the run answered {str(result.final_answer)[:60]!r}...")
    if printed.count(answer.strip()) != 1:
        problems.append("the query follower did not print the whole answer exactly once")
    return problems


async def follow_with_queries(
    starter: SteadyloopClient, counted: Client, counter: Counted, options: RunOptions, answer: str
) -> Measured:
    run = await starter.thread().start("stream", options=options)
    handle = counted.get_workflow_handle_for(ToolLoopWorkflow.run, run.workflow_id)
    out = io.StringIO()
    counter.counts.clear()
    began = time.perf_counter()
    result = await follow_by_queries(handle, ProgressDisplay(out, live=False), output=counted)
    seconds = time.perf_counter() - began
    return Measured(
        "queries", Counter(counter.counts), seconds, check_printed(out.getvalue(), result, answer)
    )


async def follow_the_log(
    starter: SteadyloopClient, counted: Client, counter: Counted, options: RunOptions, answer: str
) -> Measured:
    run = await starter.thread().start("stream", options=options)
    handle = counted.get_workflow_handle_for(ToolLoopWorkflow.run, run.workflow_id)
    out = io.StringIO()
    counter.counts.clear()
    began = time.perf_counter()
    result = await follow_the_log_by_cli(counted, handle, ProgressDisplay(out, live=False))
    seconds = time.perf_counter() - began
    counts = Counter(counter.counts)
    # What it printed, and (read again, uncounted) every event of the log once, in order.
    checked = RunHandle(
        counted, run.workflow_id, first_execution_run_id=await run.first_execution_run_id()
    )
    events = [event async for event in checked.events()]
    problems = check_printed(out.getvalue(), result, answer) + check_events(events, answer)
    return Measured("event log", counts, seconds, problems)


def table(rows: Sequence[Measured]) -> list[str]:
    lines = [
        f"{'follower':<10} {'seconds':>7} {'requests':>8}  "
        + " ".join(f"{kind:>13}" for kind in KINDS)
        + f"  {'queries/s':>9}"
    ]
    for r in rows:
        lines.append(
            f"{r.follower:<10} {r.seconds:>7.1f} {r.requests:>8}  "
            + " ".join(f"{r.counts[kind]:>13}" for kind in KINDS)
            + f"  {r.per_second('queries'):>9.2f}"
        )
    return lines


def ratios(before: Measured, after: Measured) -> list[str]:
    def ratio(a: int, b: int) -> str:
        return f"{a / b:.2f}x" if b else ("0 of 0" if a == 0 else f"{a} of 0")

    return [
        f"event log / queries, requests: {ratio(after.requests, before.requests)}",
        f"event log / queries, queries: {ratio(after.counts['queries'], before.counts['queries'])}",
    ]


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a run of about 5 seconds")
    parser.add_argument("--verbose", action="store_true", help="server and SDK warnings too")
    args = parser.parse_args(argv)
    if not args.verbose:
        logging.disable(logging.WARNING)
    words, gap_s = (20, 0.25) if args.quick else (120, 0.5)
    parts: list[Any] = [role_chunk()]
    for word in answer_words(words):
        parts += [Pause(gap_s), chunk({"content": word})]
    body = sse_response([*parts, finish_chunk("stop")])
    answer = "".join(answer_words(words))

    with tempfile.TemporaryDirectory() as blobs:
        converter = steadyloop_data_converter(Path(blobs))
        async with (
            dev_server(ui=False, data_converter=converter) as server,
            ScriptedServer(lambda _request: body) as provider,
        ):
            queue = f"bench-follow-{uuid.uuid4().hex[:8]}"
            options = WorkerOptions(
                task_queue=queue,
                endpoints=EndpointRegistry([provider.endpoint("scripted")]),
                tools=ToolRegistry([]),
            )
            counter = Counted()
            counted = await Client.connect(
                server.address, data_converter=converter, interceptors=[counter]
            )
            starter = SteadyloopClient(server.client, task_queue=queue)
            run_options = RunOptions(endpoint="scripted", model="scripted-model")
            async with running_worker(server.client, options):
                before = await follow_with_queries(starter, counted, counter, run_options, answer)
                after = await follow_the_log(starter, counted, counter, run_options, answer)
    print(
        f"following one run to its end: {words} words, one every {gap_s:g} s "
        f"(about {words * gap_s:g} s)"
    )
    print("requests the follower's client sent (per run):")
    for line in table([before, after]):
        print("  " + line)
    for line in ratios(before, after):
        print(line)
    failed = [f"{r.follower}: {p}" for r in (before, after) for p in r.problems]
    for problem in failed:
        print(f"FAILED CHECK: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
