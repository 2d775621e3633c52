"""History bytes per turn of a long run, with history bounding off and on, in one run.

Run: `.venv/bin/python benchmarks/bench_history.py` (500 turns bounded, 300 unbounded,
1,024 chars of tool-call text a turn; about two minutes on 2 cores), `--quick` for 150
turns of each.

One local dev server (in memory), the scripted provider of `bench_loop.py` (one tool
call a turn to a pure no-op tool, then a final answer), and two workers on two task
queues, differing only in their data converter:

- *unbounded* (steadyloop before bounding): the pydantic converter, every payload inline,
  so each model call records the whole transcript in history; continue-as-new only when
  Temporal suggests it.
- *bounded*: steadyloop's converter (`steadyloop._history.payload_storage`): payloads of 32 KiB or
  more go to a blob directory (chunked, content-addressed) and history keeps a
  reference; the run continues-as-new at its `RunLimits` thresholds (here
  `--events` history events or `--bytes` history bytes per execution) or when Temporal
  suggests it.

It prints, for both: history bytes added by each turn (event bytes between two
consecutive tool completions, whichever execution the turn ran in) at chosen turns and
as means over windows of turns; each execution of the run (turns, events, bytes, how it
ended); and for the bounded run what the blob directory holds against the payload bytes
it was given (what chunk sharing saves). A turn whose bytes do not grow with the turn
number is what "bounded" means here: the run's total is then linear in turns, and each
execution stays under its thresholds.

Nothing asserts a time. `tests/test_history_bounding.py` (slow) runs the bounded case
for 500 turns and asserts it completes, continues-as-new, answers every call and adds no
more history in its last turns than in its early ones.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop import (
    ENDPOINT,
    FRAGMENT_CHARS,
    PROMPT,
    SYSTEM_PROMPT,
    TOOL_NAME,
    Provider,
    Script,
    bench_services,
    build_tools,
    check_steadyloop,
    event_bytes,
)

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._history.payload_storage import (
    DEFAULT_THRESHOLD_BYTES,
    LocalFileStorageDriver,
    steadyloop_data_converter,
)
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop._worker.process import RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.tools._payloads import RUN_TOOL_ACTIVITY

CALL_CHARS = 1_024
BOUNDED_TURNS = 500
UNBOUNDED_TURNS = 300
EVENTS_PER_EXECUTION = 2_000
BYTES_PER_EXECUTION = 2_000_000
WINDOW = 50


@dataclass(frozen=True)
class Execution:
    """One execution of a run (up to its continue-as-new or its end)."""

    run_id: str
    turns: int  # tool turns completed in it
    events: int
    bytes: int
    ending: str
    offloaded: int  # payloads kept in the blob directory, not inline
    offloaded_bytes: int  # their size as payloads
    turn_bytes: list[int]  # history bytes each of its tool turns added


@dataclass
class Chain:
    """A run across its executions, and whether it is the loop the benchmark means."""

    label: str
    turns: int
    wall_s: float
    executions: list[Execution] = field(default_factory=list)
    result: RunResult | None = None
    problem: str | None = None

    @property
    def turn_bytes(self) -> list[int]:
        """History bytes added by turn 1, 2, ... of the whole run."""
        return [size for execution in self.executions for size in execution.turn_bytes]


def read_execution(run_id: str, events: Sequence[HistoryEvent]) -> tuple[Execution, str | None]:
    """What one execution's history says, and the run id it continued as (None: ended)."""
    size = at_last_turn = 0
    turn_bytes: list[int] = []
    tools: set[int] = set()
    offloaded = offloaded_bytes = 0
    ending, following = "still running", None
    for event in events:
        size += event_bytes(event)
        kind = event.event_type
        for payloads in _payloads_of(event):
            for payload in payloads:
                for external in payload.external_payloads:
                    offloaded += 1
                    offloaded_bytes += external.size_bytes
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == RUN_TOOL_ACTIVITY:
                tools.add(event.event_id)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            if event.activity_task_completed_event_attributes.scheduled_event_id in tools:
                turn_bytes.append(size - at_last_turn)
                at_last_turn = size
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            ending = "continued as new"
            following = (
                event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            )
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            ending = "completed"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            ending = "terminated: " + event.workflow_execution_terminated_event_attributes.reason
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            ending = "failed: " + event.workflow_execution_failed_event_attributes.failure.message
    execution = Execution(
        run_id=run_id,
        turns=len(turn_bytes),
        events=len(events),
        bytes=size,
        ending=ending,
        offloaded=offloaded,
        offloaded_bytes=offloaded_bytes,
        turn_bytes=turn_bytes,
    )
    return execution, following


