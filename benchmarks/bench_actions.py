"""What steadyloop costs in Temporal Cloud actions: per tool round, per run, per long
streamed turn, per minute of one follower.

Run: `.venv/bin/python benchmarks/bench_actions.py` (about three minutes on 2 cores;
`--quick` streams 6 s instead of 60 s, under a minute).

Temporal Cloud bills per action: workflow starts, activity attempts, heartbeats that
reach the server, signals, queries, updates, timers, child workflows (DESIGN.md). The
SDK throttles heartbeats, so counting `activity.heartbeat` calls would overcount: what
reaches the server is counted there. Everything runs in one process as
`bench_loop.py` runs it (its dev server, worker and scripted provider), the dev server
started with `--metrics-port`, and every figure is counted twice:

- by the server: the deltas of its Prometheus `action` counter (by `action_type`) and of
  `service_requests{operation=...}` (frontend; heartbeats and queries leave no history
  event), read before and after each measured run, with nothing else running;
- from the recorded histories of every workflow the run touched (the loop's chain, its
  output host, the endpoint's health entity, from the run's start on), by Temporal
  Cloud's rules (its "Actions" page): workflow starts, activities scheduled plus their
  retries (`ActivityTaskStarted.attempt`), signals received, updates accepted, timers,
  child workflows, one action per workflow task that recorded markers (local activities
  and patches alike: "all RecordMarkers from each Workflow Task as one action"), and
  search-attribute upserts other than `TemporalChangeVersion`'s (which Cloud exempts);
  for reference, what is not billed on its own: the local-activity and patch markers
  one by one, and the `TemporalChangeVersion` upserts the SDK adds for each patch.

Measured:
1. per tool round: (20-round run - 1-round run) / 19, short model turns (the
   `bench_loop` provider: one tool call a turn, streamed in well under a second);
2. per run: a run whose one model turn answers (tools offered, none called), and its
   fixed part: that run less one model activity;
3. a turn streamed for 60 s (`--stream-s`), not forwarded: its run less the 1-turn run;
4. one follower (`RunHandle.events()`, what `steadyloop run` follows by) of a forwarded
   60-s turn: the run followed less the same run unfollowed, per minute; the same with
   `poll_s=1` (the follower's long poll asked at most once a second); and of the same
   turn not forwarded (its log is in its history: the follower reads history).

Before each measured run the benchmark waits 2.1 s (the worker's short endpoint-health
cache), as for a run arriving alone. Nothing asserts a count; the two ways of counting
are checked against each other for every run (`disagreements`: starts, heartbeats,
signals, timers, children, marker batches, upserts must be equal), a disagreement is printed as a
PROBLEM and the exit status is 1; `tests/test_bench_actions.py` runs `--quick`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop import (
    ENDPOINT,
    PROMPT,
    SYSTEM_PROMPT,
    TOOL_NAME,
    LoopBench,
    Provider,
    Script,
    chain_events,
    versions,
)

from steadyloop._output.forwarding import ForwardingOptions, output_stream_id
from steadyloop._routing.endpoint_health import health_workflow_id
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunHandle
from steadyloop.testing._chunks import Chunk, chunk, finish_chunk, role_chunk
from steadyloop.testing._scripted_server import (
    Pause,
    RecordedRequest,
    ScriptedResponse,
    sse_response,
)

STREAM_MODEL = "bench-stream"
# A follower's slower poll (`RunHandle.events(poll_s=...)`): text in 1-s pieces.
SLOW_POLL_S = 1.0
# The kinds Temporal Cloud bills, in the order the table prints them.
BILLED = (
    "start",
    "activity",
    "heartbeat",
    "signal",
    "query",
    "update",
    "timer",
    "child",
    "markers",
    "upsert",
)
UNBILLED = ("local activity", "patch", "change version")
CHANGE_VERSION = "TemporalChangeVersion"
REQUESTS = {
    "RecordActivityTaskHeartbeat": "heartbeat",
    "RecordActivityTaskHeartbeatById": "heartbeat",
    "QueryWorkflow": "query",
}
_ACTION = re.compile(r"^action\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_REQUEST = re.compile(r"^service_requests\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


class StreamingProvider(Provider):
    """`bench_loop`'s provider, plus model `bench-stream-S`: text over about S seconds."""

    def __init__(self, fragment_chars: int) -> None:
        super().__init__(fragment_chars)
        self._streams: dict[str, ScriptedResponse] = {}

    def stream_model(self, seconds: float) -> str:
        model = f"{STREAM_MODEL}-{seconds:g}"
        words = max(2, round(seconds * 4))  # a word every 250 ms
        parts: list[Chunk | str | bytes | Pause] = [role_chunk()]
        for i in range(words):
            parts += [Pause(seconds / words), chunk({"content": f"w{i} "})]
        self._streams[model] = sse_response([*parts, finish_chunk("stop")])
        return model

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        model = str((request.json or {}).get("model", ""))
        streamed = self._streams.get(model)
        return streamed if streamed is not None else super().__call__(request)


