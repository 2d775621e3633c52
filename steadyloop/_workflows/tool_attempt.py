"""`ToolAttempt`: one claimed attempt of a tool call, and what its end means.

The receipt is claimed before the activity starts and settled by how it ended:

- an outcome (even the tool's own error, which the model should read) completes the
  receipt, and is the call's answer;
- a failure the activity reported (not a timeout) fails the receipt: the tool said
  what happened, so the next ask may run it again;
- a cancellation (an interrupt) answers the call as interrupted; a pure receipt fails,
  any other stays running: the effect may have happened, and an ask after its lease is
  ambiguous, as for a lost attempt;
- a timeout is no outcome: the effect may or may not have happened. How it ended (ran
  past its timeout, went silent) is said, not "lost" for both; the sub-operations its
  last heartbeat recorded are kept for a resumable tool's next attempt; a non-opaque
  receipt fails after one heartbeat period (the lost attempt's grace to notice), an
  opaque one stays running and becomes ambiguous.

Tool activities run one attempt each, so Temporal never re-runs an effect behind the
table's back. A run may ask for its short pure tools as local activities
(`RunInput.local_pure_tools_s`): the same receipt path, only pure calls (a local
activity is retried with the workflow task, which only a call that may run twice
survives).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError

if TYPE_CHECKING:  # annotations only: no module-level object the sandbox test cannot vouch for
    from pydantic import JsonValue

with workflow.unsafe.imports_passed_through():
    from steadyloop._chains.delegation_tool import DELEGATE_TOOL
    from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
    from steadyloop._receipts.canonical_json import canonical_json
    from steadyloop._receipts.decision import Execute, ReceiptKey
    from steadyloop._run.steering import interrupted_outcome
    from steadyloop.errors import RECEIPT_CLAIM
    from steadyloop.telemetry._workflow import attempt_lost
    from steadyloop.tools._payloads import (
        RUN_TOOL_ACTIVITY,
        LateToolResult,
        ToolDescription,
        ToolInvocation,
        ToolOutcome,
    )

from steadyloop._workflows.activity_tools import run_activity_tool
from steadyloop._workflows.delegation import innermost_message
from steadyloop._workflows.late_results import late_reason, late_text, lost_text
from steadyloop._workflows.run_state import RunState

# A receipt's lease outlives its activity's timeout by this much, so the timeout (not
# the lease) is what ends a lost attempt first.
LEASE_MARGIN = timedelta(seconds=5)


class ToolAttempt:
    """Runs claimed attempts of a batch's calls, at most the batch's pool at a time."""

    def __init__(self, state: RunState) -> None:
        self._state = state
        self._pool = asyncio.Semaphore(1)  # replaced per batch with the run's pool size
        self._local_bound: float | None = None

    def begin_batch(self, concurrency: int, local_pure_tools_s: float | None) -> None:
        """A batch's pool of running activities, and the bound for running locally."""
        self._pool = asyncio.Semaphore(concurrency)
        self._local_bound = local_pure_tools_s

    def runs_locally(self, description: ToolDescription) -> bool:
        """Whether this call runs as a local activity (`RunInput.local_pure_tools_s`):
        a pure tool declared no longer than the run's bound. Only pure tools: a local
        activity is retried with the workflow task, outside the receipt table's count,
        which is harmless only for a call that may run twice."""
        bound = self._local_bound
        return (
            bound is not None
            and description.activity is None  # the user's activity runs where it is served
            and description.effect == "pure"
            and description.timeout.total_seconds() <= bound
        )

    async def run(
        self,
        description: ToolDescription,
        invocation: ToolInvocation,
        key: ReceiptKey,
        decision: Execute,
        *,
        after_lost: bool,
    ) -> ToolOutcome | str:
        """One claimed attempt: its outcome, or (lost, no outcome) why, for a retry.

        `after_lost`: the attempt before this one lost its outcome (timed out, worker
        lost), so this one takes over from it: the tool is told (`reclaimed`)."""
        state = self._state
        if state.child_runs is not None and description.name == DELEGATE_TOOL:
            return await state.child_runs.attempt(invocation, key, decision)
        ended = await self._execute(description, invocation, key, decision, after_lost)
        if isinstance(ended, ActivityError):
            return await self._without_outcome(description, invocation, key, decision, ended)
        # An answer the model should read (even a tool's own error) is the call's result.
        self._hold_whole(ended.content)
        state.receipts.complete(key, decision.attempt, ended.content)
        state.late.settled(key.text)
        return ended

    async def _execute(
        self,
        description: ToolDescription,
        invocation: ToolInvocation,
        key: ReceiptKey,
        decision: Execute,
        after_lost: bool,
    ) -> ToolOutcome | ActivityError:
        """Claim the receipt and run the activity: its outcome, or how it ended without."""
        state = self._state
        attempt = decision.attempt
        timeout = state.deadline.remaining(description.timeout)
        # The pool bounds running activities only, and the lease starts when the attempt
        # does: a call waiting for a slot, a lease or a person holds nothing.
        async with self._pool:
            # The expiry is for people to read and for the timer that ends the lease;
            # no branch compares it with the clock (`ReceiptPath._wait_out_lease`).
            expires = workflow.now() + timeout + LEASE_MARGIN
            claimed = state.receipts.claim(key, attempt, expires)
            if not claimed.applied:  # cannot happen in one workflow; say so, do not guess
                raise ApplicationError(
                    f"receipt claim refused for {description.name!r}: {claimed}",
                    type=RECEIPT_CLAIM,
                )
            sent = invocation.model_copy(
                update={
                    "attempt": attempt,
                    "previous_progress": list(decision.previous_progress),
                    "reclaimed": decision.reclaimed or after_lost,
                }
            )
            local = self.runs_locally(description)
            # A local activity's input is not recorded: nothing rides on it. A regular
            # one's events are its second payload, so a follower never reads the first.
            # The user's own activity takes its own arguments only: events wait for the
            # next activity of the run's.
            riding = None if local or description.activity else state.events.carried()
            ended: ToolOutcome | ActivityError
            try:
                ended = await _start(description, sent, timeout, local=local, riding=riding)
            except ActivityError as error:
                ended = error
            if not local:  # its end is an event in history (a local activity's is not)
                state.durable_clock().woke()
        return ended

    async def _without_outcome(
        self,
        description: ToolDescription,
        invocation: ToolInvocation,
        key: ReceiptKey,
        decision: Execute,
        lost: ActivityError,
    ) -> ToolOutcome | str:
        """The answer to an attempt that ended in an activity error: interrupted, failed,
        or (a timeout, no outcome) why it was lost, for a retry."""
        state = self._state
        cause = lost.cause
        if isinstance(cause, CancelledError):  # interrupted mid-attempt
            if description.effect == "pure":
                state.receipts.fail(key, decision.attempt)
            # Otherwise the receipt stays running: the effect may have happened, and
            # an ask after its lease is ambiguous, as for a lost attempt.
            reason = state.steering.interrupted or "the run was cancelled"
            return interrupted_outcome(description.name, description.effect, reason)
        if not isinstance(cause, TimeoutError):
            state.receipts.fail(key, decision.attempt)
            return ToolOutcome(
                status="tool_error",
                content=f"Tool {description.name!r} failed: {innermost_message(lost)}",
                error_type="ToolFailed",
            )
        return await self._timed_out(description, invocation, key, decision.attempt, cause)

    async def _timed_out(
        self,
        description: ToolDescription,
        invocation: ToolInvocation,
        key: ReceiptKey,
        attempt: int,
        cause: TimeoutError,
    ) -> str:
        """No outcome: the effect may or may not have happened. How it ended (ran past
        its timeout, went silent) is said, not "lost" for both."""
        state = self._state
        why = lost_text(description, cause.type)
        attempt_lost(attempt, _timeout_kind(cause), why)
        if description.effect == "opaque":
            state.event(
                "tools", "tool_timeout", f"attempt {attempt} {why}", call_id=invocation.call_id
            )
            early = state.late.timed_out(key.text, attempt, why)
            if early is not None:  # the worker's signal came before the timeout
                note_late(state, early)
        progress = _recorded_progress(cause)
        if progress is not None:
            state.receipts.record_progress(key, attempt, progress)
        if description.effect != "opaque":
            # Temporal has declared the attempt lost; give it one heartbeat period to
            # notice before another attempt starts beside it.
            await workflow.sleep(description.heartbeat_timeout or LEASE_MARGIN)
            state.receipts.fail(key, attempt)
        return f"Tool {description.name!r} timed out: it {why}."

    def _hold_whole(self, answer: str) -> None:
        """Raise the receipts' bound so `answer` is kept whole, when blob storage carries it.

        The ledger keeps results up to 16 KB. With external payload storage (the worker
        reported a payload limit above Temporal's inline one) the carried state leaves
        history whatever its size, and a result the transcript holds is carried once
        (`PackedLedger`), so the bound becomes that limit: a replay answers exactly what
        the first execution answered. Without storage nothing changes (the model reads
        the 16 KB copy and its marker, and the timeline says so:
        `ReceiptPath.replayed`).
        """
        receipts = self._state.receipts
        limit = self._state.disclosure.payload_limit_bytes
        if (
            limit is not None
            and limit > MAX_INLINE_PAYLOAD_BYTES
            and limit > receipts.result_limit_bytes
            and len(answer.encode("utf-8", "replace")) > receipts.result_limit_bytes
        ):
            receipts.result_limit_bytes = limit