def _payloads_of(event: HistoryEvent) -> list[Sequence[Payload]]:
    """The payload lists an event carries that a loop puts large values in."""
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return [event.activity_task_scheduled_event_attributes.input.payloads]
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return [event.activity_task_completed_event_attributes.result.payloads]
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        return [event.workflow_execution_started_event_attributes.input.payloads]
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
        return [event.workflow_execution_continued_as_new_event_attributes.input.payloads]
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return [event.workflow_execution_completed_event_attributes.result.payloads]
    return []


class HistoryBench:
    """A dev server, the scripted provider, and a worker per converter (inline, blobs)."""

    def __init__(
        self,
        inline: Client,
        blobs: Client,
        queues: dict[str, str],
        provider: Provider,
        driver: LocalFileStorageDriver,
    ) -> None:
        self.clients = {"unbounded": inline, "bounded": blobs}
        self.queues = queues
        self.provider = provider
        self.driver = driver

    @staticmethod
    @asynccontextmanager
    async def start(
        blob_dir: Path, *, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES, quiet: bool = True
    ) -> AsyncIterator[HistoryBench]:
        provider = Provider(FRAGMENT_CHARS)
        converter = steadyloop_data_converter(blob_dir, threshold_bytes=threshold_bytes)
        assert converter.external_storage is not None
        driver = converter.external_storage.drivers[0]
        assert isinstance(driver, LocalFileStorageDriver)
        async with bench_services(provider, quiet=quiet) as (env, _, model):
            config = env.client.config()
            config["data_converter"] = converter
            blobs = Client(**config)
            queues = {
                "unbounded": f"bench-history-inline-{uuid.uuid4()}",
                "bounded": f"bench-history-blobs-{uuid.uuid4()}",
            }
            activities = [*model.activities(), *ToolActivities(build_tools()).activities()]

            def health(client: Client, queue: str) -> Sequence[Callable[..., object]]:
                return EndpointHealthActivities(client, task_queue=queue).activities()

            async with (
                Worker(
                    env.client,
                    task_queue=queues["unbounded"],
                    workflows=RUN_WORKFLOWS,
                    activities=[*activities, *health(env.client, queues["unbounded"])],
                ),
                Worker(
                    blobs,
                    task_queue=queues["bounded"],
                    workflows=RUN_WORKFLOWS,
                    activities=[*activities, *health(blobs, queues["bounded"])],
                ),
            ):
                yield HistoryBench(env.client, blobs, queues, provider, driver)

    async def run(
        self, label: str, turns: int, call_chars: int, limits: RunLimits, timeout_s: float
    ) -> Chain:
        """A `turns`-turn run on the `label` worker, followed across its executions."""
        script = Script(turns=turns, call_chars=call_chars)
        self.provider.prepare(script)
        client = self.clients[label]
        run = RunInput(
            endpoint=ENDPOINT,
            model=script.model,
            prompt=PROMPT,
            system_prompt=SYSTEM_PROMPT,
            tools=[TOOL_NAME],
            limits=limits.model_copy(update={"max_turns": turns + 1}),
        )
        started = time.perf_counter()
        handle = await client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=f"bench-history-{label}-{uuid.uuid4()}",
            task_queue=self.queues[label],
        )
        chain = Chain(label=label, turns=turns, wall_s=0.0)
        try:
            chain.result = await asyncio.wait_for(handle.result(), timeout_s)
        except TimeoutError:
            await handle.terminate(reason=f"benchmark: no result after {timeout_s:g}s")
            chain.problem = f"no result after {timeout_s:g}s (terminated by the benchmark)"
        except WorkflowFailureError as error:
            chain.problem = f"{type(error.cause).__name__}: {error.cause}"
        chain.wall_s = time.perf_counter() - started
        if chain.result is not None:
            chain.problem = check_steadyloop(chain.result, turns, call_chars)
        run_id: str | None = handle.first_execution_run_id
        while run_id is not None:
            history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
            execution, run_id = read_execution(run_id, history.events)
            chain.executions.append(execution)
        return chain


