"""`ReceiptPath`: one tool call under its content-keyed receipt, whatever happens.

A retried turn, a model asking again, or a repeat within one batch would repeat a side
effect. Each call is decided by the receipt ledger in workflow state, again after every
wait: replayed when complete; waited for while another attempt holds the lease (until
the receipt changes or the lease's timer fires); suspended for a person when an opaque
attempt ended without an outcome (ambiguous: it is not run again, the rest of the batch
goes on); held for a person when the tool is declared `approval=True`; otherwise
claimed and run (`ToolAttempt`). An attempt that ended without an outcome is retried by
the table, at most `TOOL_ATTEMPTS` times within one answer.

A resumed run inherits its predecessor's receipts: an opaque call it left without an
outcome is listed as ambiguous from the start (`surface_open_calls`), so a person can
resolve it before the model asks again.
"""

from __future__ import annotations

import asyncio
import builtins
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._receipts.decision import Ambiguous, ReceiptKey, Wait, receipt_key
    from steadyloop._run.models import AmbiguousCall, RunInput
    from steadyloop._stream.arguments import parse_tool_call_arguments
    from steadyloop._workflows.run_timeline import cut_copy_text, earlier_call
    from steadyloop.telemetry._workflow import receipt_decision
    from steadyloop.tools._payloads import ToolDescription, ToolInvocation, ToolOutcome

from steadyloop._workflows.late_results import late_reason
from steadyloop._workflows.run_state import RunState
from steadyloop._workflows.tool_attempt import ToolAttempt

# Attempts one call may take within one answer before the model is told it was lost.
TOOL_ATTEMPTS = 3


