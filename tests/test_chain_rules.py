"""Chain rules: each rule's bound, first-refusal ordering, broken vs omitted measurements."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import pytest
from pydantic import TypeAdapter, ValidationError

from steadyloop._chains.rules import (
    RETRYABLE_KINDS,
    Admission,
    Admitted,
    ChainBudgetRule,
    ChainRule,
    DepthRule,
    LedgerBoundRule,
    Measured,
    PairCooldownRule,
    PairSeenRule,
    Refused,
    TenantCeilingRule,
    TenantRateRule,
    _Rule,
    admit_child_run,
)

PAIR = ("planner", "writer")


def refused(rules: list[ChainRule]) -> Refused:
    admission = admit_child_run(rules)
    assert isinstance(admission, Refused), admission
    return admission


def admitted(rules: list[ChainRule]) -> bool:
    return isinstance(admit_child_run(rules), Admitted)


# ---------------------------------------------------------------- each rule's bound


@pytest.mark.parametrize(
    ("parent_depth", "max_depth", "admits"),
    [(0, 1, True), (1, 1, False), (0, 0, False), (2, 3, True), (3, 3, False), (7, 3, False)],
)
def test_depth_allows_children_down_to_max_depth(
    parent_depth: int, max_depth: int, admits: bool
) -> None:
    assert admitted([DepthRule(parent_depth=parent_depth, max_depth=max_depth)]) is admits


def test_a_depth_refusal_names_the_depths_and_is_final() -> None:
    refusal = refused([DepthRule(parent_depth=2, max_depth=2)])
    assert refusal.rule.kind == "depth"
    assert "depth 2" in refusal.reason and "depth 3" in refusal.reason
    assert refusal.retryable is False
    assert "will not help" in refusal.reason


@pytest.mark.parametrize(("runs", "admits"), [(1, True), (2, True), (3, False), (9, False)])
def test_chain_budget_counts_the_new_run_against_max_runs(runs: int, admits: bool) -> None:
    # A budget of 3 runs: the root and two children; a third child would be the 4th run.
    assert admitted([ChainBudgetRule(runs_in_chain=runs, max_runs=3)]) is admits


def test_a_budget_refusal_says_how_many_runs_against_what_bound() -> None:
    refusal = refused([ChainBudgetRule(runs_in_chain=3, max_runs=3)])
    assert "3 run(s)" in refusal.reason and "at most 3" in refusal.reason
    assert refusal.retryable is False


@pytest.mark.parametrize(("pair_runs", "admits"), [(0, True), (1, False), (4, False)])
def test_pair_seen_refuses_a_pair_that_already_worked_together(
    pair_runs: int, admits: bool
) -> None:
    assert admitted([PairSeenRule(agents=PAIR, pair_runs=pair_runs)]) is admits


def test_a_pair_seen_refusal_names_both_agents_and_is_final() -> None:
    refusal = refused([PairSeenRule(agents=PAIR, pair_runs=1)])
    assert "'planner'" in refusal.reason and "'writer'" in refusal.reason
    assert refusal.retryable is False


@pytest.mark.parametrize(
    ("since", "admits"), [(None, True), (0.0, False), (59.9, False), (60.0, True), (3600, True)]
)
def test_pair_cooldown_refuses_until_the_cooldown_has_passed(
    since: float | None, admits: bool
) -> None:
    rule = PairCooldownRule(agents=PAIR, seconds_since_last=since, cooldown_s=60)
    assert admitted([rule]) is admits


def test_a_cooldown_refusal_says_how_long_to_wait_and_that_later_helps() -> None:
    refusal = refused([PairCooldownRule(agents=PAIR, seconds_since_last=15, cooldown_s=60)])
    assert "15s ago" in refusal.reason and "45s to go" in refusal.reason
    assert refusal.retryable is True
    assert "can succeed" in refusal.reason


@pytest.mark.parametrize(("started", "admits"), [(0, True), (4, True), (5, False), (50, False)])
def test_tenant_rate_refuses_at_max_started_in_the_window(started: int, admits: bool) -> None:
    rule = TenantRateRule(started_in_window=started, window_s=60, max_started=5)
    assert admitted([rule]) is admits


def test_a_rate_refusal_names_the_window_and_is_retryable() -> None:
    refusal = refused([TenantRateRule(started_in_window=5, window_s=60, max_started=5)])
    assert "last 60s" in refusal.reason and "at most 5" in refusal.reason
    assert refusal.retryable is True


@pytest.mark.parametrize(("active", "admits"), [(1, True), (2, True), (3, False), (30, False)])
def test_tenant_ceiling_counts_the_new_run_against_max_active(active: int, admits: bool) -> None:
    assert admitted([TenantCeilingRule(active=active, max_active=3)]) is admits


def test_a_ceiling_refusal_is_retryable() -> None:
    refusal = refused([TenantCeilingRule(active=3, max_active=3)])
    assert "3 run(s) active" in refusal.reason
    assert refusal.retryable is True


def one_refusing_rule_of_each_kind() -> list[ChainRule]:
    return [
        DepthRule(parent_depth=1, max_depth=1),
        ChainBudgetRule(runs_in_chain=2, max_runs=2),
        PairSeenRule(agents=PAIR, pair_runs=1),
        PairCooldownRule(agents=PAIR, seconds_since_last=1, cooldown_s=2),
        TenantRateRule(started_in_window=1, window_s=1, max_started=1),
        TenantCeilingRule(active=1, max_active=1),
        LedgerBoundRule(runs_held=1, bytes_held=1, max_bytes=1),
    ]


def test_retryable_is_true_exactly_for_bounds_that_clear_on_their_own() -> None:
    retryable = {r.kind: refused([r]).retryable for r in one_refusing_rule_of_each_kind()}
    assert retryable == {
        "depth": False,
        "chain_budget": False,
        "pair_seen": False,
        "pair_cooldown": True,
        "tenant_rate": True,
        "tenant_ceiling": True,
        "ledger_bound": True,
    }
    assert {kind for kind, yes in retryable.items() if yes} == RETRYABLE_KINDS


@pytest.mark.parametrize("rule", one_refusing_rule_of_each_kind(), ids=lambda r: r.kind)
def test_every_refusal_names_its_rule_and_carries_it(rule: ChainRule) -> None:
    refusal = refused([rule])
    assert refusal.rule == rule
    assert f"chain rule {rule.kind!r}" in refusal.reason


# ---------------------------------------------------------------- first refusal wins


def test_the_first_refusing_rule_in_order_is_the_one_reported() -> None:
    rules = one_refusing_rule_of_each_kind()
    assert refused(rules).rule.kind == "depth"
    assert refused(list(reversed(rules))).rule.kind == "ledger_bound"
    for position in range(len(rules)):
        rotated = rules[position:] + rules[:position]
        assert refused(rotated).rule == rules[position]


def test_admitting_rules_before_a_refusal_do_not_hide_it() -> None:
    rules: list[ChainRule] = [
        DepthRule(parent_depth=0, max_depth=5),
        TenantCeilingRule(active=1, max_active=10),
        ChainBudgetRule(runs_in_chain=8, max_runs=8),
        PairSeenRule(agents=PAIR, pair_runs=1),
    ]
    assert refused(rules).rule.kind == "chain_budget"


def test_rules_after_the_first_refusal_are_not_checked() -> None:
    # The broken measurement behind the refusal would refuse too, with another reason;
    # the caller's order decides which reason the model reads.
    rules: list[ChainRule] = [
        TenantCeilingRule(active=4, max_active=4),
        ChainBudgetRule(runs_in_chain=math.nan, max_runs=3),
    ]
    refusal = refused(rules)
    assert refusal.rule.kind == "tenant_ceiling" and "cannot be checked" not in refusal.reason


def test_every_rule_admitting_admits() -> None:
    rules: list[ChainRule] = [
        DepthRule(parent_depth=0, max_depth=2),
        ChainBudgetRule(runs_in_chain=1, max_runs=5),
        PairSeenRule(agents=PAIR, pair_runs=0),
        PairCooldownRule(agents=PAIR, seconds_since_last=None, cooldown_s=10),
        TenantRateRule(started_in_window=0, window_s=60, max_started=1),
        TenantCeilingRule(active=0, max_active=1),
    ]
    assert admit_child_run(rules) == Admitted()


# ---------------------------------------------------------------- broken vs omitted


BROKEN_COUNTS = [math.nan, math.inf, -math.inf, -1, -0.5, 2.5, 1e-9]


def with_measurement(kind: str, value: float) -> ChainRule:
    """A rule of `kind` whose bound is loose enough to admit any sane measurement."""
    rules: dict[str, Any] = {
        "depth": lambda v: DepthRule(parent_depth=v, max_depth=1000),
        "chain_budget": lambda v: ChainBudgetRule(runs_in_chain=v, max_runs=1000),
        "pair_seen": lambda v: PairSeenRule(agents=PAIR, pair_runs=v),
        "tenant_rate": lambda v: TenantRateRule(started_in_window=v, window_s=1, max_started=1000),
        "tenant_ceiling": lambda v: TenantCeilingRule(active=v, max_active=1000),
    }
    rule: ChainRule = rules[kind](value)
    return rule


COUNT_KINDS = ["depth", "chain_budget", "pair_seen", "tenant_rate", "tenant_ceiling"]


@pytest.mark.parametrize("kind", COUNT_KINDS)
@pytest.mark.parametrize("value", BROKEN_COUNTS, ids=repr)
def test_a_broken_count_refuses_even_where_the_bound_would_admit(kind: str, value: float) -> None:
    # pair_seen with a count of 0 admits; NaN >= 1 is False, so an unchecked NaN would
    # admit there too: the refusal must come from the measurement, not the bound.
    refusal = refused([with_measurement(kind, value)])
    assert refusal.rule.kind == kind
    assert "cannot be checked" in refusal.reason
    assert refusal.retryable is (kind in RETRYABLE_KINDS)


@pytest.mark.parametrize("kind", COUNT_KINDS)
@pytest.mark.parametrize("value", [0, 1, 3.0])
def test_a_whole_count_given_as_a_float_is_not_broken(kind: str, value: float) -> None:
    admission = admit_child_run([with_measurement(kind, value)])
    assert isinstance(admission, Admitted) or "cannot be checked" not in admission.reason


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0], ids=repr)
def test_a_broken_duration_refuses(value: float) -> None:
    rule = PairCooldownRule(agents=PAIR, seconds_since_last=value, cooldown_s=1)
    assert "cannot be checked" in refused([rule]).reason


def test_a_fractional_duration_is_a_duration_not_a_broken_count() -> None:
    rule = PairCooldownRule(agents=PAIR, seconds_since_last=2.5, cooldown_s=1)
    assert admitted([rule])


def test_an_omitted_rule_admits_where_the_same_rule_broken_refuses() -> None:
    # Opposite answers to opposite questions: "could not measure" leaves the rule out;
    # "measured, and the value is garbage" keeps it, and it refuses.
    depth = DepthRule(parent_depth=0, max_depth=3)
    broken = ChainBudgetRule(runs_in_chain=math.nan, max_runs=3)
    assert admit_child_run([depth]) == Admitted()
    assert refused([depth, broken]).rule == broken
    assert admit_child_run([]) == Admitted()


@pytest.mark.parametrize("value", [True, "3", None])
def test_a_measurement_of_the_wrong_type_is_a_construction_error(value: object) -> None:
    with pytest.raises(ValidationError):
        ChainBudgetRule(runs_in_chain=value, max_runs=3)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ChainBudgetRule(runs_in_chain=1, max_runs=0),
        lambda: DepthRule(parent_depth=0, max_depth=-1),
        lambda: TenantRateRule(started_in_window=0, window_s=math.nan, max_started=1),
        lambda: TenantRateRule(started_in_window=0, window_s=0, max_started=1),
        lambda: PairCooldownRule(agents=PAIR, seconds_since_last=1, cooldown_s=math.inf),
        lambda: TenantCeilingRule(active=0, max_active=2.0),
    ],
)
def test_a_bad_bound_is_refused_when_the_rule_is_built(build: Any) -> None:
    with pytest.raises(ValidationError):
        build()


# ---------------------------------------------------------------- values


def test_only_a_refusal_carries_rule_reason_and_retryable() -> None:
    assert set(Admitted.model_fields) == {"admitted"}
    assert {"rule", "reason", "retryable"} <= set(Refused.model_fields)


def test_admissions_round_trip_as_json() -> None:
    adapter: TypeAdapter[Admitted | Refused] = TypeAdapter(Admission)
    refusals = [admit_child_run([r]) for r in one_refusing_rule_of_each_kind()]
    for admission in [admit_child_run([]), *refusals]:
        assert adapter.validate_json(adapter.dump_json(admission)) == admission


def test_the_package_exports_what_a_delegation_is_built_from_not_the_rules() -> None:
    import steadyloop.delegation

    for name in ("Delegation", "AgentProfile"):
        assert name in steadyloop.__all__ and name in steadyloop.delegation.__all__
    for name in ("DepthLimit", "TenantCeilingLimit"):
        assert name in steadyloop.delegation.__all__ and name not in steadyloop.__all__
    for name in ("admit_child_run", "Refused", "DepthRule", "descend_chain", "Lineage"):
        assert name not in steadyloop.__all__ and name not in steadyloop.delegation.__all__


# ---------------------------------------------------------------- what the model reads
# Found by mutation testing: a refusal whose defect word became None still
# refused, and the retry sentence could change without a test noticing.


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (math.nan, "is not a number"),
        (math.inf, "is infinite"),
        (-math.inf, "is infinite"),
        (-1.0, "is negative"),
        (2.5, "is not a whole number"),
    ],
    ids=repr,
)
def test_a_broken_measurement_refusal_names_the_measurement_and_its_defect(
    value: float, why: str
) -> None:
    reason = refused([with_measurement("depth", value)]).reason
    assert f"parent_depth={value!r} {why}," in reason
    assert "None" not in reason


def test_a_broken_duration_refusal_says_it_is_negative() -> None:
    rule = PairCooldownRule(agents=PAIR, seconds_since_last=-1.0, cooldown_s=1)
    assert "seconds_since_last=-1.0 is negative" in refused([rule]).reason


def test_a_depth_refusal_says_the_child_is_not_allowed() -> None:
    reason = refused([DepthRule(parent_depth=1, max_depth=1)]).reason
    assert "a child (depth 2) is not allowed. Trying again" in reason


@pytest.mark.parametrize("rule", one_refusing_rule_of_each_kind(), ids=lambda r: r.kind)
def test_the_retry_sentence_matches_retryable(rule: ChainRule) -> None:
    refusal = refused([rule])
    later = (
        "Trying again later can succeed."
        if refusal.retryable
        else "Trying again later will not help: do the work in this run instead."
    )
    assert refusal.reason.endswith(later)


class _TwoMeasurements(_Rule):
    """A rule with two measurements: `_broken` must check each, not stop at the first."""

    first: Measured | None
    second: Measured
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {
        "first": "seconds",
        "second": "count",
    }


@pytest.mark.parametrize("first", [None, 1.5], ids=repr)
def test_every_measurement_of_a_rule_is_checked_not_only_the_first(first: float | None) -> None:
    # A measurement that is None (nothing to measure) or sound must not end the check:
    # a broken one after it still makes the rule uncheckable.
    why = _TwoMeasurements(first=first, second=math.nan)._broken()
    assert why is not None and "second=nan is not a number" in why
    assert _TwoMeasurements(first=first, second=2)._broken() is None
