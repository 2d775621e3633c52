"""What forwarding a model's streamed text costs in Temporal history, per streamed token.

Run: `.venv/bin/python benchmarks/bench_forwarding.py` (under 2 minutes on 2 cores;
`--quick` for short streams, about 20 seconds; `--verbose` to see the server's and the
SDK's own warnings).

Everything runs in one process on one machine: Temporal's local dev server (in memory),
one worker with the run workflows (`ToolLoopWorkflow` and its output host
`OutputStreamWorkflow`), a scripted OpenAI-compatible provider on loopback HTTP, and one
subscriber (`follow_output`, what `steadyloop run` uses) reading the run's output from
before its first token to its end. The provider answers each run with N distinct text
tokens, one SSE chunk and one socket write each, `1/rate` seconds apart (a `Pause`
between writes), so the model activity sees about one token per network read, as from
a real provider.

It prints, for each stream, in one run:

1. tokens and the pace the provider achieved;
2. the loop's history: events, events per token, and how many of them are signals or
   updates the loop received (forwarding must add none per token); the same stream with
   forwarding off is the baseline, and the ratio says what forwarding costs the loop;
3. the output host's history summed over its whole continue-as-new chain: events,
   events per token, executions, signals (published batches), updates (subscriber
   polls), the most updates one execution took (Temporal allows 2,000), failed workflow
   tasks, and the share of the answer the host still held at its end;
4. what the subscriber received, and its end-to-end latency: from the provider handing a
   token's bytes to its socket to the subscriber receiving that token (median, p95, max),
   and how many of its polls failed and were resumed.

Every run is checked: the run ends with the final answer; the subscriber received
exactly that text, so every token once and in order (the tokens are distinct); with
forwarding off it received nothing; the loop received no signal or update; and the
roll-over stream (a small `host_max_events`, more items than the host keeps) really
made the host continue-as-new and truncate. A failed check is printed and the exit
status is 1. Nothing asserts a time; `tests/test_bench_forwarding.py` runs `--quick`.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import logging
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop import bench_services, versions

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.output_publisher import read_forwarded
from steadyloop._output.forwarding import (
    ForwardedOutput,
    ForwardingOptions,
    OutputDelta,
    output_stream_id,
)
from steadyloop._run.models import RunInput, RunResult
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop._workflows.output_stream import OutputStreamSummary
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import _event_log as event_log
from steadyloop.client._event_log import DEFAULT_POLL_S, follow_output
from steadyloop.testing._chunks import Chunk, finish_chunk, role_chunk, text_chunks, usage_chunk
from steadyloop.testing._scripted_server import (
    Pause,
    ScriptedResponse,
    ScriptedServer,
    sse_response,
)

ENDPOINT = "bench"
MODEL = "bench-forwarding"
PROMPT = "Write a long answer."
# Temporal's limit on updates per workflow execution (server default).
UPDATES_PER_EXECUTION = 2_000
FOLLOW_TIMEOUT_S = 60.0

SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
UPDATE_EVENTS = {
    UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED,
}
CONTINUED_AS_NEW = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
TASK_FAILURES = (
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
)


@dataclass(frozen=True)
class Stream:
    """One benchmark stream: N tokens at a pace, and the run's forwarding option."""

    name: str
    tokens: int
    rate: float  # tokens a second the provider aims for
    forwarding: bool = True
    batch_interval_s: float = ForwardingOptions().batch_interval_s
    host_max_events: int = ForwardingOptions().host_max_events
    must_roll_over: bool = False  # the host must continue-as-new at least once
    must_truncate: bool = False  # ... and drop its oldest items on the way
    baseline_of: str | None = None  # the forwarding stream this one is the baseline of

    def options(self) -> ForwardingOptions:
        return ForwardingOptions(
            enabled=self.forwarding,
            batch_interval_s=self.batch_interval_s,
            host_max_events=self.host_max_events,
        )


