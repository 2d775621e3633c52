"""Chain admission: the one authoritative count behind the counting chain rules. Pure.

Every counting rule (`chain_budget`, `pair_seen`, `pair_cooldown`, `tenant_rate`,
`tenant_ceiling`) is decided against an `AdmissionLedger`: the runs of one tenant, held
by one entity workflow per tenant (`steadyloop._workflows.chain_admission`), which
decides one admission at a time and records the child it admits before it answers.
What the obvious versions get wrong, and where it is prevented:

- **Counting through visibility.** Visibility is eventually consistent. Two sibling
  runs that ask at once both see the count from before either started a child, and
  both admit: a chain budget of 6 ends with 7 runs. Serializing one run's
  own admissions does not help against a cousin. Here the count and the decision are
  one step of one workflow (`decide`, then `record`), so no two admissions can both
  see the old count. Visibility is left to listing and searching.
- **A retried admission counted twice.** The admission activity may be retried after a
  timeout whose update did land. An admission is keyed by the child's workflow id
  (derived from the parent's id and the call's receipt key), and a child id already
  recorded is admitted again without being counted again (`known`): a re-attach, a
  retry and a failed child run anew are one run (one run anew is checked against the
  ceiling only: `decide_rerun`).
- **A counted run that never ends.** The ceiling needs runs to leave the count, but a
  terminated run says nothing. Runs leave it three ways: a parent's request carries
  which of its children finished (`merge`); and when the ceiling would refuse, the
  entity asks Temporal (a describe, which is strongly consistent) which of the runs it
  counts as active have closed, and decides again (`active_others`, `mark_closed`).
  A run that could not be described stays counted: the count errs high, never low.
- **A child not started yet read as closed.** The parent starts a child only after
  its admission answered; a ceiling check in between finds no such run. A run that
  is not found leaves the count only once it was admitted `START_GRACE_S` ago
  (`mark_missing`): by then its parent started it or never will (the parent crashed,
  or refused the call after all for a spent token budget).
- **Per-chain and per-tenant entities.** The ceiling and the rate span a tenant's
  chains; one admission must be checked against the chain's counts and the tenant's
  at once. Two entities would need a reservation in one undone when the other refuses;
  one entity per tenant decides both in one step.
- **Roots never admitted.** A root run started from outside (`steadyloop serve`) is
  counted once it delegates, but nothing decided whether it could start: a tenant's
  own roots could exceed `max_active`. A root asks before it starts (`root_limits`):
  `decide_root` holds it to the tenant's rate and ceiling, counting every other run of
  the tenant, and the root is recorded only when admitted (a refused root is not
  counted, so refusals do not fill the ceiling they were refused by).
- **A ledger that outgrows its own input.** The ledger rides in the entity's
  continue-as-new input, which Temporal refuses past 2 MB: about 8,000 runs in open
  chains. Closed chains are pruned, but open ones cannot be, so the entity holds at most
  `max_bytes` of it (`DEFAULT_MAX_LEDGER_BYTES`, counted as entries are added, since
  run ids grow with depth) and refuses any request that would add a run past it
  (`adds_runs`) with the retryable `ledger_bound` rule (`full`,
  `refusal_when_full`), after learning which counted runs closed; a registration it
  cannot hold is answered without being adopted. A retry or a known run asking again
  adds nothing and is decided as before. So the ledger holds at most `max_bytes` plus
  what one request adds, and a refusal errs toward fewer runs, never a wrong count.
- **Lost when the root ends or continues as new.** The ledger is not in the root: a
  root continuing-as-new keeps its workflow id and so its entry, a root that ended
  leaves its chain's entries in place until it is pruned, and the entity carries the
  ledger across its own continue-as-new.

The rules themselves are `steadyloop._chains.limits.chain_rules` and
`steadyloop._chains.rules.admit_child_run`, unchanged: the ledger supplies, for the
asking run, the counts of the other runs and its own children.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PrivateAttr

from steadyloop._chains.limits import (
    ChainLimit,
    ChainMeasurements,
    ChainPosition,
    ChildRecord,
    PairCooldownLimit,
    PairRecency,
    TenantCeilingLimit,
    TenantRateLimit,
    chain_rules,
    pair_key,
)
from steadyloop._chains.rules import (
    Admission,
    Admitted,
    ChainRule,
    LedgerBoundRule,
    Refused,
    TenantCeilingRule,
    TenantRateRule,
    admit_child_run,
)

__all__ = [
    "ADMISSION_WORKFLOW",
    "ADMISSION_WORKFLOW_ID_PREFIX",
    "ADMIT_CHAIN_RUN_ACTIVITY",
    "CLOSED_CHAIN_RUNS_ACTIVITY",
    "DEFAULT_MAX_LEDGER_BYTES",
    "START_GRACE_S",
    "AdmissionAnswer",
    "AdmissionAnswers",
    "AdmissionBatch",
    "AdmissionEntityInput",
    "AdmissionLedger",
    "AdmissionRequest",
    "ChildAsk",
    "ClosedRuns",
    "ClosedRunsInput",
    "RunEntry",
    "admission_workflow_id",
    "answer",
    "refused_by_ceiling",
]

ADMISSION_WORKFLOW = "steadyloop.ChainAdmission"
ADMIT_CHAIN_RUN_ACTIVITY = "steadyloop.admit_chain_run"
CLOSED_CHAIN_RUNS_ACTIVITY = "steadyloop.closed_chain_runs"
ADMISSION_WORKFLOW_ID_PREFIX = "steadyloop-chain-admission/"
# How long an admitted child may take to appear before "not found" means "gone".
START_GRACE_S = 300.0
# The serialized ledger one tenant's entity holds at most: half of Temporal's 2 MB
# payload limit, leaving room for the rest of its continue-as-new input.
DEFAULT_MAX_LEDGER_BYTES = 1_000_000


def admission_workflow_id(tenant: str, prefix: str = ADMISSION_WORKFLOW_ID_PREFIX) -> str:
    """The entity holding a tenant's counts: one per tenant in the namespace."""
    return prefix + tenant