# -- the report ----------------------------------------------------------------------


def _kb(size: float) -> str:
    return f"{size / 1000:,.1f} KB"


def _mb(size: float) -> str:
    return f"{size / 1_000_000:,.2f} MB"


def print_per_turn(chains: Sequence[Chain], checkpoints: Sequence[int]) -> None:
    print("\n1. History bytes added by one turn (between two consecutive tool completions)")
    print(f"   {'turn':>12}" + "".join(f"   {c.label:>12}" for c in chains))
    for turn in checkpoints:
        cells = [
            f"{_kb(c.turn_bytes[turn - 1]):>12}" if turn <= len(c.turn_bytes) else f"{'-':>12}"
            for c in chains
        ]
        print(f"   {turn:>12}   " + "   ".join(cells))
    print(f"   means over windows of {WINDOW} turns:")
    longest = max(len(c.turn_bytes) for c in chains)
    for start in range(0, longest, WINDOW):
        cells = []
        for chain in chains:
            window = chain.turn_bytes[start : start + WINDOW]
            cells.append(f"{_kb(statistics.mean(window)):>12}" if window else f"{'-':>12}")
        label = f"{start + 1}-{start + WINDOW}"
        print(f"   {label:>12}   " + "   ".join(cells))
    for chain in chains:
        sizes = chain.turn_bytes
        if len(sizes) >= 2 * WINDOW:
            early = statistics.mean(sizes[WINDOW : 2 * WINDOW])
            late = statistics.mean(sizes[-WINDOW:])
            print(
                f"   {chain.label}: the last {WINDOW} turns added {late / early:.2f}x what turns "
                f"{WINDOW + 1}-{2 * WINDOW} added a turn; largest turn {_kb(max(sizes))}"
            )


def readme_figure(chain: Chain, call_chars: int) -> str:
    """The line the README's "Long runs: bounded history" section quotes, as printed here:
    a README figure comes from a script that prints it."""
    sizes = chain.turn_bytes
    steady = sizes[WINDOW:] if len(sizes) > 2 * WINDOW else sizes
    at = {turn: _kb(sizes[turn - 1]) for turn in (100, len(sizes)) if turn <= len(sizes)}
    where = ", ".join(f"{size} at turn {turn}" for turn, size in at.items())
    return (
        f"README figure: with {call_chars:,} chars a turn, each turn of the {chain.label} run "
        f"adds about {statistics.mean(steady) / 1000:.1f} KB of history (mean of turns "
        f"{len(sizes) - len(steady) + 1}-{len(sizes)}; {where})"
    )


def print_executions(chain: Chain) -> None:
    ex = chain.executions
    total = sum(e.bytes for e in ex)
    per_turn_ms = chain.wall_s * 1000 / max(1, len(chain.turn_bytes))
    print(
        f"\n   {chain.label}: {chain.turns} turns asked, {len(chain.turn_bytes)} done in "
        f"{len(ex)} execution(s), {chain.wall_s:.1f} s ({per_turn_ms:.0f} "
        f"ms/turn); history {_mb(total)} in all, largest execution {_mb(max(e.bytes for e in ex))}"
    )
    if chain.result is not None:
        stats = chain.result.stats
        print(
            f"   stop reason {chain.result.stop_reason}; continue-as-new by reason "
            f"{dict(stats.continued_as_new) or 'none'}; {len(chain.result.transcript)} messages"
        )
    if chain.problem:
        print(f"   NOT THE LOOP MEANT: {chain.problem}")
    print(f"   {'execution':>9} {'turns':>6} {'events':>7} {'bytes':>11} {'offloaded':>16}  ending")
    shown = ex if len(ex) <= 12 else [*ex[:5], *ex[-5:]]
    for position, execution in enumerate(shown):
        if len(ex) > 12 and position == 5:
            print(f"   {'...':>9} ({len(ex) - 10} more)")
        number = ex.index(execution) + 1
        offloaded = f"{execution.offloaded} ({_mb(execution.offloaded_bytes)})"
        print(
            f"   {number:>9} {execution.turns:>6} {execution.events:>7,} "
            f"{_mb(execution.bytes):>11} {offloaded:>16}  {execution.ending}"
        )