def note_late(state: RunState, late: LateToolResult) -> None:
    """A late result of a timed-out attempt: on the timeline, and on the open call."""
    tool = ReceiptKey.from_text(late.key).tool
    view = state.ambiguous.get(late.key)
    if view is not None:
        view.late_result = late
        view.reason = late_reason(tool, late)
    call_id = view.call_ids[0] if view is not None and view.call_ids else late.call_id
    state.event("tools", "tool_late", late_text(late), call_id=call_id)
    if view is not None:  # the open call again, with its late result (state only)
        state.notes.ambiguous(state.turn, view)


async def _start(
    description: ToolDescription,
    sent: ToolInvocation,
    timeout: timedelta,
    *,
    local: bool,
    riding: list[JsonValue] | None,
) -> ToolOutcome:
    """The tool activity, local or regular, one attempt: the receipt table owns retries
    of side effects. An activity tool schedules the user's own activity instead."""
    if description.activity is not None:
        return await run_activity_tool(description, description.activity, sent.arguments, timeout)
    once = RetryPolicy(maximum_attempts=1)
    outcome: ToolOutcome
    if local:
        outcome = await workflow.execute_local_activity(
            RUN_TOOL_ACTIVITY,
            sent,
            result_type=ToolOutcome,
            start_to_close_timeout=timeout,
            retry_policy=once,
        )
        return outcome
    outcome = await workflow.execute_activity(
        RUN_TOOL_ACTIVITY,
        args=[sent] if riding is None else [sent, riding],
        result_type=ToolOutcome,
        start_to_close_timeout=timeout,
        heartbeat_timeout=description.heartbeat_timeout,
        retry_policy=once,
    )
    return outcome


def _timeout_kind(timeout: TimeoutError) -> str:
    """`start_to_close`, `heartbeat`, ...: Temporal's name for what ran out."""
    kind = timeout.type
    return "timeout" if kind is None else kind.name.lower()


def _recorded_progress(timeout: TimeoutError) -> list[Any] | None:
    """The sub-operations a lost attempt recorded: its last heartbeat's first detail.

    None when there are none, or when the receipt could not store them. Heartbeat
    details come from whichever worker ran the attempt (an older or foreign one, a tool
    that heartbeats by hand), so nothing about them is trusted: what `record_progress`
    would refuse (too deep, not JSON, a lone surrogate) is ignored here, with a warning,
    and the receipt keeps its previous snapshot, rather than failing the workflow task.
    `ToolProgress.record` refuses such a step up front, where the tool can see it.
    """
    try:
        details = timeout.last_heartbeat_details
        if not details or not isinstance(details[0], list):
            return None
        progress = list(details[0])
        canonical_json(progress, utf8=True)  # record_progress's one check, so it cannot raise
    except Exception as refused:
        workflow.logger.warning("ignored the heartbeat details of a lost attempt: %s", refused)
        return None
    return progress
