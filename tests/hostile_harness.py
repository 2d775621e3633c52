"""One time-skipping server, one worker and one scripted provider shared by many hostile
runs, and the invariants every such run must keep: hostile values tested as a class.

Why a harness of its own: the property test drives dozens of runs, and starting a server
and a worker per run would cost more than the runs. Each run is told apart by its `model`
name (`ex-<uuid>`), which every request it makes carries, so one provider answers each run
from that run's own script, and answers `done` once the script is spent (a run that
retried a defective turn still ends). Each run also has an endpoint of its own (named
like its model): endpoint health, the circuit breaker, is kept per endpoint, and one
run's provider errors must not open the breaker for the next. The environment lives on
an event loop in a thread of its own, so a synchronous hypothesis test can call into it
without fighting pytest-asyncio over loop scopes. The server has one clock for every
run: on main it moved about ten years per run (skipping to some far timer once a run is
idle), so a module of a few hundred runs stays far from `datetime`'s year 9999.

The invariants (`check_invariants`), asserted after every run:

- the run ended with a named stop reason, or it waits on a person by design (a run-input
  position may also be refused at the client or fail the workflow with a named
  `ApplicationError`);
- no workflow task failed (read from the history: a failed task is retried forever);
- no activity failed with an unhandled Python exception (`OverflowError`, `RecursionError`,
  a serialization error...): every boundary error is classified or turned into a value;
- every assistant tool call is answered by exactly one tool message with its id;
- each probe tool ran at most once per distinct call (receipts replay repeats), and
  exactly once for calls whose arguments are plain;
- no 8+ character fragment of the provider key is in any string, byte field or payload
  of the history, in any payload blob written during the run, or in the worker's log.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import os
import random
import re
import string
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_args

from google.protobuf.message import Message
from hostile_wires import Api, api_of_path, wire_answer
from pydantic import JsonValue
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._chat import ChatMessage
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunProgress, RunResult, StopReason
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    text_response,
)
from steadyloop.tools import ToolRegistry, tool

T = TypeVar("T")

# The key the worker reads from its environment, as a user sets OPENAI_API_KEY: random
# (so no fragment of it occurs by chance) but fixed (so runs are reproducible), 47
# characters like an OpenAI key.
KEY_ENV = "STEADYLOOP_HOSTILE_TEST_KEY"
KEY = "sk-" + "".join(random.Random(14).choices(string.ascii_letters + string.digits, k=44))
KEY_FRAGMENT = 8
_KEY_PATTERN = re.compile(
    "|".join(
        re.escape(KEY[i : i + KEY_FRAGMENT]) for i in range(len(KEY) - KEY_FRAGMENT + 1)
    ).encode("ascii")
)

PROBES = ("pure_probe", "opaque_probe")
# How long one run may take before it counts as wedged (wall time; workflow time skips).
RUN_WAIT_S = 25.0
# Exception names that mean an activity crashed on a value instead of classifying it.
_UNHANDLED = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
) | {"PydanticSerializationError", "ValidationError", "JSONDecodeError", "CanonicalJsonError"}


def done_answer(path: str = "/v1/chat/completions") -> ScriptedResponse:
    """What the provider says once a run's script is spent: a plain final answer, on the
    wire the request was posted on."""
    api = api_of_path(path)
    if api != "chat":
        return wire_answer(api)
    return text_response("done")


class Unprintable:
    """A tool result that cannot even be turned into text: `str` and `repr` raise."""

    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


@dataclass
class Probes:
    """What the probe tools did and what they return, per run (`ex`) and call (`n`)."""

    executions: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    results: dict[tuple[str, int], Callable[[], Any]] = field(default_factory=dict)


def build_probes(probes: Probes) -> ToolRegistry:
    """Two tools that count their executions and return whatever the run asked for."""

    def result_for(tool_name: str, ex: str, n: int) -> Any:
        probes.executions[(ex, tool_name, n)] += 1
        make = probes.results.get((ex, n))
        return "probe ok" if make is None else make()

    @tool(effect="pure")
    async def pure_probe(ex: str, n: int, value: JsonValue = None) -> Any:
        """A pure tool returning the value its run chose (counted)."""
        return result_for("pure_probe", ex, n)

    @tool(effect="opaque")
    async def opaque_probe(ex: str, n: int, value: JsonValue = None) -> Any:
        """An opaque side effect returning the value its run chose (counted)."""
        return result_for("opaque_probe", ex, n)

    return ToolRegistry([pure_probe, opaque_probe])


class LogTap(logging.Handler):
    """Keeps every log record's text (with its traceback) for the key check."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.lines.append(logging.Formatter().format(record))


