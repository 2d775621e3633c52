"""steadyloop beside its peers: Temporal's OpenAI Agents plugin and pydantic-ai's durable agents.

Run: `.venv/bin/pip install -e '.[bench]'` once (the peers, pinned), then
`.venv/bin/python benchmarks/bench_peers.py` (about ten minutes on a busy 2-core machine;
`--quick`: one repetition, 3 rounds, a smoke test of two to four minutes;
`--systems steadyloop,steadyloop-plugin` needs none of the peers' packages). Without the
one unmeasured run each system gets first, its first measured run pays its imports and
connections: a quick run showed per-round figures below zero.

One dev server (in memory, started as `bench_loop.py` starts it: the throttle lifted by
`steadyloop._temporal_binaries.dev_server_args`, plus `--metrics-port`), one loopback
scripted OpenAI-compatible provider (`bench_loop.Provider`'s answers: one call a turn to
the one tool, `--call-chars` characters of argument, then text), and one worker process
per system, so each worker's CPU is its own (read from `/proc/<pid>/stat`):

- `steadyloop`: `ToolLoopWorkflow` started directly, as `steadyloop run` starts it, on
  a worker built as `steadyloop worker` builds one: `Worker(client, task_queue=...,
  plugins=[SteadyloopPlugin(...)])` on a client with the pydantic converter (the plugin
  registers the loop, its output host, the health and admission entities, the model,
  tool, health and chain activities, and sets the heartbeat throttle and the sandbox
  runner);
- `steadyloop-local`: the same worker, the run started with `local_pure_tools_s=30`
  (its pure tool runs as a local activity);
- `steadyloop-plugin`: the same agent as a Temporal user adds it, on a worker of its own:
  `Client.connect(target, plugins=[SteadyloopPlugin(...)])`, then
  `Worker(client, task_queue=..., workflows=[BenchAgentWorkflow])` and nothing else;
  the run starts that workflow (`plugin_workflows`), which runs `Agent.run`, the loop
  as its child. Its figures count both workflows' histories. Per round the child's
  start cancels out (both the N-round and the 0-round run pay it once); a run of one
  model turn includes it, with the parent's start and workflow tasks;
- `oai-chat` / `oai-responses`: `temporalio.openai_agents.OpenAIAgentsPlugin`
  (`Runner.run`, the plugin's model activity, the tool by `activity_as_tool`) on Chat
  Completions and on the Responses API (the plugin's model activity asks for a whole
  response, not a stream);
- `pydantic-ai`: an `Agent` with `TemporalDurability` and an event stream handler (the
  model activity streams), its tool wrapped by the capability.

Runs are interleaved by repetition (each repetition runs every system's N-round run and
its 0-round run, one model turn that answers, the order rotated), one at a time, after
one unmeasured run per system. Per run: wall (start to result, from the client), the
worker's CPU, history events and bytes (every execution of the run's own workflow; for
`steadyloop-plugin`, the parent's and the child's), and actions counted twice: by
Temporal Cloud's rules from the histories of every workflow the run touched
(`bench_actions.history_kinds`, shared with `bench_actions.py`: a workflow task's markers
are one action, `TemporalChangeVersion` upserts none) plus the heartbeats and queries the
server's frontend answered, and by the server's own `action` counter. Per round is
(N-round run - 0-round run) / N within one repetition; ratios are to steadyloop's figure
of the same repetition, printed as their range over the repetitions. Nothing asserts a
figure: `tests/test_bench_peers.py` runs `--quick` (skipped without the extra), and
`--quick` of steadyloop's systems alone, and checks that every run of every system ended
with the final answer.

What would make the comparison unfair, and what prevents it:
- workers in one process would share one CPU clock: each system has its own process;
- runs in one order would favour the later (warm caches, a busier server): rotated;
- a peer doing work steadyloop does not (OpenAI's tracing export, a turn limit):
  `peer_workflows` turns tracing off and sets each peer's turn limit to N + 1;
- counting heartbeats from the worker's calls would overcount (the SDK throttles them):
  the server's counters are read;
- the plugin and the direct start served by differently built workers: both workers take
  `SteadyloopPlugin`, so they register and configure the same things.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_actions import BILLED, REQUESTS, free_port, history_kinds, scrape
from bench_loop import (
    ENDPOINT,
    PROMPT,
    SMALL_CALL_CHARS,
    SYSTEM_PROMPT,
    TOOL_NAME,
    Provider,
    Script,
    build_tools,
    chain_events,
    event_bytes,
    final_answer_text,
    process_cpu_s,
    start_dev_server,
    versions,
)
from loop_floor import turn_text
from plugin_workflows import AGENT, KEY

from steadyloop._output.forwarding import output_stream_id
from steadyloop._routing.endpoint_health import health_workflow_id
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop.testing._scripted_server import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    json_response,
)
from steadyloop.workflow import Agent

SYSTEMS = (
    "steadyloop",
    "steadyloop-local",
    "steadyloop-plugin",
    "oai-chat",
    "oai-responses",
    "pydantic-ai",
)
# Which worker process serves each system (the local-tools runs use steadyloop's).
WORKERS = {"steadyloop-local": "steadyloop"}
PEER_PACKAGES = ("temporalio-openai-agents", "openai-agents", "pydantic-ai-slim")
LOCAL_TOOLS_S = 30.0  # the tool's declared timeout (the default): within the option's bound
TURNS = 20
TIMEOUT = timedelta(seconds=60)  # the peers' model activity's start-to-close
QUICK_TURNS = 3
REPS = 7


def peers_installed() -> bool:
    """Whether the `bench` extra is installed (the peers' packages)."""
    try:
        for name in PEER_PACKAGES:
            importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# -- the provider: chat completions (streamed or not) and responses -------------------


class PeerProvider(Provider):
    """`bench_loop.Provider`'s streamed answers, and the same turns as a whole chat
    completion (the OpenAI plugin's Chat Completions model asks for one) and as a
    Responses API response. The turn is one more than the tool results the request
    carries, in any of the three shapes."""

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        body = orjson.loads(request.body)
        if request.path.split("?", 1)[0].endswith("/responses"):
            return self._response(body)
        if body.get("stream"):
            return super().__call__(request)
        script = Script.from_model(body["model"])
        turn = 1 + sum(1 for m in body["messages"] if m.get("role") == "tool")
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "tool_calls"
        if turn > script.turns:
            message["content"], finish = final_answer_text(script.turns), "stop"
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_bench_{turn}",
                    "type": "function",
                    "function": {"name": TOOL_NAME, "arguments": self._arguments(script, turn)},
                }
            ]
        return json_response(
            {
                "id": f"chatcmpl-{turn}",
                "object": "chat.completion",
                "created": 0,
                "model": script.model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": self._usage(script, turn, "prompt_tokens", "completion_tokens"),
            }
        )

    def _response(self, body: dict[str, Any]) -> ScriptedResponse:
        script = Script.from_model(body["model"])
        items = body.get("input")
        done = (
            [i for i in items if i.get("type") == "function_call_output"]
            if isinstance(items, list)
            else []
        )
        turn = 1 + len(done)
        output: dict[str, Any]
        if turn > script.turns:
            output = {
                "type": "message",
                "id": f"msg_{turn}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": final_answer_text(script.turns),
                        "annotations": [],
                    }
                ],
            }
        else:
            output = {
                "type": "function_call",
                "id": f"fc_{turn}",
                "call_id": f"call_bench_{turn}",
                "name": TOOL_NAME,
                "arguments": self._arguments(script, turn),
                "status": "completed",
            }
        usage = self._usage(script, turn, "input_tokens", "output_tokens")
        usage |= {"input_tokens_details": {"cached_tokens": 0}}
        usage |= {"output_tokens_details": {"reasoning_tokens": 0}}
        return json_response(
            {
                "id": f"resp_{turn}",
                "object": "response",
                "created_at": 0,
                "model": script.model,
                "status": "completed",
                "output": [output],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            }
        )

    @staticmethod
    def _arguments(script: Script, turn: int) -> str:
        return orjson.dumps({"text": turn_text(turn, script.call_chars)}).decode()

    @staticmethod
    def _usage(script: Script, turn: int, prompt: str, completion: str) -> dict[str, Any]:
        tokens = {prompt: turn * script.call_chars // 4, completion: script.call_chars // 4}
        return tokens | {"total_tokens": sum(tokens.values())}


# -- the worker processes ---------------------------------------------------------------


async def serve_worker(
    system: str, target: str, queue: str, base_url: str, models: list[str]
) -> None:
    """One system's worker, until stdin closes; prints `ready` once it polls."""
    from temporalio.worker import Worker

    worker: Worker
    if system.startswith("steadyloop"):
        from steadyloop.plugin import EndpointConfig, SteadyloopPlugin

        plugin = SteadyloopPlugin(
            tools=build_tools(),
            endpoints=[EndpointConfig(name=ENDPOINT, base_url=base_url)],
            blobs="off",
        )
        if system == "steadyloop-plugin":  # what a Temporal user writes
            from plugin_workflows import BenchAgentWorkflow

            client = await Client.connect(target, plugins=[plugin])
            worker = Worker(client, task_queue=queue, workflows=[BenchAgentWorkflow])
        else:  # as `steadyloop worker` builds it: the plugin on the worker alone
            from temporalio.contrib.pydantic import pydantic_data_converter

            client = await Client.connect(target, data_converter=pydantic_data_converter)
            worker = Worker(client, task_queue=queue, plugins=[plugin])
        await _serve(worker)
        return
    if system.startswith("oai-"):
        from agents import set_tracing_disabled
        from agents.models.openai_provider import OpenAIProvider
        from openai import AsyncOpenAI
        from peer_workflows import OpenAIAgentsWorkflow, noop
        from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin

        set_tracing_disabled(True)  # the SDK would export every run's traces to OpenAI
        openai = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        plugin = OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(start_to_close_timeout=TIMEOUT),
            model_provider=OpenAIProvider(
                openai_client=openai, use_responses=system == "oai-responses"
            ),
        )
        client = await Client.connect(target, plugins=[plugin])
        worker = Worker(
            client, task_queue=queue, workflows=[OpenAIAgentsWorkflow], activities=[noop]
        )
        await _serve(worker)
        return
    import peer_agent
    from peer_workflows import PydanticAIWorkflow
    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin

    agent = peer_agent.build_pydantic_agent(base_url, models)
    client = await Client.connect(target, plugins=[PydanticAIPlugin()])
    worker = Worker(
        client, task_queue=queue, workflows=[PydanticAIWorkflow], plugins=[AgentPlugin(agent)]
    )
    await _serve(worker)