# -- counting ------------------------------------------------------------------------


def _labels(text: str) -> dict[str, str]:
    return dict(_LABEL.findall(text))


async def scrape(http: httpx.AsyncClient, url: str) -> tuple[Counter[str], Counter[str]]:
    """The server's `action` counter by type and its frontend requests by operation."""
    actions: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    for line in (await http.get(url)).text.splitlines():
        if (found := _ACTION.match(line)) is not None:
            labels = _labels(found["labels"])
            if labels.get("namespace") == "default":
                actions[labels.get("action_type", "?")] += int(float(found["value"]))
        elif (found := _REQUEST.match(line)) is not None:
            labels = _labels(found["labels"])
            if labels.get("namespace") == "default" and labels.get("service_name") == "frontend":
                requests[labels.get("operation", "?")] += int(float(found["value"]))
    return actions, requests


def history_kinds(events: Sequence[HistoryEvent]) -> Counter[str]:
    """What one workflow's history says it cost, by kind (`BILLED`, `UNBILLED`)."""
    kinds: Counter[str] = Counter()
    marker_tasks: set[int] = set()
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            kinds["start"] += 1
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            kinds["activity"] += 1
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            kinds["activity"] += max(0, event.activity_task_started_event_attributes.attempt - 1)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            kinds["signal"] += 1
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            kinds["update"] += 1
        elif kind == EventType.EVENT_TYPE_TIMER_STARTED:
            kinds["timer"] += 1
        elif kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            kinds["child"] += 1
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            kinds["local activity" if "local_activity" in marker.marker_name else "patch"] += 1
            marker_tasks.add(marker.workflow_task_completed_event_id)
        elif kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            exempt = set(fields.indexed_fields) == {CHANGE_VERSION}
            kinds["change version" if exempt else "upsert"] += 1
    kinds["markers"] += len(marker_tasks)
    return +kinds


@dataclass
class Count:
    """What one measured run cost, counted by the server and from the histories."""

    server: Counter[str]  # the `action` counter's delta, by action type
    history: Counter[str]  # `history_kinds` of every workflow the run touched, + requests
    seconds: float
    result: RunResult | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def billed(self) -> int:
        return sum(self.history[kind] for kind in BILLED)

    @property
    def actions(self) -> int:
        return sum(self.server.values())

    def minus(self, other: Count, times: float = 1.0) -> dict[str, float]:
        """Each kind (and both totals) of this run less `times` x `other`'s."""
        out = {k: self.history[k] - times * other.history[k] for k in (*BILLED, *UNBILLED)}
        out["billed"] = self.billed - times * other.billed
        out["actions"] = self.actions - times * other.actions
        return out

    def figures(self) -> dict[str, float]:
        out: dict[str, float] = {k: float(self.history[k]) for k in (*BILLED, *UNBILLED)}
        out["billed"] = float(self.billed)
        out["actions"] = float(self.actions)
        return out


# What the server's `action` counter calls each kind the histories count (the server
# counts one action per batch of markers, as Cloud does, and every search-attribute
# upsert, `TemporalChangeVersion`'s too, which Cloud does not; it does not count queries).
AGREEING = {
    "start": (
        "grpc_StartWorkflowExecution",
        "grpc_SignalWithStartWorkflowExecution",
        "command_ContinueAsNewWorkflowExecution",  # a start by Cloud's rules too
    ),
    "heartbeat": ("grpc_RecordActivityTaskHeartbeat", "grpc_RecordActivityTaskHeartbeatById"),
    "signal": ("grpc_SignalWorkflowExecution", "command_SignalExternalWorkflowExecution"),
    "timer": ("command_StartTimer",),
    "child": ("command_StartChildWorkflowExecution",),
    "markers": ("command_BatchMarkers",),
}


