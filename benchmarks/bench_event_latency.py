"""The event log's latency and what it costs the loop's history, against baselines run in
the same process.

Run: `.venv/bin/python benchmarks/bench_event_latency.py` (about a minute; `--quick` for
short streams).

Everything runs in one process: Temporal's local dev server (in memory), one worker
with the run workflows, a scripted OpenAI-compatible provider on loopback HTTP.

1. Latency, from the provider handing a token's bytes to its socket (the model
   activity receives them on the same machine microseconds later) to a follower
   receiving that token, over N tokens `1/rate` seconds apart, two followers of the same
   run at once: `run_events` (the event log's reader: every topic, typed events,
   cursors checked) and a bare `WorkflowStreamClient.subscribe` of the output topic with
   the same poll cooldown (the least a follower of a Workflow Stream can do). It prints
   p50 and p95 of each and their ratio (the goal is at most 1.1x). Tokens written
   before both followers had read their first item are left out (both waited for the
   host to start). Every run checks that both followers got the whole answer, once and
   in order.
2. History per turn: a run of T tool turns then an answer, with the event log on (this
   code) and off (the same code with the log's one decision, `EventLog.begin`, made
   "off"), workflows run
   unsandboxed in both so the switch reaches them. It prints the loop's history events
   and bytes per turn, and the difference.

Nothing asserts a time; a failed check is printed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_forwarding import ENDPOINT, MODEL, Received, Stream, TokenScript
from bench_loop import bench_services, versions

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._output.forwarding import (
    HOST_IDLE_CLOSE_S,
    OUTPUT_TOPIC,
    OutputDelta,
    output_stream_id,
)
from steadyloop._run.models import RunInput, RunResult
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop._workflows import event_log as workflow_event_log
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client._event_log import DEFAULT_POLL_S, run_events
from steadyloop.events import TextDeltaEvent
from steadyloop.testing._chunks import ScriptedCall, finish_chunk, text_chunks, tool_call_chunks
from steadyloop.testing._scripted_server import ScriptedServer, sse_response
from steadyloop.tools import ToolRegistry, tool

LATENCY_STREAMS = (Stream("paced", tokens=300, rate=50), Stream("fast", tokens=600, rate=200))
QUICK_STREAMS = (Stream("paced", tokens=60, rate=50),)
TURNS = 8
QUICK_TURNS = 3
FOLLOW_TIMEOUT_S = 60.0


@tool(effect="pure")
async def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@dataclass
class LatencyRun:
    stream: Stream
    ours: list[float]
    bare: list[float]
    problems: list[str]


async def follow_events(client: Client, handle_id: str, run_id: str, into: Received) -> None:
    async for event in run_events(client, handle_id, run_id):
        if isinstance(event, TextDeltaEvent):
            into.at.append(time.perf_counter())
            into.deltas.append(
                OutputDelta(turn=event.turn, attempt=event.attempt, kind="text", text=event.text)
            )


async def follow_bare(client: Client, host_id: str, into: Received, tokens: int) -> None:
    """A bare Workflow Stream subscriber: waits for the host, then reads the output topic."""
    stream = WorkflowStreamClient.create(client, host_id)
    size = len("".join(f"t{i} " for i in range(tokens)))
    while True:
        try:
            await client.get_workflow_handle(host_id).describe()
            break
        except RPCError:
            await asyncio.sleep(DEFAULT_POLL_S)
    async for item in stream.subscribe(
        [OUTPUT_TOPIC],
        result_type=OutputDelta,
        poll_cooldown=timedelta(seconds=DEFAULT_POLL_S),
    ):
        into.at.append(time.perf_counter())
        into.deltas.append(item.data)
        if len(into.text) >= size:
            return


async def latency_run(
    client: Client, server: ScriptedServer, queue: str, stream: Stream
) -> LatencyRun:
    script = TokenScript.build(stream)
    server.enqueue(script.response)
    run = RunInput(
        endpoint=ENDPOINT, model=MODEL, prompt="a long answer", forwarding=stream.options()
    )
    handle = await client.start_workflow(
        ToolLoopWorkflow.run, run, id=f"bench-events-{uuid.uuid4()}", task_queue=queue
    )
    first = handle.first_execution_run_id or ""
    ours, bare = Received(), Received()
    followers = [
        asyncio.create_task(follow_events(client, handle.id, first, ours)),
        asyncio.create_task(
            follow_bare(client, output_stream_id(handle.id, first), bare, stream.tokens)
        ),
    ]
    problems: list[str] = []
    result: RunResult = await handle.result()
    try:
        await asyncio.wait_for(asyncio.gather(*followers), FOLLOW_TIMEOUT_S)
    except Exception as error:
        problems.append(f"a follower did not finish: {type(error).__name__}: {error}")
    if result.stop_reason != "final_answer":
        problems.append(f"the run stopped {result.stop_reason}: {result.detail}")
    for name, received in (("run_events", ours), ("bare subscriber", bare)):
        if received.text != script.text:
            problems.append(f"{name} received {len(received.text)} of {len(script.text)} chars")
    # Leave out what was written before both followers were reading.
    start = max(ours.at[0], bare.at[0]) if ours.at and bare.at else 0.0
    keep = [i for i, t in script.parts.written.items() if t >= start]
    both = [ours.latencies(script), bare.latencies(script)]
    if min(len(values) for values in both) < len(script.tokens):
        problems.append("a token was not received by both followers")
        return LatencyRun(stream, [], [], problems)
    return LatencyRun(stream, [both[0][i] for i in keep], [both[1][i] for i in keep], problems)


def tool_turns(turns: int) -> list[object]:
    responses: list[object] = []
    for turn in range(1, turns + 1):
        call = ScriptedCall("add", {"a": turn, "b": 1}, id=f"c{turn}")
        responses.append(sse_response([*tool_call_chunks([call]), finish_chunk("tool_calls")]))
    responses.append(sse_response([*text_chunks("done"), finish_chunk("stop")]))
    return responses


async def history_run(
    client: Client, server: ScriptedServer, queue: str, turns: int
) -> tuple[int, int]:
    for response in tool_turns(turns):
        server.enqueue(response)  # type: ignore[arg-type]
    run = RunInput(endpoint=ENDPOINT, model=MODEL, prompt="add", tools=["add"])
    handle = await client.start_workflow(
        ToolLoopWorkflow.run, run, id=f"bench-history-{uuid.uuid4()}", task_queue=queue
    )
    result = await handle.result()
    assert result.stop_reason == "final_answer" and result.stats.tool_calls == turns, result.detail
    info = (await handle.describe()).raw_description.workflow_execution_info
    return info.history_length, info.history_size_bytes


def log_off() -> None:
    """Run the loop without its event log: nothing is noted, so nothing is published."""
    original = workflow_event_log.EventLog.begin

    def begin(
        self: workflow_event_log.EventLog,
        host_max_events: int,
        host_idle_close_s: float = HOST_IDLE_CLOSE_S,
        *,
        forwarding: bool = False,
        continued: bool | None = None,
    ) -> None:
        original(
            self, host_max_events, host_idle_close_s, forwarding=forwarding, continued=continued
        )
        # Nothing noted, so nothing is published or recorded: the loop without its log.
        self.note = lambda event: None  # type: ignore[method-assign]

    workflow_event_log.EventLog.begin = begin  # type: ignore[method-assign]


def restore(original: object) -> None:
    workflow_event_log.EventLog.begin = original  # type: ignore[assignment,method-assign]


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    streams = QUICK_STREAMS if args.quick else LATENCY_STREAMS
    turns = QUICK_TURNS if args.quick else TURNS
    print(versions())
    problems: list[str] = []
    async with bench_services(None, quiet=not args.verbose) as (env, server, model):
        queue = f"bench-events-{uuid.uuid4()}"
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=RUN_WORKFLOWS,
            activities=[
                *model.activities(),
                *ToolActivities(ToolRegistry([add])).activities(),
                *EndpointHealthActivities(env.client, task_queue=queue).activities(),
            ],
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            runs = [await latency_run(env.client, server, queue, s) for s in streams]
            on = await history_run(env.client, server, queue, turns)
            original = workflow_event_log.EventLog.begin
            log_off()
            try:
                off = await history_run(env.client, server, queue, turns)
            finally:
                restore(original)
    print("\n1. Latency, token written by the provider -> token received by a follower")
    print(f"   (both followers poll {DEFAULT_POLL_S:g} s apart once caught up)")
    print(f"   {'stream':<8} {'tokens':>6} {'follower':<16} {'p50 ms':>7} {'p95 ms':>7}")
    for measured in runs:
        problems += measured.problems
        if not measured.ours:
            continue
        rows = (("run_events", measured.ours), ("bare subscribe", measured.bare))
        for name, values in rows:
            print(
                f"   {measured.stream.name:<8} {len(values):>6} {name:<16} "
                f"{statistics.median(values) * 1000:>7.1f} {percentile(values, 0.95) * 1000:>7.1f}"
            )
        p50 = statistics.median(measured.ours) / statistics.median(measured.bare)
        p95 = percentile(measured.ours, 0.95) / percentile(measured.bare, 0.95)
        print(f"   {measured.stream.name:<8} {'':>6} {'ratio':<16} {p50:>6.2f}x {p95:>6.2f}x")
    print(f"\n2. The loop's history, {turns} tool turns and an answer (forwarding off)")
    print(f"   {'event log':<10} {'events':>7} {'per turn':>9} {'bytes':>8} {'per turn':>9}")
    for name, (events, size) in (("off", off), ("on", on)):
        print(f"   {name:<10} {events:>7} {events / turns:>9.1f} {size:>8} {size / turns:>9.0f}")
    print(
        f"   {'added':<10} {on[0] - off[0]:>7} {(on[0] - off[0]) / turns:>9.1f} "
        f"{on[1] - off[1]:>8} {(on[1] - off[1]) / turns:>9.0f}"
    )
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