# About 2,000 tokens at 100 a second is a long answer from a hosted model.
STREAMS = (
    Stream("paced", tokens=2_000, rate=100),
    Stream("paced, off", tokens=2_000, rate=100, forwarding=False, baseline_of="paced"),
    Stream("fast", tokens=2_000, rate=500),
    Stream("slow", tokens=300, rate=20),
    # More items than a host retains (2,000), so its roll-overs also truncate.
    Stream(
        "roll-over",
        tokens=4_000,
        rate=200,
        batch_interval_s=0.1,
        host_max_events=300,
        must_roll_over=True,
        must_truncate=True,
    ),
)
QUICK_STREAMS = (
    Stream("paced", tokens=300, rate=200),
    Stream("paced, off", tokens=300, rate=200, forwarding=False, baseline_of="paced"),
    Stream("fast", tokens=300, rate=1_000),
    Stream("slow", tokens=40, rate=20),
    Stream(
        "roll-over",
        tokens=4_000,
        rate=1_000,
        batch_interval_s=0.02,
        host_max_events=200,
        must_roll_over=True,
        must_truncate=True,
    ),
)


def token_text(index: int) -> str:
    """Token `index`: distinct from every other, so exact text means once each, in order."""
    return f"t{index} "


# -- the provider: token writes, timestamped -------------------------------------------


class StampedParts(list[bytes | Pause]):
    """A response's parts that note when the server takes each token's part to write it.

    The scripted server writes each part right after taking it from the sequence, so the
    moment it is taken is when the token leaves for the socket.
    """

    def __init__(self, parts: Sequence[bytes | Pause], token_parts: dict[int, int]) -> None:
        super().__init__(parts)
        self._token_parts = token_parts  # part index -> token index
        self.written: dict[int, float] = {}

    def __iter__(self) -> Iterator[bytes | Pause]:
        for index, part in enumerate(super().__iter__()):
            token = self._token_parts.get(index)
            if token is not None:
                self.written[token] = time.perf_counter()
            yield part


@dataclass(frozen=True)
class TokenScript:
    """The provider's answer to one run: the tokens, paced, and their write times."""

    tokens: list[str]
    response: ScriptedResponse
    parts: StampedParts

    @staticmethod
    def build(stream: Stream) -> TokenScript:
        tokens = [token_text(i) for i in range(stream.tokens)]
        chunks: list[Chunk | Pause] = [role_chunk()]
        token_parts: dict[int, int] = {}
        for index, chunk in enumerate(text_chunks(tokens, role=False)):
            if index:
                chunks.append(Pause(1 / stream.rate))
            token_parts[len(chunks)] = index
            chunks.append(chunk)
        chunks += [finish_chunk("stop"), usage_chunk(completion_tokens=stream.tokens)]
        response = sse_response(chunks)
        parts = StampedParts(response.parts, token_parts)
        return TokenScript(tokens, replace(response, parts=parts), parts)

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    def achieved_rate(self) -> float:
        times = sorted(self.parts.written.values())
        if len(times) < 2:
            return 0.0
        return (len(times) - 1) / (times[-1] - times[0])


# -- reading histories ---------------------------------------------------------------


@dataclass(frozen=True)
class Execution:
    """One execution of a workflow (a link of a continue-as-new chain)."""

    run_id: str
    events: list[HistoryEvent]

    def count(self, *kinds: EventType.ValueType) -> int:
        return sum(1 for event in self.events if event.event_type in kinds)

    @property
    def continued_to(self) -> str | None:
        last = self.events[-1] if self.events else None
        if last is None or last.event_type != CONTINUED_AS_NEW:
            return None
        return last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


async def execution(client: Client, workflow_id: str, run_id: str | None = None) -> Execution:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    events = [event async for event in handle.fetch_history_events()]
    return Execution(run_id or handle.run_id or "", events)