class RunEntry(BaseModel):
    """One run of the tenant as the ledger counts it."""

    model_config = ConfigDict(extra="forbid")

    workflow_id: str
    chain_root: str
    parent: str | None = None  # None: a root
    agent: str
    pair: str | None = None  # the unordered (parent's agent, agent); None for a root
    started_at: AwareDatetime
    active: bool = True


class ChildAsk(BaseModel):
    """The child a run asks to start: its derived id, its agent, the run's limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workflow_id: str
    agent: str
    limits: list[ChainLimit]


class AdmissionRequest(BaseModel):
    """A run asking the authority: register itself (`child` None) or admit a child.

    `children` is what the asking run knows of its own children (carried across its
    continue-as-new); the ledger adopts the ones it lacks and the ends it did not know.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str
    run: RunEntry
    position: ChainPosition
    children: list[ChildRecord] = Field(default_factory=list)
    child: ChildAsk | None = None
    # A root asking to start (`child` None): its tenant's rate and ceiling limits. None:
    # a registration, which decides nothing.
    root_limits: list[ChainLimit] | None = None


class AdmissionBatch(BaseModel):
    """Requests one process queued for the entity, decided in this order (`admit_many`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: list[AdmissionRequest]


class AdmissionAnswer(BaseModel):
    """The decision (None for a registration) and the counts after it, for logs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    admission: Annotated[Admission | None, Field(default=None)]
    runs_in_chain: int
    tenant_active: int
    known: bool = False  # the child id was admitted before: not counted again