class ReceiptPath:
    """Answers one call through the ledger: replay, wait, suspend, ask, or attempt."""

    def __init__(self, state: RunState, attempts: ToolAttempt) -> None:
        self._state = state
        self._attempts = attempts

    async def run(
        self, description: ToolDescription, invocation: ToolInvocation, key: ReceiptKey
    ) -> ToolOutcome:
        """Run one call under its receipt: claim before, record after, replay if done.

        The workflow owns retries of tools (each activity runs one attempt). An attempt
        that ends without an outcome (timed out, worker lost) is retried by the table:
        a pure tool runs again; a resumable one is reclaimed with the sub-operations its
        last heartbeat recorded, after a grace for the lost attempt to notice it is
        dead; an opaque one keeps its receipt running until the lease expires, then is
        ambiguous, and waits for a person.
        """
        attempts_here = 0
        lost = ""
        approved = False
        while True:
            decision = self._state.receipts.decide(key, description.effect)
            receipt_decision(decision.kind, description.name)
            if decision.kind == "replay":
                self.replayed(invocation.call_id, key)
                return ToolOutcome(status="ok", content=decision.result)
            if decision.kind == "wait":
                await self._wait_out_lease(key, decision)
                continue
            if decision.kind == "ambiguous":
                # Do not guess: suspend this call (the rest of the batch goes on) until a
                # person says what happened through `resolve_receipt`.
                if not await self._await_resolution(key, description, invocation, decision):
                    return _unresolved(description)
                continue
            if description.approval and not approved:
                refused = await self._ask_approval(description, invocation, key)
                if refused is not None:
                    return refused
                approved = True
                continue  # decide again: the ledger may have moved while a person thought
            if attempts_here >= TOOL_ATTEMPTS:
                return ToolOutcome(status="tool_error", content=lost, error_type="ToolLost")
            attempts_here += 1
            if lost:
                self._state.stats.count_retry("tool_lost")
                self._state.event(
                    "tools",
                    "tool_retry",
                    f"attempt {attempts_here - 1} lost ({lost}), run again",
                    call_id=invocation.call_id,
                )
            outcome = await self._attempts.run(
                description, invocation, key, decision, after_lost=bool(lost)
            )
            if isinstance(outcome, ToolOutcome):
                return outcome
            lost = outcome

    async def _ask_approval(
        self, description: ToolDescription, invocation: ToolInvocation, key: ReceiptKey
    ) -> ToolOutcome | None:
        """Wait for a person's decision on a call of an `approval=True` tool: None when
        approved, else the answer the model reads."""
        state = self._state
        state.notes.approval_waiting(state.turn, invocation.call_id, description, key)
        await state.events.flush()
        refused = await state.approvals.ask(
            description,
            invocation,
            arguments_sha256=key.args_hash,
            turn=state.turn,
            deadline=state.deadline,
            interrupted=lambda: state.steering.interrupted,
        )
        if refused is None:
            await state.events.flush(carried=True)  # the decision, before the call runs
        return refused

    async def _wait_out_lease(self, key: ReceiptKey, decision: Wait) -> None:
        """Wait for another attempt's lease: until its receipt changes (the attempt
        reported) or the durable timer that ends the lease fires, then end it.

        Never "is the lease over yet?" against `workflow.now()`: the clock reads the time
        of the workflow task the code runs in, which after a local activity can differ
        live and on replay, and a branch on it (a timer, or none) wedges the run with a
        nondeterminism error. Here both branches start the same timer, and which one
        ends the wait is an event in history. The timer's length is read from the
        clock; a length is not part of what replay checks.
        """
        receipts = self._state.receipts
        current = receipts.get(key)
        remaining = max(decision.until - workflow.now(), timedelta(seconds=1))
        try:
            await workflow.wait_condition(
                lambda: receipts.get(key) is not current, timeout=remaining
            )
        except builtins.TimeoutError:
            self._state.durable_clock().woke()
            receipts.end_lease(key, decision.attempt)

    async def _await_resolution(
        self,
        key: ReceiptKey,
        description: ToolDescription,
        invocation: ToolInvocation,
        decision: Ambiguous,
    ) -> bool:
        """Wait for `resolve_receipt` on this call; False if the run stops first."""
        state = self._state
        view = state.ambiguous.get(key.text)
        if view is None:
            view = self._ambiguous_view(key, description, invocation, decision)
            state.ambiguous[key.text] = view
        view.call_ids.append(invocation.call_id)
        state.notes.ambiguous(state.turn, view)
        await state.events.flush()
        state.phase = "awaiting a person"
        # While the call waits, what a signal noted (its late result) is published then,
        # not at the resolution: the person resolving it needs to read it first.

        def decided() -> bool:
            return key.text not in state.ambiguous or state.steering.interrupted is not None

        try:
            while not decided():
                if not await state.deadline.wait(lambda: decided() or state.events.pending > 0):
                    return False  # the deadline passed first
                if not decided():
                    await state.events.flush()
        except asyncio.CancelledError:  # interrupted
            return False
        state.phase = "tools"
        return key.text not in state.ambiguous

    def _ambiguous_view(
        self,
        key: ReceiptKey,
        description: ToolDescription,
        invocation: ToolInvocation,
        decision: Ambiguous,
    ) -> AmbiguousCall:
        """The open call a person resolves: a timeout is told apart from a lost worker,
        and a result that came back after it is shown."""
        late_results = self._state.late
        why = late_results.why(key.text, decision.attempt)
        late = late_results.result(key.text, decision.attempt)
        reason = decision.reason
        if late is not None:
            reason = late_reason(description.name, late)
        elif why is not None:
            reason = (
                f"attempt {decision.attempt} of the opaque tool {description.name!r} "
                f"{why}; it may or may not have taken effect, and running it again "
                "could repeat the effect"
            )
        return AmbiguousCall(
            key=key.text,
            tool=description.name,
            arguments=invocation.arguments,
            attempt=decision.attempt,
            reason=reason,
            call_ids=[],
            lost=why,
            late_result=late,
        )

    def replayed(self, call_id: str, key: ReceiptKey, twin: str | None = None) -> None:
        """Count a call answered from its receipt, and say why it was not run."""
        state = self._state
        if twin is not None:
            why = f"same call twice in this batch ({twin}'s answer)"
        else:
            said = self._why_replayed(key)
            if said is None:
                return  # answered with the give-up, not a replay: its decision event says so
            why = said
        state.stats.tool_replays += 1
        state.notes.replayed(call_id, why)
        state.event("tools", "replay", f"replayed, not run: {why}", call_id=call_id)

    def _why_replayed(self, key: ReceiptKey) -> str | None:
        """Why a complete receipt answered the call, or None when it is not a replay (a
        person gave the call up in this run)."""
        state = self._state
        receipt = state.receipts.get(key)
        earlier = earlier_call(state.transcript, key.text, state.tenant, state.receipt_scope)
        resumed = state.receipt_scope != workflow.info().workflow_id
        given_up = receipt is not None and receipt.resolution == "give_up" and earlier is None
        if given_up and not resumed:
            return None
        if given_up:
            why = "given up by a person in the run this one resumes"
        elif receipt is not None and receipt.resolution == "happened":
            why = "a person resolved an earlier attempt as done"
        elif earlier is not None:
            why = f"same call earlier in the run (turn {earlier[0]}, {earlier[1]})"
        elif resumed:
            why = "completed by the run this one resumes"
        else:
            why = "receipt already complete (a redelivered turn)"
        if receipt is not None and receipt.truncated and receipt.result is not None:
            why += "; " + cut_copy_text(receipt.result, receipt.result_bytes)
        return why

    def surface_open_calls(self, run: RunInput) -> None:
        """List as ambiguous every call the ledger holds running that the table would
        not run again (an opaque attempt with no outcome), before the model asks.

        Such rows come from the run this one resumes (or an earlier execution): a
        person must be able to see and resolve them (`ambiguous_receipts`,
        `resolve_receipt`) without waiting for the model to repeat the call. A tool no
        longer offered counts as opaque: nothing says it is safe to repeat.
        """
        state = self._state
        tools = state.offered()
        arguments: dict[str, dict[str, Any]] | None = None
        for key, receipt in state.receipts.items():
            if receipt.status != "running" or key.text in state.ambiguous:
                continue
            description = tools.get(key.tool)
            decision = state.receipts.decide(
                key, "opaque" if description is None else description.effect
            )
            if not isinstance(decision, Ambiguous):
                continue
            if arguments is None:
                arguments = self._arguments_by_key(run)
            state.ambiguous[key.text] = AmbiguousCall(
                key=key.text,
                tool=key.tool,
                arguments=arguments.get(key.text, {}),
                attempt=decision.attempt,
                reason=(
                    f"attempt {decision.attempt} of {key.tool!r} ended without an outcome "
                    "before this run (or the run it resumes) stopped or handed over; it may "
                    "or may not have taken effect, and running it again could repeat the effect"
                ),
                call_ids=[],
            )

    def _arguments_by_key(self, run: RunInput) -> dict[str, dict[str, Any]]:
        """The parsed arguments of every call in the transcript, by receipt key."""
        found: dict[str, dict[str, Any]] = {}
        for message in self._state.transcript:
            for call in message.tool_calls:
                reading = parse_tool_call_arguments(call)
                if reading.kind != "parsed":
                    continue
                try:
                    key = receipt_key(
                        run.tenant_id, self._state.receipt_scope, call.name, reading.arguments
                    )
                except ValueError:
                    continue
                found.setdefault(key.text, dict(reading.arguments))
        return found


def _unresolved(description: ToolDescription) -> ToolOutcome:
    """The answer to an ambiguous call nobody resolved before the run stopped."""
    return ToolOutcome(
        status="tool_error",
        content=(
            f"Not run again: an attempt of {description.name!r} with these "
            "arguments ended without a result, so it may already have taken "
            "effect, and nobody resolved it before the run stopped."
        ),
        error_type="AmbiguousReceipt",
    )