async def _serve(worker: Any) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with worker:
        print("ready", flush=True)
        await reader.read()  # the benchmark closes our stdin when it is done


@dataclass
class WorkerProcess:
    system: str
    queue: str
    process: asyncio.subprocess.Process

    @property
    def cpu_s(self) -> float:
        return process_cpu_s(self.process.pid)


async def start_worker(system: str, target: str, base_url: str, models: list[str]) -> WorkerProcess:
    queue = f"bench-peers-{system}-{uuid.uuid4().hex[:8]}"
    log = Path(tempfile.gettempdir()) / f"{queue}.log"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        system,
        "--target",
        target,
        "--queue",
        queue,
        "--base-url",
        base_url,
        "--models",
        ",".join(models),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log.open("wb"),  # the SDKs' warnings; read it when a run fails
        env=os.environ | {"OPENAI_AGENTS_DISABLE_TRACING": "1"},
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 120)
    if line.strip() != b"ready":
        raise RuntimeError(f"the {system} worker did not start (said {line!r}; see {log})")
    return WorkerProcess(system, queue, process)


async def stop_worker(worker: WorkerProcess) -> None:
    assert worker.process.stdin is not None
    worker.process.stdin.close()
    try:
        await asyncio.wait_for(worker.process.wait(), 30)
    except TimeoutError:
        worker.process.kill()
        await worker.process.wait()


