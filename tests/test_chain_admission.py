"""The admission ledger's counting rules, without a server (`steadyloop._chains.admission`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from steadyloop._chains.admission import (
    START_GRACE_S,
    AdmissionLedger,
    AdmissionRequest,
    ChildAsk,
    RunEntry,
    refused_by_ceiling,
)
from steadyloop._chains.limits import (
    ChainBudgetLimit,
    ChainLimit,
    ChainPosition,
    ChildRecord,
    PairSeenLimit,
    TenantCeilingLimit,
    TenantRateLimit,
)
from steadyloop._chains.rules import Refused

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def ask(
    me: str,
    child: str,
    limits: list[ChainLimit],
    *,
    root: str = "root",
    parent: str | None = None,
    agent: str = "a",
    target: str = "b",
    children: list[ChildRecord] | None = None,
) -> AdmissionRequest:
    parent_agent = None if parent is None else "a"
    return AdmissionRequest(
        tenant="acme",
        run=RunEntry(
            workflow_id=me,
            chain_root=root,
            parent=parent,
            agent=agent,
            pair=None if parent is None else "a|a",
            started_at=T0,
        ),
        position=ChainPosition(
            agent=agent, parent_agent=parent_agent, depth=int(parent is not None), started_at=T0
        ),
        children=children or [],
        child=ChildAsk(workflow_id=child, agent=target, limits=limits),
    )


def admit(ledger: AdmissionLedger, request: AdmissionRequest, now: datetime = T0) -> bool:
    ledger.merge(request)
    decision = ledger.decide(request, now)
    if decision.admitted:
        ledger.record(request, now)
    return decision.admitted


def test_siblings_asking_in_turn_see_each_others_children() -> None:
    # root + two children; each child asks for one more with a budget of 4: the first
    # is admitted, the second sees it (its cousin) and is refused.
    ledger = AdmissionLedger(tenant="acme")
    budget: list[ChainLimit] = [ChainBudgetLimit(max_runs=4)]
    assert admit(ledger, ask("root", "c1", budget, agent="a", target="a"))
    assert admit(ledger, ask("root", "c2", budget, agent="a", target="a"))
    assert ledger.runs_in_chain("root") == 3
    assert admit(ledger, ask("c1", "g1", budget, parent="root"))
    request = ask("c2", "g2", budget, parent="root")
    ledger.merge(request)
    refused = ledger.decide(request, T0)
    assert isinstance(refused, Refused) and "already has 4 run(s)" in refused.reason


def test_a_pair_and_the_tenant_rate_are_counted_across_runs() -> None:
    ledger = AdmissionLedger(tenant="acme")
    assert admit(ledger, ask("root", "c1", [PairSeenLimit()]))
    assert not admit(ledger, ask("root", "c2", [PairSeenLimit()]))
    rate: list[ChainLimit] = [TenantRateLimit(window_s=60, max_started=4)]
    assert admit(ledger, ask("other", "o1", rate, root="other"))  # root, c1, other: 3 of 4
    assert not admit(ledger, ask("other", "o2", rate, root="other"), T0 + timedelta(seconds=30))
    assert admit(ledger, ask("other", "o2", rate, root="other"), T0 + timedelta(seconds=61))
    assert ledger.horizon_s == 60


def test_a_ceiling_counts_active_runs_and_a_parent_reports_its_finished_children() -> None:
    ledger = AdmissionLedger(tenant="acme")
    ceiling: list[ChainLimit] = [TenantCeilingLimit(max_active=2)]
    assert admit(ledger, ask("root", "c1", ceiling))
    request = ask("root", "c2", ceiling)
    ledger.merge(request)
    assert refused_by_ceiling(ledger.decide(request, T0))
    assert ledger.active_others("root") == ["c1"]
    finished = ChildRecord(workflow_id="c1", agent="b", started_at=T0, running=False)
    assert admit(ledger, ask("root", "c2", ceiling, children=[finished]))
    ledger.mark_closed(["c2", "unknown"])
    assert ledger.active_ids() == ["root"]


def test_a_run_the_ledger_never_saw_is_adopted_with_its_children() -> None:
    # A run that started its children before the entity existed (or under the
    # visibility path) brings them along: they count against the budget.
    ledger = AdmissionLedger(tenant="acme")
    earlier = [ChildRecord(workflow_id=f"c{i}", agent="b", started_at=T0) for i in range(2)]
    request = ask("root", "c9", [ChainBudgetLimit(max_runs=3)], children=earlier)
    ledger.merge(request)
    assert ledger.runs_in_chain("root") == 3
    assert isinstance(ledger.decide(request, T0), Refused)


def test_pruning_forgets_only_closed_chains_past_the_horizon() -> None:
    ledger = AdmissionLedger(tenant="acme", horizon_s=60)
    assert admit(ledger, ask("old", "old-1", [], root="old"))
    assert admit(ledger, ask("recent", "recent-1", [], root="recent"), T0 + timedelta(seconds=90))
    assert admit(ledger, ask("live", "live-1", [], root="live"))
    ledger.mark_closed(["old", "old-1", "recent", "recent-1", "live"])
    later = T0 + timedelta(seconds=100)
    assert ledger.prune(later) == ["old"]
    # "live" has a running child: its chain may still grow, so its count stays.
    assert ledger.runs_in_chain("live") == 2 and ledger.runs_in_chain("recent") == 2


def test_a_child_not_started_yet_is_not_read_as_closed() -> None:
    # Admitted, but its parent has not started it when the ceiling asks Temporal:
    # "not found" closes it only once it is older than the grace.
    ledger = AdmissionLedger(tenant="acme")
    assert admit(ledger, ask("root", "c1", [TenantCeilingLimit(max_active=2)]))
    assert ledger.mark_missing(["c1"], T0 + timedelta(seconds=1)) == []
    assert ledger.active_ids() == ["c1", "root"]
    later = T0 + timedelta(seconds=START_GRACE_S)
    assert ledger.mark_missing(["c1", "never-admitted"], later) == ["c1"]
    assert ledger.active_ids() == ["root"]


def test_a_failed_child_run_anew_is_one_run_but_waits_for_the_ceiling() -> None:
    ledger = AdmissionLedger(tenant="acme")
    limits: list[ChainLimit] = [ChainBudgetLimit(max_runs=2), TenantCeilingLimit(max_active=3)]
    assert admit(ledger, ask("root", "c1", limits))
    ledger.mark_closed(["c1"])  # it failed; the parent's retry runs it anew
    assert admit(ledger, ask("other", "o1", [], root="other"))  # root, other, o1: full
    again = ask("root", "c1", limits)
    ledger.merge(again)
    refused = ledger.decide_rerun(again, T0)
    assert isinstance(refused, Refused) and refused.rule.kind == "tenant_ceiling"
    ledger.mark_closed(["o1"])
    assert ledger.decide_rerun(again, T0).admitted  # budget full, but it is the same run
    assert ledger.runs_in_chain("root") == 2