@dataclass
class Outcome:
    """How one run went, with everything the invariants read."""

    ex: str
    run: RunInput | None
    result: RunResult | None = None
    refused: BaseException | None = None  # at the client, before the workflow started
    workflow_failure: BaseException | None = None
    awaiting_person: bool = False
    timed_out: bool = False
    history: History | None = None
    transcript: list[ChatMessage] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    new_blobs: list[Path] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    # Probe executions of this run by (tool, n).
    executions: Counter[tuple[str, int]] = field(default_factory=Counter)

    def describe(self) -> str:
        if self.result is not None:
            head = f"stop_reason={self.result.stop_reason!r} detail={self.result.detail[:300]!r}"
        elif self.refused is not None:
            head = f"refused at the client: {self.refused!r}"[:400]
        elif self.workflow_failure is not None:
            head = f"workflow failed: {_failure_text(self.workflow_failure)}"[:600]
        elif self.awaiting_person:
            head = "awaiting a person"
        else:
            head = f"no outcome (timed out={self.timed_out})"
        failed_tasks = task_failures(self.history)
        if failed_tasks:
            head += f"; {len(failed_tasks)} workflow task failure(s), first: {failed_tasks[0]}"
        return f"[{self.ex}] {head}; {len(self.requests)} model request(s)"


def _failure_text(error: BaseException) -> str:
    parts = [f"{type(error).__name__}: {error}"]
    cause = error.__cause__ or getattr(error, "cause", None)
    while cause is not None and len(parts) < 6:
        kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
        parts.append(f"{kind}: {cause}")
        cause = cause.__cause__ or getattr(cause, "cause", None)
    return " <- ".join(parts)