async def chain(client: Client, workflow_id: str) -> list[Execution]:
    """Every execution of `workflow_id`'s continue-as-new chain, first to last."""
    latest = await execution(client, workflow_id)
    first = latest.events[0].workflow_execution_started_event_attributes.first_execution_run_id
    runs = [await execution(client, workflow_id, first)]
    while (following := runs[-1].continued_to) is not None:
        runs.append(await execution(client, workflow_id, following))
    return runs


@dataclass
class HostFacts:
    executions: int
    events: int
    signals: int
    updates: int
    most_updates: int  # in one execution
    most_events: int  # in one execution
    task_failures: int  # workflow tasks failed or timed out
    ending: str
    retained: ForwardedOutput  # what the host held at its end


def host_facts(
    runs: Sequence[Execution], summary: OutputStreamSummary, retained: ForwardedOutput
) -> HostFacts:
    updates = [run.count(UPDATE_ACCEPTED) for run in runs]
    return HostFacts(
        executions=len(runs),
        events=sum(len(run.events) for run in runs),
        signals=sum(run.count(SIGNALED) for run in runs),
        updates=sum(updates),
        most_updates=max(updates, default=0),
        most_events=max((len(run.events) for run in runs), default=0),
        task_failures=sum(run.count(*TASK_FAILURES) for run in runs),
        ending=summary.reason,
        retained=retained,
    )


# -- one run ---------------------------------------------------------------------------


class ResumeCounter(logging.Handler):
    """Counts the polls `follow_output` resumed after a failure (it logs each one)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self._logger = logging.getLogger(event_log.__name__)
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    def __enter__(self) -> ResumeCounter:
        self._logger.addHandler(self)
        self._logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


@dataclass
class Received:
    """What the subscriber got: each delta with the time it arrived."""

    deltas: list[OutputDelta] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    resumed: int = 0  # polls that failed and were followed again

    @property
    def text(self) -> str:
        return "".join(delta.text for delta in self.deltas if delta.kind == "text")

    def latencies(self, script: TokenScript) -> list[float]:
        """Seconds from each token's write to the arrival of the delta that completed it."""
        ends: list[int] = []
        size = 0
        for delta in self.deltas:
            size += len(delta.text)
            ends.append(size)
        out: list[float] = []
        size = 0
        for index, token in enumerate(script.tokens):
            size += len(token)
            arrival = bisect.bisect_left(ends, size)
            written = script.parts.written.get(index)
            if arrival < len(self.at) and written is not None:
                out.append(self.at[arrival] - written)
        return out


@dataclass
class Measured:
    workflow_id: str
    stream: Stream
    script: TokenScript
    result: RunResult | None
    received: Received
    loop: Execution
    host: HostFacts | None
    wall_s: float
    problems: list[str]

    @property
    def loop_signals_updates(self) -> int:
        return self.loop.count(SIGNALED, *UPDATE_EVENTS)