# -- one measured run -----------------------------------------------------------------


@dataclass
class Run:
    wall_ms: float
    cpu_ms: float
    events: int
    kb: float
    server_actions: int  # the server's `action` counter
    billed: int  # from the histories, plus heartbeats and queries the frontend answered
    kinds: Counter[str] = field(default_factory=Counter)
    problem: str | None = None


class PeerBench:
    def __init__(self, client: Client, metrics: str, workers: dict[str, WorkerProcess]) -> None:
        self.client = client
        self.metrics = metrics
        self.workers = workers
        self.http = httpx.AsyncClient()

    async def run(self, system: str, script: Script) -> Run:
        worker = self.workers[WORKERS.get(system, system)]
        await asyncio.sleep(0.3)  # let the previous run's stragglers (a closing host) land
        before_actions, before_requests = await scrape(self.http, self.metrics)
        since = time.time()
        cpu = worker.cpu_s
        started = time.perf_counter()
        workflow_id = f"bench-peers-{system}-{uuid.uuid4().hex[:8]}"
        answer: str
        if system == "steadyloop-plugin":
            handle = await self.client.start_workflow(
                "BenchSteadyloopAgent",
                args=[script.model, script.turns + 1],
                id=workflow_id,
                task_queue=worker.queue,
                result_type=str,
            )
            try:
                answer = await asyncio.wait_for(handle.result(), 300)
            except WorkflowFailureError as failed:  # `AgentStopped`: no final answer
                answer = f"(failed: {failed.cause})"
        elif system.startswith("steadyloop"):
            run = RunInput(
                endpoint=ENDPOINT,
                model=script.model,
                prompt=PROMPT,
                system_prompt=SYSTEM_PROMPT,
                tools=[TOOL_NAME],
                limits=RunLimits(max_turns=script.turns + 1),
                local_pure_tools_s=LOCAL_TOOLS_S if system == "steadyloop-local" else None,
            )
            handle = await self.client.start_workflow(
                "ToolLoopWorkflow",
                run,
                id=workflow_id,
                task_queue=worker.queue,
                result_type=RunResult,
            )
            result: RunResult = await asyncio.wait_for(handle.result(), 300)
            answer = result.final_answer or f"({result.stop_reason}: {result.detail})"
        else:
            name = "BenchOpenAIAgents" if system.startswith("oai-") else "BenchPydanticAI"
            handle = await self.client.start_workflow(
                name,
                args=[script.model, script.turns + 1],
                id=workflow_id,
                task_queue=worker.queue,
                result_type=str,
            )
            answer = await asyncio.wait_for(handle.result(), 300)
        wall = time.perf_counter() - started
        cpu = worker.cpu_s - cpu
        events = await chain_events(self.client, workflow_id, handle.result_run_id)
        loop_id, loop_run_id = workflow_id, handle.result_run_id or ""
        if system == "steadyloop-plugin":  # the agent's loop is a child: its history too
            loop_id, loop_run_id = _child_run(workflow_id, events)
            events += await chain_events(self.client, loop_id, loop_run_id)
        kinds: Counter[str] = Counter()
        others = await self._others(system, loop_id, loop_run_id, since)
        for touched in [events, *others]:
            kinds += history_kinds(touched)
        await asyncio.sleep(1.0)  # the server's counters, and a host closing after the run
        after_actions, after_requests = await scrape(self.http, self.metrics)
        for operation, kind in REQUESTS.items():
            kinds[kind] += after_requests[operation] - before_requests[operation]
        expected = final_answer_text(script.turns)
        return Run(
            wall_ms=wall * 1000,
            cpu_ms=cpu * 1000,
            events=len(events),
            kb=sum(event_bytes(e) for e in events) / 1024,
            server_actions=sum((after_actions - before_actions).values()),
            billed=sum(kinds[k] for k in BILLED),
            kinds=kinds,
            problem=None if answer == expected else f"answered {answer[:120]!r}",
        )

    async def _others(
        self, system: str, loop_id: str, loop_run_id: str, since: float
    ) -> list[list[HistoryEvent]]:
        """steadyloop's output host (of the loop's run: `loop_id`) and endpoint-health
        entity, from the run's start."""
        if not system.startswith("steadyloop"):
            return []
        found = []
        for other in (
            output_stream_id(loop_id, loop_run_id),
            health_workflow_id(ENDPOINT),
        ):
            try:
                events = await chain_events(self.client, other, None)
            except RPCError:
                continue
            found.append([e for e in events if e.event_time.ToNanoseconds() / 1e9 >= since])
        return found


