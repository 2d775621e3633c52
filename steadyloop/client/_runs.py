"""`RunHandle`: one run, read (`snapshot`, `result`) and steered by people.

Every steering request that is a Temporal update carries the caller's key as its update
id, so the same request sent twice (a double click, a retried HTTP call) records one
decision: Temporal answers the second with the first one's outcome. What the obvious
wrappers get wrong, and where this one prevents it:

- A decision bound to a call id alone: servers that number calls per turn reuse
  `call_0`, so an approval could run a call nobody reviewed. `approve` binds the
  decision to the tool, arguments SHA and turn the person saw (`ApprovalDecision.for_call`)
  and the run refuses one that does not match (`NotTheCallReviewed`, listing what
  waits now).
- A double approval looked up again first: the call no longer waits, so the lookup
  would refuse what is only a repeat. The update is sent anyway, under the same key;
  Temporal answers a repeat from its record, and only a real mismatch is refused.
- "Timed out" read as "lost": an update no worker accepted within the bound is not
  lost, it waits on the server for a worker (`NoWorkerAnswered` says so), and a retry
  with the same key is applied at most once.
- A run that has ended answers no update: `RunEnded` says how it ended, rather than
  Temporal's "workflow execution already completed".

`interrupt` is a signal, not an update: the server takes it without a worker, and it is
idempotent by nature (the first reason given is the one the run keeps).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._chat import ChatMessage
from steadyloop._receipts.ledger import AmbiguityResolution
from steadyloop._run.models import AmbiguousCall, ResolveReceipt, RunProgress, RunResult
from steadyloop._run.steering import ApprovalDecision, PendingApproval, UserMessage
from steadyloop._stops.stop_text import status_header
from steadyloop.client._errors import (
    NotTheCallReviewed,
    NoWorkerAnswered,
    RequestRefused,
    RunEnded,
    RunFailed,
    RunNotFound,
)
from steadyloop.client._event_log import HOST_MISSING, latest_cursor, run_events
from steadyloop.client._fanout import EventFanout
from steadyloop.client._reconnect import DEFAULT_RECONNECT_BOUND, Reconnect, unreachable
from steadyloop.events import CursorExpired, RunEventItem, StopEvent, TimelineEntryEvent

__all__ = ["DEFAULT_WORKER_BOUND", "RunHandle", "RunSnapshot", "RunStatus", "StartOrigin"]

# How long a query or an update may wait for a worker before `NoWorkerAnswered`.
DEFAULT_WORKER_BOUND = timedelta(seconds=10)
# The shortest SHA prefix a caller may name a reviewed call by (the CLI's rule).
MIN_SHA_PREFIX = 8

RunStatus = Literal[
    "running", "completed", "failed", "canceled", "terminated", "continued_as_new", "timed_out"
]
# How `Thread.start` came to the run: it started it, found the one this key had already
# started (a retry), or gave the running run the message (`steer=True`); `opened`: a
# handle asked for by id.
StartOrigin = Literal["started", "attached", "steered", "opened"]


class RunSnapshot(BaseModel):
    """What a run is now: while it runs, its queries' answers; once it ended, its result.

    `result` is how it stopped (reason, detail, partial output), None while it runs or
    when the workflow did not complete (`failure` then says why). `progress` and the
    waiting calls come from a live worker, so they are empty once the run has ended.

    `cursor` is where the run's event log stood just before the snapshot was read:
    `handle.events(after=snapshot.cursor)` misses nothing that came after it, and may
    repeat a little of what the snapshot already shows (the log and the run are two
    workflows; no read of both is atomic). None: from the log's first event.
    """

    workflow_id: str
    status: RunStatus
    cursor: str | None = None
    transcript: list[ChatMessage] = Field(default_factory=list)
    progress: RunProgress | None = None
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    ambiguous_receipts: list[AmbiguousCall] = Field(default_factory=list)
    result: RunResult | None = None
    failure: str | None = None


def mint_key() -> str:
    """A fresh idempotency key, for a request whose caller gave none."""
    return f"sl-{uuid.uuid4().hex}"


class RunHandle:
    """One run of a thread (or any steadyloop run, by workflow id)."""

    def __init__(
        self,
        client: Client,
        workflow_id: str,
        *,
        thread: str | None = None,
        number: int | None = None,
        first_execution_run_id: str | None = None,
        origin: StartOrigin = "opened",
        worker_bound: timedelta = DEFAULT_WORKER_BOUND,
        fanout: EventFanout | None = None,
    ) -> None:
        self.workflow_id = workflow_id
        self.thread = thread
        self.number = number
        self.origin: StartOrigin = origin
        self.worker_bound = worker_bound
        self._client = client
        # Followers of one run in one process share one reader of its log.
        self._fanout = fanout if fanout is not None else EventFanout()
        self._first_run_id = first_execution_run_id
        self._handle: WorkflowHandle[Any, Any] = self._pinned()

    def _pinned(self) -> WorkflowHandle[Any, Any]:
        """The Temporal handle, pinned to the run's first execution when it is known: the
        chain it continues as new is followed, another run under a reused id is not."""
        return self._client.get_workflow_handle(
            self.workflow_id, first_execution_run_id=self._first_run_id, result_type=RunResult
        )

    async def first_execution_run_id(self) -> str:
        """The run id of the run's first execution: with the workflow id, what names this
        run for good (its event log is keyed by it)."""
        if self._first_run_id is None:
            description = await self._describe()
            info = description.raw_description.workflow_execution_info
            self._first_run_id = info.first_run_id or description.run_id
            self._handle = self._pinned()
        return self._first_run_id

    @property
    def temporal_handle(self) -> WorkflowHandle[Any, Any]:
        """The Temporal workflow handle, for what this API does not cover."""
        return self._handle

    def __repr__(self) -> str:
        return f"RunHandle({self.workflow_id!r}, origin={self.origin!r})"

    # -- reading -------------------------------------------------------------------

    async def events(
        self,
        after: str | None = None,
        *,
        poll_s: float | None = None,
        stop_patience_s: float | None = None,
        reconnect_bound: timedelta = DEFAULT_RECONNECT_BOUND,
        on_lost: Callable[[BaseException], None] | None = None,
    ) -> AsyncIterator[RunEventItem]:
        """The run's events after cursor `after` (None: from the first), in run order,
        each once, ending with its stop: text and reasoning deltas, tool calls and their
        results, approvals waiting, ambiguous receipts, the timeline, the stop. Each
        carries its `cursor`; `CursorExpired` when what follows `after` is no longer held
        (read the snapshot instead), `InvalidCursor` for a cursor this library did not
        write, `StopUnread` when the run completed but its stop could not be read within
        `stop_patience_s` (default `event_log.STOP_PATIENCE_S`) of finding the run over:
        it names the cursor to follow again after. A run that failed or was terminated
        published no stop: its events end with `RunFailed`, naming how and why (e.g.
        `UnknownTools: ...`), as `result()` does. Followers of one run through one
        client share one reader (`fanout`), with the first one's `poll_s` and patience.

        Temporal going away (a restart, a killed `worker --dev` that ran it) does not end
        the iteration: it retries, calling `on_lost(error)` once per outage, and reads on
        from the last event's cursor when the server answers again, skipping and
        repeating nothing. After `reconnect_bound` (default 5 minutes) without an answer
        it raises `TemporalLost`, naming the cursor to follow again after: the run's fate
        is unknown then, not failed."""
        reconnect = Reconnect(self.workflow_id, reconnect_bound.total_seconds(), on_lost)
        run_id = await reconnect.call(self.first_execution_run_id, after)
        extra: dict[str, Any] = {} if poll_s is None else {"poll_s": poll_s}
        if stop_patience_s is not None:
            extra["stop_patience_s"] = stop_patience_s

        def source(start: str | None) -> AsyncIterator[RunEventItem]:
            return run_events(self._client, self.workflow_id, run_id, start, **extra)

        cursor = after
        stopped = False
        while True:
            try:
                async for event in self._fanout.follow(self.workflow_id, run_id, cursor, source):
                    reconnect.up()
                    cursor = event.cursor
                    stopped = isinstance(event, StopEvent)
                    yield event
                break
            except CursorExpired as expired:
                if expired.detail != HOST_MISSING:
                    raise
                await self._raise_failure()
                raise
            except RPCError as error:
                if not unreachable(error):
                    raise
                await reconnect.down(error, cursor)
        if not stopped:
            await self._raise_failure()

    async def _raise_failure(self) -> None:
        """`RunFailed` with its cause when the run's workflow did not complete: a log that
        ends without a stop (or was never written) says why through its follower."""
        if await self.status() not in ("running", "completed", "continued_as_new"):
            await self.result()  # raises `RunFailed`, with the cause

    async def timeline(self) -> list[TimelineEntryEvent]:
        """What the guarantees did in the run (replays and why, retries, stalls, breakers,
        healing), in run order, once the run has stopped: a view of its event log (the
        run's one record), read from the first event to the stop, so it waits for that."""
        return [event async for event in self.events() if isinstance(event, TimelineEntryEvent)]

    async def status(self) -> RunStatus:
        """ "running", or how the run's workflow closed; `RunNotFound` for no such run."""
        return _status_name((await self._describe()).status)

    async def result(self) -> RunResult:
        """How the run stopped, once it has; `RunFailed` when its workflow did not complete."""
        try:
            result: RunResult = await self._handle.result()
        except WorkflowFailureError as error:
            raise RunFailed(self.workflow_id, await self.status(), _cause_text(error)) from None
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFound(self.workflow_id, self._client.namespace) from None
            raise
        return result

    async def _describe(self) -> WorkflowExecutionDescription:
        try:
            return await self._handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFound(self.workflow_id, self._client.namespace) from None
            raise

    async def snapshot(self) -> RunSnapshot:
        """The run now: transcript, progress, waiting calls and ambiguous receipts while
        it runs (`NoWorkerAnswered` when no worker answers its queries); how it stopped
        once it has."""
        status = await self.status()
        cursor = await self._cursor()  # before the reads: what follows it is not missed
        if status == "running":
            progress = await self._query("progress", RunProgress)
            transcript = await self._query("transcript", list[ChatMessage])
            approvals = await self._query("pending_approvals", list[PendingApproval])
            ambiguous = await self._query("ambiguous_receipts", list[AmbiguousCall])
            # Four queries are four moments: a call can start waiting between the first
            # and the third. The counts follow the lists, so the snapshot agrees with itself.
            progress = progress.model_copy(
                update={"pending_approvals": len(approvals), "ambiguous": len(ambiguous)}
            )
            return RunSnapshot(
                workflow_id=self.workflow_id,
                status=status,
                transcript=transcript,
                progress=progress,
                pending_approvals=approvals,
                ambiguous_receipts=ambiguous,
                cursor=cursor,
            )
        if status == "completed":
            result = await self.result()
            return RunSnapshot(
                workflow_id=self.workflow_id,
                status=status,
                transcript=result.transcript,
                result=result,
                cursor=cursor,
            )
        try:
            await self.result()
        except RunFailed as failed:
            return RunSnapshot(
                workflow_id=self.workflow_id, status=status, failure=failed.cause, cursor=cursor
            )
        return RunSnapshot(workflow_id=self.workflow_id, status=status, cursor=cursor)

    async def ended_soon(self) -> bool:
        """Whether the run, still running, has stopped its loop and then closed within
        the worker bound (its last steps: closing its log, returning its result). False
        when it goes on, or when no worker says (it is then treated as going on)."""
        try:
            progress: RunProgress = await self._query("progress", RunProgress)
        except (NoWorkerAnswered, RequestRefused):
            return False
        if progress.stop_reason is None:
            return False
        try:
            await asyncio.wait_for(self._handle.result(), self.worker_bound.total_seconds())
        except TimeoutError:
            return False
        except WorkflowFailureError:
            pass  # it ended all the same; the follow-up says what that means
        return True

    async def pending_approvals(self) -> list[PendingApproval]:
        """The calls waiting for a person's approval (a live worker answers)."""
        waiting: list[PendingApproval] = await self._query(
            "pending_approvals", list[PendingApproval]
        )
        return waiting

    # -- steering ------------------------------------------------------------------

    async def approve(
        self, call: PendingApproval | str, sha: str | None = None, *, key: str | None = None
    ) -> str:
        """Approve the waiting call the person reviewed: the `PendingApproval` they saw,
        or its call id and arguments SHA (a prefix of 8 or more hex digits). It then runs
        under its receipt. The run's answer, e.g. "approved 'wire' call 'call_0'"."""
        return await self._decide(call, sha, approved=True, reason=None, key=key)

    async def reject(
        self,
        call: PendingApproval | str,
        sha: str | None = None,
        *,
        reason: str,
        key: str | None = None,
    ) -> str:
        """Reject the reviewed call: it does not run, and the model reads `reason`."""
        if not reason.strip():
            raise ValueError("reason is blank: the model reads it to decide what next")
        return await self._decide(call, sha, approved=False, reason=reason, key=key)

    async def send(self, text: str, *, key: str | None = None) -> str:
        """Give the agent a message, appended before its next model request."""
        message = UserMessage(content=text)  # blank or oversize: refused here, by name
        return await self._update("send_message", message, key=key, what="the message")

    async def pause(self, *, key: str | None = None) -> str:
        """Hold the run at its next turn boundary (its deadline still runs)."""
        return await self._update("pause", None, key=key, what="the pause")

    async def unpause(self, *, key: str | None = None) -> str:
        return await self._update("unpause", None, key=key, what="the unpause")

    async def resolve_receipt(
        self,
        receipt: AmbiguousCall | str,
        resolution: AmbiguityResolution,
        *,
        key: str | None = None,
    ) -> str:
        """Say what happened to an ambiguous call (`Happened`, `DidNotHappen`, `GiveUp`);
        `receipt` is the listed `AmbiguousCall` or its full key."""
        receipt_key = receipt.key if isinstance(receipt, AmbiguousCall) else receipt
        request = ResolveReceipt(key=receipt_key, resolution=resolution)
        return await self._update("resolve_receipt", request, key=key, what="the resolution")

    async def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the run now: what is in flight is cancelled and every call answered; the
        run ends `interrupted` (await `result()` for how)."""
        try:
            await self._handle.signal("interrupt", reason, rpc_timeout=self.worker_bound)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise RunEnded(
                    self.workflow_id, await self._how_it_ended(), "the interrupt"
                ) from None
            raise

    # -- the requests --------------------------------------------------------------

    async def _decide(
        self,
        call: PendingApproval | str,
        sha: str | None,
        *,
        approved: bool,
        reason: str | None,
        key: str | None,
    ) -> str:
        what = "the approval" if approved else "the rejection"
        if isinstance(call, PendingApproval):
            if sha is not None and not call.arguments_sha256.startswith(sha.lower()):
                raise ValueError(
                    f"sha {sha!r} is not the listed call's ({call.arguments_sha256}); pass the "
                    "PendingApproval alone, or its call id and the SHA you reviewed"
                )
            decision = ApprovalDecision.for_call(call, approved=approved, reason=reason)
        else:
            sha = _sha_prefix(sha)
            waiting = await self.pending_approvals()
            found = next(
                (c for c in waiting if c.call_id == call and c.arguments_sha256.startswith(sha)),
                None,
            )
            if found is None:
                # Perhaps decided already under this key (a double click): the update is
                # sent anyway, unbound, so Temporal answers a repeat from its record and
                # the run refuses anything else.
                decision = ApprovalDecision(
                    call_id=call, approved=approved, reason=reason, arguments_sha256=sha
                )
            else:
                decision = ApprovalDecision.for_call(found, approved=approved, reason=reason)
        try:
            return await self._update("approve_call", decision, key=key, what=what)
        except RequestRefused as refused:
            waiting_now = await self.pending_approvals()
            detail = refused.reason
            if decision.tool is None:  # sent unbound: nothing waited under it with that SHA
                detail = f"you reviewed SHA {decision.arguments_sha256}"
            raise NotTheCallReviewed(
                self.workflow_id, decision.call_id, waiting_now, detail=detail
            ) from None

    async def _update(self, name: str, argument: Any, *, key: str | None, what: str) -> str:
        args: Sequence[Any] = [] if argument is None else [argument]
        bound = self.worker_bound
        try:
            answer: str = await self._handle.execute_update(
                name, args=args, id=key or mint_key(), result_type=str, rpc_timeout=bound
            )
        except WorkflowUpdateFailedError as error:
            raise RequestRefused(self.workflow_id, what, _cause_text(error.cause)) from None
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            raise NoWorkerAnswered(self.workflow_id, what, bound.total_seconds()) from None
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise RunEnded(self.workflow_id, await self._how_it_ended(), what) from None
            raise
        return answer

    async def _query(self, name: str, result_type: Any) -> Any:
        try:
            return await self._handle.query(
                name, result_type=result_type, rpc_timeout=self.worker_bound
            )
        except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as error:
            raise RequestRefused(self.workflow_id, f"the {name} query", str(error)) from None
        except RPCError as error:
            if error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raise NoWorkerAnswered(
                    self.workflow_id, f"the {name} query", self.worker_bound.total_seconds()
                ) from None
            raise

    async def _cursor(self) -> str | None:
        """The cursor of the last event on the run's log now (None: nothing logged yet);
        a running log answers by query, so within the worker bound."""
        run_id = await self.first_execution_run_id()
        bound = self.worker_bound.total_seconds()
        try:
            return await asyncio.wait_for(
                latest_cursor(self._client, self.workflow_id, run_id), bound
            )
        except (TimeoutError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
            raise NoWorkerAnswered(
                self.workflow_id, "the event log's offset query", bound
            ) from None

    async def _how_it_ended(self) -> str:
        """How the run stopped, in a few words ("final_answer", "terminated")."""
        try:
            description = await self._handle.describe()
        except RPCError:
            return "not found"
        status = _status_name(description.status)
        if status != "completed":
            return status
        return status_header(await self._handle.result(), status)


def _sha_prefix(sha: str | None) -> str:
    if sha is None:
        raise ValueError(
            "name the call's SHA as you reviewed it (arguments_sha256, 8+ hex digits), or "
            "pass the PendingApproval itself: a call id alone may name another call by now"
        )
    sha = sha.strip().lower()
    if len(sha) < MIN_SHA_PREFIX or any(c not in "0123456789abcdef" for c in sha):
        raise ValueError(f"sha {sha!r}: expected {MIN_SHA_PREFIX} or more hex digits")
    return sha


def _status_name(status: WorkflowExecutionStatus | None) -> RunStatus:
    names: dict[WorkflowExecutionStatus, RunStatus] = {
        WorkflowExecutionStatus.RUNNING: "running",
        WorkflowExecutionStatus.COMPLETED: "completed",
        WorkflowExecutionStatus.FAILED: "failed",
        WorkflowExecutionStatus.CANCELED: "canceled",
        WorkflowExecutionStatus.TERMINATED: "terminated",
        WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued_as_new",
        WorkflowExecutionStatus.TIMED_OUT: "timed_out",
    }
    return names.get(status, "failed") if status is not None else "failed"


def _cause_text(error: BaseException | None) -> str:
    """The messages of an exception chain, outermost first, each once (without the
    `ValueError: ` a validator's refusal is prefixed with)."""
    messages: list[str] = []
    while error is not None:
        text = re.sub(r"^[A-Za-z]*Error: ", "", str(error).strip())
        if text and text not in messages:
            messages.append(text)
        error = error.__cause__
    return ": ".join(messages) or "no reason given"