def disagreements(count: Count) -> list[str]:
    """Where the server's counter and the histories disagree about one run (a broken
    count would otherwise print a plausible table). Activities: the server counts
    each one scheduled, the histories also each retry, so the history may only be more."""
    found = []
    for kind, types in AGREEING.items():
        server = sum(count.server[t] for t in types)
        if server != count.history[kind]:
            found.append(f"{kind}: server {server}, histories {count.history[kind]}")
    upserts = count.server["command_UpsertWorkflowSearchAttributes"]
    if upserts != count.history["upsert"] + count.history["change version"]:
        found.append(
            f"upsert: server {upserts}, histories {count.history['upsert']}"
            f" + {count.history['change version']} {CHANGE_VERSION}"
        )
    scheduled = count.server["command_ScheduleActivityTask"]
    if not scheduled <= count.history["activity"]:
        found.append(f"activity: server {scheduled}, histories {count.history['activity']}")
    return found


class ActionBench:
    """Runs one workflow at a time on `bench` and counts what it cost."""

    def __init__(
        self, bench: LoopBench, provider: StreamingProvider, metrics: str, cache_s: float
    ) -> None:
        self.bench = bench
        self.provider = provider
        self.metrics = metrics
        self.cache_s = cache_s
        self.http = httpx.AsyncClient()

    @property
    def client(self) -> Client:
        return self.bench.client

    async def run(
        self,
        model: str,
        *,
        max_turns: int,
        forwarding: bool = False,
        follow: bool = False,
        follow_poll_s: float | None = None,
    ) -> Count:
        await asyncio.sleep(self.cache_s)  # the worker's health cache: cold, as for a lone run
        before_actions, before_requests = await scrape(self.http, self.metrics)
        since = time.time()
        run = RunInput(
            endpoint=ENDPOINT,
            model=model,
            prompt=PROMPT,
            system_prompt=SYSTEM_PROMPT,
            tools=[TOOL_NAME],
            limits=RunLimits(max_turns=max_turns),
            forwarding=ForwardingOptions(enabled=forwarding),
        )
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=f"bench-actions-{uuid.uuid4()}",
            task_queue=self.bench.task_queue,
        )
        follower = None
        if follow:
            follower = asyncio.ensure_future(
                _drain(RunHandle(self.client, handle.id), follow_poll_s)
            )
        result = await asyncio.wait_for(handle.result(), 600)
        seconds = time.perf_counter() - started
        problems = []
        if follower is not None:
            seen = await asyncio.wait_for(follower, 60)
            if not seen:
                problems.append("the follower saw no event")
        await asyncio.sleep(1.0)  # the output host closes after the run: count that too
        after_actions, after_requests = await scrape(self.http, self.metrics)
        self.bench.server.exchanges.clear()
        history = Counter[str]()
        for events in await self._histories(handle.id, handle.result_run_id or "", since):
            history += history_kinds(events)
        for operation, kind in REQUESTS.items():
            history[kind] += after_requests[operation] - before_requests[operation]
        if result.stop_reason != "final_answer":
            problems.append(f"stopped {result.stop_reason}: {result.detail}")
        count = Count(after_actions - before_actions, history, seconds, result, problems)
        problems += disagreements(count)
        return count

    async def _histories(
        self, workflow_id: str, first_run_id: str, since: float
    ) -> list[list[HistoryEvent]]:
        """The loop's chain, its output host's, and the health entity's since `since`."""
        found = [await chain_events(self.client, workflow_id, first_run_id)]
        for other in (output_stream_id(workflow_id, first_run_id), health_workflow_id(ENDPOINT)):
            try:
                # From its first execution: a host followed by a reader grows faster and
                # may have continued-as-new during the run (its latest alone misses that).
                described = await self.client.get_workflow_handle(other).describe()
                first = described.raw_description.workflow_execution_info.first_run_id
                events = await chain_events(self.client, other, first or None)
            except RPCError:
                continue  # never started
            found.append([e for e in events if e.event_time.ToNanoseconds() / 1e9 >= since])
        return found


async def _drain(run: RunHandle, poll_s: float | None = None) -> int:
    """Follow `run` to its stop, as `steadyloop run` does; how many events it read."""
    seen = 0
    async for _event in run.events(poll_s=poll_s):
        seen += 1
    return seen


# -- the report ----------------------------------------------------------------------


COLUMNS = ("actions", "billed", *BILLED, *UNBILLED)