def _child_run(parent_id: str, events: Sequence[HistoryEvent]) -> tuple[str, str]:
    """The workflow and run id of the agent's loop that the `BenchSteadyloopAgent` run
    `parent_id` started: `Agent.child_id_for(parent_id, KEY)`, its run id read from the
    parent's history."""
    child_id = Agent(name=AGENT, endpoint=ENDPOINT, model="bench").child_id_for(parent_id, KEY)
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
            started = event.child_workflow_execution_started_event_attributes.workflow_execution
            if started.workflow_id == child_id:
                return child_id, started.run_id
    raise RuntimeError(f"{parent_id} started no child {child_id}")


# -- the table ------------------------------------------------------------------------

# The billed kinds, each its own column where some system pays it (`bench_actions.BILLED`).
KINDS = BILLED
FIGURES = ("wall_ms", "cpu_ms", "events", "kb", "billed", "server_actions", *KINDS)
HEADS = {
    "wall_ms": "wall ms",
    "cpu_ms": "worker CPU ms",
    "events": "events",
    "kb": "history KB",
    "billed": "actions (Cloud, histories)",
    "server_actions": "actions (server)",
    "start": "starts",
    "activity": "activities",
    "heartbeat": "heartbeats",
    "signal": "signals",
    "query": "queries",
    "update": "updates",
    "timer": "timers",
    "child": "children",
    "markers": "marker batches",
    "upsert": "upserts",
}


