"""`ToolLoopWorkflow`: model turn, tool batch, repeat, until the agent is done.

Deterministic code only: time is `workflow.now()` (read only where replay cannot branch
on it), all I/O is an activity, and the transcript lives in workflow state. The loop
owns its parts, each with its own state and its own guarantees, and shares the run's
state with them (`RunState`):

- `ModelTurn` (`model_turn`, `turn_stops`, `model_request`): one usable completion,
  routed over the run's endpoints, healed, continued, or a stop that says why;
- `ToolBatch` (`tool_batch`, `receipt_path`, `tool_attempt`): every call of the turn
  answered exactly once, in order, each under its content-keyed receipt;
- `HandOver` (`hand_over`): the state a run restores, carries to its next execution
  (continue-as-new) or returns, each made to fit one payload;
- `Steering`: people steer a running run: messages are appended at a turn boundary, a
  pause holds the run there, and an interrupt cancels the model turn or the tool batch
  in flight, answering every call; text the interrupted turn had shown is kept in
  `RunResult.partial`, so a resumed run goes on from it;
- `Approvals`: calls of tools declared `approval=True` wait for a person inside their
  receipt path; `LateResults`: what a timed-out tool returned after all, kept for the
  person who resolves the call;
- `ChildRuns`: a run carrying a `Delegation` gets the `delegate` tool, whose calls take
  the same receipt path and start child runs admitted by chain rules; the token budget
  counts finished children's tokens too.

An exception from workflow code that is not a Temporal failure would fail the workflow
*task*, which Temporal retries forever: deterministic errors are listed in
`failure_exception_types`, and an activity input that would pass the payload limit
fails the run with an error that names the cause (`payload_ceiling`).
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from steadyloop._chat import ChatMessage
    from steadyloop._output.forwarding import CLOSE_OUTPUT_STREAM_SIGNAL
    from steadyloop._receipts.decision import ReceiptKey
    from steadyloop._receipts.ledger import PackedLedger, resolution_text
    from steadyloop._run.models import (
        AmbiguousCall,
        ResolveReceipt,
        RunInput,
        RunProgress,
        RunResult,
        StopReason,
    )
    from steadyloop._run.steering import ApprovalDecision, PendingApproval, UserMessage
    from steadyloop._workflows.compaction_step import compact_at_boundary
    from steadyloop._workflows.routed_turn import read_health_ahead
    from steadyloop.errors import RECEIPT_RESOLUTION
    from steadyloop.telemetry._workflow import traced_turn
    from steadyloop.tools._payloads import LATE_TOOL_RESULT_SIGNAL, LateToolResult

from steadyloop._workflows.delegation import ChildRuns
from steadyloop._workflows.durable_time import Deadline, DurableClock
from steadyloop._workflows.hand_over import HandOver
from steadyloop._workflows.late_results import kept
from steadyloop._workflows.model_turn import INTERRUPT_SETTLE, ModelTurn
from steadyloop._workflows.payload_ceiling import PayloadCeiling
from steadyloop._workflows.run_state import RunState, Stop
from steadyloop._workflows.steering import Cut
from steadyloop._workflows.tool_attempt import note_late
from steadyloop._workflows.tool_batch import ToolBatch
from steadyloop._workflows.tool_disclosure import describes_locally, disclose_tools
from steadyloop._workflows.typed_answer import settle_answer


@workflow.defn(
    name="ToolLoopWorkflow",
    failure_exception_types=[ValidationError, ValueError, TypeError, LookupError],
)
class ToolLoopWorkflow:
    """Runs one agent: streams model turns, answers every tool call, stops with a reason."""

    def __init__(self) -> None:
        self._state = RunState()
        self._stop_reason: StopReason | None = None
        self._model = ModelTurn(self._state)
        self._tools = ToolBatch(self._state)
        self._hand_over = HandOver(self._state)

    # -- queries and signals ---------------------------------------------------------

    @workflow.query
    def progress(self) -> RunProgress:
        state = self._state
        return RunProgress(
            turn=state.turn,
            tool_calls=state.stats.tool_calls,
            tokens=state.stats.total_tokens,
            phase=state.phase,
            stop_reason=self._stop_reason,
            receipts=len(state.receipts),
            receipts_bytes=state.receipts.size_bytes(),
            ambiguous=len(state.ambiguous),
            cost_usd=state.stats.cost_usd,
            active_plugins=state.disclosure.active_plugins,
            activatable_plugins=state.disclosure.activatable_plugins,
            paused=state.steering.paused,
            pending_approvals=len(state.approvals.pending()),
            pending_messages=state.steering.messages_waiting,
            events=state.notes.timeline_count,
            tool_replays=state.stats.tool_replays,
        )

    @workflow.query
    def transcript(self) -> list[ChatMessage]:
        return list(self._state.transcript)

    @workflow.query
    def ambiguous_receipts(self) -> list[AmbiguousCall]:
        """Calls suspended because an earlier attempt may have taken effect."""
        return list(self._state.ambiguous.values())

    @workflow.update
    def resolve_receipt(self, request: ResolveReceipt) -> str:
        """A person's answer for an ambiguous call; the suspended call then goes on."""
        self._state.updates += 1
        view = self._state.ambiguous[request.key]
        written = self._state.receipts.resolve_ambiguous(
            ReceiptKey.from_text(request.key), view.attempt, request.resolution
        )
        if not written.applied:
            raise ApplicationError(f"not applied: {written}", type=RECEIPT_RESOLUTION)
        del self._state.ambiguous[request.key]
        said = resolution_text(request.resolution, view.attempt)
        self._state.late.settled(request.key)
        self._state.notes.decision(
            self._state.turn, "resolved", key=request.key, detail=said or request.resolution.kind
        )
        return f"{request.resolution.kind}: applied to {view.tool!r} (attempt {view.attempt})"

    @resolve_receipt.validator
    def _validate_resolve_receipt(self, request: ResolveReceipt) -> None:
        if request.key not in self._state.ambiguous:
            open_keys = ", ".join(self._state.ambiguous) or "none"
            raise ValueError(f"no ambiguous call with key {request.key!r}; open: {open_keys}")

    @workflow.signal(name=LATE_TOOL_RESULT_SIGNAL)
    def tool_result_after_timeout(self, late: LateToolResult) -> None:
        """What a tool returned after its attempt timed out (the worker sends it; Temporal
        refused the completion): kept for the person who resolves the call, while that
        attempt still owns its receipt. Never decides the call (`late_results`)."""
        late = kept(late)
        arrival = self._state.late.received(late, self._state.receipts.receipts.get(late.key))
        if arrival == "noted":
            note_late(self._state, late)
        elif arrival == "ignored":
            workflow.logger.info("a late tool result for a call that has moved on was ignored")

    @workflow.signal
    def interrupt(self, reason: str) -> None:
        """Stop now with `interrupted`: the model turn or tool batch in flight is
        cancelled, and every call asked for is answered (not run, or interrupted)."""
        self._state.steering.interrupt(reason)
        self._state.notes.decision(self._state.turn, "interrupt", detail=reason)

    @workflow.query
    def pending_approvals(self) -> list[PendingApproval]:
        """Calls of tools declared `approval=True` waiting for a person's decision."""
        return self._state.approvals.pending()

    @workflow.update
    def approve_call(self, decision: ApprovalDecision) -> str:
        """Approve a waiting call (it runs under its receipt) or reject it (the model
        reads the reason)."""
        self._state.updates += 1
        answer = self._state.approvals.decide(decision)
        self._state.notes.decision(
            self._state.turn,
            "approved" if decision.approved else "rejected",
            call_id=decision.call_id,
            detail=decision.reason,
        )
        return answer

    @approve_call.validator
    def _validate_approve_call(self, decision: ApprovalDecision) -> None:
        self._state.approvals.check(decision)

    @workflow.update
    def send_message(self, message: UserMessage) -> str:
        """A person's message, appended before the next model request."""
        self._state.updates += 1
        waiting = self._state.steering.send(message)
        self._state.notes.decision(self._state.turn, "message_sent", detail=message.content)
        return f"queued for turn {self._state.turn + 1} ({waiting} waiting)"

    @send_message.validator
    def _validate_send_message(self, message: UserMessage) -> None:
        if self._stop_reason is not None or self._state.steering.interrupted is not None:
            raise ValueError("the run is stopping; start a new run to go on")

    @workflow.update
    def pause(self) -> str:
        """Hold the run at its next turn boundary (nothing in flight); the deadline runs."""
        self._state.updates += 1
        if not self._state.steering.pause():
            return "already paused"
        return "pausing at the next turn boundary"

    @workflow.update
    def unpause(self) -> str:
        self._state.updates += 1
        return "going on" if self._state.steering.unpause() else "not paused"

    # -- the loop --------------------------------------------------------------------

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        state = self._state
        state.clock = DurableClock()
        state.deadline = Deadline(self._hand_over.restore(run))
        state.deadline.start()
        state.tenant = run.tenant_id
        state.events.begin(
            run.forwarding.host_max_events,
            run.forwarding.host_idle_close_s,
            forwarding=run.forwarding.enabled,
            continued=None if run.carried is None else run.carried.log_in_history,
        )
        if run.delegation is not None:
            state.child_runs = ChildRuns.begin(
                run, run.delegation, state.stats, state.receipts, state.deadline, state.clock
            )
        try:
            await self._describe_tools(run)
            turns_this_run = 0
            while True:
                await self._turn_boundary(run, turns_this_run)
                turns_this_run += 1
                await self._take_turn(run)
        except Stop as stop:
            return await self._stopped(run, stop)

    async def _describe_tools(self, run: RunInput) -> None:
        """The run's tools, described once; the first turn's endpoint health is read
        beside the description, not after it."""
        state = self._state
        if state.child_runs is not None:
            await state.child_runs.register()  # counted before it delegates
        locally = describes_locally(run)
        ahead = (
            asyncio.ensure_future(
                read_health_ahead(
                    run.resolved_route().endpoints, self._model.health_view, state.durable_clock()
                )
            )
            if locally
            else None
        )
        try:
            state.disclosure = await disclose_tools(run, locally=locally)
            if ahead is not None:
                await ahead
        finally:
            if ahead is not None and not ahead.done():
                ahead.cancel()
        state.ceiling = PayloadCeiling(state.disclosure.payload_limit_bytes)
        self._tools.receipts.surface_open_calls(run)

    async def _turn_boundary(self, run: RunInput, turns_this_run: int) -> None:
        """Between turns: hold while paused, stop at a bound, hand over when history is
        long, compact, and take the messages people sent."""
        state = self._state
        if state.steering.paused:
            if state.events.in_history and state.events.pending:
                await state.events.flush()  # nothing carries them while paused
            state.phase = "paused"
            await state.steering.hold_while_paused(state.deadline)
        state.check_bounds(run.limits)
        reason = self._hand_over.due(run, turns_this_run)
        if reason is not None:
            await self._hand_over.continue_as_new(run, reason)
        state.transcript = await compact_at_boundary(
            state.transcript, run.limits.compaction, state.stats
        )
        state.check_interrupt()  # a compaction activity may have taken a while
        state.transcript.extend(state.steering.take_messages())

    async def _take_turn(self, run: RunInput) -> None:
        """One model turn, then its tool batch; a final answer stops the run."""
        state = self._state
        state.turn += 1
        state.stats.turns = state.turn
        state.phase = "model"
        tools = state.offered()
        turn = await state.steering.unless_interrupted(
            traced_turn(state.turn, state.stats, self._model.complete(run, tools)),
            settle_within=INTERRUPT_SETTLE if run.forwarding.enabled else None,
        )
        if isinstance(turn, Cut):
            why = state.steering.interrupted
            kept_text = ""
            if run.forwarding.enabled:
                kept_text = await self._model.keep_shown_output(run, settled=turn.settled)
            counted = self._model.count_cut_turn()
            raise Stop("interrupted", f"{why} (the model turn was cancelled{counted}){kept_text}")
        turn = self._model.qualified(turn)
        message = turn.to_message()
        state.transcript.append(message)
        if not turn.tool_calls:
            if state.steering.messages_waiting:
                return  # a person spoke while the model answered: answer that too
            settle_answer(state, run.output_type, turn.text)
            return  # an invalid typed answer: the model is told why and asked again
        state.phase = "tools"
        said = None if run.forwarding.enabled else (message.content or "").strip()
        await self._tools.answer(run, tools, turn.tool_calls, said=said)

    async def _stopped(self, run: RunInput, stop: Stop) -> RunResult:
        """The run's result: its stop, what it kept, and what a resumed run needs."""
        state = self._state
        self._stop_reason = stop.reason
        state.phase = "done"
        # Messages a person sent that no request carried: kept, so nothing said is lost
        # (a run resumed from this one sends them).
        state.transcript.extend(state.steering.take_messages())
        state.notes.stop(state.turn, stop.reason, stop.detail, stop.answer, state.partial)
        tail = state.events.carried() or []  # a log in history: recorded with the result
        await state.events.flush()
        if run.forwarding.enabled or not state.events.in_history:
            await _close_output_stream(state.events.stream_id)
        state.stats.wall_time_s = (workflow.now() - state.started).total_seconds()
        return await self._hand_over.bounded_result(
            RunResult(
                final_answer=stop.answer,
                stop_reason=stop.reason,
                detail=stop.detail,
                output=stop.output,
                raw_output=stop.raw_output,
                transcript=state.transcript,
                stats=state.stats,
                partial=state.partial,
                active_plugins=state.disclosure.active_plugins,
                activatable_plugins=state.disclosure.activatable_plugins,
                receipt_scope=state.receipt_scope,
                receipts=PackedLedger.pack(state.receipts, state.transcript),
                log_events=tail,
            )
        )


async def _close_output_stream(stream_id: str) -> None:
    """Tell the run's output host the run is over (it drains to subscribers and ends).

    No host is fine: nothing was forwarded (or it already ended, idle); the run's end
    does not depend on it.
    """
    host = workflow.get_external_workflow_handle(stream_id)
    try:
        await host.signal(CLOSE_OUTPUT_STREAM_SIGNAL)
    except Exception:
        workflow.logger.info("no output stream to close for this run")