class ForwardingBench:
    """A dev server, the scripted provider and one worker running the run workflows."""

    def __init__(self, env: WorkflowEnvironment, server: ScriptedServer, queue: str) -> None:
        self.env = env
        self.server = server
        self.task_queue = queue

    @property
    def client(self) -> Client:
        return self.env.client

    @staticmethod
    @asynccontextmanager
    async def start(*, quiet: bool = True) -> AsyncIterator[ForwardingBench]:
        async with bench_services(None, quiet=quiet) as (env, server, model):
            queue = f"bench-forwarding-{uuid.uuid4()}"
            async with Worker(
                env.client,
                task_queue=queue,
                workflows=RUN_WORKFLOWS,
                activities=[
                    *model.activities(),
                    *EndpointHealthActivities(env.client, task_queue=queue).activities(),
                ],
                max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            ):
                yield ForwardingBench(env, server, queue)

    async def run(self, stream: Stream) -> Measured:
        script = TokenScript.build(stream)
        self.server.enqueue(script.response)
        run = RunInput(
            endpoint=ENDPOINT,
            model=MODEL,
            prompt=PROMPT,
            forwarding=stream.options(),
        )
        problems: list[str] = []
        received = Received()
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=f"bench-forwarding-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )
        follower = asyncio.create_task(self._follow(handle.id, received))
        result: RunResult | None = None
        try:
            result = await asyncio.wait_for(handle.result(), 60 + 2 * stream.tokens / stream.rate)
        except Exception as error:
            problems.append(f"the run did not finish: {type(error).__name__}: {error}")
        try:
            await asyncio.wait_for(follower, FOLLOW_TIMEOUT_S)
        except TimeoutError:
            problems.append(f"the subscriber was still following {FOLLOW_TIMEOUT_S:g}s later")
        except Exception as error:
            problems.append(f"the subscriber stopped: {type(error).__name__}: {error}")
        wall = time.perf_counter() - started
        assert handle.first_execution_run_id is not None  # a handle from the start
        host_id = output_stream_id(handle.id, handle.first_execution_run_id)
        host = await self._host(host_id, problems) if stream.forwarding else None
        if not stream.forwarding and await self._host_text(host_id):
            problems.append("forwarding is off, yet the run's output host holds text")
        loop = await execution(self.client, handle.id)
        measured = Measured(handle.id, stream, script, result, received, loop, host, wall, problems)
        problems += check(measured)
        return measured

    async def _follow(self, run_id: str, into: Received) -> None:
        with ResumeCounter() as resumes:
            try:
                async for delta in follow_output(self.client, run_id):
                    into.at.append(time.perf_counter())
                    into.deltas.append(delta)
            finally:
                into.resumed = resumes.count

    async def _host(self, host_id: str, problems: list[str]) -> HostFacts | None:
        handle = self.client.get_workflow_handle(host_id, result_type=OutputStreamSummary)
        try:
            summary = await asyncio.wait_for(handle.result(), FOLLOW_TIMEOUT_S)
        except Exception as error:
            problems.append(f"the output host did not end: {type(error).__name__}: {error}")
            return None
        retained = await read_forwarded(
            self.client, pydantic_data_converter.payload_converter, host_id, turn=1
        )
        return host_facts(await chain(self.client, host_id), summary, retained)

    async def _host_text(self, host_id: str) -> str:
        """The text the run's host holds (its event log is there with forwarding off too)."""
        try:
            retained = await read_forwarded(
                self.client, pydantic_data_converter.payload_converter, host_id, turn=1
            )
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return ""
            raise
        return retained.text + retained.reasoning


def check(measured: Measured) -> list[str]:
    """What makes the run not the one the benchmark means to measure."""
    problems: list[str] = []
    stream, result, script = measured.stream, measured.result, measured.script
    if result is not None and (
        result.stop_reason != "final_answer" or result.final_answer != script.text
    ):
        problems.append(
            f"the run stopped with {result.stop_reason!r}, final answer of "
            f"{len(result.final_answer or '')} chars (expected {len(script.text)})"
        )
    got = measured.received.text
    if stream.forwarding and got != script.text:
        problems.append(f"the subscriber received {describe_mismatch(got, script.tokens)}")
    if not stream.forwarding and measured.received.deltas:
        problems.append(f"forwarding is off, yet {len(measured.received.deltas)} items arrived")
    if any((d.turn, d.attempt) != (1, 1) for d in measured.received.deltas):
        problems.append("items from another turn or attempt arrived")
    if measured.loop_signals_updates:
        problems.append(f"the loop received {measured.loop_signals_updates} signals/updates")
    host = measured.host
    if stream.must_roll_over and (host is None or host.executions < 2):
        problems.append("the host never continued-as-new: the roll-over went unexercised")
    if host is not None and not script.text.endswith(host.retained.text):
        problems.append("the host retained text that is not the end of the answer")
    if stream.must_truncate and (host is None or host.retained.complete):
        problems.append("the host never truncated: more items than it retains went unexercised")
    return problems


