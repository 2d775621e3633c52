"""`ChainAdmissionWorkflow`: one tenant's chain counts, and the only place they are decided.

A long-lived entity workflow per tenant (id `admission_workflow_id(tenant)`), started
on first use by update-with-start from the admission activity
(`steadyloop._activities.chain_admission`), like the endpoint-health entities. It answers:

- `admit` (update): register a run (a delegating root at its start), or decide whether
  a run may start a child and, when it may, count the child before answering. The
  handler holds `_deciding` from the decision to the record, across the one await it
  may make (asking Temporal which counted runs have closed, when the ceiling would
  refuse), so two admissions never both see the old count.
- `ledger` (query): the counts, for people and tests
  (`temporal workflow query --name ledger`).

Why an entity per tenant rather than an update to each chain's root: the tenant
ceiling and rate span chains, so a root could decide its chain's budget but not the
tenant's; and a root ends and continues-as-new, while an entity that is started on
demand is always there to ask (`steadyloop._chains.admission` says more).

Updates grow this workflow's history, so it continues as new after
`continue_as_new_after` handled requests (500 by default) or when Temporal suggests
it, after its handlers finish, carrying the ledger (closed chains pruned first). The
ledger is bounded: past `max_ledger_bytes` held (open chains, or closed ones inside the
rate horizon) a new run is refused by the `ledger_bound` rule, retryable, after the
entity forgot what closed.

`admit_many` (update) is `admit` for a batch: what one worker process queued while its
previous update was in flight (`steadyloop._activities.update_batches`), so a burst of
runs costs a few updates instead of one each past Temporal's 10 in flight.

Deterministic: time is `workflow.now()`, closed runs come from an activity.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from steadyloop._chains.admission import (
        ADMISSION_WORKFLOW,
        CLOSED_CHAIN_RUNS_ACTIVITY,
        AdmissionAnswer,
        AdmissionAnswers,
        AdmissionBatch,
        AdmissionEntityInput,
        AdmissionLedger,
        AdmissionRequest,
        ClosedRuns,
        ClosedRunsInput,
        answer,
        refused_by_ceiling,
    )
    from steadyloop._chains.rules import Admitted, Refused

CLOSED_RUNS_TIMEOUT = timedelta(seconds=20)
# A full ledger asks Temporal at most this often (each ask describes every active run).
LEDGER_SWEEP_EVERY = timedelta(seconds=30)


@workflow.defn(name=ADMISSION_WORKFLOW)
class ChainAdmissionWorkflow:
    """The chain and tenant counts of one tenant."""

    @workflow.init
    def __init__(self, start: AdmissionEntityInput) -> None:
        self._ledger = start.carried or AdmissionLedger(tenant=start.tenant)
        self._deciding = asyncio.Lock()
        self._handled = 0
        self._max_bytes = start.max_ledger_bytes
        self._swept_at: datetime | None = None  # when a full ledger last asked what closed

    @workflow.run
    async def run(self, start: AdmissionEntityInput) -> None:
        await workflow.wait_condition(
            lambda: (
                self._handled >= start.continue_as_new_after
                or workflow.info().is_continue_as_new_suggested()
            )
        )
        async with self._deciding:
            await self._drop_closed(self._ledger.active_ids())
            forgotten = self._ledger.prune(workflow.now())
            if forgotten:
                workflow.logger.info("forgot %d closed chain(s)", len(forgotten))
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            AdmissionEntityInput(
                tenant=self._ledger.tenant,
                carried=self._ledger,
                continue_as_new_after=start.continue_as_new_after,
                max_ledger_bytes=start.max_ledger_bytes,
            )
        )

    @workflow.query
    def ledger(self) -> AdmissionLedger:
        return self._ledger

    @workflow.update
    async def admit(self, request: AdmissionRequest) -> AdmissionAnswer:
        self._handled += 1
        async with self._deciding:
            return await self._decide(request)

    @workflow.update
    async def admit_many(self, batch: AdmissionBatch) -> AdmissionAnswers:
        """The requests one process queued while its previous batch was in flight
        (`steadyloop._activities.update_batches`), decided one at a time in their order,
        exactly as `admit` decides each: a batch changes how requests travel, not how
        they are counted. Each request counts toward `continue_as_new_after`."""
        self._handled += len(batch.requests)
        async with self._deciding:
            return AdmissionAnswers(answers=[await self._decide(r) for r in batch.requests])

    async def _decide(self, request: AdmissionRequest) -> AdmissionAnswer:
        """One request, with `_deciding` held."""
        ledger = self._ledger
        if request.child is None and request.root_limits is not None:
            return await self._admit_root(request)
        if ledger.adds_runs(request):
            full = await self._refused_by_bound()
            if full is not None:  # a registration is not adopted: nothing is decided
                return answer(ledger, request, None if request.child is None else full)
        ledger.merge(request)
        child = request.child
        if child is None:
            return answer(ledger, request, None)
        known = ledger.runs.get(child.workflow_id)
        now = workflow.now()
        if known is not None and known.parent == request.run.workflow_id:
            # A retry or a re-attach (still active), or a closed child run anew,
            # which is the same run for every count but the ceiling.
            rerun = Admitted() if known.active else ledger.decide_rerun(request, now)
            known.active = known.active or rerun.admitted
            return answer(ledger, request, rerun, known=True)
        decision = ledger.decide(request, now)
        # Some runs counted as active may have closed without telling us.
        if refused_by_ceiling(decision) and await self._drop_closed(
            ledger.active_others(request.run.workflow_id)
        ):
            decision = ledger.decide(request, now)
        if decision.admitted:
            ledger.record(request, now)
        return answer(ledger, request, decision)

    async def _refused_by_bound(self) -> Refused | None:
        """The refusal of a new run while the ledger holds `max_ledger_bytes` (its continue-as-new
        input must stay under Temporal's 2 MB payload limit), after forgetting what it
        can: runs that closed without telling it, then chains closed past the horizon.
        """
        ledger = self._ledger
        if not ledger.full(self._max_bytes):
            return None
        now = workflow.now()
        if self._swept_at is None or now - self._swept_at >= LEDGER_SWEEP_EVERY:
            self._swept_at = now
            await self._drop_closed(ledger.active_ids())
            ledger.prune(now)
        return ledger.refusal_when_full(self._max_bytes)

    async def _admit_root(self, request: AdmissionRequest) -> AdmissionAnswer:
        """A root asking to start: admitted (and counted) or refused (and not counted).

        Only requests carrying `root_limits` come here: a root that configured none is
        not counted.
        """
        ledger = self._ledger
        me = request.run.workflow_id
        known = ledger.runs.get(me)
        if known is not None and known.active:  # a retried admission of an admitted root
            return answer(ledger, request, Admitted(), known=True)
        full = await self._refused_by_bound()
        if full is not None:
            return answer(ledger, request, full)
        now = workflow.now()
        decision = ledger.decide_root(request, now)
        if refused_by_ceiling(decision) and await self._drop_closed(ledger.active_others(me)):
            decision = ledger.decide_root(request, now)
        if decision.admitted:
            ledger.record_root(request, now)
        return answer(ledger, request, decision)

    @admit.validator
    def _validate_admit(self, request: AdmissionRequest) -> None:
        if request.tenant != self._ledger.tenant:
            raise ValueError(
                f"this workflow holds the counts of tenant {self._ledger.tenant!r}, "
                f"not {request.tenant!r}"
            )

    async def _drop_closed(self, workflow_ids: list[str]) -> bool:
        """Stop counting the runs among `workflow_ids` that closed; True if any did."""
        if not workflow_ids:
            return False
        try:
            found: ClosedRuns = await workflow.execute_activity(
                CLOSED_CHAIN_RUNS_ACTIVITY,
                ClosedRunsInput(workflow_ids=workflow_ids),
                result_type=ClosedRuns,
                start_to_close_timeout=CLOSED_RUNS_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError as error:  # they stay counted: the count errs high
            workflow.logger.warning("could not learn which runs closed: %s", error)
            return False
        self._ledger.mark_closed(found.closed)
        gone = self._ledger.mark_missing(found.missing, workflow.now())
        return bool(found.closed or gone)
