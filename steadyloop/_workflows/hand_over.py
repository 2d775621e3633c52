"""`HandOver`: what a run takes from the execution before it, and what it hands on.

A run carries its state to its next execution (continue-as-new) or returns it
(`RunResult`, which `steadyloop resume` hands to the next run). Either is one payload,
refused over the limit like any other, and a refused continue-as-new or result is a
workflow task retried forever. So:

- receipts travel packed against the transcript beside them (a result is not carried
  twice: `PackedLedger`);
- the whole is measured against the run's payload ceiling; receipts' own results are
  cut short first, and a run whose transcript alone no longer fits stops
  `state_too_large` (`continue_as_new`); a result over the limit loses what is for
  people only (the last events of its log) first, then its receipts, then its oldest
  messages, and says so (`bounded_result`);
- an attempt the last execution left running can never report to this one: its lease
  ends on restore, so a decision on it needs no timer (and no clock);
- a resumed run inherits its predecessor's receipts and their key scope
  (`RunInput.inherited`), so what the predecessor completed replays.

The hand-over happens only at a turn boundary, after handlers finish: no activity is
in flight, and a signal that arrived meanwhile (an interrupt) is honoured.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._history.budget import (
        ContinueAsNewReason,
        HistoryReading,
        HistoryThresholds,
        continue_as_new_reason,
    )
    from steadyloop._receipts.ledger import MIN_RESULT_LIMIT_BYTES, PackedLedger, ReceiptLedger
    from steadyloop._run.models import CarriedState, RunInput, RunResult

from steadyloop._workflows.payload_ceiling import payload_bytes
from steadyloop._workflows.run_state import RunState, Stop
from steadyloop._workflows.steering import Steering


class HandOver:
    """Restores a run's state at its start and hands it on: to the next execution, or to
    the run's result, each made to fit one payload."""

    def __init__(self, state: RunState) -> None:
        self._state = state

    def restore(self, run: RunInput) -> datetime | None:
        """State from the run this one continues, or a fresh start; returns the deadline."""
        state = self._state
        carried = run.carried
        if carried is None or carried.started is None:
            state.started = workflow.now()
        else:
            state.started = datetime.fromisoformat(carried.started)
        state.receipt_scope = workflow.info().workflow_id
        if carried is None:
            state.transcript = initial_transcript(run)
            if run.inherited is not None:
                # A resumed run: the stopped run's receipts, under its key scope. Its
                # attempts can never report here, so their leases end now.
                state.receipt_scope = run.inherited.scope
                state.receipts = unpacked(run.inherited.receipts, list(run.messages))
                state.receipts.release_leases()
            if run.limits.deadline_s is None:
                return None
            return workflow.now() + timedelta(seconds=run.limits.deadline_s)
        state.transcript = list(carried.transcript)
        if carried.receipt_scope is not None:
            state.receipt_scope = carried.receipt_scope
        state.receipts = unpacked(carried.packed_receipts, state.transcript)
        # An attempt the last execution left running can never report to this one: its
        # lease ends now, so a decision on it needs no timer (and no clock).
        state.receipts.release_leases()
        state.steering = Steering(carried.steering)
        state.stats = carried.stats
        state.turn = carried.turn
        state.notes.timeline_count = carried.timeline_count
        return None if carried.deadline is None else datetime.fromisoformat(carried.deadline)

    def due(self, run: RunInput, turns_this_run: int) -> ContinueAsNewReason | None:
        """Why to hand over now (Temporal's suggestion, or this execution's turns, history
        events, bytes or updates past the run's limits), or None."""
        info = workflow.info()
        limits = run.limits
        return continue_as_new_reason(
            HistoryReading(
                turns=turns_this_run,
                events=info.get_current_history_length(),
                bytes=info.get_current_history_size(),
                updates=self._state.updates,
                suggested=info.is_continue_as_new_suggested(),
            ),
            HistoryThresholds(
                turns=limits.continue_as_new_after_turns,
                events=limits.continue_as_new_at_events,
                bytes=limits.continue_as_new_at_bytes,
                updates=limits.continue_as_new_at_updates,
            ),
        )

    async def continue_as_new(self, run: RunInput, reason: ContinueAsNewReason) -> NoReturn:
        """Hand over at a turn boundary, after handlers finish: no activity is in flight.

        A signal that arrived while handlers finished (an interrupt) is honoured here
        rather than lost with this execution."""
        state = self._state
        state.phase = "continuing as new"
        while True:
            await workflow.wait_condition(workflow.all_handlers_finished)
            if state.events.pending:  # a handler noted a decision: publish it first
                await state.events.flush()
                continue
            state.check_bounds(run.limits)
            successor = self.successor(run, reason)
            size = payload_bytes(successor)
            limit = state.ceiling.known_limit(size)
            if limit is None:
                # Ask the worker (an activity: handlers may run meanwhile), then build
                # the state again from what it is once they have finished.
                await state.ceiling.limit_for(size)
                continue
            break
        if size > limit:
            _shrink_to_fit(successor, size, limit)
        workflow.continue_as_new(successor)

    def successor(self, run: RunInput, reason: ContinueAsNewReason) -> RunInput:
        """The input of the next execution: this one's state, receipts packed against the
        transcript they travel with (`PackedLedger`), so no result is carried twice."""
        state = self._state
        stats = state.stats.model_copy(deep=True)
        stats.continued_as_new[reason] = stats.continued_as_new.get(reason, 0) + 1
        deadline = state.deadline.at
        carried = CarriedState(
            transcript=state.transcript,
            packed_receipts=PackedLedger.pack(state.receipts, state.transcript),
            receipt_scope=state.receipt_scope,
            stats=stats,
            turn=state.turn,
            deadline=None if deadline is None else deadline.isoformat(),
            started=state.started.isoformat(),
            children=[] if state.child_runs is None else state.child_runs.children,
            activated_plugins=state.disclosure.activated,
            steering=state.steering.state,
            timeline_count=state.notes.timeline_count,
            log_in_history=state.events.in_history,
        )
        return run.model_copy(
            update={"carried": carried, "prompt": None, "messages": [], "inherited": None}
        )

    async def bounded_result(self, result: RunResult) -> RunResult:
        """`result`, made to fit one payload: a result over the limit would be refused at
        completion and the workflow task retried forever.

        First the receipts' own copies of results are cut short, then the receipts are
        left out (a run resuming this one would then run again what it completed, so
        the detail says so), then the oldest messages are (the transcript can pass the
        limit only through tool results added after the last model request).
        """
        size = payload_bytes(result)
        limit = await self._state.ceiling.limit_for(size)
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
        if payload_bytes(result) > limit:
            _drop_oldest_messages(result, limit)
        return result