def describe_mismatch(got: str, tokens: Sequence[str]) -> str:
    """Which tokens the subscriber lost, repeated or reordered."""
    seen = Counter(got.split())
    expected = [token.strip() for token in tokens]
    missing = [t for t in expected if seen[t] == 0]
    repeated = [t for t, n in seen.items() if n > 1]
    order = (
        "in order"
        if [t for t in got.split() if seen[t] == 1] == [t for t in expected if seen[t] == 1]
        else "OUT OF ORDER"
    )
    return (
        f"{len(got)} chars for {len(''.join(tokens))}: {len(missing)} tokens missing "
        f"{missing[:5]}, {len(repeated)} repeated {repeated[:5]}, the rest {order}"
    )


# -- the report ----------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.0f}"


def report(runs: Sequence[Measured]) -> None:
    by_name = {m.stream.name: m for m in runs}
    w = max(len(m.stream.name) for m in runs) + 1

    print("\n1. Streams (one run each; one subscriber reading from before the first token)")
    print(
        f"   {'':<{w}} {'tokens':>7} {'aimed':>7} {'achieved':>9} {'forward':>8} "
        f"{'batch':>6} {'host max':>9} {'run':>6}"
    )
    print(f"   {'':<{w}} {'':>7} {'tok/s':>7} {'tok/s':>9} {'':>8} {'s':>6} {'events':>9} {'s':>6}")
    for m in runs:
        s = m.stream
        print(
            f"   {s.name:<{w}} {s.tokens:>7,} {s.rate:>7,.0f} {m.script.achieved_rate():>9,.0f} "
            f"{'on' if s.forwarding else 'off':>8} "
            f"{s.batch_interval_s if s.forwarding else '-':>6} "
            f"{s.host_max_events if s.forwarding else '-':>9} {m.wall_s:>6.1f}"
        )

    print("\n2. The loop's history (ToolLoopWorkflow; one model turn streaming the tokens)")
    print(f"   {'':<{w}} {'events':>7} {'per token':>10} {'signals+':>9}   vs forwarding off")
    print(f"   {'':<{w}} {'':>7} {'':>10} {'updates':>9}")
    baselines = {m.stream.baseline_of: m for m in runs if m.stream.baseline_of}
    for m in runs:
        events = len(m.loop.events)
        base = baselines.get(m.stream.name)
        versus = ""
        if base is not None:
            base_events = len(base.loop.events)
            versus = (
                f"{events / base_events:.2f}x ({events - base_events:+d} events, "
                f"{(events - base_events) / m.stream.tokens:+.4f} a token)"
            )
        elif m.stream.baseline_of:
            versus = "(the baseline)"
        print(
            f"   {m.stream.name:<{w}} {events:>7,} {events / m.stream.tokens:>10.4f} "
            f"{m.loop_signals_updates:>9}   {versus}"
        )
    print(
        "   signals+updates: signals and updates the loop received; forwarding sends every\n"
        "   token to the output host instead, so this stays 0 however long the stream."
    )

    print(
        "\n3. The output host's history (OutputStreamWorkflow), summed over its continue-as-new "
        "chain"
    )
    print(
        f"   {'':<{w}} {'events':>7} {'per token':>10} {'execs':>6} {'signals':>8} "
        f"{'updates':>8} {'most upd':>9} {'most ev':>8} {'wft':>5} {'kept':>6}   ended"
    )
    print(
        f"   {'':<{w}} {'':>7} {'':>10} {'':>6} {'':>8} {'':>8} {'one exec':>9} "
        f"{'one exec':>8} {'fail':>5} {'':>6}"
    )
    for m in runs:
        host = m.host
        if host is None:
            why = "no host (forwarding off)" if not m.stream.forwarding else "no host"
            print(f"   {m.stream.name:<{w}} {why}")
            continue
        print(
            f"   {m.stream.name:<{w}} {host.events:>7,} {host.events / m.stream.tokens:>10.3f} "
            f"{host.executions:>6} {host.signals:>8,} {host.updates:>8,} "
            f"{host.most_updates:>9,} {host.most_events:>8,} {host.task_failures:>5} "
            f"{len(host.retained.text) / len(m.script.text):>6.0%}   {host.ending}"
        )
    print(
        "   signals: published batches (one per batch interval while text arrives); updates:\n"
        "   the subscriber's long polls, each answered when new items arrive; Temporal allows\n"
        f"   {UPDATES_PER_EXECUTION:,} updates per execution. execs: executions in the chain "
        "(continue-as-new count + 1).\n   kept: the share of the answer the host still held at "
        "its end (it keeps the newest 2,000\n   items when it continues-as-new). wft fail: "
        "workflow tasks that failed, each a publish\n   signal that landed while the host was "
        "continuing-as-new (UnhandledCommand): Temporal\n   retries the task with the signal, "
        "and aborts the subscriber's poll admitted meanwhile."
    )

    print("\n4. The subscriber (follow_output): what it received, and end-to-end latency from the")
    print("   provider writing a token to the subscriber receiving it")
    print(
        f"   {'':<{w}} {'items':>6} {'tokens':>7} {'exact':>6} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'max ms':>7} {'resumed':>8}"
    )
    for m in runs:
        if not m.stream.forwarding:
            print(f"   {m.stream.name:<{w}} {len(m.received.deltas):>6}   (forwarding off)")
            continue
        latencies = sorted(m.received.latencies(m.script))
        exact = "yes" if m.received.text == m.script.text else "NO"
        if len(latencies) >= 2:
            p95 = statistics.quantiles(latencies, n=20)[18]
            cells = f"{_ms(statistics.median(latencies))} {_ms(p95)} {_ms(latencies[-1])}"
        else:
            cells = "      -       -       -"
        print(
            f"   {m.stream.name:<{w}} {len(m.received.deltas):>6,} {len(latencies):>7,} "
            f"{exact:>6} {cells} {m.received.resumed:>8}"
        )
    print(
        "   items: forwarded pieces (one per network read the model activity made); exact: the\n"
        "   subscriber's text equals the final answer, so every token arrived once, in order.\n"
        "   Latency includes the publisher's batch interval and the subscriber's poll cooldown.\n"
        "   resumed: polls that failed while the host was alive and were followed again right\n"
        "   after the last item received (see 'wft fail' above)."
    )
    if "paced" in by_name and by_name["paced"].host is not None:
        paced = by_name["paced"]
        assert paced.host is not None
        print(
            f"\n   In short: a {paced.stream.tokens:,}-token answer at "
            f"{paced.stream.rate:g} tokens/s cost the host "
            f"{paced.host.events / paced.stream.tokens:.2f} history events a token and the "
            f"loop {len(paced.loop.events) / paced.stream.tokens:.4f}."
        )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short streams (about 20 s)")
    parser.add_argument("--verbose", action="store_true", help="show server and SDK warnings")
    args = parser.parse_args(argv)
    streams = QUICK_STREAMS if args.quick else STREAMS
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]

    started = time.perf_counter()
    runs: list[Measured] = []
    async with ForwardingBench.start(quiet=not args.verbose) as bench:
        print("\nsteadyloop output-forwarding benchmark")
        print(f"   {versions()}")
        print(
            "   local dev server (in memory); one worker; pydantic data converter; scripted\n"
            "   provider on 127.0.0.1 writing one token per SSE chunk; one subscriber\n"
            f"   (follow_output, {DEFAULT_POLL_S:g} s between polls once caught up)"
        )
        for stream in streams:
            runs.append(await bench.run(stream))
    report(runs)
    problems = [(m.stream.name, p) for m in runs for p in m.problems]
    for name, problem in problems:
        print(f"   FAILED CHECK ({name}): {problem}")
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