def print_blobs(chain: Chain, driver: LocalFileStorageDriver) -> None:
    usage = driver.usage()
    given = sum(e.offloaded_bytes for e in chain.executions)
    print(
        f"\n3. Blob directory after the bounded run: {usage.files:,} files, {_mb(usage.bytes)} on "
        f"disk, for {_mb(given)} of payloads\n   referenced from history "
        f"({given / max(1, usage.bytes):.1f}x: consecutive requests share their transcript's "
        f"chunks); {_kb(usage.bytes / max(1, len(chain.turn_bytes)))} a turn"
    )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="150 turns of each")
    parser.add_argument("--turns", type=int, help=f"bounded run ({BOUNDED_TURNS})")
    parser.add_argument("--unbounded-turns", type=int, help=f"({UNBOUNDED_TURNS})")
    parser.add_argument("--call-chars", type=int, default=CALL_CHARS)
    parser.add_argument("--events", type=int, default=EVENTS_PER_EXECUTION)
    parser.add_argument("--bytes", type=int, default=BYTES_PER_EXECUTION)
    parser.add_argument("--threshold", type=int, default=DEFAULT_THRESHOLD_BYTES)
    parser.add_argument("--verbose", action="store_true", help="show server and SDK warnings")
    args = parser.parse_args(argv)
    bounded_turns = args.turns or (150 if args.quick else BOUNDED_TURNS)
    unbounded_turns = args.unbounded_turns or (150 if args.quick else UNBOUNDED_TURNS)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-history-blobs-") as blob_dir:
        async with HistoryBench.start(
            Path(blob_dir), threshold_bytes=args.threshold, quiet=not args.verbose
        ) as bench:
            print("\nsteadyloop history benchmark: bounded against unbounded, one dev server")
            print(
                f"   {args.call_chars:,} chars of tool-call text a turn; bounded: payloads of "
                f"{args.threshold:,} bytes or more in a blob directory, continue-as-new at\n"
                f"   {args.events:,} events or {args.bytes:,} bytes per execution (or when "
                "Temporal suggests it); unbounded: every payload inline,\n   continue-as-new "
                "only when Temporal suggests it"
            )
            inline_limits = RunLimits(
                continue_as_new_at_events=None,
                continue_as_new_at_bytes=None,
                continue_as_new_at_updates=None,
            )
            bounded_limits = RunLimits(
                continue_as_new_at_events=args.events, continue_as_new_at_bytes=args.bytes
            )
            unbounded = await bench.run(
                "unbounded",
                unbounded_turns,
                args.call_chars,
                inline_limits,
                60 + 2.0 * unbounded_turns,
            )
            bounded = await bench.run(
                "bounded", bounded_turns, args.call_chars, bounded_limits, 60 + 1.0 * bounded_turns
            )
            chains = [unbounded, bounded]
            checkpoints = sorted(
                {10, 50, 100, 150, 200, 300, 400, 500, bounded_turns, unbounded_turns}
            )
            print_per_turn(
                chains, [c for c in checkpoints if c <= max(bounded_turns, unbounded_turns)]
            )
            print("\n2. Executions of each run (bytes: serialized History proto of the execution)")
            for chain in chains:
                print_executions(chain)
            print_blobs(bounded, bench.driver)
            print(f"\n{readme_figure(bounded, args.call_chars)}")
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