def _shrink_to_fit(successor: RunInput, size: int, limit: int) -> None:
    """Make the carried state fit `limit`: the receipts' own results are cut short; stop
    when the transcript alone does not fit."""
    carried = successor.carried
    assert carried is not None
    cut = carried.packed_receipts.shrink_results(MIN_RESULT_LIMIT_BYTES)
    carried.stats.compactions["receipt_results"] = (
        carried.stats.compactions.get("receipt_results", 0) + cut
    )
    shrunk = payload_bytes(successor)
    if shrunk > limit:
        raise Stop(
            "state_too_large",
            f"the state the run carries to its next execution is {shrunk:,} bytes "
            f"({size:,} before the receipts' results were cut), over the {limit:,}-"
            "byte payload limit: the transcript alone is too large. Compact it "
            "(RunLimits.compaction) or run the workers with external payload "
            "storage (STEADYLOOP_BLOB_DIR).",
        )


def _drop_oldest_messages(result: RunResult, limit: int) -> None:
    """Leave out the fewest oldest messages that make `result` fit, and say how many."""
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


def initial_transcript(run: RunInput) -> list[ChatMessage]:
    """A fresh run's transcript: its messages, its system prompt first, its prompt last."""
    messages = list(run.messages)
    if run.system_prompt and not any(m.role == "system" for m in messages):
        messages.insert(0, ChatMessage(role="system", content=run.system_prompt))
    if run.prompt:
        messages.append(ChatMessage(role="user", content=run.prompt))
    return messages


def unpacked(packed: PackedLedger, transcript: list[ChatMessage]) -> ReceiptLedger:
    """The ledger `packed` against `transcript`; a result not found there is warned of."""
    ledger, lost = packed.unpack(transcript)
    if lost:
        workflow.logger.warning(
            "%d receipt result(s) could not be read back from the carried transcript; "
            "those calls replay a note saying so and are not run again",
            lost,
        )
    return ledger
