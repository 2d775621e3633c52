"""From configured limits to rules: visibility counts of other runs plus what the run knows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from steadyloop._chains.limits import (
    ChainBudgetLimit,
    ChainLimit,
    ChainMeasurements,
    ChainPosition,
    ChildRecord,
    DepthLimit,
    PairCooldownLimit,
    PairRecency,
    PairSeenLimit,
    TenantCeilingLimit,
    TenantRateLimit,
    chain_rules,
    pair_key,
)
from steadyloop._chains.rules import (
    ChainBudgetRule,
    ChainRule,
    DepthRule,
    PairCooldownRule,
    PairSeenRule,
    TenantCeilingRule,
    TenantRateRule,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ALL_LIMITS: list[ChainLimit] = [
    DepthLimit(max_depth=3),
    ChainBudgetLimit(max_runs=10),
    PairSeenLimit(),
    PairCooldownLimit(cooldown_s=60),
    TenantRateLimit(window_s=300, max_started=20),
    TenantCeilingLimit(max_active=5),
]
MEASURED_ALL = ChainMeasurements(
    runs_in_chain=0,
    pair_runs=0,
    pair_recency=PairRecency(),
    tenant_started_in_window=0,
    tenant_active=0,
)


def root(agent: str = "planner", started: timedelta = timedelta(hours=1)) -> ChainPosition:
    return ChainPosition(agent=agent, started_at=NOW - started)


def child(agent: str, ago: timedelta = timedelta(minutes=30), running: bool = True) -> ChildRecord:
    return ChildRecord(
        workflow_id=f"c-{agent}-{ago}", agent=agent, started_at=NOW - ago, running=running
    )


def rules_for(
    limits: list[ChainLimit],
    *,
    position: ChainPosition | None = None,
    target: str = "writer",
    children: list[ChildRecord] | None = None,
    measured: ChainMeasurements = MEASURED_ALL,
) -> list[ChainRule]:
    return chain_rules(
        limits,
        position=position or root(),
        target=target,
        children=children or [],
        measured=measured,
        now=NOW,
    )


def only(rules: list[ChainRule]) -> ChainRule:
    assert len(rules) == 1, rules
    return rules[0]


def test_rules_come_in_the_order_the_limits_were_given() -> None:
    kinds = [rule.kind for rule in rules_for(ALL_LIMITS)]
    assert kinds == [limit.kind for limit in ALL_LIMITS]
    backwards = list(reversed(ALL_LIMITS))
    assert [r.kind for r in rules_for(backwards)] == [limit.kind for limit in backwards]


def test_depth_is_the_runs_own_depth_and_needs_no_visibility() -> None:
    position = ChainPosition(agent="writer", parent_agent="planner", depth=2, started_at=NOW)
    nothing = ChainMeasurements()
    rule = only(rules_for([DepthLimit(max_depth=2)], position=position, measured=nothing))
    assert rule == DepthRule(parent_depth=2, max_depth=2)


@pytest.mark.parametrize(
    ("field", "kind"),
    [
        ("runs_in_chain", "chain_budget"),
        ("pair_runs", "pair_seen"),
        ("pair_recency", "pair_cooldown"),
        ("tenant_started_in_window", "tenant_rate"),
        ("tenant_active", "tenant_ceiling"),
    ],
)
def test_a_limit_whose_count_could_not_be_taken_is_left_out(field: str, kind: str) -> None:
    measured = MEASURED_ALL.model_copy(update={field: None})
    # The run's own children alone would be a wrong number, not a missing one.
    kinds = [r.kind for r in rules_for(ALL_LIMITS, measured=measured, children=[child("writer")])]
    assert kind not in kinds
    assert len(kinds) == len(ALL_LIMITS) - 1


def test_chain_budget_adds_this_run_and_its_children_to_the_other_runs() -> None:
    children = [child("writer"), child("critic", running=False), child("writer", timedelta(1))]
    measured = MEASURED_ALL.model_copy(update={"runs_in_chain": 4})
    rule = only(rules_for([ChainBudgetLimit(max_runs=9)], children=children, measured=measured))
    assert rule == ChainBudgetRule(runs_in_chain=4 + 1 + 3, max_runs=9)


def test_a_pair_counts_the_children_of_that_pair_only() -> None:
    children = [child("writer"), child("critic"), child("writer", timedelta(minutes=1))]
    measured = MEASURED_ALL.model_copy(update={"pair_runs": 1})
    rule = only(rules_for([PairSeenLimit()], children=children, measured=measured))
    assert rule == PairSeenRule(agents=("planner", "writer"), pair_runs=1 + 2)


def test_handing_work_back_to_the_parents_agent_is_the_same_pair() -> None:
    # writer (started by planner) delegating to planner: the pair is writer itself.
    position = ChainPosition(agent="writer", parent_agent="planner", depth=1, started_at=NOW)
    rule = only(rules_for([PairSeenLimit()], position=position, target="planner"))
    assert rule == PairSeenRule(agents=("writer", "planner"), pair_runs=1)
    assert pair_key("writer", "planner") == pair_key("planner", "writer") == "planner|writer"


def test_cooldown_is_measured_from_the_latest_start_of_the_pair_anywhere() -> None:
    measured = MEASURED_ALL.model_copy(
        update={"pair_recency": PairRecency(last_started=NOW - timedelta(seconds=50))}
    )
    children = [child("writer", timedelta(seconds=20)), child("critic", timedelta(seconds=1))]
    rule = only(rules_for([PairCooldownLimit(cooldown_s=60)], children=children, measured=measured))
    assert rule == PairCooldownRule(
        agents=("planner", "writer"), seconds_since_last=20, cooldown_s=60
    )
    visible_latest = only(rules_for([PairCooldownLimit(cooldown_s=60)], measured=measured))
    assert isinstance(visible_latest, PairCooldownRule)
    assert visible_latest.seconds_since_last == 50


def test_a_pair_that_never_started_a_run_has_nothing_to_cool_down_from() -> None:
    rule = only(rules_for([PairCooldownLimit(cooldown_s=60)], children=[child("critic")]))
    assert isinstance(rule, PairCooldownRule) and rule.seconds_since_last is None


def test_a_start_the_server_recorded_after_this_tasks_now_is_just_now() -> None:
    measured = MEASURED_ALL.model_copy(
        update={"pair_recency": PairRecency(last_started=NOW + timedelta(milliseconds=30))}
    )
    rule = only(rules_for([PairCooldownLimit(cooldown_s=60)], measured=measured))
    assert isinstance(rule, PairCooldownRule) and rule.seconds_since_last == 0


def test_tenant_rate_adds_the_runs_own_starts_inside_the_window() -> None:
    children = [
        child("writer", timedelta(seconds=10)),
        child("writer", timedelta(seconds=299)),
        child("writer", timedelta(seconds=301)),  # left the window
    ]
    measured = MEASURED_ALL.model_copy(update={"tenant_started_in_window": 7})
    limit = TenantRateLimit(window_s=300, max_started=20)
    young_root = root(started=timedelta(seconds=100))
    inside = only(rules_for([limit], position=young_root, children=children, measured=measured))
    assert inside == TenantRateRule(started_in_window=7 + 1 + 2, window_s=300, max_started=20)
    old_root = only(rules_for([limit], children=children, measured=measured))
    assert isinstance(old_root, TenantRateRule) and old_root.started_in_window == 7 + 2


def test_tenant_ceiling_counts_this_run_and_its_children_still_running() -> None:
    children = [child("writer"), child("critic", running=False), child("writer", timedelta(1))]
    measured = MEASURED_ALL.model_copy(update={"tenant_active": 3})
    rule = only(rules_for([TenantCeilingLimit(max_active=5)], children=children, measured=measured))
    assert rule == TenantCeilingRule(active=3 + 1 + 2, max_active=5)
