"""Tool calls that wait for a person: tools declared `@tool(approval=True)`.

Deterministic workflow code, the same shape as ambiguous receipts: the run suspends the
call, lists it in a query (`pending_approvals`), and goes on when an update
(`approve_call`) decides it. What the obvious version gets wrong, and where this one
prevents it:

- Holding the whole batch for one approval: only the call waits (`ask` is awaited
  inside that call's own task); the other calls of the batch run meanwhile.
- Asking before the receipt is read: a call the ledger would replay (it already ran)
  needs no approval, and a call that ran once must not run again because someone
  approved it twice. The loop asks only when the receipt decides to execute, and an
  approved call then runs under its receipt like any other.
- A person who never answers: the wait ends at the run's deadline or an interrupt, and
  the call is answered as not run, saying why.
- A decision for a call that is not waiting (a typo, a call already decided, a run
  that moved on): refused by the update's validator, so nothing is written.
- A decision bound only to a call id: servers that number calls per turn reuse `call_0`
  every turn, so a person who reviewed turn 0's `pay 100` could approve turn 1's
  `pay 999`. A decision names the tool, the hash of the arguments and the turn it was
  shown (`ApprovalDecision.for_call`); one that does not match what waits is refused,
  with what waits now.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from temporalio import workflow

from steadyloop._workflows.durable_time import Deadline

with workflow.unsafe.imports_passed_through():
    from steadyloop._run.steering import (
        ApprovalDecision,
        PendingApproval,
        rejected_outcome,
        unapproved_outcome,
    )
    from steadyloop.tools._payloads import ToolDescription, ToolInvocation, ToolOutcome


class Approvals:
    """The calls waiting for a person's approval, and the decisions that arrived."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingApproval] = {}
        self._decided: dict[str, ApprovalDecision] = {}

    def pending(self) -> list[PendingApproval]:
        return list(self._pending.values())

    def check(self, decision: ApprovalDecision) -> None:
        """The update's validator: a decision must name a call that waits, bound to
        exactly what was shown (tool, arguments hash, turn)."""
        view = self._pending.get(decision.call_id)
        if view is None:
            waiting = ", ".join(self._pending) or "none"
            raise ValueError(
                f"no call {decision.call_id!r} is waiting for approval; waiting: {waiting}"
            )
        shown = (decision.tool, decision.arguments_sha256, decision.turn)
        if shown != (view.tool, view.arguments_sha256, view.turn):
            unbound = None in shown
            raise ValueError(
                (
                    "a decision must name the tool, arguments_sha256 and turn of the call "
                    "it decides, as pending_approvals lists them"
                    if unbound
                    else "the decision was made for another call than the one waiting"
                )
                + f"; waiting as {view.call_id!r} now: {view.tool} "
                f"{json.dumps(view.arguments, ensure_ascii=False)} (turn {view.turn}, "
                f"arguments_sha256 {view.arguments_sha256})"
            )

    def decide(self, decision: ApprovalDecision) -> str:
        """Record a person's decision; the waiting call goes on."""
        view = self._pending.pop(decision.call_id)
        self._decided[decision.call_id] = decision
        verb = "approved" if decision.approved else "rejected"
        return f"{verb} {view.tool!r} call {view.call_id!r}"

    async def ask(
        self,
        description: ToolDescription,
        invocation: ToolInvocation,
        *,
        arguments_sha256: str,
        turn: int,
        deadline: Deadline,
        interrupted: Callable[[], str | None],
    ) -> ToolOutcome | None:
        """Wait for a person: None when approved (run it), else the call's answer."""
        call_id = invocation.call_id
        self._pending[call_id] = PendingApproval(
            call_id=call_id,
            tool=description.name,
            arguments=invocation.arguments,
            turn=turn,
            requested_at=workflow.now().isoformat(),
            arguments_sha256=arguments_sha256,
        )
        try:
            if not await deadline.wait(
                lambda: call_id in self._decided or interrupted() is not None
            ):
                return self._unanswered(description, call_id, "the run's deadline passed")
        except asyncio.CancelledError:  # the batch was cancelled around this call
            return self._unanswered(description, call_id, _stopped(interrupted()))
        decision = self._decided.pop(call_id, None)
        if decision is None:
            return self._unanswered(description, call_id, _stopped(interrupted()))
        if decision.approved:
            return None
        return rejected_outcome(description.name, decision.reason)

    def _unanswered(self, description: ToolDescription, call_id: str, why: str) -> ToolOutcome:
        self._pending.pop(call_id, None)
        return unapproved_outcome(description.name, why)


def _stopped(interrupt: str | None) -> str:
    if interrupt is None:
        return "the run was cancelled"
    return f"the run was interrupted ({interrupt})"