def per_round(long: Run, short: Run, turns: int) -> dict[str, float]:
    many, one = per_run(long), per_run(short)
    return {f: (many[f] - one[f]) / turns for f in many}


def per_run(run: Run) -> dict[str, float]:
    figures = {f: float(getattr(run, f)) for f in FIGURES if f not in KINDS}
    return figures | {kind: float(run.kinds[kind]) for kind in KINDS}


def _fmt(value: float) -> str:
    return (
        f"{value:.0f}"
        if abs(value) >= 100
        else f"{value:.1f}"
        if abs(value) >= 10
        else f"{value:.2f}"
    )


def _ratio(values: Sequence[float], base: Sequence[float]) -> str:
    ratios = [v / b for v, b in zip(values, base, strict=True) if b > 0]
    if not ratios:
        return "-"
    low, high = min(ratios), max(ratios)
    return f"{statistics.median(ratios):.2f}x ({low:.2f}-{high:.2f})"


def table(title: str, figures: dict[str, list[dict[str, float]]]) -> list[str]:
    """One markdown table: each system's median, and its ratio to steadyloop paired by
    repetition (median, and the range over the repetitions) for wall, CPU and actions
    (Cloud's rules)."""
    base = figures["steadyloop"]
    shown = [
        f
        for f in FIGURES
        if f not in KINDS or any(rep[f] for reps in figures.values() for rep in reps)
    ]
    lines = [
        f"| {title} | "
        + " | ".join(HEADS[f] for f in shown)
        + " | wall / steadyloop | CPU / steadyloop | actions / steadyloop |",
        "|---" * (len(shown) + 4) + "|",
    ]
    for system, reps in figures.items():
        cells = [_fmt(statistics.median(rep[f] for rep in reps)) for f in shown]
        ratios = [
            _ratio([rep[f] for rep in reps], [rep[f] for rep in base])
            for f in ("wall_ms", "cpu_ms", "billed")
        ]
        lines.append(f"| {system} | " + " | ".join(cells + ratios) + " |")
    return lines


