"""Threads: one conversation, a sequence of runs, never two of them running at once.

A thread's runs are workflows named `<thread>/1`, `<thread>/2`, ...: run n+1 is the
follow-up of run n, started once run n has ended, with its transcript and receipts
(`resume_input`). Each run id is started at most once, ever (Temporal's
`REJECT_DUPLICATE` reuse policy and `FAIL` conflict policy), and that single rule gives
every guarantee below. What the obvious designs get wrong, and where this one prevents it:

- Two starts at once (two tabs, a retried request racing its original) starting two
  runs, or two follow-ups of one run each losing the other's answer. Both try to start
  the same id `<thread>/n+1`; Temporal lets one through, the other reads who won:
  the same idempotency key means the same request (it attaches), another key while that
  run is in flight is `ThreadBusy` (or, with `steer=True`, the message goes to that run).
- A retried start after its run already ended starting the same prompt again. Each run
  records its key, and the keys of the thread's earlier runs (`ThreadMemo`, the last
  `MAX_REMEMBERED_KEYS`), in its memo, so a retry finds the run it started and attaches.
- A reused id showing another run's output or repeating its effects. A
  follow-up is a new workflow id, so its output host and its events are its own
  (`<thread>/n/output`), and it inherits its predecessor's receipts under the thread's
  one key scope, so a call that already took effect replays. A predecessor that left no
  receipts to inherit (its workflow failed or was terminated, or its receipts did not
  fit its result) is `ThreadCannotContinue`, not a follow-up that could repeat effects.
- Finding the latest run by listing workflows: visibility is eventually consistent and
  would miss a run started a moment ago. The latest run is found by describing ids
  (gallop, then bisect), a read-after-write lookup: O(log n) describes.

Not guaranteed: a message steered into a running run under key K, then retried under K
after that run ended, is a new run's prompt (the steer is recorded in that run's update
log, not in the thread's memo).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticSerializationError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._chat import ChatMessage
from steadyloop._run.bounds import identity_problem, text_problem
from steadyloop._run.models import RunInput, RunResult
from steadyloop._run.resume import resume_input
from steadyloop._worker.serving import ServedTools
from steadyloop.client._errors import (
    ClientError,
    RequestRefused,
    ThreadBusy,
    ThreadCannotContinue,
    ToolsNotServed,
)
from steadyloop.client._fanout import EventFanout
from steadyloop.client._options import RunOptions
from steadyloop.client._runs import (
    DEFAULT_WORKER_BOUND,
    RunHandle,
    RunStatus,
    _status_name,
    mint_key,
)
from steadyloop.events._publishing import log_mode_memo

__all__ = ["MAX_REMEMBERED_KEYS", "THREAD_MEMO", "Thread", "ThreadMemo", "run_workflow_id"]

LOOP_WORKFLOW = "ToolLoopWorkflow"
THREAD_MEMO = "steadyloop.thread"
# How many earlier start keys a run remembers, so a retry after newer runs still attaches.
MAX_REMEMBERED_KEYS = 64
# A start that loses the race for the next id this many times in a row gives up: each
# loss means another run of the thread started and ended in between.
MAX_START_ROUNDS = 8
# A thread id leaves room for "/<run number>/output" within Temporal's id limit.
MAX_THREAD_ID_CHARS = 200


class ThreadMemo(BaseModel):
    """What each run of a thread records in its memo: whose it is, and under which keys
    it and the thread's earlier runs were started (key -> run number)."""

    thread: str
    run: int = Field(ge=1)
    key: str
    earlier: dict[str, int] = Field(default_factory=dict)


def run_workflow_id(thread: str, number: int) -> str:
    """The workflow id of run `number` of `thread`."""
    return f"{thread}/{number}"


def check_id(value: str, what: str, max_chars: int = MAX_THREAD_ID_CHARS) -> str:
    problem = identity_problem(value, max_chars=max_chars)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return value


@dataclass(frozen=True)
class _Found:
    """A run of the thread as described now."""

    number: int
    status: RunStatus
    memo: ThreadMemo | None
    first_execution_run_id: str | None


