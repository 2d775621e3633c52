"""`ModelTurn`: one usable completion for the loop, or a stop that says why not.

Each completion is routed (`routed_completion` over the run's route,
`RunInput.resolved_route`): retried, sent to another endpoint, or stopped by one table,
and an attempt whose output a person already saw is never repeated anywhere. Every
worker running this workflow registers the endpoint-health activities the route reads.
Around it, the turn:

- heals, before every completion, a transcript the provider would refuse;
- builds the request (`model_request`), continuing a cut answer when the run asks;
- races the routed completion against the run's deadline timer (`before_deadline`), so
  the deadline holds in workflow time even while a model streams; an attempt that
  forwards gets `INTERRUPT_SETTLE` longer, so the timer (which cancels it and waits for
  its last batch) ends it, not its own timeout at the same instant;
- counts attempts, retries, tokens and cost (priced as the candidate that answered);
- decides how a turn without a usable answer ends (`turn_stops`).

People reading the output are never shown the same text twice: text an interrupted or
deadline-cut turn had shown is kept as the run's partial output (`keep_shown_output`),
so a resumed run goes on from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from steadyloop._history.call_ids import follow_renamed_calls, qualify_reused_call_ids
    from steadyloop._history.healing import validate_and_heal
    from steadyloop._output.forwarding import PartialOutput, ReadForwardedOutput
    from steadyloop._routing.pricing import price_for
    from steadyloop._routing.provider_profiles import transcript_rules
    from steadyloop._routing.route_plan import RouteConfig, RoutePlan
    from steadyloop._run.models import RunInput
    from steadyloop._stops.budget import CHARS_PER_TOKEN, estimate_tokens
    from steadyloop._stream.completion import AssembledTurn, CompletionRequest
    from steadyloop._workflows.routed_turn import (
        HealthView,
        RouteAttempt,
        RoutedTurn,
        read_shown,
        routed_completion,
    )
    from steadyloop._workflows.run_timeline import (
        attempt_events,
        healing_text,
        passback_dropped_text,
        plan_events,
    )
    from steadyloop.tools._payloads import ToolDescription

from steadyloop._workflows.durable_time import Deadline
from steadyloop._workflows.model_request import model_request
from steadyloop._workflows.run_state import RunState, Stop
from steadyloop._workflows.turn_continuation import TurnContinuation, cut_by_length
from steadyloop._workflows.turn_stops import (
    after_defect,
    after_length_cut,
    continue_after_failure,
    stop_cut_by_budget,
    stop_routed,
)
from steadyloop._workflows.typed_answer import told_by_the_run

# How long an interrupt waits for a forwarding model activity to confirm its cancel
# (a live worker hears of it at its next heartbeat, about a second, then sends its last
# batch), and how long reading the shown text back from the output host may take.
INTERRUPT_SETTLE = timedelta(seconds=10)
INTERRUPT_READ = timedelta(seconds=15)
T = TypeVar("T")


class ModelTurn:
    """Takes the run's model turns: a usable completion each, or a stop."""

    def __init__(self, state: RunState) -> None:
        self._state = state
        self.health_view = HealthView()  # endpoint health read by earlier turns
        # (turn, endpoint) pairs whose dropped pass-back items the timeline already told.
        self._passback_noted: set[tuple[int, str]] = set()

    async def complete(self, run: RunInput, tools: dict[str, ToolDescription]) -> AssembledTurn:
        """A usable completion. A defective one is replaced by a fresh completion within
        its kind's budget; a cut answer is continued when the run asks; an attempt whose
        output was shown is never repeated."""
        state = self._state
        spent: dict[str, int] = {}
        attempt = 1  # the number of the turn's next attempt, across fresh completions
        going_on = TurnContinuation(run.continuation, run.provider_profile)
        route = run.resolved_route()
        while True:
            self._heal(run)
            request = await model_request(state, run, tools, attempt, going_on)
            routed = await self._routed(run, route, request, attempt)
            self._count_attempts(routed)
            attempt += len(routed.sent)
            if routed.turn is None:
                if continue_after_failure(state, run, routed, request, going_on):
                    continue
                stop_routed(state, routed, request, going_on)
            self._count_usage(routed.turn)  # this piece's tokens (the pieces are counted apart)
            # Priced as the candidate that answered, not the run's first choice.
            answered = price_for(run.prices, routed.endpoint or run.endpoint, routed.model)
            state.stats.count_cost(routed.turn.usage, answered)
            turn = told_by_the_run(run.output_type, going_on.whole(routed.turn))
            sequence = routed.sent[-1].sequence
            if turn.stats.cut_by_budget is not None:
                stop_cut_by_budget(state, run, turn, sequence, going_on)
            if turn.defects:
                after_defect(state, run, turn, sequence, spent)
                continue
            if cut_by_length(turn):
                after_length_cut(state, run, turn, sequence, going_on)
                continue
            if going_on.active:
                state.partial = None  # the continued answer is whole now
            return turn

    def _heal(self, run: RunInput) -> None:
        """Before every completion: a transcript the provider would refuse is healed."""
        state = self._state
        state.transcript, healed = validate_and_heal(
            state.transcript, transcript_rules(run.provider_profile)
        )
        state.stats.count_healings(healed)
        if healed:
            state.event("model", "healed", healing_text(healed))

    async def _routed(
        self, run: RunInput, route: RouteConfig, request: CompletionRequest, attempt: int
    ) -> RoutedTurn:
        """The routed completion, raced against the run's deadline. An attempt that
        forwards gets `INTERRUPT_SETTLE` longer than the deadline, so the deadline's timer
        (which cancels it and waits for its last batch) ends it, not its own timeout at
        the same instant (a timed-out attempt goes on publishing on its worker, after
        the run closed its output host, and would stop the run `output_interrupted`)."""
        state = self._state
        heartbeat_s = run.limits.model_heartbeat_timeout_s
        try:
            return await before_deadline(
                routed_completion(
                    route,
                    request,
                    attempt_timeout=timedelta(seconds=run.limits.model_timeout_s),
                    heartbeat_timeout=None
                    if heartbeat_s is None
                    else timedelta(seconds=heartbeat_s),
                    deadline=state.deadline,
                    deadline_slack=INTERRUPT_SETTLE if run.forwarding.enabled else timedelta(0),
                    clock=state.clock,
                    first_attempt=attempt,
                    health_view=self.health_view,
                    observe=self._observe_route,
                    settle=self._publish_retry,
                    carried=state.events.carried,
                ),
                state.deadline,
            )
        except Stop as stop:  # the deadline, mid-stream: keep what people saw
            if run.forwarding.enabled:
                stop.detail += await self.keep_shown_output(
                    run, settled=True, cause=f"deadline: {stop.detail}"
                )
            raise

    async def keep_shown_output(
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
        state = self._state
        why = state.steering.interrupted or "interrupted"
        cause = cause or f"interrupted: {why}"
        try:
            shown = await read_shown(
                ReadForwardedOutput(stream_id=state.events.stream_id, turn=state.turn),
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
        state.partial = PartialOutput(
            turn=state.turn,
            attempt=max(shown.attempts, default=0),
            text=shown.text,
            reasoning=reasoning,
            source="stream",
            complete=shown.complete and settled,
            cause=cause,
        )
        return ""

    def count_cut_turn(self) -> str:
        """Count the output of a model turn an interrupt cancelled, for the stop's detail.

        The provider's usage comes in a stream's last chunk, which a cancelled stream
        never sends: the turn would count 0 tokens though a person read its text. What
        it showed (the run's partial output) is estimated at `CHARS_PER_TOKEN` a token
        and added to the completion tokens. Nothing shown (no forwarding, or nothing
        streamed yet) is nothing measured, and adds nothing. Workflow state only.
        """
        state = self._state
        partial = state.partial
        if partial is None or partial.turn != state.turn:
            return ""
        tokens = estimate_tokens(len(partial.text) + len(partial.reasoning))
        if tokens == 0:
            return ""
        state.stats.completion_tokens += tokens
        return f" after about {tokens} output tokens, estimated"

    def qualified(self, turn: AssembledTurn) -> AssembledTurn:
        """`turn` with each call id an earlier turn of the run holds qualified by this
        turn's number, so no two calls or answers of the transcript share an id (servers
        that number every response's calls from `call_0`). The place every wire's turn
        passes; a timeline event says what was renamed. Workflow state only."""
        if not turn.tool_calls:
            return turn
        state = self._state
        calls, renames = qualify_reused_call_ids(turn.tool_calls, state.transcript, state.turn)
        if not renames:
            return turn
        named = ", ".join(f"{old!r} as {new!r}" for old, new in renames)
        state.event("model", "healed", f"call ids an earlier turn used, kept as: {named}")
        # The reasoning that preceded a call stays in front of it under its new id.
        passback = follow_renamed_calls(turn.passback, turn.tool_calls, calls)
        return turn.model_copy(update={"tool_calls": calls, "passback": passback})

    def _observe_route(self, seen: RoutePlan | RouteAttempt) -> None:
        """The route's plan and log lines as they happen, as timeline events."""
        if isinstance(seen, RoutePlan):
            for line in plan_events(seen):
                self._state.event("model", "breaker", line)
            return
        for kind, line in attempt_events(seen):
            self._state.event("model", kind, line)
        if seen.outcome != "skipped":
            self._note_dropped_passback(seen.endpoint)

    def _note_dropped_passback(self, endpoint: str) -> None:
        """Say once per turn and endpoint how many pass-back items (reasoning issued by
        another endpoint) the wire left out of a request to `endpoint`: a fallback
        loses the reasoning it cannot be sent. Workflow state only, no command."""
        state = self._state
        if (state.turn, endpoint) in self._passback_noted:
            return
        line = passback_dropped_text(state.transcript, endpoint)
        if line is not None:
            self._passback_noted.add((state.turn, endpoint))
            state.event("model", "healed", line)

    async def _publish_retry(self) -> None:
        """A failed attempt's timeline events, published before the next attempt runs,
        so a follower reads the retry before that attempt's text."""
        events = self._state.events
        if events.in_history:
            return  # the next attempt's input carries them (`EventLog.carried`)
        if events.pending:
            await events.flush()

    def _count_attempts(self, routed: RoutedTurn) -> None:
        """Every attempt sent is a model attempt; every failed one followed by another (on
        the same candidate or the next) is a retry, by the type of its failure."""
        stats = self._state.stats
        sent = routed.sent
        stats.model_attempts += len(sent)
        for line in sent[:-1]:
            stats.count_retry(f"model_{line.error_type or 'error'}")

    def _count_usage(self, turn: AssembledTurn) -> None:
        stats = self._state.stats
        if turn.usage is not None:
            stats.prompt_tokens += turn.usage.prompt_tokens
            stats.completion_tokens += turn.usage.completion_tokens
            return
        produced = len(turn.text) + sum(len(c.arguments) + len(c.name) for c in turn.tool_calls)
        stats.completion_tokens += max(1, produced // CHARS_PER_TOKEN)


async def before_deadline(work: Awaitable[T], deadline: Deadline) -> T:
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
        raise Stop("deadline", "the run's deadline passed during a model turn")
    return task.result()