class HostileWorld:
    """The shared server, worker and provider, on an event loop in its own thread."""

    def __init__(self) -> None:
        self.probes = Probes()
        self.scripts: dict[str, list[ScriptedResponse]] = {}
        self.requests: dict[str, list[RecordedRequest]] = {}
        self.unrouted: list[RecordedRequest] = []
        self.log = LogTap()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stack: contextlib.AsyncExitStack | None = None
        self._blob_dir = tempfile.TemporaryDirectory(prefix="steadyloop-hostile-blobs-")
        self.blob_dir = Path(self._blob_dir.name)
        self._seen_blobs: set[Path] = set()
        self.env: WorkflowEnvironment | None = None
        self.server: ScriptedServer | None = None
        # One endpoint per run (named like its model): endpoint health (the circuit
        # breaker) is kept per endpoint, and one run's provider errors must not open the
        # breaker for the next run.
        self.endpoints = EndpointRegistry()
        self.task_queue = f"hostile-{uuid.uuid4()}"

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self.call(self._start(), timeout=120)
        logging.getLogger().addHandler(self.log)

    def stop(self) -> None:
        logging.getLogger().removeHandler(self.log)
        with contextlib.suppress(Exception):
            self.call(self._stop(), timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._blob_dir.cleanup()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run a coroutine on the world's loop and wait for it from this thread."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(self) -> None:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        self._stack = stack
        self.server = await stack.enter_async_context(ScriptedServer(self._respond))
        # environ=None: the key is read from os.environ at call time, as in production.
        model = await stack.enter_async_context(ModelActivities(self.endpoints))
        env = await WorkflowEnvironment.start_time_skipping(
            data_converter=steadyloop_data_converter(self.blob_dir),
            test_server_existing_path=time_skipping_server_path(),
        )
        await stack.enter_async_context(env)
        self.env = env
        health = EndpointHealthActivities(env.client, task_queue=self.task_queue)
        worker = Worker(
            env.client,
            task_queue=self.task_queue,
            workflows=RUN_WORKFLOWS,
            activities=[
                *model.activities(),
                *ToolActivities(build_probes(self.probes)).activities(),
                *health.activities(),
            ],
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        )
        await stack.enter_async_context(worker)

    async def _stop(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()

    async def _respond(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json
        ex = body.get("model") if isinstance(body, dict) else None
        if not isinstance(ex, str) or ex not in self.scripts:
            self.unrouted.append(request)
            return done_answer(request.path)
        self.requests[ex].append(request)
        script = self.scripts[ex]
        return script.pop(0) if script else done_answer(request.path)

    # -- one run -----------------------------------------------------------------------

    def new_example(self, api: Api = "chat") -> str:
        """A run's name, with an endpoint of its own speaking `api`."""
        ex = f"ex-{uuid.uuid4().hex[:16]}"
        assert self.server is not None
        self.endpoints.add(self.server.endpoint(ex, api_key_env=KEY_ENV, api=api))
        self.scripts[ex] = []
        self.requests[ex] = []
        return ex

    def run(
        self,
        ex: str,
        make_run: Callable[[], RunInput],
        script: Sequence[ScriptedResponse],
        results: dict[int, Callable[[], Any]] | None = None,
    ) -> Outcome:
        """Start the run `make_run` builds (its model must be `ex`), answer it from
        `script`, wait (bounded) until it ends or waits on a person, and collect."""
        self.scripts[ex] = list(script)
        for n, make in (results or {}).items():
            self.probes.results[(ex, n)] = make
        self.log.lines.clear()
        try:
            run = make_run()
        except (ValueError, TypeError) as refused:
            return Outcome(ex=ex, run=None, refused=refused)
        outcome = self.call(self._run(ex, run), timeout=RUN_WAIT_S + 60)
        outcome.log_lines = list(self.log.lines)
        outcome.requests = list(self.requests[ex])
        outcome.new_blobs = self._new_blobs()
        outcome.executions = Counter(
            {(t, n): c for (e, t, n), c in self.probes.executions.items() if e == ex}
        )
        return outcome

    async def _run(self, ex: str, run: RunInput) -> Outcome:
        assert self.env is not None
        outcome = Outcome(ex=ex, run=run)
        try:
            handle: WorkflowHandle[Any, RunResult] = await self.env.client.start_workflow(
                ToolLoopWorkflow.run, run, id=f"hostile-{ex}", task_queue=self.task_queue
            )
        except Exception as refused:  # the client could not even send the input
            outcome.refused = refused
            return outcome
        result_task = asyncio.ensure_future(handle.result())
        loop = asyncio.get_running_loop()
        give_up = loop.time() + RUN_WAIT_S
        try:
            while True:
                done, _ = await asyncio.wait({result_task}, timeout=0.5)
                if done:
                    break
                history = await _all_runs_history(self.env, handle)
                if task_failures(history):
                    break  # retried forever: no point waiting for it
                if await _awaiting_person(handle):
                    outcome.awaiting_person = True
                    break
                if loop.time() > give_up:
                    outcome.timed_out = True
                    break
            if result_task.done():
                try:
                    outcome.result = result_task.result()
                except WorkflowFailureError as failure:
                    outcome.workflow_failure = failure
        finally:
            if not result_task.done():
                result_task.cancel()
                with contextlib.suppress(BaseException):
                    await result_task
        if outcome.result is not None:
            outcome.transcript = list(outcome.result.transcript)
        elif outcome.awaiting_person:
            with contextlib.suppress(Exception):
                outcome.transcript = await asyncio.wait_for(
                    handle.query("transcript", result_type=list[ChatMessage]), 5
                )
        outcome.history = await _all_runs_history(self.env, handle)
        if outcome.result is None and outcome.workflow_failure is None:
            with contextlib.suppress(Exception):
                await handle.terminate("hostile-values test: example over")
        return outcome

    def _new_blobs(self) -> list[Path]:
        found = [p for p in self.blob_dir.rglob("*") if p.is_file() and p not in self._seen_blobs]
        self._seen_blobs.update(found)
        return found


async def _all_runs_history(env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any]) -> History:
    """The first run's events and, when it continued-as-new, the latest run's too."""
    first = await handle.fetch_history()
    latest_handle = env.client.get_workflow_handle(handle.id)
    latest = await latest_handle.fetch_history()
    if latest.events and first.events and latest.events[0] == first.events[0]:
        return History(events=list(first.events))
    merged = History()
    merged.events.extend(first.events)
    merged.events.extend(latest.events)
    return merged


async def _awaiting_person(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        progress: RunProgress = await asyncio.wait_for(
            handle.query("progress", result_type=RunProgress), 2
        )
    except Exception:
        return False
    return progress.phase == "awaiting a person"


@contextlib.contextmanager
def hostile_world() -> Iterator[HostileWorld]:
    """The world, with the provider key in the process environment (where the worker
    reads it) for as long as it runs."""
    previous = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = KEY
    world = HostileWorld()
    try:
        world.start()
        yield world
    finally:
        world.stop()
        if previous is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = previous


# -- reading a history -----------------------------------------------------------------


def task_failures(history: History | None) -> list[str]:
    """Each failed workflow task of a history, as `cause: message`."""
    if history is None:
        return []
    out = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            attributes = event.workflow_task_failed_event_attributes
            out.append(f"{attributes.cause}: {attributes.failure.message[:400]}")
    return out


def unhandled_activity_failures(history: History | None) -> list[str]:
    """Activity failures typed as a Python exception (a crash, not a classified error)."""
    if history is None:
        return []
    out = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            continue
        failure: Failure | None = event.activity_task_failed_event_attributes.failure
        while failure is not None:
            kind = failure.application_failure_info.type
            if kind in _UNHANDLED:
                out.append(f"{kind}: {failure.message[:300]}")
                break
            failure = failure.cause if failure.HasField("cause") else None
    return out


def _strings(message: Message, out: list[bytes]) -> None:
    """Every string and bytes field of a protobuf message, recursively (payload data
    included: steadyloop's converter writes JSON, so a key in a payload is plain text)."""
    for descriptor, value in message.ListFields():
        values: list[Any]
        if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            values = [value[k] for k in value]
            out.extend(str(k).encode("utf-8", "surrogatepass") for k in value)
        elif not isinstance(value, str | bytes | Message) and hasattr(value, "__len__"):
            values = list(value)  # a repeated field
        else:
            values = [value]
        for item in values:
            if isinstance(item, Message):
                _strings(item, out)
            elif isinstance(item, str):
                out.append(item.encode("utf-8", "surrogatepass"))
            elif isinstance(item, bytes):
                out.append(item)


def key_leaks(outcome: Outcome) -> list[str]:
    """Where a fragment of the provider key appears: history fields, blobs, log lines."""
    found: list[str] = []
    if outcome.history is not None:
        for event in outcome.history.events:
            texts: list[bytes] = []
            _strings(event, texts)
            for text in texts:
                match = _KEY_PATTERN.search(text)
                if match:
                    found.append(
                        f"history event {event.event_id} ({EventType.Name(event.event_type)}):"
                        f" ...{_around(text, match)}..."
                    )
                    break
    for blob in outcome.new_blobs:
        data = blob.read_bytes()
        match = _KEY_PATTERN.search(data)
        if match:
            found.append(f"payload blob {blob.name}: ...{_around(data, match)}...")
    for line in outcome.log_lines:
        match = _KEY_PATTERN.search(line.encode("utf-8", "surrogatepass"))
        if match:
            found.append(f"worker log: {line[:300]!r}")
    return found


def _around(data: bytes, match: re.Match[bytes]) -> str:
    start, end = max(0, match.start() - 60), match.end() + 20
    return repr(data[start:end])


# -- the invariants ----------------------------------------------------------------------

NAMED_STOPS: frozenset[StopReason] = frozenset(get_args(StopReason))


@dataclass(frozen=True)
class PlannedCall:
    """A probe call the run's script makes: `plain` when its arguments are ordinary, so
    it must run (once); otherwise it may be refused, but never run twice."""

    tool: str
    n: int
    plain: bool


def check_invariants(
    outcome: Outcome,
    planned: Sequence[PlannedCall] = (),
    *,
    input_position: bool = False,
) -> list[str]:
    """Every broken invariant of one run, as a line naming it (empty: all held)."""
    broken: list[str] = []
    failed_tasks = task_failures(outcome.history)
    if failed_tasks:
        broken.append(f"workflow task failed ({len(failed_tasks)}x): {failed_tasks[0]}")
    if outcome.timed_out:
        broken.append(f"run neither ended nor waited on a person within {RUN_WAIT_S:g}s")
    crashed = unhandled_activity_failures(outcome.history)
    if crashed:
        broken.append(f"activity crashed on a value: {crashed[0]}")
    if outcome.refused is not None and not input_position:
        broken.append(f"refused at the client: {outcome.refused!r}"[:400])
    if outcome.workflow_failure is not None:
        named = isinstance(getattr(outcome.workflow_failure, "cause", None), ApplicationError)
        if not (input_position and named):
            broken.append(f"workflow failed: {_failure_text(outcome.workflow_failure)}"[:600])
    if outcome.result is not None and outcome.result.stop_reason not in NAMED_STOPS:
        broken.append(f"unnamed stop reason {outcome.result.stop_reason!r}")
    if outcome.result is not None or outcome.awaiting_person:
        broken.extend(_unanswered(outcome.transcript, complete=outcome.result is not None))
    broken.extend(_effects(outcome, planned))
    broken.extend(f"key leaked: {where}" for where in key_leaks(outcome))
    return broken


def _unanswered(transcript: Sequence[ChatMessage], *, complete: bool) -> list[str]:
    broken: list[str] = []
    ids_seen: list[str] = []
    position = 0
    while position < len(transcript):
        message = transcript[position]
        position += 1
        if message.role == "tool":
            broken.append(f"orphan tool message {message.tool_call_id!r:.80}")
            continue
        if message.role != "assistant" or not message.tool_calls:
            continue
        ids = [call.id for call in message.tool_calls]
        ids_seen.extend(ids)
        if not all(i.strip() for i in ids):
            broken.append(f"blank tool call id among {[i[:40] for i in ids]}")
        if len(set(ids)) != len(ids):
            broken.append(f"duplicate tool call ids {[i[:40] for i in ids]}")
        answers = transcript[position : position + len(ids)]
        if not complete and position + len(ids) > len(transcript):
            break  # the batch a person is deciding on is not answered yet
        if [m.role for m in answers] != ["tool"] * len(ids) or [
            m.tool_call_id for m in answers
        ] != ids:
            broken.append(
                f"calls {[i[:40] for i in ids]} not answered one each: "
                f"{[(m.role, (m.tool_call_id or '')[:40]) for m in answers]}"
            )
        position += len(ids)
    if len(set(ids_seen)) != len(ids_seen):
        broken.append("a tool call id repeats across turns")
    return broken


def _effects(outcome: Outcome, planned: Sequence[PlannedCall]) -> list[str]:
    broken: list[str] = []
    ran = outcome.executions
    for (tool_name, n), count in sorted(ran.items()):
        if count > 1:
            broken.append(f"{tool_name} call n={n} ran {count} times (an effect repeated)")
    finished = outcome.result is not None and outcome.result.stop_reason == "final_answer"
    for call in planned:
        if call.plain and finished and ran.get((call.tool, call.n), 0) != 1:
            broken.append(
                f"{call.tool} call n={call.n} with plain arguments ran "
                f"{ran.get((call.tool, call.n), 0)} times, expected once"
            )
    return broken


def assert_invariants(
    outcome: Outcome, planned: Sequence[PlannedCall] = (), *, input_position: bool = False
) -> None:
    broken = check_invariants(outcome, planned, input_position=input_position)
    if broken:
        raise AssertionError(outcome.describe() + "\n  - " + "\n  - ".join(broken))
