"""Child runs of a `ToolLoopWorkflow`: the `delegate` tool, admitted by chain rules.

Deterministic workflow code: measurements come from an activity, time from
`workflow.now()`. `ToolLoopWorkflow` holds one `ChildRuns` when its input carries a
`Delegation`, offers the `delegate` tool through it, and hands it each `delegate` call
from the receipt-guarded tool path. What the obvious version gets wrong, and where
this one prevents it:

- **An admission decided against a stale count.** Visibility lags behind starts:
  siblings (or two calls of one batch) that count through it at once all see the same
  count and all pass the budget. Every counting rule is decided by the tenant's
  admission entity (`steadyloop._chains.admission`), which counts the child before it
  answers; the run asks it through `ADMIT_CHAIN_RUN_ACTIVITY`, and a delegating root
  registers there at its first start, so it is counted before it delegates. Admission
  still holds `_admission` until the child has started.
- **A retried or repeated delegation starting a second child.** Each call runs under
  its receipt like an opaque tool: claimed before the child starts, completed with its
  answer, replayed when asked again. The child's id is derived from the parent's id
  and the receipt key, with `ALLOW_DUPLICATE_FAILED_ONLY`, so a parent whose ledger
  forgot the call (restarted under the same id, reset) re-attaches to the child that
  answered (`_attach`) instead of running it again; only a failed child is run anew.
- **A refusal recorded as the call's answer.** A refused call claims no receipt, so the
  same call asked again later is admitted afresh (a cooldown or a ceiling clears).
- **Children orphaned by a cancelled parent.** Cancelling the parent while it waits for
  a child cancels the child and waits for it to close; a parent that closes any other
  way (terminated, timed out) takes its children with it (`ParentClosePolicy.TERMINATE`).
  A re-attached child is not Temporal's child of this run, so it is cancelled through
  its external handle.
- **A cancellation read as a failed admission.** Temporal reports the in-flight
  admission of a cancelled run as an `ActivityError`; read as "no answer", it would
  end in a tool message in a run being cancelled. `raise_if_cancelled` ends the
  delegation as cancelled instead.
- **An authority that did not answer read as "admit".** Counts that could not be taken
  would let a burst through the budget that exists to stop it; the call is refused as
  retryable (`AdmissionUnavailable`), and depth, checked locally, still refuses first.
- **A budget escaped by delegating.** The parent's token budget counts its finished
  children's tokens (`RunStats.tokens_with_children`), and a child is started with a
  budget no larger than what the parent has left when it starts (`_tokens_left`); with
  nothing left the call is refused like a chain rule refusal, and no child starts.
  Children of one batch are not given shares: each gets what is left when it starts,
  counting the children finished by then, so siblings running at once may each get the
  same remainder. Splitting it would guess how the work divides (one sibling may need
  nearly all of it); the overshoot is bounded (each sibling by that remainder, like any
  budget checked at turn boundaries) and caught: the parent checks its budget, children
  included, at its next turn boundary and stops `token_budget`.
- **A root missing from its own chain's counts.** A delegating root upserts its chain
  attributes once, at its first start (they survive continue-as-new); a child gets them
  at its start, so it is counted from its first moment.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)

from steadyloop._workflows.durable_time import Deadline, DurableClock

with workflow.unsafe.imports_passed_through():
    from steadyloop._chains.admission import (
        ADMIT_CHAIN_RUN_ACTIVITY,
        AdmissionAnswer,
        AdmissionRequest,
        ChildAsk,
        RunEntry,
    )
    from steadyloop._chains.delegation_tool import (
        AWAIT_CHILD_RUN_ACTIVITY,
        DELEGATE_TOOL,
        DELEGATION_HORIZON_S,
        AwaitChildRunInput,
        DelegateRequest,
        child_failed_outcome,
        child_outcome,
        child_run_input,
        child_workflow_id,
        delegate_tool_description,
        read_delegate_request,
    )
    from steadyloop._chains.limits import (
        VISIBILITY_KINDS,
        ChainLimit,
        ChainMeasurements,
        ChainPosition,
        ChildRecord,
        chain_rules,
        pair_key,
    )
    from steadyloop._chains.queries import quotable
    from steadyloop._chains.rules import Refused, admit_child_run
    from steadyloop._chains.search_attributes import chain_search_attributes
    from steadyloop._receipts.decision import Execute, ReceiptKey
    from steadyloop._receipts.ledger import ReceiptLedger
    from steadyloop._routing.provider_profiles import schema_profile
    from steadyloop._run.models import Delegation, RunInput, RunResult, RunStats
    from steadyloop.errors import RECEIPT_CLAIM, RESERVED_TOOL_NAME, UNUSABLE_WORKFLOW_ID
    from steadyloop.events._publishing import log_mode_memo
    from steadyloop.tools._payloads import ToolDescription, ToolInvocation, ToolOutcome

# The entity answers in milliseconds; a ceiling check may describe the counted runs.
ADMIT_TIMEOUT = timedelta(seconds=30)
ADMIT_RETRY = RetryPolicy(maximum_attempts=3)
# An attached child is awaited by an activity; its heartbeat shows the waiter is alive.
ATTACH_HEARTBEAT_TIMEOUT = timedelta(seconds=60)
CHILD_LEASE_MARGIN = timedelta(seconds=5)


class ChildRuns:
    """The delegations of one run: admission, start or re-attach, answer, stats."""

    def __init__(
        self,
        run: RunInput,
        delegation: Delegation,
        *,
        stats: RunStats,
        receipts: ReceiptLedger,
        deadline: Deadline,
        clock: DurableClock,
        children: list[ChildRecord],
    ) -> None:
        info = workflow.info()
        self._run = run
        self._delegation = delegation
        self._stats = stats
        self._receipts = receipts
        self._deadline = deadline
        self._clock = clock  # time for chain rules, the same on replay (`durable_time`)
        self._me = info.workflow_id
        self._chain_root = run.lineage.root_of(self._me)
        self._position = ChainPosition(
            agent=run.agent,
            parent_agent=run.parent_agent,
            depth=run.lineage.depth,
            started_at=info.workflow_start_time,
        )
        self.children = children
        self._admission = asyncio.Lock()

    @classmethod
    def begin(
        cls,
        run: RunInput,
        delegation: Delegation,
        stats: RunStats,
        receipts: ReceiptLedger,
        deadline: Deadline,
        clock: DurableClock,
    ) -> ChildRuns:
        """Delegation for a run starting or continuing: its children carried over, and a
        root put into its chain's and tenant's counts at its first start."""
        if not quotable(workflow.info().workflow_id):
            raise ApplicationError(
                f"workflow id {workflow.info().workflow_id!r}: a run that delegates is counted "
                "by its id in Temporal visibility, which cannot match quotes, backslashes or "
                "control characters; start it under an id without them",
                type=UNUSABLE_WORKFLOW_ID,
                non_retryable=True,
            )
        carried = run.carried
        children = [] if carried is None else carried.children
        runs = cls(
            run,
            delegation,
            stats=stats,
            receipts=receipts,
            deadline=deadline,
            clock=clock,
            children=children,
        )
        if carried is None and run.lineage.is_root:
            attributes = chain_search_attributes(
                tenant=run.tenant_id, chain_root=runs._me, depth=0, agent=run.agent
            )
            workflow.upsert_search_attributes([p.key.value_set(p.value) for p in attributes])
        return runs

    async def register(self) -> None:
        """Count a delegating root from its first start in its tenant's entity (a child
        is counted by the admission that started it; a continued run already is)."""
        if self._run.carried is not None or not self._run.lineage.is_root:
            return
        try:
            await self._ask(None)
        except ActivityError as error:
            raise_if_cancelled(error)
            # Its first admission registers it too; until then it is not counted.
            workflow.logger.warning("chain registration failed: %s", innermost_message(error))

    def offer(self, tools: dict[str, ToolDescription]) -> dict[str, ToolDescription]:
        """The run's tools with `delegate` added (when there is anyone to delegate to: a
        run with an empty `to` is still counted in its tenant's limits)."""
        if not self._delegation.to:
            return tools
        if DELEGATE_TOOL in tools:
            raise ApplicationError(
                f"the run has a tool named {DELEGATE_TOOL!r}, which is reserved for delegation "
                "when the run carries a Delegation; rename the tool",
                type=RESERVED_TOOL_NAME,
                non_retryable=True,
            )
        profile = schema_profile(self._run.provider_profile)
        return {**tools, DELEGATE_TOOL: delegate_tool_description(self._delegation, profile)}

    async def attempt(
        self, invocation: ToolInvocation, key: ReceiptKey, decision: Execute
    ) -> ToolOutcome:
        """One claimed delegation: admitted, started (or re-attached), answered."""
        request = read_delegate_request(invocation.arguments, self._delegation)
        if isinstance(request, ToolOutcome):
            return request
        child_id = child_workflow_id(self._me, key)
        async with self._admission:
            refused = await self._refusal(request.agent, child_id)
            if refused is not None:
                self._stats.child_refusals += 1
                return refused
            # Read again after asking: a sibling may have finished meanwhile (a child
            # admitted and then refused here stays counted, erring toward refusing).
            tokens_left = self._tokens_left()
            if tokens_left is not None and tokens_left <= 0:
                self._stats.child_refusals += 1
                return ToolOutcome(
                    status="tool_error", content=self._budget_spent(), error_type="TokenBudgetSpent"
                )
            now = self._clock.now
            remaining = None if self._deadline.at is None else self._deadline.at - now
            child = child_run_input(
                self._run,
                parent_id=self._me,
                request=request,
                remaining_s=None if remaining is None else remaining.total_seconds(),
                tokens_left=tokens_left,
            )
            horizon = timedelta(seconds=child.limits.deadline_s or DELEGATION_HORIZON_S)
            claimed = self._receipts.claim(
                key, decision.attempt, now + horizon + CHILD_LEASE_MARGIN
            )
            if not claimed.applied:  # cannot happen in one workflow; say so, do not guess
                raise ApplicationError(
                    f"receipt claim refused for a delegation: {claimed}", type=RECEIPT_CLAIM
                )
            answer = await self._start(child_id, child, request, horizon)
            record = ChildRecord(workflow_id=child_id, agent=request.agent, started_at=now)
            self.children.append(record)
            self._stats.child_runs += 1
        try:
            result = await answer
        except (ChildWorkflowError, ActivityError) as error:
            self._receipts.fail(key, decision.attempt)
            return child_failed_outcome(request.agent, innermost_message(error))
        finally:
            record.running = False
        self._stats.fold_child(result.stats)
        outcome = child_outcome(request.agent, result)
        self._receipts.complete(key, decision.attempt, outcome.content)
        return outcome

    def _tokens_left(self) -> int | None:
        """What is left of the run's token budget, children included (None: no budget)."""
        budget = self._run.limits.token_budget
        return None if budget is None else budget - self._stats.tokens_with_children

    def _budget_spent(self) -> str:
        budget = self._run.limits.token_budget
        assert budget is not None  # only asked when a budget is spent
        return (
            f"Delegation refused: this run's token budget is spent "
            f"({self._stats.budget_use(budget)}), so a child run would have nothing to "
            "spend. Answer with what you have; delegating again will not help."
        )

    async def _refusal(self, agent: str, child_id: str) -> ToolOutcome | None:
        """Why delegating to `agent` (as run `child_id`) is refused now, or None.

        Rules that need no count and come first (depth, usually) are checked before
        anything is asked: when one refuses, no later rule could be the first.
        """
        limits = self._delegation.limits
        local = list(itertools.takewhile(lambda x: x.kind not in VISIBILITY_KINDS, limits))
        if local and len(local) < len(limits):
            early = self._admit(agent, local, ChainMeasurements())
            if early is not None:
                return _refusal_outcome(early)
        if not any(limit.kind in VISIBILITY_KINDS for limit in limits):
            return _refusal_outcome(self._admit(agent, limits, ChainMeasurements()))
        tokens_left = self._tokens_left()
        if tokens_left is not None and tokens_left <= 0:
            # Before asking: an admitted child that is never started stays counted.
            return ToolOutcome(
                status="tool_error", content=self._budget_spent(), error_type="TokenBudgetSpent"
            )
        ask = ChildAsk(workflow_id=child_id, agent=agent, limits=list(limits))
        try:
            answered = await self._ask(ask)
        except ActivityError as error:
            raise_if_cancelled(error)
            why = innermost_message(error)
            workflow.logger.warning("chain admission did not answer: %s", why)
            return ToolOutcome(
                status="tool_error",
                content=(
                    "Delegation refused: the chain admission authority did not answer "
                    f"({why}), so the chain's counts cannot be checked. Trying again later "
                    "can succeed."
                ),
                error_type="AdmissionUnavailable",
            )
        admission = answered.admission
        return _refusal_outcome(admission if isinstance(admission, Refused) else None)

    async def _ask(self, child: ChildAsk | None) -> AdmissionAnswer:
        """The tenant's entity: register this run (`child` None) or admit `child`."""
        request = AdmissionRequest(
            tenant=self._run.tenant_id,
            run=RunEntry(
                workflow_id=self._me,
                chain_root=self._chain_root,
                parent=self._run.lineage.parent_id,
                agent=self._run.agent,
                pair=self._position.own_pair,
                started_at=self._position.started_at,
            ),
            position=self._position,
            children=self.children,
            child=child,
        )
        answer: AdmissionAnswer = await workflow.execute_activity(
            ADMIT_CHAIN_RUN_ACTIVITY,
            request,
            result_type=AdmissionAnswer,
            start_to_close_timeout=ADMIT_TIMEOUT,
            retry_policy=ADMIT_RETRY,
        )
        return answer

    def _admit(
        self, agent: str, limits: Sequence[ChainLimit], measured: ChainMeasurements
    ) -> Refused | None:
        admission = admit_child_run(
            chain_rules(
                limits,
                position=self._position,
                target=agent,
                children=self.children,
                measured=measured,
                now=self._clock.now,
            )
        )
        return admission if isinstance(admission, Refused) else None

    async def _start(
        self, child_id: str, child: RunInput, request: DelegateRequest, horizon: timedelta
    ) -> Awaitable[RunResult]:
        """The child's answer to wait for: a new child, or the one that already has this id."""
        try:
            return await workflow.start_child_workflow(
                "ToolLoopWorkflow",
                child,
                id=child_id,
                result_type=RunResult,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                search_attributes=chain_search_attributes(
                    tenant=self._run.tenant_id,
                    chain_root=self._chain_root,
                    depth=child.lineage.depth,
                    agent=request.agent,
                    parent=self._me,
                    pair=pair_key(self._run.agent, request.agent),
                ),
                static_summary=f"{request.agent}: {request.task[:120]}",
                memo=log_mode_memo(child),  # where its followers find its log
            )
        except WorkflowAlreadyStartedError:
            return self._attach(child_id, horizon)

    async def _attach(self, child_id: str, horizon: timedelta) -> RunResult:
        try:
            result: RunResult = await workflow.execute_activity(
                AWAIT_CHILD_RUN_ACTIVITY,
                AwaitChildRunInput(workflow_id=child_id),
                result_type=RunResult,
                schedule_to_close_timeout=horizon + CHILD_LEASE_MARGIN,
                heartbeat_timeout=ATTACH_HEARTBEAT_TIMEOUT,
            )
        except ActivityError as error:
            if isinstance(error.cause, CancelledError):
                await workflow.get_external_workflow_handle(child_id).cancel()
            raise_if_cancelled(error)
            raise
        return result


def _refusal_outcome(refused: Refused | None) -> ToolOutcome | None:
    if refused is None:
        return None
    return ToolOutcome(status="tool_error", content=refused.reason, error_type="ChainRuleRefused")


def raise_if_cancelled(error: ActivityError) -> None:
    """Raise `asyncio.CancelledError` when `error` is an activity cancelled because this
    run was (Temporal reports it as an `ActivityError` caused by `CancelledError`)."""
    if isinstance(error.cause, CancelledError):
        raise asyncio.CancelledError from None


def innermost_message(error: BaseException) -> str:
    """The innermost message: the outer errors only say which child or activity failed.

    An application error's type is named once: `str()` prefixes it even to a message
    that already starts with it (the model activity's failures do).
    """
    cause: BaseException = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    text = cause.message if isinstance(cause, FailureError) else str(cause)
    kind = cause.type if isinstance(cause, ApplicationError) else None
    if kind and not text.startswith(kind):
        text = f"{kind}: {text}"
    return text or type(cause).__name__