def peer_versions() -> str:
    found = []
    for name in PEER_PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return "; ".join(found)


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="one repetition, 3-round runs")
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--call-chars", type=int, default=SMALL_CALL_CHARS)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--queue", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--models", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        await serve_worker(
            args.worker, args.target, args.queue, args.base_url, args.models.split(",")
        )
        return 0
    reps = 1 if args.quick else args.reps
    turns = QUICK_TURNS if args.quick else args.turns
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown or "steadyloop" not in systems:
        parser.error(
            f"--systems: steadyloop and any of {', '.join(SYSTEMS)} (not {sorted(unknown)})"
        )
    peers = [s for s in systems if not s.startswith("steadyloop")]
    if peers and not peers_installed():
        print(
            f"the peers are not installed ({', '.join(peers)}): .venv/bin/pip install -e "
            "'.[bench]', or --systems with steadyloop's systems only",
            file=sys.stderr,
        )
        return 2
    long, short = Script(turns, args.call_chars), Script(0, args.call_chars)
    provider = PeerProvider(fragment_chars=64)
    provider.prepare(long)
    provider.prepare(short)
    metrics_port = free_port()
    before_load = _load()
    print(versions())
    if peers:
        print(peer_versions())
    print(
        f"{reps} repetitions of a {turns}-round run and a 0-round run (one model turn) per "
        "system, interleaved; "
        f"{args.call_chars} characters of tool argument a turn; one worker process per system"
    )
    routes = ("/chat/completions", "/responses")
    async with ScriptedServer(provider, routes=routes) as server:
        env = await start_dev_server(quiet=True, extra_args=["--metrics-port", str(metrics_port)])
        async with env:
            target = env.client.service_client.config.target_host
            models = [long.model, short.model]
            workers: dict[str, WorkerProcess] = {}
            try:
                for system in {WORKERS.get(s, s) for s in systems}:
                    workers[system] = await start_worker(system, target, server.base_url, models)
                bench = PeerBench(env.client, f"http://127.0.0.1:{metrics_port}/metrics", workers)
                for system in systems:  # one unmeasured run each: imports, caches, connections
                    await bench.run(system, short)
                rounds: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
                fixed: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
                problems: list[str] = []
                for rep in range(reps):
                    order = systems[rep % len(systems) :] + systems[: rep % len(systems)]
                    for system in order:
                        one = await bench.run(system, short)  # the run's fixed part
                        many = await bench.run(system, long)
                        problems += [f"{system}: {r.problem}" for r in (one, many) if r.problem]
                        rounds[system].append(per_round(many, one, turns))
                        fixed[system].append(per_run(one))
                        server.exchanges.clear()
            finally:
                after_load = _load()
                for worker in workers.values():
                    await stop_worker(worker)
    print(f"load average {before_load} before, {after_load} after")
    print()
    print("\n".join(table(f"per tool round (({turns}-round run - 0-round run) / {turns})", rounds)))
    print()
    print("\n".join(table("a run of one model turn (it answers)", fixed)))
    print()
    if "steadyloop-plugin" in systems:
        print(
            "steadyloop-plugin: a workflow of the user's runs `Agent.run` (the loop as its "
            "child); its figures count both histories. Per round the child's start cancels "
            "out; a run of one model turn includes it (the parent's start, its workflow "
            "tasks, the child's start)."
        )
    print(
        "actions (histories): workflow starts, activities and their retries, signals, "
        "updates, timers, children in every workflow the run touched, plus the heartbeats "
        "and queries the server answered; actions (server): the dev server's `action` counter."
    )
    for problem in problems:
        print(f"PROBLEM {problem}")
    return 1 if problems else 0


def _load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