class AdmissionAnswers(BaseModel):
    """One answer per request of an `AdmissionBatch`, in its order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answers: list[AdmissionAnswer]


class ClosedRunsInput(BaseModel):
    """Runs the entity counts as active; the activity answers which have closed."""

    workflow_ids: list[str]


class ClosedRuns(BaseModel):
    """Of the runs asked about: those that closed, and those Temporal does not know."""

    closed: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)


class AdmissionLedger(BaseModel):
    """A tenant's runs, keyed by workflow id (one entry per run, across continue-as-new).

    `horizon_s` is the longest rate window or cooldown any request used: entries of a
    closed chain are kept that long, so a rule reading recent starts still sees them.
    """

    model_config = ConfigDict(extra="forbid")

    tenant: str
    runs: dict[str, RunEntry] = Field(default_factory=dict)
    horizon_s: float = 0.0
    # The serialized size, kept as entries are added (None: measure it when asked).
    _bytes: int | None = PrivateAttr(default=None)

    def _put(self, entry: RunEntry) -> None:
        """Hold `entry`, keeping the size up to date (an entry serializes on its own in
        the same bytes it takes in the ledger, with its key, a colon and a comma)."""
        if self._bytes is not None:
            old = self.runs.get(entry.workflow_id)
            self._bytes += _entry_bytes(entry) - (0 if old is None else _entry_bytes(old))
        self.runs[entry.workflow_id] = entry

    def bytes_held(self) -> int:
        """The ledger's serialized size, within a byte per run (a run closed since it was
        counted serializes one byte longer)."""
        if self._bytes is None:
            self._bytes = len(self.model_dump_json().encode())
        return self._bytes

    # -- what requests tell the ledger --------------------------------------------------

    def merge(self, request: AdmissionRequest) -> None:
        """Adopt the asking run (it is running: it asks) and what it knows of its children."""
        me = request.run
        known = self.runs.get(me.workflow_id)
        if known is None:
            self._put(me.model_copy(update={"active": True}))
        else:
            known.active = True
        for child in request.children:
            entry = self.runs.get(child.workflow_id)
            if entry is None:
                self._put(
                    RunEntry(
                        workflow_id=child.workflow_id,
                        chain_root=me.chain_root,
                        parent=me.workflow_id,
                        agent=child.agent,
                        pair=pair_key(me.agent, child.agent),
                        started_at=child.started_at,
                        active=child.running,
                    )
                )
            elif not child.running:
                entry.active = False
        if request.child is not None:
            for limit in request.child.limits:
                if isinstance(limit, TenantRateLimit):
                    self.horizon_s = max(self.horizon_s, limit.window_s)
                elif isinstance(limit, PairCooldownLimit):
                    self.horizon_s = max(self.horizon_s, limit.cooldown_s)

    def mark_closed(self, workflow_ids: Iterable[str]) -> None:
        for workflow_id in workflow_ids:
            entry = self.runs.get(workflow_id)
            if entry is not None:
                entry.active = False

    def mark_missing(self, workflow_ids: Iterable[str], now: datetime) -> list[str]:
        """Runs Temporal does not know: closed once admitted `START_GRACE_S` ago (a
        younger one may not be started yet). Returns the ones marked closed."""
        cutoff = now - timedelta(seconds=START_GRACE_S)
        gone = [w for w in workflow_ids if w in self.runs and self.runs[w].started_at <= cutoff]
        self.mark_closed(gone)
        return gone

    # -- deciding -----------------------------------------------------------------------

    def decide(self, request: AdmissionRequest, now: datetime) -> Admitted | Refused:
        """The first refusing rule for `request.child`, from the counts held now."""
        assert request.child is not None  # a registration decides nothing
        me = request.run.workflow_id
        root = request.run.chain_root
        pair = pair_key(request.run.agent, request.child.agent)
        mine = [e for e in self.runs.values() if e.parent == me]
        others = [e for e in self.runs.values() if e.workflow_id != me and e.parent != me]
        chain = [e for e in others if e.chain_root == root]
        in_pair = [e for e in chain if e.pair == pair]
        window = next(
            (x.window_s for x in request.child.limits if isinstance(x, TenantRateLimit)), None
        )
        measured = ChainMeasurements(
            runs_in_chain=len(chain),
            pair_runs=len(in_pair),
            pair_recency=PairRecency(
                last_started=max((e.started_at for e in in_pair), default=None)
            ),
            tenant_started_in_window=None
            if window is None
            else sum(e.started_at >= now - timedelta(seconds=window) for e in others),
            tenant_active=sum(e.active for e in others),
        )
        children = [
            ChildRecord(
                workflow_id=e.workflow_id, agent=e.agent, started_at=e.started_at, running=e.active
            )
            for e in mine
        ]
        return admit_child_run(
            chain_rules(
                request.child.limits,
                position=request.position,
                target=request.child.agent,
                children=children,
                measured=measured,
                now=now,
            )
        )

    def decide_root(self, request: AdmissionRequest, now: datetime) -> Admitted | Refused:
        """May the root `request.run` start? Its tenant's rate and ceiling limits, counting
        every run of the tenant but itself (a root has no chain, pair or depth yet)."""
        assert request.root_limits is not None
        me = request.run.workflow_id
        others = [e for e in self.runs.values() if e.workflow_id != me]
        rules: list[ChainRule] = []
        for limit in request.root_limits:
            if isinstance(limit, TenantRateLimit):
                self.horizon_s = max(self.horizon_s, limit.window_s)
                window = now - timedelta(seconds=limit.window_s)
                rules.append(
                    TenantRateRule(
                        started_in_window=sum(e.started_at >= window for e in others),
                        window_s=limit.window_s,
                        max_started=limit.max_started,
                    )
                )
            elif isinstance(limit, TenantCeilingLimit):
                rules.append(
                    TenantCeilingRule(
                        active=sum(e.active for e in others), max_active=limit.max_active
                    )
                )
        return admit_child_run(rules)

    def record_root(self, request: AdmissionRequest, now: datetime) -> None:
        """Count the admitted root from this moment (before the answer leaves)."""
        self._put(
            request.run.model_copy(update={"started_at": now, "active": True, "parent": None})
        )

    def decide_rerun(self, request: AdmissionRequest, now: datetime) -> Admitted | Refused:
        """A closed child run again under its id: only the ceiling applies (every other
        count already holds it), counted without the child itself."""
        assert request.child is not None
        ceiling = [x for x in request.child.limits if isinstance(x, TenantCeilingLimit)]
        child = self.runs.pop(request.child.workflow_id)
        try:
            rerun = request.model_copy(
                update={"child": request.child.model_copy(update={"limits": ceiling})}
            )
            return self.decide(rerun, now)
        finally:
            self.runs[child.workflow_id] = child

    def record(self, request: AdmissionRequest, now: datetime) -> None:
        """Count the admitted child from this moment (before the answer leaves)."""
        assert request.child is not None
        me = request.run
        self._put(
            RunEntry(
                workflow_id=request.child.workflow_id,
                chain_root=me.chain_root,
                parent=me.workflow_id,
                agent=request.child.agent,
                pair=pair_key(me.agent, request.child.agent),
                started_at=now,
            )
        )

    # -- counts and upkeep --------------------------------------------------------------

    def runs_in_chain(self, chain_root: str) -> int:
        return sum(e.chain_root == chain_root for e in self.runs.values())

    def active(self) -> int:
        return sum(e.active for e in self.runs.values())

    def active_others(self, me: str) -> list[str]:
        """Active runs other than `me`: the ones a refusing ceiling asks Temporal about."""
        return sorted(w for w, e in self.runs.items() if e.active and w != me)

    def adds_runs(self, request: AdmissionRequest) -> bool:
        """Would `request` add an entry: the asking run, a child it reports, or the child
        it asks for, unknown here? (What a full ledger refuses; a retry adds nothing.)"""
        asked = [request.run.workflow_id, *(c.workflow_id for c in request.children)]
        if request.child is not None:
            asked.append(request.child.workflow_id)
        return any(w not in self.runs for w in asked)

    def full(self, max_bytes: int) -> bool:
        return self.bytes_held() >= max_bytes

    def refusal_when_full(self, max_bytes: int) -> Refused | None:
        """The `ledger_bound` refusal of a new run, or None while there is room."""
        bound = LedgerBoundRule(
            runs_held=len(self.runs), bytes_held=self.bytes_held(), max_bytes=max_bytes
        )
        decision = admit_child_run([bound])
        return decision if isinstance(decision, Refused) else None

    def active_ids(self) -> list[str]:
        return sorted(w for w, e in self.runs.items() if e.active)

    def prune(self, now: datetime) -> list[str]:
        """Forget chains none of whose runs is active and none started within `horizon_s`.

        Returns the chain roots forgotten. A chain whose runs all closed admits nothing
        more (its runs are the only ones that could ask), so its counts are not needed.
        """
        recent = now - timedelta(seconds=self.horizon_s)
        keep: set[str] = {
            e.chain_root for e in self.runs.values() if e.active or e.started_at >= recent
        }
        gone = sorted({e.chain_root for e in self.runs.values()} - keep)
        self.runs = {w: e for w, e in self.runs.items() if e.chain_root in keep}
        self._bytes = None
        return gone


class AdmissionEntityInput(BaseModel):
    """The entity's input: its tenant, and the ledger it carries across continue-as-new."""

    tenant: str
    carried: AdmissionLedger | None = None
    # Handled requests before it continues as new (an update is about four history
    # events; a batch counts each of its requests).
    continue_as_new_after: int = Field(default=500, ge=1)
    # The ledger's serialized bytes at most before it refuses new runs (`ledger_bound`).
    max_ledger_bytes: int = Field(default=DEFAULT_MAX_LEDGER_BYTES, ge=1)


def _entry_bytes(entry: RunEntry) -> int:
    return len(entry.workflow_id.encode()) + len(entry.model_dump_json().encode()) + 4


def answer(
    ledger: AdmissionLedger,
    request: AdmissionRequest,
    admission: Admitted | Refused | None,
    *,
    known: bool = False,
) -> AdmissionAnswer:
    return AdmissionAnswer(
        admission=admission,
        runs_in_chain=ledger.runs_in_chain(request.run.chain_root),
        tenant_active=ledger.active(),
        known=known,
    )


def refused_by_ceiling(admission: Admitted | Refused) -> bool:
    return isinstance(admission, Refused) and admission.rule.kind == "tenant_ceiling"