def table(rows: Sequence[tuple[str, dict[str, float]]]) -> list[str]:
    heads = {
        "actions": "server",
        "billed": "history",
        "local activity": "local",
        "change version": "chgver",
        "activity": "activ",
    }
    lines = [
        f"{'':<40}" + "".join(f"{heads.get(c, c)[:7]:>8}" for c in COLUMNS),
    ]
    for label, figures in rows:
        lines.append(f"{label:<40}" + "".join(f"{_num(figures[c]):>8}" for c in COLUMNS))
    return lines


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.005 else f"{value:.2f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6-second streams")
    parser.add_argument("--stream-s", type=float, default=None, help="the long turn (60 s)")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    stream_s = args.stream_s or (6.0 if args.quick else 60.0)
    port = free_port()
    provider = StreamingProvider(64)
    print(versions())
    async with LoopBench.start(
        provider=provider, server_args=["--metrics-port", str(port)]
    ) as bench:
        counter = ActionBench(bench, provider, f"http://127.0.0.1:{port}/metrics", cache_s=2.1)
        many, one = Script(args.rounds, 4096), Script(1, 4096)
        answer = Script(0, 4096)
        for script in (many, one, answer):
            provider.prepare(script)
        await counter.run(one.model, max_turns=3)  # warm-up: the health entity, caches
        runs = {
            "many": await counter.run(many.model, max_turns=args.rounds + 1),
            "one": await counter.run(one.model, max_turns=3),
            "answer": await counter.run(answer.model, max_turns=2),
        }
        stream = provider.stream_model(stream_s)
        runs["stream"] = await counter.run(stream, max_turns=2)
        runs["forwarded"] = await counter.run(stream, max_turns=2, forwarding=True)
        runs["followed"] = await counter.run(stream, max_turns=2, forwarding=True, follow=True)
        runs["followed_slowly"] = await counter.run(
            stream, max_turns=2, forwarding=True, follow=True, follow_poll_s=SLOW_POLL_S
        )
        runs["followed_history"] = await counter.run(stream, max_turns=2, follow=True)
    problems = [f"{name}: {p}" for name, c in runs.items() for p in c.problems]
    rounds = args.rounds - 1
    per_round = {k: v / rounds for k, v in runs["many"].minus(runs["one"]).items()}
    answer_run = runs["answer"].figures()
    fixed = dict(answer_run)
    fixed["activity"] -= 1
    fixed["billed"] -= 1
    fixed["actions"] -= 1
    minutes = runs["followed"].seconds / 60
    follower = {k: v / minutes for k, v in runs["followed"].minus(runs["forwarded"]).items()}
    slow_minutes = runs["followed_slowly"].seconds / 60
    slow_follower = {
        k: v / slow_minutes for k, v in runs["followed_slowly"].minus(runs["forwarded"]).items()
    }
    quiet_minutes = runs["followed_history"].seconds / 60
    history_follower = {
        k: v / quiet_minutes for k, v in runs["followed_history"].minus(runs["stream"]).items()
    }
    print(
        "\nTemporal Cloud actions ('server': the dev server's `action` counter; 'history':"
        " what Temporal\nCloud bills, counted from the histories and the server's request"
        " counters; local, patch,\nchgver: markers one by one and `TemporalChangeVersion`"
        " upserts, not billed on their own)\n"
    )
    rows = [
        (f"per tool round ({args.rounds}-round runs)", per_round),
        ("1-turn run (an answer, tools offered)", answer_run),
        ("  fixed per run (less 1 model activity)", fixed),
        (f"{stream_s:g}-s streamed turn, whole run", runs["stream"].figures()),
        ("  the stream (less the 1-turn run)", runs["stream"].minus(runs["answer"])),
        (f"{stream_s:g}-s turn forwarded, whole run", runs["forwarded"].figures()),
        ("one follower, per minute", follower),
        (f"  polling every {SLOW_POLL_S:g} s, per minute", slow_follower),
        ("one follower of a run not forwarded, /min", history_follower),
    ]
    for line in table(rows):
        print(line)
    print(f"\nserver action types, 1-turn run: {dict(sorted(runs['answer'].server.items()))}")
    print(
        "server action types, one round:  ",
        _per(runs["many"].server - runs["one"].server, rounds),
    )
    for line in problems:
        print(f"PROBLEM {line}")
    return 1 if problems else 0


def _per(counter: Counter[str], n: int) -> dict[str, str]:
    return {k: _num(v / n) for k, v in sorted(counter.items())}


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
