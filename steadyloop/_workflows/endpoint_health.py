"""`EndpointHealthWorkflow`: one endpoint's breaker and degradations, shared by every run.

A long-lived entity workflow per endpoint (id `health_workflow_id(name)`), started on
first use by update-with-start from the health activities. It answers:

- `record` (update): an attempt's outcome (success, failure, or a parameter the
  endpoint refused); returns the health after it, so the caller's cache holds what the
  entity decided rather than a guess.
- `admit_probe` (update): whether an attempt may go now. Updates are handled one at a
  time, so of two runs that both see a half-open breaker exactly one gets the probe.
- `record_many`, `admit_probes` (updates): the same for a batch, what one worker
  process queued while its previous update was in flight
  (`steadyloop._activities.update_batches`), so 500 runs reporting an outage at once cost
  a few updates instead of 500 past Temporal's 10 in flight per workflow.
  An outcome carries its report id (the reporting run and call), so one sent again
  after its answer was lost (a timed-out local activity, retried) is counted once.
- `health` (query): the state, for the activities' cache and for people
  (`temporal workflow query --name health`).
- `forget_degradation` (signal): send a parameter again (a provider added support).

Why an entity workflow rather than a table in each worker: the breaker must be the same
for every worker and survive restarts, and workflow code may only learn it through a
recorded input. Updates and signals grow this workflow's history, so it continues as
new after `continue_as_new_after` handled messages (500 by default, about four
history events each, far below the history and 2,000-update limits) or when Temporal
suggests it,
after its handlers finish, carrying the state.

Deterministic: time is `workflow.now()`; the breaker is `steadyloop._routing.circuit_breaker`.
Log lines (a breaker opening or closing, a parameter degraded) go to the worker's log
through `workflow.logger`, which stays silent during replay.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._routing.circuit_breaker import (
        BreakerPhase,
        BreakerPolicy,
        BreakerState,
        admit_probe,
        breaker_phase,
        record_failure,
        record_success,
    )
    from steadyloop._routing.endpoint_health import (
        ENDPOINT_HEALTH_WORKFLOW,
        RECENT_REPORTS,
        DegradedParameter,
        EndpointHealth,
        EndpointHealthInput,
        EndpointOutcome,
        OutcomeBatch,
        ProbeBatch,
        ProbeGrant,
        ProbeGrants,
        ProbeRequest,
    )
    from steadyloop._routing.taxonomy import DegradableParameter
    from steadyloop.telemetry._workflow import breaker_opened


@workflow.defn(name=ENDPOINT_HEALTH_WORKFLOW)
class EndpointHealthWorkflow:
    """The shared health of one model endpoint."""

    @workflow.init
    def __init__(self, start: EndpointHealthInput) -> None:
        carried = start.carried
        self._endpoint = start.endpoint
        self._breaker = carried.breaker if carried else BreakerState()
        self._policy = carried.policy if carried else BreakerPolicy()
        self._degraded: dict[str, DegradedParameter] = (
            {d.parameter: d for d in carried.degraded} if carried else {}
        )
        self._handled = 0
        # Report ids already counted, oldest first (a dict keeps insertion order).
        self._reports: dict[str, None] = dict.fromkeys(start.recent_reports)

    @workflow.run
    async def run(self, start: EndpointHealthInput) -> None:
        await workflow.wait_condition(
            lambda: (
                self._handled >= start.continue_as_new_after
                or workflow.info().is_continue_as_new_suggested()
            )
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            EndpointHealthInput(
                endpoint=self._endpoint,
                carried=self._health(),
                continue_as_new_after=start.continue_as_new_after,
                recent_reports=list(self._reports),
            )
        )

    # -- handlers ------------------------------------------------------------------------

    @workflow.query
    def health(self) -> EndpointHealth:
        return self._health()

    @workflow.update
    def record(self, outcome: EndpointOutcome) -> EndpointHealth:
        self._apply(outcome)
        return self._health()

    @workflow.update
    def record_many(self, batch: OutcomeBatch) -> EndpointHealth:
        """The outcomes one process queued while its previous update was in flight
        (`steadyloop._activities.update_batches`), applied in their order as `record`
        applies each; the health after the last. Each counts toward
        `continue_as_new_after`."""
        for outcome in batch.outcomes:
            self._apply(outcome)
        return self._health()

    @record_many.validator
    def _validate_record_many(self, batch: OutcomeBatch) -> None:
        for outcome in batch.outcomes:
            self._validate_record(outcome)

    def _apply(self, outcome: EndpointOutcome) -> None:
        now, before = self._begin(outcome.policy)
        if outcome.report is not None:
            if outcome.report in self._reports:
                return  # a retry of a report already counted (its answer was lost)
            self._reports[outcome.report] = None
            while len(self._reports) > RECENT_REPORTS:
                del self._reports[next(iter(self._reports))]
        if outcome.outcome == "failure":
            self._breaker = record_failure(self._breaker, self._policy, now, outcome.detail)
        elif outcome.outcome == "success":
            self._breaker = record_success(self._breaker, now)
        elif outcome.parameter is not None and outcome.parameter not in self._degraded:
            self._degraded[outcome.parameter] = DegradedParameter(
                parameter=outcome.parameter, since=now, evidence=outcome.detail[:300]
            )
            workflow.logger.warning(
                "endpoint %r does not support the request parameter %r; it will not be "
                "sent to this endpoint again (the provider said: %s)",
                self._endpoint,
                outcome.parameter,
                outcome.detail[:300] or "nothing",
            )
        self._log_transition(before, now)

    @record.validator
    def _validate_record(self, outcome: EndpointOutcome) -> None:
        self._check_endpoint(outcome.endpoint)
        if outcome.outcome == "degraded" and outcome.parameter is None:
            raise ValueError("a 'degraded' outcome names the parameter")

    @workflow.update
    def admit_probe(self, request: ProbeRequest) -> ProbeGrant:
        return self._grant(request)

    @admit_probe.validator
    def _validate_admit_probe(self, request: ProbeRequest) -> None:
        self._check_endpoint(request.endpoint)

    @workflow.update
    def admit_probes(self, batch: ProbeBatch) -> ProbeGrants:
        """`admit_probe` for a batch, in order: of the runs that asked at once, the first
        gets the probe and the rest are refused, as they would be one by one."""
        return ProbeGrants(grants=[self._grant(request) for request in batch.requests])

    @admit_probes.validator
    def _validate_admit_probes(self, batch: ProbeBatch) -> None:
        for request in batch.requests:
            self._check_endpoint(request.endpoint)

    def _grant(self, request: ProbeRequest) -> ProbeGrant:
        now, before = self._begin(request.policy)
        self._breaker, granted = admit_probe(self._breaker, self._policy, now)
        if granted and before == "half_open":
            workflow.logger.info("endpoint %r is half-open: one probe admitted", self._endpoint)
        return ProbeGrant(endpoint=self._endpoint, granted=granted, health=self._health())

    @workflow.signal
    def forget_degradation(self, parameter: DegradableParameter) -> None:
        """Send `parameter` to this endpoint again."""
        self._handled += 1
        if self._degraded.pop(parameter, None) is not None:
            workflow.logger.warning(
                "endpoint %r: the parameter %r will be sent again", self._endpoint, parameter
            )

    # -- helpers -------------------------------------------------------------------------

    def _begin(self, policy: BreakerPolicy | None) -> tuple[datetime, BreakerPhase]:
        """Count the message, adopt the worker's policy; the time and the phase before."""
        self._handled += 1
        if policy is not None:
            self._policy = policy
        now = workflow.now()
        return now, breaker_phase(self._breaker, now)

    def _check_endpoint(self, endpoint: str) -> None:
        if endpoint != self._endpoint:
            raise ValueError(
                f"this workflow holds the health of {self._endpoint!r}, not {endpoint!r}"
            )

    def _health(self) -> EndpointHealth:
        return EndpointHealth(
            endpoint=self._endpoint,
            breaker=self._breaker,
            policy=self._policy,
            degraded=sorted(self._degraded.values(), key=lambda d: d.parameter),
            as_of=workflow.now(),
        )

    def _log_transition(self, before: BreakerPhase, now: datetime) -> None:
        after = breaker_phase(self._breaker, now)
        if after == before:
            return
        if after == "open":
            breaker_opened(self._endpoint)
            workflow.logger.warning(
                "endpoint %r: breaker opened until %s (was %s; last failure: %s)",
                self._endpoint,
                self._breaker.open_until,
                before.replace("_", "-"),
                self._breaker.last_failure or "unknown",
            )
        elif after == "closed":
            workflow.logger.info(
                "endpoint %r: breaker closed (the probe succeeded)", self._endpoint
            )
