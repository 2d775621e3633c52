"""`ToolLoopWorkflow`: model turn, tool batch, repeat, until the agent is done.

Deterministic code only: time is `workflow.now()`, all I/O is an activity, and the
transcript lives in workflow state. What the obvious loop gets wrong, and where this
one prevents it:

- An assistant tool call left unanswered makes the provider reject the next request.
  Every call gets exactly one tool message with its id, whatever happened: run, unknown
  tool, unparseable arguments, unsupported type, the tool raised, timed out, or the run
  was interrupted before the batch ran (`_answer_batch`).
- A model turn that fails is retried, sent to another endpoint, or stopped by one table
  (`routed_completion` over the run's route, `RunInput.resolved_route`), and an attempt
  whose output a person already saw is never repeated anywhere: the run stops
  `output_interrupted` with what was shown (`RunResult.partial`). Every worker running
  this workflow registers the endpoint-health activities the route reads.
- An answer the token limit cut is not a final answer: the run stops `max_tokens` with
  the text as its partial output, or continues it when the run asks; so is an answer
  whose stream failed once shown (`continuation`), and the token budget cuts the turn in
  flight (`output_budget_tokens`): see `turn_continuation`.
- A defective completion (dropped deltas, truncated arguments, no text and no calls) is
  never dispatched: it is retried as a fresh completion within its kind's budget, and
  never appended, so the transcript stays valid when the budget is spent.
- Arguments are read for the whole batch before any tool runs (two phases), so a batch
  with one unreadable call does not half-run; results keep the model's order even
  though calls run concurrently.
- An exception from workflow code that is not a Temporal failure would fail the
  workflow *task*, which Temporal retries forever: deterministic errors are listed in
  `failure_exception_types`, and an activity input that would pass the payload limit
  fails the run with an error that names the cause (`payload_ceiling`): Temporal's 2 MB
  when payloads stay inline, a larger bound the worker reports when its external
  payload storage takes them out of history.
- A retried turn, a model asking again, or a repeat within one batch would repeat a
  side effect. Each call runs under a content-keyed receipt in workflow state
  (`_run_guarded`): claimed before the activity, recorded after, replayed when
  complete; tool activities run one attempt each, so Temporal never re-runs an effect
  behind the table's back. An opaque call whose attempt ended without an outcome is
  ambiguous and is not run again. A run may ask for its short pure tools as local
  activities (`local_pure_tools_s`): the same receipt path, only pure calls (a local
  activity is retried with the workflow task, which only a call that may run twice
  survives).
- What a run carries to its next execution (continue-as-new) or returns (`RunResult`,
  which `steadyloop resume` hands to the next run) is one payload, refused over the
  limit like any other, and a refused continue-as-new is a workflow task retried
  forever. Receipts travel packed against the transcript beside them (a result is not
  carried twice: `PackedLedger`), the whole is measured against the run's payload
  ceiling, receipts' own results are cut short when it would not fit, and a run whose
  transcript alone no longer fits stops `state_too_large` (`_continue_as_new`,
  `_bounded_result`).
- A resumed run inherits its predecessor's receipts and their key scope
  (`RunInput.inherited`), so what the predecessor completed replays, and an opaque call
  it left without an outcome is listed as ambiguous from the start
  (`_surface_open_calls`).
- A run carrying a `Delegation` gets the `delegate` tool; its calls take the same
  receipt path and start child runs admitted by chain rules (`delegation.ChildRuns`).
  The token budget counts finished children's tokens too, and a child gets at most
  what is left of it.
- A run with on-demand plugins gets `activate_plugin`; activation is workflow state,
  answered without an activity or a receipt (`tool_disclosure`, `steadyloop.tools.disclosure`).
- People steer a running run (`steering.Steering`): messages are appended at a turn
  boundary, a pause holds the run there, and an interrupt cancels the model turn or the
  tool batch in flight, answering every call. Text the interrupted turn had already
  shown is kept in `RunResult.partial` (`_keep_shown_output`), so a resumed run goes on
  from it. Calls of tools declared
  `approval=True` wait for a person inside their receipt path (`approvals.Approvals`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from steadyloop.chains.delegation_tool import DELEGATE_TOOL
    from steadyloop.chat import ChatMessage, ToolCall
    from steadyloop.errors import RECEIPT_CLAIM, RECEIPT_RESOLUTION, SteadyloopError
    from steadyloop.events.models import EventKind, EventPhase
    from steadyloop.history.budget import (
        MAX_INLINE_PAYLOAD_BYTES,
        ContinueAsNewReason,
        HistoryReading,
        HistoryThresholds,
        continue_as_new_reason,
    )
    from steadyloop.history.call_ids import follow_renamed_calls, qualify_reused_call_ids
    from steadyloop.history.healing import validate_and_heal
    from steadyloop.output.forwarding import (
        CLOSE_OUTPUT_STREAM_SIGNAL,
        ForwardedOutput,
        ForwardTarget,
        PartialOutput,
        ReadForwardedOutput,
    )
    from steadyloop.receipts.canonical_json import canonical_json
    from steadyloop.receipts.decision import Ambiguous, Execute, ReceiptKey, Wait, receipt_key
    from steadyloop.receipts.ledger import (
        MIN_RESULT_LIMIT_BYTES,
        PackedLedger,
        ReceiptLedger,
        resolution_text,
    )
    from steadyloop.routing.pricing import price_for
    from steadyloop.routing.provider_profiles import transcript_rules
    from steadyloop.routing.route_plan import RoutePlan
    from steadyloop.run.models import (
        AmbiguousCall,
        CarriedState,
        ResolveReceipt,
        RunInput,
        RunProgress,
        RunResult,
        RunStats,
        StopReason,
    )
    from steadyloop.run.steering import (
        ApprovalDecision,
        PendingApproval,
        UserMessage,
        interrupted_outcome,
    )
    from steadyloop.stops.budget import CHARS_PER_TOKEN, estimate_tokens
    from steadyloop.stream.arguments import parse_tool_call_arguments
    from steadyloop.stream.completion import AssembledTurn, CompletionRequest
    from steadyloop.telemetry.workflow import (
        attempt_lost,
        receipt_decision,
        traced_tool,
        traced_turn,
    )
    from steadyloop.tools.disclosure import PluginDisclosure
    from steadyloop.tools.payloads import (
        LATE_TOOL_RESULT_SIGNAL,
        RUN_TOOL_ACTIVITY,
        LateToolResult,
        ToolDescription,
        ToolInvocation,
        ToolOutcome,
    )
    from steadyloop.workflows.compaction_step import compact_at_boundary
    from steadyloop.workflows.routed_turn import (
        HealthView,
        RouteAttempt,
        RoutedTurn,
        read_health_ahead,
        read_shown,
        routed_completion,
    )
    from steadyloop.workflows.run_timeline import (
        attempt_events,
        cut_copy_text,
        earlier_call,
        healing_text,
        passback_dropped_text,
        plan_events,
    )

from steadyloop.workflows.approvals import Approvals
from steadyloop.workflows.delegation import ChildRuns, innermost_message
from steadyloop.workflows.durable_time import Deadline, DurableClock
from steadyloop.workflows.event_log import EventLog
from steadyloop.workflows.late_results import (
    LateResults,
    kept,
    late_reason,
    late_text,
    lost_text,
)
from steadyloop.workflows.payload_ceiling import PayloadCeiling, payload_bytes
from steadyloop.workflows.run_events import RunEventNotes
from steadyloop.workflows.steering import Cut, Steering
from steadyloop.workflows.tool_disclosure import describes_locally, disclose_tools
from steadyloop.workflows.turn_continuation import TurnContinuation, cut_by_length

# A receipt's lease outlives its activity's timeout by this much, so the timeout (not
# the lease) is what ends a lost attempt first.
LEASE_MARGIN = timedelta(seconds=5)
# Attempts one call may take within one answer before the model is told it was lost.
TOOL_ATTEMPTS = 3
# How long an interrupt waits for a forwarding model activity to confirm its cancel
# (a live worker hears of it at its next heartbeat, about a second, then sends its last
# batch), and how long reading the shown text back from the output host may take.
INTERRUPT_SETTLE = timedelta(seconds=10)
INTERRUPT_READ = timedelta(seconds=15)
T = TypeVar("T")


class _Stop(SteadyloopError):
    """Ends the loop at a turn boundary with a named stop reason."""

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@workflow.defn(
    name="ToolLoopWorkflow",
    failure_exception_types=[ValidationError, ValueError, TypeError, LookupError],
)
class ToolLoopWorkflow:
    """Runs one agent: streams model turns, answers every tool call, stops with a reason."""

    def __init__(self) -> None:
        self._transcript: list[ChatMessage] = []
        self._stats = RunStats()
        self._turn = 0
        self._phase = "starting"
        self._stop_reason: StopReason | None = None
        self._steering = Steering()
        self._approvals = Approvals()
        self._receipts = ReceiptLedger()
        # The `run` part of receipt keys: the workflow id, or the scope a resumed run
        # inherited from the run it resumes (so that run's receipts match).
        self._receipt_scope = ""
        self._ambiguous: dict[str, AmbiguousCall] = {}
        self._late = LateResults()  # timed-out attempts and what came back late (issue 25)
        self._deadline = Deadline(None)  # ended by its timer (`durable_time`)
        self._clock: DurableClock | None = None  # what time-dependent decisions read
        self._partial: PartialOutput | None = None
        self._started = datetime.min  # set by `_restore` when the run begins
        self._pool = asyncio.Semaphore(1)  # replaced per batch with the run's pool size
        self._child_runs: ChildRuns | None = None  # set when the run may delegate
        self._disclosure = PluginDisclosure.none()  # the run's tools, once described
        self._ceiling = PayloadCeiling()  # the limit on one activity input, once known
        self._updates = 0  # updates handled by this execution (Temporal caps them)
        self._health_view = HealthView()  # endpoint health read by earlier turns
        # (turn, endpoint) pairs whose dropped pass-back items the timeline already told.
        self._passback_noted: set[tuple[int, str]] = set()
        self._tenant = "default"  # the run's tenant, for receipt keys (set by `run`)
        self._local_pure_tools_s: float | None = None  # set by `run`
        self._events = EventLog()  # the run's events for followers, published per step
        self._notes = RunEventNotes(self._events)

    # -- queries and signals ---------------------------------------------------------

    @workflow.query
    def progress(self) -> RunProgress:
        return RunProgress(
            turn=self._turn,
            tool_calls=self._stats.tool_calls,
            tokens=self._stats.total_tokens,
            phase=self._phase,
            stop_reason=self._stop_reason,
            receipts=len(self._receipts),
            receipts_bytes=self._receipts.size_bytes(),
            ambiguous=len(self._ambiguous),
            cost_usd=self._stats.cost_usd,
            active_plugins=self._disclosure.active_plugins,
            activatable_plugins=self._disclosure.activatable_plugins,
            paused=self._steering.paused,
            pending_approvals=len(self._approvals.pending()),
            pending_messages=self._steering.messages_waiting,
            events=self._notes.timeline_count,
            tool_replays=self._stats.tool_replays,
        )

    @workflow.query
    def transcript(self) -> list[ChatMessage]:
        return list(self._transcript)

    @workflow.query
    def ambiguous_receipts(self) -> list[AmbiguousCall]:
        """Calls suspended because an earlier attempt may have taken effect."""
        return list(self._ambiguous.values())

    @workflow.update
    def resolve_receipt(self, request: ResolveReceipt) -> str:
        """A person's answer for an ambiguous call; the suspended call then goes on."""
        self._updates += 1
        view = self._ambiguous[request.key]
        written = self._receipts.resolve_ambiguous(
            ReceiptKey.from_text(request.key), view.attempt, request.resolution
        )
        if not written.applied:
            raise ApplicationError(f"not applied: {written}", type=RECEIPT_RESOLUTION)
        del self._ambiguous[request.key]
        said = resolution_text(request.resolution, view.attempt)
        self._late.settled(request.key)
        self._notes.decision(
            self._turn, "resolved", key=request.key, detail=said or request.resolution.kind
        )
        return f"{request.resolution.kind}: applied to {view.tool!r} (attempt {view.attempt})"

    @resolve_receipt.validator
    def _validate_resolve_receipt(self, request: ResolveReceipt) -> None:
        if request.key not in self._ambiguous:
            open_keys = ", ".join(self._ambiguous) or "none"
            raise ValueError(f"no ambiguous call with key {request.key!r}; open: {open_keys}")

    @workflow.signal(name=LATE_TOOL_RESULT_SIGNAL)
    def tool_result_after_timeout(self, late: LateToolResult) -> None:
        """What a tool returned after its attempt timed out (the worker sends it; Temporal
        refused the completion): kept for the person who resolves the call, while that
        attempt still owns its receipt. Never decides the call (`late_results`)."""
        late = kept(late)
        arrival = self._late.received(late, self._receipts.receipts.get(late.key))
        if arrival == "noted":
            self._note_late(late)
        elif arrival == "ignored":
            workflow.logger.info("a late tool result for a call that has moved on was ignored")

    def _note_late(self, late: LateToolResult) -> None:
        """A late result of a timed-out attempt: on the timeline, and on the open call."""
        tool = ReceiptKey.from_text(late.key).tool
        view = self._ambiguous.get(late.key)
        if view is not None:
            view.late_result = late
            view.reason = late_reason(tool, late)
        call_id = view.call_ids[0] if view is not None and view.call_ids else late.call_id
        self._event("tools", "tool_late", late_text(late), call_id=call_id)
        if view is not None:  # the open call again, with its late result (state only)
            self._notes.ambiguous(self._turn, view)

    @workflow.signal
    def interrupt(self, reason: str) -> None:
        """Stop now with `interrupted`: the model turn or tool batch in flight is
        cancelled, and every call asked for is answered (not run, or interrupted)."""
        self._steering.interrupt(reason)
        self._notes.decision(self._turn, "interrupt", detail=reason)

    @workflow.query
    def pending_approvals(self) -> list[PendingApproval]:
        """Calls of tools declared `approval=True` waiting for a person's decision."""
        return self._approvals.pending()

    @workflow.update
    def approve_call(self, decision: ApprovalDecision) -> str:
        """Approve a waiting call (it runs under its receipt) or reject it (the model
        reads the reason)."""
        self._updates += 1
        answer = self._approvals.decide(decision)
        self._notes.decision(
            self._turn,
            "approved" if decision.approved else "rejected",
            call_id=decision.call_id,
            detail=decision.reason,
        )
        return answer

    @approve_call.validator
    def _validate_approve_call(self, decision: ApprovalDecision) -> None:
        self._approvals.check(decision)

    @workflow.update
    def send_message(self, message: UserMessage) -> str:
        """A person's message, appended before the next model request."""
        self._updates += 1
        waiting = self._steering.send(message)
        self._notes.decision(self._turn, "message_sent", detail=message.content)
        return f"queued for turn {self._turn + 1} ({waiting} waiting)"

    @send_message.validator
    def _validate_send_message(self, message: UserMessage) -> None:
        if self._stop_reason is not None or self._steering.interrupted is not None:
            raise ValueError("the run is stopping; start a new run to go on")

    @workflow.update
    def pause(self) -> str:
        """Hold the run at its next turn boundary (nothing in flight); the deadline runs."""
        self._updates += 1
        if not self._steering.pause():
            return "already paused"
        return "pausing at the next turn boundary"

    @workflow.update
    def unpause(self) -> str:
        self._updates += 1
        return "going on" if self._steering.unpause() else "not paused"

    # -- the loop --------------------------------------------------------------------

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        self._clock = DurableClock()
        self._deadline = Deadline(self._restore(run))
        self._deadline.start()
        self._tenant = run.tenant_id
        self._local_pure_tools_s = run.local_pure_tools_s
        self._events.begin(
            run.forwarding.host_max_events,
            run.forwarding.host_idle_close_s,
            forwarding=run.forwarding.enabled,
            continued=None if run.carried is None else run.carried.log_in_history,
        )
        if run.delegation is not None:
            self._child_runs = ChildRuns.begin(
                run, run.delegation, self._stats, self._receipts, self._deadline, self._clock
            )
        turns_this_run = 0
        final_answer: str | None = None
        try:
            if self._child_runs is not None:
                await self._child_runs.register()  # counted before it delegates (issue 15)
            locally = describes_locally(run)
            # The first turn's health is read beside the description, not after it.
            ahead = (
                asyncio.ensure_future(
                    read_health_ahead(
                        run.resolved_route().endpoints, self._health_view, self._clock
                    )
                )
                if locally
                else None
            )
            try:
                self._disclosure = await disclose_tools(run, locally=locally)
                if ahead is not None:
                    await ahead
            finally:
                if ahead is not None and not ahead.done():
                    ahead.cancel()
            self._ceiling = PayloadCeiling(self._disclosure.payload_limit_bytes)
            self._surface_open_calls(run)
            while True:
                if self._steering.paused:
                    if self._events.in_history and self._events.pending:
                        await self._events.flush()  # nothing carries them while paused
                    self._phase = "paused"
                    await self._steering.hold_while_paused(self._deadline)
                self._check_bounds(run)
                reason = self._should_continue_as_new(run, turns_this_run)
                if reason is not None:
                    await self._continue_as_new(run, reason)
                self._transcript = await compact_at_boundary(
                    self._transcript, run.limits.compaction, self._stats
                )
                self._check_interrupt()  # a compaction activity may have taken a while
                self._transcript.extend(self._steering.take_messages())
                turns_this_run += 1
                self._turn += 1
                self._stats.turns = self._turn
                self._phase = "model"
                tools = self._offered()
                turn = await self._steering.unless_interrupted(
                    traced_turn(self._turn, self._stats, self._model_turn(run, tools)),
                    settle_within=INTERRUPT_SETTLE if run.forwarding.enabled else None,
                )
                if isinstance(turn, Cut):
                    why = self._steering.interrupted
                    kept = ""
                    if run.forwarding.enabled:
                        kept = await self._keep_shown_output(run, settled=turn.settled)
                    counted = self._count_cut_turn()
                    raise _Stop(
                        "interrupted", f"{why} (the model turn was cancelled{counted}){kept}"
                    )
                turn = self._qualified(turn)
                message = turn.to_message()
                self._transcript.append(message)
                if not turn.tool_calls:
                    if self._steering.messages_waiting:
                        continue  # a person spoke while the model answered: answer that too
                    final_answer = turn.text
                    raise _Stop("final_answer", "the model answered without tool calls")
                self._phase = "tools"
                said = None if run.forwarding.enabled else (message.content or "").strip()
                await self._answer_batch(run, tools, turn.tool_calls, said=said)
        except _Stop as stop:
            self._stop_reason = stop.reason
            self._phase = "done"
            # Messages a person sent that no request carried: kept, so nothing said is lost
            # (a run resumed from this one sends them).
            self._transcript.extend(self._steering.take_messages())
            self._notes.stop(self._turn, stop.reason, stop.detail, final_answer, self._partial)
            tail = self._events.carried() or []  # a log in history: recorded with the result
            await self._events.flush()
            if run.forwarding.enabled or not self._events.in_history:
                await _close_output_stream(self._events.stream_id)
            self._stats.wall_time_s = (workflow.now() - self._started).total_seconds()
            return await self._bounded_result(
                RunResult(
                    final_answer=final_answer,
                    stop_reason=stop.reason,
                    detail=stop.detail,
                    transcript=self._transcript,
                    stats=self._stats,
                    partial=self._partial,
                    active_plugins=self._disclosure.active_plugins,
                    activatable_plugins=self._disclosure.activatable_plugins,
                    receipt_scope=self._receipt_scope,
                    receipts=PackedLedger.pack(self._receipts, self._transcript),
                    log_events=tail,
                )
            )

    async def _bounded_result(self, result: RunResult) -> RunResult:
        """`result`, made to fit one payload: a result over the limit would be refused at
        completion and the workflow task retried forever.

        First the receipts' own copies of results are cut short, then the receipts are
        left out (a run resuming this one would then run again what it completed, so
        the detail says so), then the oldest messages are (the transcript can pass the
        limit only through tool results added after the last model request).
        """
        size = payload_bytes(result)
        limit = await self._ceiling.limit_for(size)
        if size > limit and result.log_events:  # for people only: the first thing to go
            result.log_events = []  # (followers then raise StopUnread)
            size = payload_bytes(result)
        if size <= limit or result.receipts is None:
            return result
        cut = result.receipts.shrink_results(MIN_RESULT_LIMIT_BYTES)
        size = payload_bytes(result)
        if size <= limit:
            result.detail += f" (the results of {cut} receipt(s) were cut to fit the result)"
            return result
        result.receipts = None
        result.detail += (
            " (its receipts were left out: with them the result would pass the "
            f"{limit:,}-byte payload limit; a run resuming it does not know what it completed)"
        )
        if payload_bytes(result) <= limit:
            return result
        messages = result.transcript
        low, high = 1, len(messages)  # drop `high` oldest messages: fits (nothing left)
        while low < high:
            middle = (low + high) // 2
            result.transcript = messages[middle:]
            if payload_bytes(result) <= limit:
                high = middle
            else:
                low = middle + 1
        result.transcript = messages[high:]
        result.detail += f" (its {high} oldest message(s) were left out to fit the result)"
        return result

    def _restore(self, run: RunInput) -> datetime | None:
        """State from the run this one continues, or a fresh start; returns the deadline."""
        carried = run.carried
        if carried is None or carried.started is None:
            self._started = workflow.now()
        else:
            self._started = datetime.fromisoformat(carried.started)
        self._receipt_scope = workflow.info().workflow_id
        if carried is None:
            self._transcript = _initial_transcript(run)
            if run.inherited is not None:
                # A resumed run: the stopped run's receipts, under its key scope. Its
                # attempts can never report here, so their leases end now.
                self._receipt_scope = run.inherited.scope
                self._receipts = self._unpacked(run.inherited.receipts, list(run.messages))
                self._receipts.release_leases()
            if run.limits.deadline_s is None:
                return None
            return workflow.now() + timedelta(seconds=run.limits.deadline_s)
        self._transcript = list(carried.transcript)
        if carried.receipt_scope is not None:
            self._receipt_scope = carried.receipt_scope
        if carried.packed_receipts is not None:
            self._receipts = self._unpacked(carried.packed_receipts, self._transcript)
        else:  # carried by an earlier version: every result in the ledger itself
            self._receipts = carried.receipts
        # An attempt the last execution left running can never report to this one: its
        # lease ends now, so a decision on it needs no timer (and no clock).
        self._receipts.release_leases()
        self._steering = Steering(carried.steering)
        self._stats = carried.stats
        self._turn = carried.turn
        self._notes.timeline_count = carried.timeline_count
        return None if carried.deadline is None else datetime.fromisoformat(carried.deadline)

    @staticmethod
    def _unpacked(packed: PackedLedger, transcript: list[ChatMessage]) -> ReceiptLedger:
        ledger, lost = packed.unpack(transcript)
        if lost:
            workflow.logger.warning(
                "%d receipt result(s) could not be read back from the carried transcript; "
                "those calls replay a note saying so and are not run again",
                lost,
            )
        return ledger

    def _surface_open_calls(self, run: RunInput) -> None:
        """List as ambiguous every call the ledger holds running that the table would
        not run again (an opaque attempt with no outcome), before the model asks.

        Such rows come from the run this one resumes (or an earlier execution): a
        person must be able to see and resolve them (`ambiguous_receipts`,
        `resolve_receipt`) without waiting for the model to repeat the call. A tool no
        longer offered counts as opaque: nothing says it is safe to repeat.
        """
        tools = self._offered()
        arguments: dict[str, dict[str, Any]] | None = None
        for key, receipt in self._receipts.items():
            if receipt.status != "running" or key.text in self._ambiguous:
                continue
            description = tools.get(key.tool)
            decision = self._receipts.decide(
                key, "opaque" if description is None else description.effect
            )
            if not isinstance(decision, Ambiguous):
                continue
            if arguments is None:
                arguments = self._arguments_by_key(run)
            self._ambiguous[key.text] = AmbiguousCall(
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
        for message in self._transcript:
            for call in message.tool_calls:
                reading = parse_tool_call_arguments(call)
                if reading.kind != "parsed":
                    continue
                try:
                    key = receipt_key(
                        run.tenant_id, self._receipt_scope, call.name, reading.arguments
                    )
                except ValueError:
                    continue
                found.setdefault(key.text, dict(reading.arguments))
        return found

    def _should_continue_as_new(
        self, run: RunInput, turns_this_run: int
    ) -> ContinueAsNewReason | None:
        """Why to hand over now (Temporal's suggestion, or this execution's turns, history
        events, bytes or updates past the run's limits), or None."""
        info = workflow.info()
        limits = run.limits
        return continue_as_new_reason(
            HistoryReading(
                turns=turns_this_run,
                events=info.get_current_history_length(),
                bytes=info.get_current_history_size(),
                updates=self._updates,
                suggested=info.is_continue_as_new_suggested(),
            ),
            HistoryThresholds(
                turns=limits.continue_as_new_after_turns,
                events=limits.continue_as_new_at_events,
                bytes=limits.continue_as_new_at_bytes,
                updates=limits.continue_as_new_at_updates,
            ),
        )

    async def _continue_as_new(self, run: RunInput, reason: ContinueAsNewReason) -> NoReturn:
        """Hand over at a turn boundary, after handlers finish: no activity is in flight.

        A signal that arrived while handlers finished (an interrupt) is honoured here
        rather than lost with this execution."""
        self._phase = "continuing as new"
        while True:
            await workflow.wait_condition(workflow.all_handlers_finished)
            if self._events.pending:  # a handler noted a decision: publish it first
                await self._events.flush()
                continue
            self._check_bounds(run)
            successor = self._successor(run, reason)
            size = payload_bytes(successor)
            limit = self._ceiling.known_limit(size)
            if limit is None:
                # Ask the worker (an activity: handlers may run meanwhile), then build
                # the state again from what it is once they have finished.
                await self._ceiling.limit_for(size)
                continue
            break
        if size > limit:
            carried = successor.carried
            assert carried is not None and carried.packed_receipts is not None
            cut = carried.packed_receipts.shrink_results(MIN_RESULT_LIMIT_BYTES)
            carried.stats.compactions["receipt_results"] = (
                carried.stats.compactions.get("receipt_results", 0) + cut
            )
            shrunk = payload_bytes(successor)
            if shrunk > limit:
                raise _Stop(
                    "state_too_large",
                    f"the state the run carries to its next execution is {shrunk:,} bytes "
                    f"({size:,} before the receipts' results were cut), over the {limit:,}-"
                    "byte payload limit: the transcript alone is too large. Compact it "
                    "(RunLimits.compaction) or run the workers with external payload "
                    "storage (STEADYLOOP_BLOB_DIR).",
                )
        workflow.continue_as_new(successor)

    def _successor(self, run: RunInput, reason: ContinueAsNewReason) -> RunInput:
        """The input of the next execution: this one's state, receipts packed against the
        transcript they travel with (`PackedLedger`), so no result is carried twice."""
        stats = self._stats.model_copy(deep=True)
        stats.continued_as_new[reason] = stats.continued_as_new.get(reason, 0) + 1
        carried = CarriedState(
            transcript=self._transcript,
            packed_receipts=PackedLedger.pack(self._receipts, self._transcript),
            receipt_scope=self._receipt_scope,
            stats=stats,
            turn=self._turn,
            deadline=None if self._deadline.at is None else self._deadline.at.isoformat(),
            started=self._started.isoformat(),
            children=[] if self._child_runs is None else self._child_runs.children,
            activated_plugins=self._disclosure.activated,
            steering=self._steering.state,
            timeline_count=self._notes.timeline_count,
            log_in_history=self._events.in_history,
        )
        return run.model_copy(
            update={"carried": carried, "prompt": None, "messages": [], "inherited": None}
        )

    def _check_interrupt(self) -> None:
        if self._steering.interrupted is not None:
            raise _Stop("interrupted", self._steering.interrupted)

    def _check_bounds(self, run: RunInput, *, boundary: bool = True) -> None:
        """Stop when a bound is reached. Within a turn (`boundary=False`: between the
        pieces of a continued answer) the turn count is not a bound: the turn is one."""
        self._check_interrupt()
        if self._deadline.passed:
            raise _Stop("deadline", f"the run's deadline of {run.limits.deadline_s}s passed")
        budget = run.limits.token_budget
        # Children's tokens count: a run cannot escape its budget by delegating.
        if budget is not None and self._stats.tokens_with_children >= budget:
            raise _Stop("token_budget", self._stats.budget_use(budget))
        if boundary and self._turn >= run.limits.max_turns:
            raise _Stop("max_turns", f"{run.limits.max_turns} model turns taken")

    def _offered(self) -> dict[str, ToolDescription]:
        """This turn's tools: core and built-in first, then the active plugins' appended."""
        tools = self._disclosure.core()
        if self._child_runs is not None:
            tools = self._child_runs.offer(tools)
        return self._disclosure.with_active_plugins(tools)

    # -- one model turn --------------------------------------------------------------

    async def _model_turn(self, run: RunInput, tools: dict[str, ToolDescription]) -> AssembledTurn:
        """A usable completion. Each completion is routed (`routed_completion`: retries,
        traversal to other candidates and breakers, by one table); a defective one is
        replaced by a fresh completion within its kind's budget; an attempt whose output
        was shown is never repeated."""
        route = run.resolved_route()
        heartbeat_s = run.limits.model_heartbeat_timeout_s
        spent: dict[str, int] = {}
        attempt = 1  # the number of the turn's next attempt, across fresh completions
        going_on = TurnContinuation(run.continuation, run.provider_profile)
        while True:
            # Before every completion: a transcript the provider would refuse is healed.
            self._transcript, healed = validate_and_heal(
                self._transcript, transcript_rules(run.provider_profile)
            )
            self._stats.count_healings(healed)
            if healed:
                self._event("model", "healed", healing_text(healed))
            request = await self._request(run, tools, attempt, going_on)
            # The run's deadline is the timer `_before_deadline` races: an attempt that
            # forwards gets that much longer, so the timer (which cancels it and waits
            # for its last batch) ends it, not its own timeout at the same instant (a
            # timed-out attempt goes on publishing on its worker, after the run closed
            # its output host, and would stop the run `output_interrupted`).
            try:
                routed = await _before_deadline(
                    routed_completion(
                        route,
                        request,
                        attempt_timeout=timedelta(seconds=run.limits.model_timeout_s),
                        heartbeat_timeout=None
                        if heartbeat_s is None
                        else timedelta(seconds=heartbeat_s),
                        deadline=self._deadline,
                        deadline_slack=INTERRUPT_SETTLE if run.forwarding.enabled else timedelta(0),
                        clock=self._clock,
                        first_attempt=attempt,
                        health_view=self._health_view,
                        observe=self._observe_route,
                        settle=self._publish_retry,
                        carried=self._events.carried,
                    ),
                    self._deadline,
                )
            except _Stop as stop:  # the deadline, mid-stream: keep what people saw
                if run.forwarding.enabled:
                    stop.detail += await self._keep_shown_output(
                        run, settled=True, cause=f"deadline: {stop.detail}"
                    )
                raise
            self._count_attempts(routed)
            attempt += len(routed.sent)
            if routed.turn is None:
                if self._continue_after_failure(run, routed, request, going_on):
                    continue
                self._stop_routed(routed, request, going_on)
            self._count_usage(routed.turn)  # this piece's tokens (the pieces are counted apart)
            # Priced as the candidate that answered, not the run's first choice.
            answered = price_for(run.prices, routed.endpoint or run.endpoint, routed.model)
            self._stats.count_cost(routed.turn.usage, answered)
            turn = going_on.whole(routed.turn)
            sequence = routed.sent[-1].sequence
            if turn.stats.cut_by_budget is not None:
                self._stop_cut_by_budget(run, turn, sequence, going_on)
            if not turn.defects:
                if cut_by_length(turn):
                    self._partial = PartialOutput(
                        turn=self._turn,
                        attempt=sequence,
                        text=turn.text,
                        source="activity",
                        cause=f"finish_reason {turn.finish_reason!r}",
                        shown=going_on.shown or turn.stats.produced_output,
                    )
                    if not going_on.may_continue("max_tokens"):
                        used = going_on.used["max_tokens"]
                        after = f" after {used} continuation(s)" if used else ""
                        raise _Stop(
                            "max_tokens",
                            f"the answer was cut by the output token limit (finish_reason "
                            f"{turn.finish_reason!r}){after}; its text is the partial output",
                        )
                    going_on.after_length_cut(turn)
                    self._stats.count_continuation("max_tokens")
                    self._check_bounds(run, boundary=False)
                    continue
                if going_on.active:
                    self._partial = None  # the continued answer is whole now
                return turn
            defect = turn.defects[0]
            if turn.stats.produced_output:
                self._partial = PartialOutput(
                    turn=self._turn,
                    attempt=routed.sent[-1].sequence,
                    text=turn.text,
                    reasoning=turn.reasoning if run.forwarding.reasoning_is_output else "",
                    source="activity",
                    cause=f"completion defect {defect.kind!r}: {defect.detail}",
                )
                raise _Stop(
                    "output_interrupted",
                    f"the turn's output was already shown, so its completion defect "
                    f"{defect.kind!r} is not retried: {defect.detail}",
                )
            used = spent.get(defect.kind, 0)
            if used >= defect.retry_budget:
                raise _Stop(
                    "failed",
                    f"completion defect {defect.kind!r} persisted after {used} fresh "
                    f"completion(s): {defect.detail}",
                )
            spent[defect.kind] = used + 1
            self._event(
                "model",
                "defect_retry",
                f"completion defect {defect.kind!r} ({defect.detail}); asking for a fresh "
                f"completion ({used + 1} of {defect.retry_budget})",
            )
            self._stats.count_retry(defect.kind)
            self._stats.defect_retries[defect.kind] = (
                self._stats.defect_retries.get(defect.kind, 0) + 1
            )
            self._check_bounds(run)

    def _continue_after_failure(
        self,
        run: RunInput,
        routed: RoutedTurn,
        request: CompletionRequest,
        going_on: TurnContinuation,
    ) -> bool:
        """Whether to continue from what a failed attempt showed (the run asks for it,
        `ContinuationOptions.after_stream_failure`), rather than stop
        `output_interrupted`; the answer so far is then the run's partial output."""
        stop = routed.stop
        if stop is None or stop.rule != "produced_output" or stop.shown is None:
            return False
        if not stop.shown.text.strip():  # only reasoning was shown: no answer to go on from
            return False
        if not going_on.may_continue("stream_failure"):
            return False
        reasoning_counts = request.forward is not None and request.forward.reasoning_is_output
        if not going_on.after_stream_failure(
            stop.shown, stop.shown_source, reasoning_counts=reasoning_counts
        ):
            return False
        self._stats.count_continuation("stream_failure")
        self._partial = going_on.partial(self._turn, stop.sequence or routed.sent[-1].sequence)
        self._check_bounds(run, boundary=False)
        return True

    def _stop_cut_by_budget(
        self, run: RunInput, turn: AssembledTurn, sequence: int, going_on: TurnContinuation
    ) -> NoReturn:
        """The model activity cut the turn in flight when the run's token budget ran out:
        stop `token_budget`, keeping what streamed (nothing it asked for is run)."""
        budget = run.limits.token_budget
        assert budget is not None and turn.stats.cut_by_budget is not None
        counted = "reported by the provider" if turn.stats.budget_count_reported else "estimated"
        if turn.text or turn.reasoning:
            self._partial = PartialOutput(
                turn=self._turn,
                attempt=sequence,
                text=turn.text,
                reasoning=turn.reasoning if run.forwarding.reasoning_is_output else "",
                source="activity",
                cause="the run's token budget ran out while the turn streamed",
                shown=going_on.shown or turn.stats.produced_output,
            )
        raise _Stop(
            "token_budget",
            f"the turn in flight was cut after {turn.stats.cut_by_budget} output tokens "
            f"({counted}); {self._stats.budget_use(budget)}",
        )

    async def _request(
        self,
        run: RunInput,
        tools: dict[str, ToolDescription],
        attempt: int,
        going_on: TurnContinuation,
    ) -> CompletionRequest:
        """The completion to route; `routed_completion` sets the endpoint and model of
        each candidate and the number of each attempt (`forward.attempt`). A turn being
        continued sends its answer so far (`TurnContinuation.messages`), and the model
        activity is told what is left of the token budget, so it cuts a runaway turn."""
        forwarding = run.forwarding
        forward = None
        if forwarding.enabled:
            forward = ForwardTarget(
                stream_id=self._events.stream_id,
                turn=self._turn,
                attempt=attempt,
                reasoning_is_output=forwarding.reasoning_is_output,
                batch_interval_s=forwarding.batch_interval_s,
                host_max_events=forwarding.host_max_events,
                host_idle_close_s=forwarding.host_idle_close_s,
                accepted_chars=going_on.accepted_chars,
            )
        budget = run.limits.token_budget
        # A continuation is its own prefill (or asks for the rest); the run's prefill and
        # a forced tool choice open a fresh reply, not the rest of one.
        continuing = going_on.kind is not None
        prefill = None if continuing else run.turn_prefill(self._transcript)
        messages = going_on.messages(self._transcript)
        request = CompletionRequest(
            endpoint=run.endpoint,
            model=run.model,
            messages=messages if prefill is None else [*messages, prefill],
            tools=[tool.to_spec() for tool in tools.values()],
            tool_choice=None if continuing else run.turn_tool_choice(self._transcript),
            temperature=run.sampling.temperature,
            top_p=run.sampling.top_p,
            max_tokens=run.sampling.max_tokens,
            seed=run.sampling.seed,
            stop=run.sampling.stop,
            mint_prefix=f"call_sl_t{self._turn}a{attempt}",
            forward=forward,
            output_budget_tokens=None
            if budget is None
            else max(budget - self._stats.tokens_with_children, 1),
        )
        if _text_bound(self._transcript) + _tools_bound(tools) > MAX_INLINE_PAYLOAD_BYTES:
            await self._ceiling.check(request, "the model request (the transcript so far)")
        return request

    async def _keep_shown_output(
        self, run: RunInput, *, settled: bool, cause: str | None = None
    ) -> str:
        """Keep what the person saw of the interrupted turn as the run's partial output;
        a note for the stop's detail when it could not be read.

        Read from the run's output host once the cancelled attempt has ended (it is
        scheduled `WAIT_CANCELLATION_COMPLETED`, see `routed_completion`), so the batch
        its publisher sends while exiting is included: the text is what the host
        retained, which is what a subscriber reads. An attempt that did not end within
        `INTERRUPT_SETTLE` (a dead worker; a stalled stream that heartbeats only when a
        chunk arrives) may still send one batch, so the text is then `complete=False`.
        The read itself is bounded (`INTERRUPT_READ`), so no interrupt outlasts both.
        """
        why = self._steering.interrupted or "interrupted"
        cause = cause or f"interrupted: {why}"
        try:
            shown = await read_shown(
                ReadForwardedOutput(stream_id=self._events.stream_id, turn=self._turn),
                within=INTERRUPT_READ,
            )
        except ActivityError as error:
            workflow.logger.warning("the interrupted turn's shown output was not read: %s", error)
            return "; what it had shown could not be read back"
        reasoning = shown.reasoning if run.forwarding.reasoning_is_output else ""
        if not shown.text and not reasoning:
            return ""
        if not settled:
            cause += " (the attempt had not ended; a last batch may have followed)"
        self._partial = PartialOutput(
            turn=self._turn,
            attempt=max(shown.attempts, default=0),
            text=shown.text,
            reasoning=reasoning,
            source="stream",
            complete=shown.complete and settled,
            cause=cause,
        )
        return ""

    def _count_cut_turn(self) -> str:
        """Count the output of a model turn an interrupt cancelled, for the stop's detail.

        The provider's usage comes in a stream's last chunk, which a cancelled stream
        never sends: the turn would count 0 tokens though a person read its text. What
        it showed (the run's partial output) is estimated at `CHARS_PER_TOKEN` a token
        and added to the completion tokens. Nothing shown (no forwarding, or nothing
        streamed yet) is nothing measured, and adds nothing. Workflow state only.
        """
        partial = self._partial
        if partial is None or partial.turn != self._turn:
            return ""
        tokens = estimate_tokens(len(partial.text) + len(partial.reasoning))
        if tokens == 0:
            return ""
        self._stats.completion_tokens += tokens
        return f" after about {tokens} output tokens, estimated"

    def _qualified(self, turn: AssembledTurn) -> AssembledTurn:
        """`turn` with each call id an earlier turn of the run holds qualified by this
        turn's number, so no two calls or answers of the transcript share an id (servers
        that number every response's calls from `call_0`). The place every wire's turn
        passes; a timeline event says what was renamed. Workflow state only."""
        if not turn.tool_calls:
            return turn
        calls, renames = qualify_reused_call_ids(turn.tool_calls, self._transcript, self._turn)
        if not renames:
            return turn
        named = ", ".join(f"{old!r} as {new!r}" for old, new in renames)
        self._event("model", "healed", f"call ids an earlier turn used, kept as: {named}")
        # The reasoning that preceded a call stays in front of it under its new id.
        passback = follow_renamed_calls(turn.passback, turn.tool_calls, calls)
        return turn.model_copy(update={"tool_calls": calls, "passback": passback})

    def _event(
        self, phase: EventPhase, kind: EventKind, text: str, call_id: str | None = None
    ) -> None:
        """Note what a guarantee did in the current turn on the event log (workflow
        state, no command): the run's one record of it."""
        self._notes.timeline(self._turn, phase, kind, text, call_id)

    def _observe_route(self, seen: RoutePlan | RouteAttempt) -> None:
        """The route's plan and log lines as they happen, as timeline events."""
        if isinstance(seen, RoutePlan):
            for line in plan_events(seen):
                self._event("model", "breaker", line)
            return
        for kind, line in attempt_events(seen):
            self._event("model", kind, line)
        if seen.outcome != "skipped":
            self._note_dropped_passback(seen.endpoint)

    def _note_dropped_passback(self, endpoint: str) -> None:
        """Say once per turn and endpoint how many pass-back items (reasoning issued by
        another endpoint) the wire left out of a request to `endpoint`: a fallback
        loses the reasoning it cannot be sent. Workflow state only, no command; a
        transcript recorded before pass-back items existed has none, so nothing new
        happens on replay."""
        if (self._turn, endpoint) in self._passback_noted:
            return
        line = passback_dropped_text(self._transcript, endpoint)
        if line is not None:
            self._passback_noted.add((self._turn, endpoint))
            self._event("model", "healed", line)

    async def _publish_retry(self) -> None:
        """A failed attempt's timeline events, published before the next attempt runs,
        so a follower reads the retry before that attempt's text."""
        if self._events.in_history:
            return  # the next attempt's input carries them (`EventLog.carried`)
        if self._events.pending:
            await self._events.flush()

    def _replayed(self, call_id: str, key: ReceiptKey, twin: str | None = None) -> None:
        """Count a call answered from its receipt, and say why it was not run."""
        if twin is not None:
            self._stats.tool_replays += 1
            why = f"same call twice in this batch ({twin}'s answer)"
            self._notes.replayed(call_id, why)
            self._event("tools", "replay", f"replayed, not run: {why}", call_id=call_id)
            return
        receipt = self._receipts.get(key)
        earlier = earlier_call(self._transcript, key.text, self._tenant, self._receipt_scope)
        resumed = self._receipt_scope != workflow.info().workflow_id
        given_up = receipt is not None and receipt.resolution == "give_up" and earlier is None
        if given_up and not resumed:
            return  # answered with the give-up, not a replay: its decision event says so
        self._stats.tool_replays += 1
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
        self._notes.replayed(call_id, why)
        self._event("tools", "replay", f"replayed, not run: {why}", call_id=call_id)

    def _hold_whole(self, answer: str) -> None:
        """Raise the receipts' bound so `answer` is kept whole, when blob storage carries it.

        The ledger keeps results up to 16 KB, so a replay of a 40 KB answer used to read
        a cut copy. With external payload storage (the worker reported a payload limit
        above Temporal's inline one) the carried state leaves history whatever its size,
        and a result the transcript holds is carried once (`PackedLedger`), so the bound
        becomes that limit: a replay answers exactly what the first execution answered
        (issue 27 §4). Without storage nothing changes (the model reads the 16 KB copy
        and its marker, and the timeline says so: `_replayed`).
        """
        limit = self._disclosure.payload_limit_bytes
        if (
            limit is not None
            and limit > MAX_INLINE_PAYLOAD_BYTES
            and limit > self._receipts.result_limit_bytes
            and len(answer.encode("utf-8", "replace")) > self._receipts.result_limit_bytes
        ):
            self._receipts.result_limit_bytes = limit

    def _count_attempts(self, routed: RoutedTurn) -> None:
        """Every attempt sent is a model attempt; every failed one followed by another (on
        the same candidate or the next) is a retry, by the type of its failure."""
        sent = routed.sent
        self._stats.model_attempts += len(sent)
        for line in sent[:-1]:
            self._stats.count_retry(f"model_{line.error_type or 'error'}")

    def _stop_routed(
        self, routed: RoutedTurn, request: CompletionRequest, going_on: TurnContinuation
    ) -> NoReturn:
        """End the run for a route that produced no turn, with the reason it gives."""
        stop = routed.stop
        assert stop is not None  # a routed turn without a turn always says why
        if stop.reason == "deadline":
            raise _Stop("deadline", f"the run's deadline: {stop.detail}")
        if stop.rule == "aborted":
            raise asyncio.CancelledError  # the run was cancelled: not a model failure
        cause = stop.failure.describe() if stop.failure is not None else stop.detail
        if stop.rule == "produced_output":
            shown = stop.shown or ForwardedOutput(complete=False)
            reasoning_counts = request.forward is not None and request.forward.reasoning_is_output
            source = stop.shown_source or "activity"
            self._partial = PartialOutput(
                turn=self._turn,
                attempt=stop.sequence or routed.sent[-1].sequence,
                # The host's copy holds every attempt of the turn; an attempt's own copy,
                # its piece only (a continued answer's earlier pieces go before it).
                text=shown.text if source == "stream" else going_on.whole_text(shown.text),
                reasoning=shown.reasoning if reasoning_counts else "",
                source=source,
                complete=shown.complete,
                cause=cause,
            )
            if self._deadline.passed:
                # The attempt's timeout is cut to the deadline, so it can end first: the
                # run stopped because its deadline passed, not because the stream broke.
                raise _Stop("deadline", f"the run's deadline passed during a model turn ({cause})")
            raise _Stop(
                "output_interrupted",
                f"the model call failed after its output was shown, so it is not repeated: {cause}",
            )
        if stop.reason == "rule":  # context_length: compacting is the caller's decision
            raise _Stop("failed", f"the model call stopped ({stop.rule}): {cause}")
        if not routed.sent:  # no_candidate: every breaker open, or the probe taken
            reopens = stop.next_open_at
            when = "" if reopens is None else f" (a probe is admitted at {reopens.isoformat()})"
            raise _Stop("failed", f"no endpoint of the route was tried: {stop.detail}{when}")
        last = routed.sent[-1]
        raise _Stop(
            "failed",
            f"the model call failed after {len(routed.sent)} attempt(s) "
            f"({last.error_type}): {stop.detail}",
        )

    def _count_usage(self, turn: AssembledTurn) -> None:
        if turn.usage is not None:
            self._stats.prompt_tokens += turn.usage.prompt_tokens
            self._stats.completion_tokens += turn.usage.completion_tokens
            return
        produced = len(turn.text) + sum(len(c.arguments) + len(c.name) for c in turn.tool_calls)
        self._stats.completion_tokens += max(1, produced // CHARS_PER_TOKEN)

    # -- one tool batch --------------------------------------------------------------

    async def _answer_batch(
        self,
        run: RunInput,
        tools: dict[str, ToolDescription],
        calls: list[ToolCall],
        *,
        said: str | None = None,
    ) -> None:
        """Read every call, then run the readable ones; one tool message per call, in order.
        `said`: the model's text beside the calls when it was not forwarded (for the log)."""
        answers: list[ToolOutcome | None] = []
        runnable: list[tuple[int, ToolDescription, ToolInvocation, ReceiptKey]] = []
        for position, call in enumerate(calls):
            self._stats.tool_calls += 1
            if self._steering.interrupted is not None:
                answers.append(self._interrupted_before_running())
                continue
            description = tools.get(call.name)
            if description is None:
                answers.append(self._disclosure.unknown_tool(call.name, tools))
                continue
            reading = parse_tool_call_arguments(call)
            if reading.kind != "parsed":
                answers.append(
                    ToolOutcome(
                        status="invalid_arguments",
                        content=f"Invalid tool arguments: {reading.detail}",
                        error_type=reading.kind,
                    )
                )
                continue
            if self._disclosure.handles(call.name):  # workflow state: no activity, no receipt
                answers.append(self._disclosure.activate(reading.arguments))
                continue
            try:
                key = receipt_key(run.tenant_id, self._receipt_scope, call.name, reading.arguments)
            except ValueError as refused:  # CanonicalJsonError: no faithful identity
                answers.append(
                    ToolOutcome(
                        status="invalid_arguments",
                        content=f"Invalid tool arguments: {refused}",
                        error_type="unhashable",
                    )
                )
                continue
            invocation = ToolInvocation(
                tool=call.name,
                arguments=reading.arguments,
                call_id=call.id,
                workflow_id=workflow.info().workflow_id,
                tenant_id=run.tenant_id,
                allowed_tools=self._disclosure.allowed(tools),
                idempotency_key=key.text,
            )
            try:
                await self._ceiling.check(invocation, f"the arguments of tool call {call.name!r}")
            except ValueError as unencodable:  # the converter refused them: answer, never die
                answers.append(_unencodable(unencodable))
                continue
            answers.append(None)
            runnable.append((position, description, invocation, key))

        self._notes.calls(self._turn, calls, {pos: key for pos, _, _, key in runnable}, said)
        await self._events.flush(carried=True)  # a log in history: on the first tool's input
        self._pool = asyncio.Semaphore(run.limits.tool_concurrency)
        # One task per receipt key: a second call with the same key in this batch waits
        # for the first and replays its answer, with its own tool message and id.
        first_by_key: dict[str, asyncio.Task[ToolOutcome]] = {}

        async def run_one(
            description: ToolDescription, invocation: ToolInvocation, key: ReceiptKey
        ) -> ToolOutcome:
            return await traced_tool(
                description, invocation, self._run_guarded(description, invocation, key)
            )

        async def replay_of(
            first: asyncio.Task[ToolOutcome], call_id: str, key: ReceiptKey, twin: str
        ) -> ToolOutcome:
            await workflow.wait_condition(first.done)
            self._replayed(call_id, key, twin)
            return first.result()

        tasks: list[asyncio.Task[ToolOutcome]] = []
        first_ids: dict[str, str] = {}
        for _, description, invocation, key in runnable:
            first = first_by_key.get(key.text)
            if first is None:
                task = asyncio.ensure_future(run_one(description, invocation, key))
                first_by_key[key.text] = task
                first_ids[key.text] = invocation.call_id
            else:
                twin = first_ids[key.text]
                task = asyncio.ensure_future(
                    traced_tool(
                        description,
                        invocation,
                        replay_of(first, invocation.call_id, key, twin),
                        decided="replay",
                    )
                )
            tasks.append(task)
        results = await self._steering.settle(tasks, self._interrupted_before_running)
        self._durable_clock().settle()  # what the batch's activities woke to, in any order
        for (position, _, _, _), outcome in zip(runnable, results, strict=True):
            answers[position] = outcome
        for call, answer in zip(calls, answers, strict=True):
            assert answer is not None
            if answer.status != "ok":
                self._stats.tool_errors += 1
            self._transcript.append(answer.to_message(call.id))
            self._notes.result(self._turn, call, answer)
        await self._events.flush(carried=True)  # a log in history: on the next model turn's

    def _durable_clock(self) -> DurableClock:
        assert self._clock is not None  # set first thing in `run`
        return self._clock

    def _interrupted_before_running(self) -> ToolOutcome:
        return _not_run(f"the run was interrupted: {self._steering.interrupted}")

    async def _await_resolution(
        self,
        key: ReceiptKey,
        description: ToolDescription,
        invocation: ToolInvocation,
        decision: Ambiguous,
    ) -> bool:
        """Wait for `resolve_receipt` on this call; False if the run stops first."""
        view = self._ambiguous.get(key.text)
        if view is None:
            # A timeout is told apart from a lost worker, and a result that came back
            # after it is shown (issue 25).
            why = self._late.why(key.text, decision.attempt)
            late = self._late.result(key.text, decision.attempt)
            reason = decision.reason
            if late is not None:
                reason = late_reason(description.name, late)
            elif why is not None:
                reason = (
                    f"attempt {decision.attempt} of the opaque tool {description.name!r} "
                    f"{why}; it may or may not have taken effect, and running it again "
                    "could repeat the effect"
                )
            view = AmbiguousCall(
                key=key.text,
                tool=description.name,
                arguments=invocation.arguments,
                attempt=decision.attempt,
                reason=reason,
                call_ids=[],
                lost=why,
                late_result=late,
            )
            self._ambiguous[key.text] = view
        view.call_ids.append(invocation.call_id)
        self._notes.ambiguous(self._turn, view)
        await self._events.flush()
        self._phase = "awaiting a person"
        # While the call waits, what a signal noted (its late result) is published then,
        # not at the resolution: the person resolving it needs to read it first.

        def decided() -> bool:
            return key.text not in self._ambiguous or self._steering.interrupted is not None

        try:
            while not decided():
                if not await self._deadline.wait(lambda: decided() or self._events.pending > 0):
                    return False  # the deadline passed first
                if not decided():
                    await self._events.flush()
        except asyncio.CancelledError:  # interrupted
            return False
        self._phase = "tools"
        return key.text not in self._ambiguous

    async def _run_guarded(
        self,
        description: ToolDescription,
        invocation: ToolInvocation,
        key: ReceiptKey,
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
            decision = self._receipts.decide(key, description.effect)
            receipt_decision(decision.kind, description.name)
            if decision.kind == "replay":
                self._replayed(invocation.call_id, key)
                return ToolOutcome(status="ok", content=decision.result)
            if decision.kind == "wait":
                await self._wait_out_lease(key, decision)
                continue
            if decision.kind == "ambiguous":
                # Do not guess: suspend this call (the rest of the batch goes on) until a
                # person says what happened through `resolve_receipt`.
                if not await self._await_resolution(key, description, invocation, decision):
                    return ToolOutcome(
                        status="tool_error",
                        content=(
                            f"Not run again: an attempt of {description.name!r} with these "
                            "arguments ended without a result, so it may already have taken "
                            "effect, and nobody resolved it before the run stopped."
                        ),
                        error_type="AmbiguousReceipt",
                    )
                continue
            if description.approval and not approved:
                self._notes.approval_waiting(self._turn, invocation.call_id, description, key)
                await self._events.flush()
                refused = await self._approvals.ask(
                    description,
                    invocation,
                    arguments_sha256=key.args_hash,
                    turn=self._turn,
                    deadline=self._deadline,
                    interrupted=lambda: self._steering.interrupted,
                )
                if refused is not None:
                    return refused
                await self._events.flush(carried=True)  # the decision, before the call runs
                approved = True
                continue  # decide again: the ledger may have moved while a person thought
            if attempts_here >= TOOL_ATTEMPTS:
                return ToolOutcome(status="tool_error", content=lost, error_type="ToolLost")
            attempts_here += 1
            if lost:
                self._stats.count_retry("tool_lost")
                self._event(
                    "tools",
                    "tool_retry",
                    f"attempt {attempts_here - 1} lost ({lost}), run again",
                    call_id=invocation.call_id,
                )
            outcome = await self._attempt(
                description, invocation, key, decision, after_lost=bool(lost)
            )
            if isinstance(outcome, ToolOutcome):
                return outcome
            lost = outcome

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
        current = self._receipts.get(key)
        remaining = max(decision.until - workflow.now(), timedelta(seconds=1))
        try:
            await workflow.wait_condition(
                lambda: self._receipts.get(key) is not current, timeout=remaining
            )
        except builtins.TimeoutError:
            self._durable_clock().woke()
            self._receipts.end_lease(key, decision.attempt)

    def _runs_locally(self, description: ToolDescription) -> bool:
        """Whether this call runs as a local activity (`RunInput.local_pure_tools_s`):
        a pure tool declared no longer than the run's bound. Only pure tools: a local
        activity is retried with the workflow task, outside the receipt table's count,
        which is harmless only for a call that may run twice."""
        bound = self._local_pure_tools_s
        return (
            bound is not None
            and description.effect == "pure"
            and description.timeout.total_seconds() <= bound
        )

    async def _attempt(
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
        if self._child_runs is not None and description.name == DELEGATE_TOOL:
            return await self._child_runs.attempt(invocation, key, decision)
        attempt = decision.attempt
        timeout = self._deadline.remaining(description.timeout)
        lost: ActivityError | None = None
        # The pool bounds running activities only, and the lease starts when the attempt
        # does: a call waiting for a slot, a lease or a person holds nothing.
        async with self._pool:
            # The expiry is for people to read and for the timer that ends the lease;
            # no branch compares it with the clock (`_wait_out_lease`).
            expires = workflow.now() + timeout + LEASE_MARGIN
            claimed = self._receipts.claim(key, attempt, expires)
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
            local = self._runs_locally(description)
            # A local activity's input is not recorded: nothing rides on it. A regular
            # one's events are its second payload, so a follower never reads the first.
            riding = None if local else self._events.carried()
            # The receipt table owns retries of side effects: one attempt each.
            once = RetryPolicy(maximum_attempts=1)
            try:
                outcome: ToolOutcome
                if local:
                    outcome = await workflow.execute_local_activity(
                        RUN_TOOL_ACTIVITY,
                        sent,
                        result_type=ToolOutcome,
                        start_to_close_timeout=timeout,
                        retry_policy=once,
                    )
                else:
                    outcome = await workflow.execute_activity(
                        RUN_TOOL_ACTIVITY,
                        args=[sent] if riding is None else [sent, riding],
                        result_type=ToolOutcome,
                        start_to_close_timeout=timeout,
                        heartbeat_timeout=description.heartbeat_timeout,
                        retry_policy=once,
                    )
            except ActivityError as error:
                lost = error
            if not local:  # its end is an event in history (a local activity's is not)
                self._durable_clock().woke()
        if lost is not None:
            cause = lost.cause
            if isinstance(cause, CancelledError):  # interrupted mid-attempt
                if description.effect == "pure":
                    self._receipts.fail(key, attempt)
                # Otherwise the receipt stays running: the effect may have happened, and
                # an ask after its lease is ambiguous, as for a lost attempt.
                reason = self._steering.interrupted or "the run was cancelled"
                return interrupted_outcome(description.name, description.effect, reason)
            if not isinstance(cause, TimeoutError):
                self._receipts.fail(key, attempt)
                return ToolOutcome(
                    status="tool_error",
                    content=f"Tool {description.name!r} failed: {innermost_message(lost)}",
                    error_type="ToolFailed",
                )
            # No outcome: the effect may or may not have happened. How it ended (ran
            # past its timeout, went silent) is said, not "lost" for both (issue 25).
            why = lost_text(description, cause.type)
            attempt_lost(attempt, _timeout_kind(cause), why)
            if description.effect == "opaque":
                self._event(
                    "tools",
                    "tool_timeout",
                    f"attempt {attempt} {why}",
                    call_id=invocation.call_id,
                )
                early = self._late.timed_out(key.text, attempt, why)
                if early is not None:  # the worker's signal came before the timeout
                    self._note_late(early)
            progress = _recorded_progress(cause)
            if progress is not None:
                self._receipts.record_progress(key, attempt, progress)
            if description.effect != "opaque":
                # Temporal has declared the attempt lost; give it one heartbeat period to
                # notice before another attempt starts beside it.
                await workflow.sleep(description.heartbeat_timeout or LEASE_MARGIN)
                self._receipts.fail(key, attempt)
            return f"Tool {description.name!r} timed out: it {why}."
        # An answer the model should read (even a tool's own error) is the call's result.
        self._hold_whole(outcome.content)
        self._receipts.complete(key, attempt, outcome.content)
        self._late.settled(key.text)
        return outcome


def _initial_transcript(run: RunInput) -> list[ChatMessage]:
    messages = list(run.messages)
    if run.system_prompt and not any(m.role == "system" for m in messages):
        messages.insert(0, ChatMessage(role="system", content=run.system_prompt))
    if run.prompt:
        messages.append(ChatMessage(role="user", content=run.prompt))
    return messages


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


def _not_run(reason: str) -> ToolOutcome:
    return ToolOutcome(status="tool_error", content=f"Not run: {reason}.", error_type="NotRun")


def _unencodable(error: ValueError) -> ToolOutcome:
    """The answer to arguments the reader accepted but the data converter cannot encode.

    `parse_tool_call_arguments` refuses every such value it knows of (lone surrogates,
    deep nesting); this is the net under it, so the call is answered, not the run
    failed. The converter's message is escaped: it may quote the offending text.
    """
    reason = str(error)[:500].encode("utf-8", "backslashreplace").decode("utf-8")
    return ToolOutcome(
        status="invalid_arguments",
        content=f"Invalid tool arguments: they cannot be sent to the tool ({reason}).",
        error_type="unencodable",
    )


async def _before_deadline(work: Awaitable[T], deadline: Deadline) -> T:
    """The work's result, or a deadline stop when the deadline's timer fires first.

    The run's deadline timer races the work (a routed model turn), so the deadline holds
    in workflow time even while a model streams (and time-skipping tests can reach it);
    the work is cancelled, and with it the activity or backoff it was waiting for.
    Cancelling this wait (an interrupt) cancels the work too.
    """
    if deadline.at is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        finished = await deadline.wait(task.done)
    except asyncio.CancelledError:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ActivityError):
            await task
        raise
    if not finished:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ActivityError):
            await task
        raise _Stop("deadline", "the run's deadline passed during a model turn")
    return task.result()


def _text_bound(messages: list[ChatMessage]) -> int:
    """An upper bound on the transcript's JSON size, so the exact (serializing) check runs
    only when it could fail: at most 6 bytes a character (`\\u0000` escapes) plus a
    generous envelope a message."""
    chars = 0
    for message in messages:
        chars += len(message.content or "") + len(message.name or "")
        for call in message.tool_calls:
            chars += len(call.arguments) + len(call.name) + len(call.id)
    return 6 * chars + 512 * len(messages) + 64 * 1024


def _tools_bound(tools: dict[str, ToolDescription]) -> int:
    """The same bound for the tool specs (their schemas' repr is about their JSON size)."""
    return sum(
        6 * (len(t.name) + len(t.description) + len(repr(t.parameters))) + 512
        for t in tools.values()
    )