class Thread:
    """A conversation: `start` its first run, or the follow-up of its last one."""

    def __init__(
        self,
        client: Client,
        thread_id: str,
        *,
        task_queue: str,
        worker_bound: timedelta = DEFAULT_WORKER_BOUND,
        fanout: EventFanout | None = None,
        served: ServedTools | None = None,
    ) -> None:
        self.id = check_id(thread_id, "a thread id")
        self._fanout = fanout if fanout is not None else EventFanout()
        self._client = client
        self._task_queue = task_queue
        # What the task queue's worker serves, asked once per client (`ServedTools`).
        self._served = served if served is not None else ServedTools(client, task_queue)
        self._worker_bound = worker_bound
        self._known = 0  # the highest run number seen to exist (a hint for the lookup)

    def __repr__(self) -> str:
        return f"Thread({self.id!r})"

    def run(self, number: int, *, first_execution_run_id: str | None = None) -> RunHandle:
        """A handle on run `number` of this thread (it may not exist)."""
        return RunHandle(
            self._client,
            run_workflow_id(self.id, number),
            thread=self.id,
            number=number,
            first_execution_run_id=first_execution_run_id,
            worker_bound=self._worker_bound,
            fanout=self._fanout,
        )

    async def latest(self) -> RunHandle | None:
        """The thread's last run, running or ended; None before its first."""
        found = await self._latest()
        if found is None:
            return None
        return self.run(found.number, first_execution_run_id=found.first_execution_run_id)

    async def start(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[ChatMessage] = (),
        options: RunOptions | None = None,
        key: str | None = None,
        steer: bool = False,
    ) -> RunHandle:
        """Start the thread's first run, or the follow-up of its last one.

        The run is asked `prompt` (after `messages`, when given). A first run needs
        `options`; a follow-up takes the last run's unless given, and always inherits
        its transcript and receipts. `key` makes the start idempotent: a start retried
        under the same key attaches to the run it started (`origin` "attached"). While a
        run is in flight another start is `ThreadBusy`, or with `steer=True` `prompt`
        goes to that run as a message at its next turn boundary (`origin` "steered").

        Before a run starts, its tools and plugins are checked against what the worker of
        the task queue serves (asked once per client): `ToolsNotServed` names what is
        missing and what the worker has, and nothing is started.
        """
        if prompt is None and not messages:
            raise ValueError("a run needs a prompt or messages")
        problem = None if prompt is None else text_problem(prompt)
        if problem is not None:
            raise ValueError(f"prompt {problem}")
        given = [_sendable(number, m) for number, m in enumerate(messages)]
        key = check_id(key, "key") if key is not None else mint_key()
        for _ in range(MAX_START_ROUNDS):
            latest = await self._latest()
            if latest is None:
                if options is None:
                    raise ValueError(
                        f"thread {self.id!r} has no run yet: its first run needs options= "
                        "(RunOptions: endpoint, model, tools...)"
                    )
                number, run = 1, options.run_input(prompt=prompt, messages=given)
                memo = ThreadMemo(thread=self.id, run=1, key=key)
            else:
                attached = self._attached(latest, key)
                if attached is not None:
                    return attached
                if latest.status == "running":
                    steered = await self._steer(latest, prompt, given, key, steer)
                    if steered is None:  # it was ending, and has ended: follow it up
                        continue
                    return steered
                number = latest.number + 1
                run = await self._follow_up(latest, prompt, given, options)
                assert latest.memo is not None  # `_attached` refused a foreign run
                earlier = latest.memo.earlier | {latest.memo.key: latest.number}
                memo = ThreadMemo(
                    thread=self.id,
                    run=number,
                    key=key,
                    earlier=dict(list(earlier.items())[-MAX_REMEMBERED_KEYS:]),
                )
            handle = await self._start(number, run, memo)
            if handle is not None:
                return handle
        last = run_workflow_id(self.id, self._known)
        raise ClientError(
            f"thread {self.id!r} kept moving: {MAX_START_ROUNDS} runs started and ended "
            f"while this start looked for the next id (last seen {last}); start again",
            workflow_id=last,
        )

    # -- the steps of a start ------------------------------------------------------

    def _attached(self, latest: _Found, key: str) -> RunHandle | None:
        """The run this key already started, or None; refuses a run of another origin."""
        memo = latest.memo
        if memo is None or memo.thread != self.id:
            raise ThreadCannotContinue(
                self.id,
                run_workflow_id(self.id, latest.number),
                "that workflow was not started as a run of this thread",
            )
        number = latest.number if memo.key == key else memo.earlier.get(key)
        if number is None:
            return None
        handle = self.run(
            number,
            first_execution_run_id=latest.first_execution_run_id
            if number == latest.number
            else None,
        )
        handle.origin = "attached"
        return handle

    async def _steer(
        self,
        latest: _Found,
        prompt: str | None,
        messages: list[ChatMessage],
        key: str,
        steer: bool,
    ) -> RunHandle | None:
        """The running run, given the message (`steer`), or `ThreadBusy`; None when the
        run was already stopping and has ended since (a follow-up is due, not a steer:
        a person who just read its stop event expects to go on)."""
        workflow_id = run_workflow_id(self.id, latest.number)
        handle = self.run(latest.number, first_execution_run_id=latest.first_execution_run_id)
        if await handle.ended_soon():
            return None
        if not steer:
            raise ThreadBusy(self.id, workflow_id)
        if prompt is None or messages:
            raise ValueError(
                "steer=True gives the running run one message: pass it as prompt, without messages"
            )
        try:
            await handle.send(prompt, key=key)  # the key is the update id: sent once
        except RequestRefused:
            if await handle.ended_soon():  # it began to stop in between
                return None
            raise
        handle.origin = "steered"
        return handle

    async def _follow_up(
        self,
        latest: _Found,
        prompt: str | None,
        messages: list[ChatMessage],
        options: RunOptions | None,
    ) -> RunInput:
        """The input of the run after `latest`: its conversation and receipts, then the
        new messages; refused when it left nothing safe to inherit."""
        workflow_id = run_workflow_id(self.id, latest.number)
        if latest.status != "completed":
            raise ThreadCannotContinue(
                self.id, workflow_id, f"its workflow {latest.status.replace('_', ' ')}"
            )
        handle = self._client.get_workflow_handle(workflow_id, result_type=RunResult)
        result: RunResult = await handle.result()
        if result.receipts is None or result.receipt_scope is None:
            raise ThreadCannotContinue(
                self.id, workflow_id, "its receipts were left out of its result (too large)"
            )
        if options is not None:
            original = options.unchecked_input()
        else:
            original = await _run_input_of(self._client, handle)
        resumed = resume_input(original, result, prompt=prompt, then=messages)
        # `resume_input` copies without validating: check the whole as a first start does.
        return RunInput.model_validate(resumed.model_dump(mode="python"))

    async def _start(self, number: int, run: RunInput, memo: ThreadMemo) -> RunHandle | None:
        """Start run `number`; None when another start took that id first."""
        workflow_id = run_workflow_id(self.id, number)
        await self._check_served(workflow_id, run)
        try:
            started = await self._client.start_workflow(
                LOOP_WORKFLOW,
                run,
                id=workflow_id,
                task_queue=self._task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                memo={THREAD_MEMO: memo.model_dump(mode="json"), **log_mode_memo(run)},
                result_type=RunResult,
            )
        except WorkflowAlreadyStartedError:
            self._known = max(self._known, number)
            return None
        self._known = max(self._known, number)
        handle = self.run(number, first_execution_run_id=started.first_execution_run_id)
        handle.origin = "started"
        return handle

    async def _check_served(self, workflow_id: str, run: RunInput) -> None:
        """`ToolsNotServed` when the run names tools or plugins its worker lacks."""
        found = await self._served.unserved(list(run.tools), run.plugins.named)
        if found is None:
            return
        missing, served = found
        where = f"the worker on task queue {self._task_queue!r}"
        raise ToolsNotServed(
            workflow_id,
            self._task_queue,
            missing.text(served, where),
            tools=missing.tools,
            plugins=missing.plugins,
            served_tools=served.tools,
            served_plugins=served.plugins,
        )

    # -- finding the latest run ----------------------------------------------------

    async def _latest(self) -> _Found | None:
        """The highest-numbered run: from the last one known, gallop up until an id is
        free, then bisect (runs are numbered without gaps)."""
        low = self._known  # exists (0: nothing known)
        found = await self._describe(low) if low else None
        if low and found is None:  # cannot happen for a thread's own runs; start over
            low, self._known = 0, 0
        step = 1
        high = low + step
        probe = await self._describe(high)
        while probe is not None:
            low, found = high, probe
            step *= 2
            high = low + step
            probe = await self._describe(high)
        while high - low > 1:  # low exists (or is 0), high does not
            middle = (low + high) // 2
            probe = await self._describe(middle)
            if probe is None:
                high = middle
            else:
                low, found = middle, probe
        self._known = low
        return found

    async def _describe(self, number: int) -> _Found | None:
        handle = self._client.get_workflow_handle(run_workflow_id(self.id, number))
        try:
            description = await handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        raw: Any = await description.memo_value(THREAD_MEMO, None)
        try:
            memo = None if raw is None else ThreadMemo.model_validate(raw)
        except ValidationError:
            memo = None
        if description.workflow_type != LOOP_WORKFLOW:
            memo = None
        first = description.raw_description.workflow_execution_info.first_run_id or None
        return _Found(number, _status_name(description.status), memo, first)


def _sendable(number: int, message: ChatMessage | dict[str, Any]) -> ChatMessage:
    """A message the run can carry: valid, and encodable as JSON (a lone surrogate from
    bytes that were not UTF-8 is not: it would fail at start, or worse, later)."""
    checked = ChatMessage.model_validate(message)
    try:
        checked.model_dump_json()
    except PydanticSerializationError as error:
        raise ValueError(f"messages[{number}] cannot be sent: {error}") from None
    return checked


async def _run_input_of(client: Client, handle: WorkflowHandle[Any, Any]) -> RunInput:
    """The configuration the run's latest execution started with (its first event),
    decoded with the client's converter (a continued run's input is in the blob store)."""
    async for event in handle.fetch_history_events(page_size=1):
        started = event.workflow_execution_started_event_attributes
        decoded = await client.data_converter.decode(started.input.payloads, [RunInput])
        return RunInput.model_validate(decoded[0])
    raise ThreadCannotContinue("?", handle.id, "its history is empty")
