"""`routed_completion`: one model turn across a route's candidates, by one table.

Called from workflow code (`ToolLoopWorkflow` routes every model turn through it,
over the run's route). It reads the candidates' shared health (a local activity,
answered from the worker's cache), plans (`plan_route`), and runs the model activity
on each planned candidate in order, one attempt per activity execution (so every
attempt is visible in history and no retry happens behind the table's back). After
each failure it asks `failure_disposition` what to do: wait and retry the same
candidate, go on to the next, or stop; and records the failure on the endpoint's
breaker when the table says the endpoint is at fault.

What it does that a loop of `try/except` would get wrong:

- An attempt that already forwarded output is never retried nor sent elsewhere. The
  flag is read from the failure (`produced_output` in the activity's error details)
  and, for an attempt that ended without an outcome (the worker died), from its last
  heartbeat (`StreamProgress.produced_output`). The stop carries what was shown: the
  failure's own copy, or, for a lost attempt, what the run's output host retained
  (`RouteStop.shown`), so the caller can hand it to the person who saw it.
- Every attempt of a turn gets its own number in `request.forward.attempt`
  (`first_attempt`, `first_attempt + 1`, ... across candidates): the model activity
  refuses to stream when the output host holds output from an earlier number of the
  same turn, and a subscriber tells attempts apart by it.
- A rejected request (400, content filter) moves on without touching the breaker,
  so one caller's malformed request cannot open a healthy endpoint for everyone.
- A half-open endpoint gets exactly one probe: the entity admits it by update before
  anything is sent; a run that is refused the probe moves on.
- A parameter the endpoint refused as unsupported is dropped for one more attempt;
  when that attempt succeeds, the endpoint's health remembers it, so later plans leave
  it out from the start.
- Backoff sleeps are workflow timers, and no sleep or attempt is started past the
  caller's deadline.
- A turn the caller cancels (an interrupt, its deadline, the run's cancellation) ends
  `aborted`, whatever its attempt then ended with: never retried, never a failure on
  the breaker. When the attempt forwards output it is scheduled with
  `WAIT_CANCELLATION_COMPLETED`, so the cancelled turn ends only once the activity has
  (its publisher's final send done) and what the host retained is then what was shown;
  the caller bounds that wait (`ToolLoopWorkflow`, `INTERRUPT_SETTLE`).

Health is read only when it can have changed (`HealthView`): a run whose
route has one endpoint, healthy when last read, less workflow time ago than the reading
worker's cache TTL (`EndpointHealth.view_ttl_s`, recorded with the read), with no failure
or recorded outcome since, plans from that view and schedules no read (each read is a
local-activity marker in history, about 700 bytes, and 1-3 ms of worker CPU, every
turn). The gate is the recorded result itself, so a replay takes the same path as the
live run did; a read that carries no TTL (`view_ttl_s=None`) means read every turn.

Health is advice: if a health activity fails, the turn goes on as if every endpoint
were healthy. The health activities run as local activities, so every worker that runs
a workflow calling this must register them (`EndpointHealthActivities.activities()`;
`steadyloop._worker.process.build_worker` does): a worker without them fails the
workflow task until one that has them takes it.

A half-open probe that fails for the request's own reason (a 400) records nothing, so
its lease (`BreakerPolicy.probe_lease_s`) lapses before another probe is admitted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError
from temporalio.workflow import ActivityCancellationType

from steadyloop._workflows.durable_time import Deadline, DurableClock

if TYPE_CHECKING:  # annotations only: no module-level object the sandbox test cannot vouch for
    from pydantic import JsonValue

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from steadyloop._output.forwarding import (
        READ_FORWARDED_OUTPUT_ACTIVITY,
        ForwardedOutput,
        ReadForwardedOutput,
    )
    from steadyloop._routing.disposition import (
        Action,
        AttemptContext,
        Disposition,
        failure_disposition,
    )
    from steadyloop._routing.endpoint_health import (
        ADMIT_PROBE_ACTIVITY,
        READ_ENDPOINT_HEALTH_ACTIVITY,
        RECORD_ENDPOINT_OUTCOME_ACTIVITY,
        EndpointHealth,
        EndpointOutcome,
        ProbeGrant,
        ProbeRequest,
        ReadHealthInput,
    )
    from steadyloop._routing.route_plan import (
        PlannedCandidate,
        RouteConfig,
        RoutePlan,
        RouteRequest,
        plan_route,
    )
    from steadyloop._routing.taxonomy import (
        DegradableParameter,
        StreamFailure,
    )
    from steadyloop._stream.completion import (
        STREAM_COMPLETION_ACTIVITY,
        AssembledTurn,
        CompletionRequest,
    )
    from steadyloop.errors import CONFIGURATION_ERROR_TYPES
    from steadyloop.telemetry._workflow import AttemptTrace, attempt_trace

__all__ = [
    "HealthView",
    "RouteAttempt",
    "RouteStop",
    "RoutedTurn",
    "facts_from_activity_error",
    "read_shown",
    "routed_completion",
]

HEALTH_TIMEOUT = timedelta(seconds=10)
# How old a read taken ahead of the first turn may be when that turn plans (workflow time).
HEALTH_AHEAD = timedelta(seconds=2)
HEALTH_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=200))
# Reading back what a lost attempt showed, from the run's output host.
READ_SHOWN_TIMEOUT = timedelta(seconds=30)
# Longest evidence kept with a degraded parameter or a breaker failure.
DETAIL_CHARS = 300


class HealthView:
    """The endpoint health a run last read, kept in workflow state between its turns.

    `fresh` answers instead of a read only when a read cannot change the plan: the route
    has one endpoint (health is per endpoint; with more, the order of candidates
    depends on all of them), that endpoint was known, closed and had no failure in its
    window when read, the read is younger in workflow time than the TTL the reading
    worker recorded with it (`view_ttl_s`: its cache would have answered a read within
    it with the same copy, so another run's failures reach this one at most that much
    later than before), and nothing happened since on this run's side (`forget`: an
    attempt failed, was a probe, or recorded an outcome). Deterministic: workflow time
    and recorded results. A new execution (continue-as-new) starts with no view and
    reads once.
    """

    def __init__(self) -> None:
        self._read_at: datetime | None = None
        self._health: dict[str, EndpointHealth] = {}
        # A read taken ahead of the first turn (`read_health_ahead`), for that turn only.
        self._ahead: tuple[datetime, dict[str, EndpointHealth]] | None = None

    def fresh(self, endpoints: list[str], now: datetime) -> dict[str, EndpointHealth] | None:
        """The view to plan from without a read, or None when a read is due."""
        if self._read_at is None or len(endpoints) != 1:
            return None
        health = self._health.get(endpoints[0])
        if health is None or not health.known or not health.quiet or not health.view_ttl_s:
            return None
        if now - self._read_at >= timedelta(seconds=health.view_ttl_s):
            return None
        return self._health

    def keep(self, health: dict[str, EndpointHealth], now: datetime) -> None:
        self._read_at, self._health = now, health

    def keep_ahead(self, health: dict[str, EndpointHealth], now: datetime) -> None:
        self._ahead = (now, health)

    def take_ahead(self, endpoints: list[str], now: datetime) -> dict[str, EndpointHealth] | None:
        """The read taken ahead, once, if it was of these endpoints and moments ago (the
        same workflow task, as a run's start usually is; a run paused first reads again)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or now - ahead[0] > HEALTH_AHEAD or set(ahead[1]) - set(endpoints):
            return None
        self.keep(ahead[1], ahead[0])
        return ahead[1]

    def forget(self) -> None:
        self._read_at, self._health = None, {}


class RouteAttempt(BaseModel):
    """One line of the route's log: an attempt, or a candidate skipped without one."""

    endpoint: str
    model: str
    # The attempt's number on its candidate (1-based), and within the caller's turn
    # (`ForwardTarget.attempt`); both 0 for a candidate skipped without an attempt.
    attempt: int = 0
    sequence: int = 0
    outcome: Literal["ok", "failed", "skipped"]
    rule: str = ""
    action: Action | None = None
    delay_s: float = 0.0
    failure: StreamFailure | None = None
    # The failure as Temporal reported it: the activity's error type (the stream
    # failure's kind, `unknown_endpoint`, ...) or `timeout_<type>` for a lost attempt.
    error_type: str = ""
    omitted: list[DegradableParameter] = Field(default_factory=list)
    breaker_recorded: bool = False
    detail: str = ""


class RouteStop(BaseModel):
    """Why the route ended without a turn.

    `rule`: a rule of the table stopped it (`produced_output`, `context_length`,
    `aborted`); `exhausted`: every planned candidate was tried; `no_candidate`: every
    candidate was skipped (breakers open, probe taken; `next_open_at` says when the
    first cool-off ends); `deadline`: the caller's deadline came first.

    A `produced_output` stop names the attempt that showed output (`sequence`) and what
    it showed (`shown`): from the failure itself (`activity`), or, when the attempt was
    lost, as the run's output host retained it (`stream`).
    """

    reason: Literal["rule", "exhausted", "no_candidate", "deadline"]
    rule: str = ""
    detail: str = ""
    failure: StreamFailure | None = None
    next_open_at: datetime | None = None
    sequence: int | None = None
    shown: ForwardedOutput | None = None
    shown_source: Literal["activity", "stream"] | None = None


class RoutedTurn(BaseModel):
    """The turn and the candidate that produced it, or why there is none; and the log."""

    turn: AssembledTurn | None = None
    endpoint: str | None = None
    model: str | None = None
    plan: RoutePlan
    attempts: list[RouteAttempt] = Field(default_factory=list)
    stop: RouteStop | None = None

    @property
    def sent(self) -> list[RouteAttempt]:
        """The attempts that were sent (every line of the log but skipped candidates)."""
        return [a for a in self.attempts if a.outcome != "skipped"]


async def routed_completion(
    route: RouteConfig,
    request: CompletionRequest,
    *,
    attempt_timeout: timedelta,
    heartbeat_timeout: timedelta | None = None,
    deadline: Deadline | None = None,
    deadline_slack: timedelta = timedelta(0),
    clock: DurableClock | None = None,
    first_attempt: int = 1,
    health_view: HealthView | None = None,
    observe: Callable[[RoutePlan | RouteAttempt], None] | None = None,
    settle: Callable[[], Awaitable[None]] | None = None,
    carried: Callable[[], list[JsonValue] | None] | None = None,
) -> RoutedTurn:
    """Run `request` across `route`; `request.endpoint` and `.model` are replaced per
    candidate, and `request.forward.attempt` per attempt, counting from `first_attempt`
    (a caller that routes one turn more than once continues the count). Never raises
    for a model failure: the result says what happened. A caller that keeps a
    `health_view` across its turns reads health only when it can have changed.

    `observe` is handed the plan, then each line of the log as it is written (before
    any backoff), so a caller can show a retry while it happens; it must not raise.
    `settle` is awaited after a failed attempt's line, before the backoff and the next
    attempt, so the caller can publish what it observed before that attempt's output.
    `carried` is called as each attempt is scheduled: what it returns rides with that
    attempt's input as its second payload (the run's events, recorded in history; None:
    the run keeps no log there, and the input is one payload).

    `deadline` stops the turn when its timer has fired (an attempt that forwards may run
    `deadline_slack` past it, for its cancellation to settle); `clock` is the time the
    plan and the health view read (`durable_time`), advanced as the turn's activities
    and timers resolve (a clock of its own when None)."""
    timing = _Timing(clock or DurableClock(), deadline, deadline_slack)
    health = await _health_for(route.endpoints, health_view, timing.clock)
    try:
        routed = await _route(
            route,
            request,
            health,
            attempt_timeout=attempt_timeout,
            heartbeat_timeout=heartbeat_timeout,
            timing=timing,
            first_attempt=first_attempt,
            observe=observe,
            settle=settle,
            carried=carried,
        )
    except BaseException:
        if health_view is not None:
            health_view.forget()
        raise
    if health_view is not None and not _quiet_turn(routed):
        health_view.forget()
    return routed


async def read_health_ahead(endpoints: list[str], view: HealthView, clock: DurableClock) -> None:
    """Read the endpoints' health for the first turn while the run does something else
    first (describes its tools): both local activities go out in one activation, and
    their markers are one batch in the run's first workflow task."""
    view.keep_ahead(await _read_health(endpoints), clock.now)


async def _health_for(
    endpoints: list[str], view: HealthView | None, clock: DurableClock
) -> dict[str, EndpointHealth]:
    """The read taken ahead, or the view when it is fresh, else a read kept in the view.
    Times are the durable clock's, read before the read (a local activity, after which
    `workflow.now()` can differ on replay)."""
    now = clock.now
    if view is not None:
        fresh = view.take_ahead(endpoints, now) or view.fresh(endpoints, now)
        if fresh is not None:
            return fresh
    health = await _read_health(endpoints)
    if view is not None:
        view.keep(health, now)
    return health


@dataclass(frozen=True)
class _Timing:
    """What a turn's time-dependent decisions read: the durable clock and the deadline."""

    clock: DurableClock
    deadline: Deadline | None
    slack: timedelta

    @property
    def passed(self) -> bool:
        return self.deadline is not None and self.deadline.passed

    def bounded(self, timeout: timedelta) -> timedelta:
        """`timeout`, cut so the attempt cannot outlive the deadline (and its slack)."""
        return timeout if self.deadline is None else self.deadline.remaining(timeout, self.slack)


def _quiet_turn(routed: RoutedTurn) -> bool:
    """One attempt, on its candidate's first try, answered, with no probe: nothing this
    run did can have changed the endpoint's health."""
    return (
        routed.turn is not None
        and len(routed.attempts) == 1
        and routed.attempts[0].outcome == "ok"
        and routed.attempts[0].attempt == 1
        and not any(c.probe for c in routed.plan.candidates)
    )


async def _route(
    route: RouteConfig,
    request: CompletionRequest,
    health: dict[str, EndpointHealth],
    *,
    attempt_timeout: timedelta,
    heartbeat_timeout: timedelta | None,
    timing: _Timing,
    first_attempt: int,
    observe: Callable[[RoutePlan | RouteAttempt], None] | None,
    settle: Callable[[], Awaitable[None]] | None = None,
    carried: Callable[[], list[JsonValue] | None] | None = None,
) -> RoutedTurn:
    plan = plan_route(route, RouteRequest(now=timing.clock.now, health=list(health.values())))
    log = _Log(observe, settle, carried)
    if observe is not None:
        observe(plan)
    last: RouteAttempt | None = None
    for position, planned in enumerate(plan.candidates):
        candidate = planned.candidate
        if planned.probe and not await _admit_probe(candidate.endpoint):
            log.append(_probe_taken(planned))
            continue
        ended = await _Candidate(
            planned,
            request,
            first_attempt=first_attempt,
            later_candidates=position < len(plan.candidates) - 1,
            larger_context_later=_larger_context_later(plan.candidates, position),
            attempt_timeout=attempt_timeout,
            heartbeat_timeout=heartbeat_timeout,
            timing=timing,
            log=log,
        ).run()
        if isinstance(ended, AssembledTurn):
            return RoutedTurn(
                turn=ended,
                endpoint=candidate.endpoint,
                model=candidate.model,
                plan=plan,
                attempts=log,
            )
        if isinstance(ended, RouteStop):
            return RoutedTurn(plan=plan, attempts=log, stop=ended)
        last = ended
    return RoutedTurn(plan=plan, attempts=log, stop=_no_turn(plan, log, last))


def _no_turn(plan: RoutePlan, log: _Log, last: RouteAttempt | None) -> RouteStop:
    """Why every candidate of the plan ended without a turn: all skipped, or all failed."""
    if last is None:
        return RouteStop(
            reason="no_candidate",
            detail="every candidate was skipped: "
            + "; ".join(
                [f"{s.candidate.endpoint}: {s.reason}" for s in plan.skipped]
                + [f"{a.endpoint}: {a.detail}" for a in log if a.outcome == "skipped"]
            ),
            next_open_at=plan.next_open_at,
        )
    return RouteStop(
        reason="exhausted",
        rule=last.rule,
        detail=f"every candidate failed; the last: {last.detail}",
        failure=last.failure,
    )


def _probe_taken(planned: PlannedCandidate) -> RouteAttempt:
    """A half-open candidate skipped: another run holds its probe."""
    return RouteAttempt(
        endpoint=planned.candidate.endpoint,
        model=planned.candidate.model,
        outcome="skipped",
        rule="probe_taken",
        detail="half-open, and another run holds the probe",
    )


class _Log(list[RouteAttempt]):
    """The route's log, handing each line to the caller's observer as it is written."""

    def __init__(
        self,
        observe: Callable[[RoutePlan | RouteAttempt], None] | None,
        settle: Callable[[], Awaitable[None]] | None = None,
        carried: Callable[[], list[JsonValue] | None] | None = None,
    ) -> None:
        super().__init__()
        self._observe = observe
        self._settle = settle
        self._carried = carried

    def append(self, entry: RouteAttempt) -> None:
        super().append(entry)
        if self._observe is not None:
            self._observe(entry)

    async def settled(self) -> None:
        """The caller's turn to act on what it observed, before another attempt."""
        if self._settle is not None:
            await self._settle()

    def carried(self) -> list[JsonValue] | None:
        """What the attempt being scheduled carries for the caller (its second payload)."""
        return None if self._carried is None else self._carried()


class _Candidate:
    """Attempts on one planned candidate, by the table: the turn, a stop, or the attempt
    that traversed to the next candidate. Retries on the candidate drop a degradable
    parameter or back off (racing the deadline's timer); each attempt's end advances the
    durable clock, since it is an event in history."""

    def __init__(
        self,
        planned: PlannedCandidate,
        request: CompletionRequest,
        *,
        first_attempt: int,
        later_candidates: bool,
        larger_context_later: bool,
        attempt_timeout: timedelta,
        heartbeat_timeout: timedelta | None,
        timing: _Timing,
        log: _Log,
    ) -> None:
        self._planned = planned
        self._candidate = planned.candidate
        self._request = request
        self._first_attempt = first_attempt
        self._later_candidates = later_candidates
        self._larger_context_later = larger_context_later
        self._attempt_timeout = attempt_timeout
        self._heartbeat_timeout = heartbeat_timeout
        self._timing = timing
        self._log = log
        self._omitted = list(planned.omit_parameters)
        self._dropped: dict[DegradableParameter, str] = {}
        self._attempt = 1  # the attempt's number on this candidate

    async def run(self) -> AssembledTurn | RouteStop | RouteAttempt:
        candidate = self._candidate
        while True:
            if self._timing.passed:
                return RouteStop(reason="deadline", detail="the deadline passed before an attempt")
            sequence = self._first_attempt + sum(1 for a in self._log if a.outcome != "skipped")
            sent = self._sent(sequence)
            trace = attempt_trace(candidate.endpoint, candidate.model, sequence, self._attempt)
            turn, failed = await self._send(sent, trace)
            if _cancel_requested():
                # Whatever the attempt ended with once its cancellation was asked for (a
                # stall it was in, a timeout of a dead worker, even its answer), the caller
                # gave up on the turn: not the endpoint's failure, nothing to retry.
                facts = StreamFailure(
                    kind="aborted", message="the turn was cancelled by its caller"
                )
            elif failed is None:
                assert turn is not None
                return await self._answered(sent, sequence, trace, turn)
            else:
                facts = facts_from_activity_error(failed)
            disposition, entry = await self._failed(sent, sequence, trace, facts, failed)
            if disposition.action == "stop":
                return await self._stopped(disposition, facts, sequence, sent, failed)
            await self._log.settled()
            if disposition.action == "traverse":
                return entry
            if disposition.drop_parameter is not None:
                self._omitted.append(disposition.drop_parameter)
                self._dropped[disposition.drop_parameter] = facts.message
            else:
                self._attempt += 1
            if disposition.delay_s > 0 and await self._backed_off_past_deadline(disposition):
                return RouteStop(
                    reason="deadline",
                    rule=disposition.rule,
                    detail=f"the deadline comes before the retry ({disposition.reason})",
                    failure=facts,
                )

    def _sent(self, sequence: int) -> CompletionRequest:
        """The request as this candidate's attempt `sequence` sends it."""
        request = self._request
        forward = request.forward
        return request.model_copy(
            update={
                "endpoint": self._candidate.endpoint,
                "model": self._candidate.model,
                "omit_parameters": sorted({*request.omit_parameters, *self._omitted}),
                "forward": None
                if forward is None
                else forward.model_copy(update={"attempt": sequence}),
            }
        )

    async def _send(
        self, sent: CompletionRequest, trace: AttemptTrace
    ) -> tuple[AssembledTurn | None, ActivityError | None]:
        """One model activity: its turn, or the error it ended with."""
        riding = self._log.carried()
        turn: AssembledTurn | None = None
        failed: ActivityError | None = None
        try:
            turn = await trace.scheduled(
                workflow.execute_activity(
                    STREAM_COMPLETION_ACTIVITY,
                    args=[sent] if riding is None else [sent, riding],
                    result_type=AssembledTurn,
                    start_to_close_timeout=self._timing.bounded(self._attempt_timeout),
                    heartbeat_timeout=self._heartbeat_timeout,
                    # The table owns retries: one attempt per execution, each in history.
                    retry_policy=RetryPolicy(maximum_attempts=1),
                    cancellation_type=_cancellation_type(sent),
                )
            )
        except ActivityError as error:
            failed = error
        self._timing.clock.advance()  # the attempt's end is an event in history
        return turn, failed

    async def _answered(
        self, sent: CompletionRequest, sequence: int, trace: AttemptTrace, turn: AssembledTurn
    ) -> AssembledTurn:
        """Log the answer, and record in the endpoint's health what it proved."""
        candidate = self._candidate
        self._log.append(
            RouteAttempt(
                endpoint=candidate.endpoint,
                model=candidate.model,
                attempt=self._attempt,
                sequence=sequence,
                outcome="ok",
                omitted=sent.omit_parameters,
            )
        )
        trace.ended(self._log[-1], turn)
        for parameter, evidence in self._dropped.items():
            await _record(candidate.endpoint, "degraded", evidence, parameter)
        if self._planned.probe:
            await _record(candidate.endpoint, "success", "the half-open probe succeeded")
        return turn

    async def _failed(
        self,
        sent: CompletionRequest,
        sequence: int,
        trace: AttemptTrace,
        facts: StreamFailure,
        failed: ActivityError | None,
    ) -> tuple[Disposition, RouteAttempt]:
        """What the table says of a failed attempt, recorded and logged."""
        candidate = self._candidate
        disposition = failure_disposition(
            facts,
            AttemptContext(
                attempt=self._attempt,
                attempts=candidate.attempts,
                backoff=candidate.backoff,
                max_retry_after_s=candidate.max_retry_after_s,
                omitted=self._omitted,
                later_candidates=self._later_candidates,
                larger_context_available=self._larger_context_later,
            ),
        )
        recorded = disposition.record_failure and await _record(
            candidate.endpoint, "failure", facts.describe()
        )
        entry = RouteAttempt(
            endpoint=candidate.endpoint,
            model=candidate.model,
            attempt=self._attempt,
            sequence=sequence,
            outcome="failed",
            rule=disposition.rule,
            action=disposition.action,
            delay_s=disposition.delay_s,
            failure=facts,
            error_type="cancelled" if failed is None else _error_type(failed),
            omitted=sent.omit_parameters,
            breaker_recorded=recorded,
            detail=disposition.reason,
        )
        self._log.append(entry)
        trace.ended(entry)
        return disposition, entry

    async def _stopped(
        self,
        disposition: Disposition,
        facts: StreamFailure,
        sequence: int,
        sent: CompletionRequest,
        failed: ActivityError | None,
    ) -> RouteStop:
        """The route stops here; an attempt that showed output says what it showed."""
        stop = RouteStop(
            reason="rule",
            rule=disposition.rule,
            detail=disposition.reason,
            failure=facts,
            sequence=sequence,
        )
        if disposition.rule == "produced_output" and failed is not None:
            shown, source = await _shown_output(failed, sent)
            stop = stop.model_copy(update={"shown": shown, "shown_source": source})
        return stop

    async def _backed_off_past_deadline(self, disposition: Disposition) -> bool:
        """Back off before the next attempt; True when the deadline came first.

        Not "does the deadline come first?" against the clock: the backoff races the
        deadline's timer, and whichever fires is an event in history."""
        timing = self._timing
        delay = timedelta(seconds=disposition.delay_s)
        cut = await timing.deadline.sleep(delay) if timing.deadline else await _sleep(delay)
        timing.clock.advance()
        return cut


def facts_from_activity_error(error: ActivityError) -> StreamFailure:
    """The facts of a failed model activity, as the workflow receives them.

    The model activity raises an `ApplicationError` whose type is the failure kind and
    whose first detail is the `StreamFailure` (plus `produced_output` once output was
    forwarded). An attempt that timed out (the worker died mid-stream) carries its last
    heartbeat, whose `produced_output` says whether a user already saw part of it.
    """
    cause = error.cause
    if isinstance(cause, CancelledError):
        return StreamFailure(kind="aborted", message=str(cause) or "the attempt was cancelled")
    if isinstance(cause, TimeoutError):
        return StreamFailure(
            kind="lost",
            message=f"the attempt timed out ({cause.type.name if cause.type else 'timeout'}) "
            "without an outcome",
            produced_output=_flag(cause.last_heartbeat_details),
        )
    if not isinstance(cause, ApplicationError):
        return StreamFailure(kind="lost", message=str(cause or error))
    produced = _flag(cause.details)
    if cause.type in CONFIGURATION_ERROR_TYPES:
        return StreamFailure(kind="configuration", message=cause.message, produced_output=produced)
    first = cause.details[0] if cause.details else None
    try:
        return StreamFailure.model_validate(first)
    except ValidationError:
        # Not a classified stream failure (an unexpected error in the activity).
        return StreamFailure(
            kind="lost", message=f"{cause.type}: {cause.message}", produced_output=produced
        )


async def _shown_output(
    error: ActivityError, sent: CompletionRequest
) -> tuple[ForwardedOutput, Literal["activity", "stream"]]:
    """What a person saw of an attempt that failed after forwarding output.

    The activity reports it as its failure's second detail; an attempt that was lost
    (the worker died) reported nothing, so the run's output host is asked for what it
    retained of this turn up to this attempt. `complete=False` says the text may be
    short of what was shown.
    """
    cause = error.cause
    if isinstance(cause, ApplicationError):
        if len(cause.details) > 1:
            return ForwardedOutput.model_validate(cause.details[1]), "activity"
        return ForwardedOutput(complete=False), "activity"
    forward = sent.forward
    if forward is None:
        return ForwardedOutput(complete=False), "stream"
    shown = await read_shown(
        ReadForwardedOutput(
            stream_id=forward.stream_id, turn=forward.turn, before_attempt=forward.attempt + 1
        )
    )
    return shown, "stream"


async def read_shown(
    request: ReadForwardedOutput, *, within: timedelta | None = None
) -> ForwardedOutput:
    """What the run's output host retained of a turn (the read activity).

    `within` bounds the read with its retries (an interrupt must end the run in bounded
    time even when the host cannot be read); without it, the read is retried until the
    host answers, as a lost attempt's stop has no other source for what was shown.
    """
    shown: ForwardedOutput = await workflow.execute_activity(
        READ_FORWARDED_OUTPUT_ACTIVITY,
        request,
        result_type=ForwardedOutput,
        start_to_close_timeout=READ_SHOWN_TIMEOUT if within is None else within,
        schedule_to_close_timeout=within,
    )
    return shown


def _cancellation_type(sent: CompletionRequest) -> ActivityCancellationType:
    """How a cancel of this attempt settles.

    A forwarding attempt waits for the activity to end (`WAIT_CANCELLATION_COMPLETED`):
    with `TRY_CANCEL` the workflow would move on at once while the activity, told at its
    next heartbeat (about a second), still sends its queued output from
    `OutputPublisher.__aexit__`, so reading the host then could miss a batch the person
    sees. An attempt that forwards nothing keeps `TRY_CANCEL` (nothing to wait for, and
    its history is unchanged). A dead worker never confirms the cancel; the caller
    bounds the wait, so it does not last until the heartbeat timeout.
    """
    if sent.forward is None or sent.wants_json():  # the activity forwards nothing
        return ActivityCancellationType.TRY_CANCEL
    return ActivityCancellationType.WAIT_CANCELLATION_COMPLETED


def _cancel_requested() -> bool:
    """Whether the task running this turn was cancelled (an interrupt, a deadline, the
    run's cancellation). The SDK delivers a task's cancel to the activity it awaits and
    then hands the task the activity's outcome, which for `WAIT_CANCELLATION_COMPLETED`
    may be a failure, a timeout or a result: the task's own cancel count is what says
    the caller asked for the stop. Deterministic: pure asyncio state."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _error_type(error: ActivityError) -> str:
    cause = error.cause
    if isinstance(cause, TimeoutError):
        return f"timeout_{cause.type.name.lower()}" if cause.type else "timeout"
    if isinstance(cause, ApplicationError):
        return cause.type or "error"
    return type(cause or error).__name__


def _flag(details: Any) -> bool:
    """`produced_output` from the first detail (a failure or a heartbeat), if any."""
    if not details:
        return False
    first = details[0]
    return isinstance(first, dict) and first.get("produced_output") is True


def _larger_context_later(candidates: list[PlannedCandidate], position: int) -> bool:
    here = candidates[position].candidate.context_tokens
    if here is None:
        return False
    return any((later.candidate.context_tokens or 0) > here for later in candidates[position + 1 :])


async def _sleep(delay: timedelta) -> bool:
    """A backoff with no deadline to race: never cut."""
    await workflow.sleep(delay)
    return False


# -- the health activities (advice: a failure here never fails the turn) -----------------


async def _read_health(endpoints: list[str]) -> dict[str, EndpointHealth]:
    try:
        read: list[EndpointHealth] = await workflow.execute_local_activity(
            READ_ENDPOINT_HEALTH_ACTIVITY,
            ReadHealthInput(endpoints=endpoints),
            result_type=list[EndpointHealth],
            start_to_close_timeout=HEALTH_TIMEOUT,
            retry_policy=HEALTH_RETRY,
        )
    except ActivityError as error:
        workflow.logger.warning("endpoint health unavailable, routing without it: %s", error)
        return {}
    return {h.endpoint: h for h in read}


async def _admit_probe(endpoint: str) -> bool:
    try:
        grant: ProbeGrant = await workflow.execute_local_activity(
            ADMIT_PROBE_ACTIVITY,
            ProbeRequest(endpoint=endpoint),
            result_type=ProbeGrant,
            start_to_close_timeout=HEALTH_TIMEOUT,
            retry_policy=HEALTH_RETRY,
        )
    except ActivityError as error:
        workflow.logger.warning("no probe decision for %r, trying it: %s", endpoint, error)
        return True
    return grant.granted


async def _record(
    endpoint: str,
    outcome: Literal["success", "failure", "degraded"],
    detail: str,
    parameter: DegradableParameter | None = None,
) -> bool:
    try:
        await workflow.execute_local_activity(
            RECORD_ENDPOINT_OUTCOME_ACTIVITY,
            EndpointOutcome(
                endpoint=endpoint,
                outcome=outcome,
                detail=detail[:DETAIL_CHARS],
                parameter=parameter,
            ),
            result_type=EndpointHealth,
            start_to_close_timeout=HEALTH_TIMEOUT,
            retry_policy=HEALTH_RETRY,
        )
    except ActivityError as error:
        workflow.logger.warning("could not record %s on %r: %s", outcome, endpoint, error)
        return False
    return True
