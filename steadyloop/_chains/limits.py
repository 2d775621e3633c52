"""Chain limits: the bounds a run is configured with, turned into rules with measurements.

Pure, no I/O. A run's configuration names limits (`DepthLimit`, `ChainBudgetLimit`,
...) in the order it wants them checked; at each delegation, `chain_rules` pairs each
limit with its measurement and hands the rules to `admit_child_run`. The limits are
defined in `steadyloop._chains.rules`, each the configured half of its rule, and
re-exported here.

A measurement is split in two: counts of the *other* runs (`ChainMeasurements`: not
the asking run, not its own children) and what the asking run is (`ChainPosition`)
and started (`ChildRecord`), which `chain_rules` adds. The counts come from the
admission ledger (`steadyloop._chains.admission`), kept by one workflow per tenant that
decides one admission at a time and counts the child before it answers, so the count
cannot be stale: siblings counted from Temporal visibility, which is eventually
consistent, would each see the count from before either started a child, and both
admit. The loop checks depth alone, with empty measurements, before it asks the ledger.

A count that came back broken (NaN, negative, ...) is never filled in here: the rule
receives it and refuses.

The pair of agents is unordered: `planner` delegating to `writer` and `writer`
delegating back to `planner` are the same pair working together, which is what a
ping-pong looks like.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from steadyloop._chains.rules import (
    ChainBudgetLimit,
    ChainBudgetRule,
    ChainRule,
    ChainRuleKind,
    DepthLimit,
    DepthRule,
    PairCooldownLimit,
    PairCooldownRule,
    PairSeenLimit,
    PairSeenRule,
    TenantCeilingLimit,
    TenantCeilingRule,
    TenantRateLimit,
    TenantRateRule,
)

__all__ = [
    "DEFAULT_CHAIN_LIMITS",
    "VISIBILITY_KINDS",
    "ChainBudgetLimit",
    "ChainLimit",
    "ChainMeasurements",
    "ChainPosition",
    "ChildRecord",
    "DepthLimit",
    "PairCooldownLimit",
    "PairRecency",
    "PairSeenLimit",
    "TenantCeilingLimit",
    "TenantRateLimit",
    "chain_rules",
    "pair_key",
]

ChainLimit = Annotated[
    DepthLimit
    | ChainBudgetLimit
    | PairSeenLimit
    | PairCooldownLimit
    | TenantRateLimit
    | TenantCeilingLimit,
    Field(discriminator="kind"),
]

# What a run that configures no limits gets: recursion and fan-out stay bounded.
DEFAULT_CHAIN_LIMITS: tuple[ChainLimit, ...] = (
    DepthLimit(max_depth=3),
    ChainBudgetLimit(max_runs=16),
)
# Every kind but depth needs a count of other runs, which only the admission ledger keeps.
VISIBILITY_KINDS: frozenset[ChainRuleKind] = frozenset(
    {"chain_budget", "pair_seen", "pair_cooldown", "tenant_rate", "tenant_ceiling"}
)


def pair_key(first: str, second: str) -> str:
    """The unordered pair of two agent names, as stored in the `SteadyloopPair` attribute."""
    low, high = sorted((first, second))
    return f"{low}|{high}"


class ChildRecord(BaseModel):
    """A child this run started: what its own admissions count, carried across continue-as-new."""

    model_config = ConfigDict(extra="forbid")

    workflow_id: str
    agent: str
    started_at: AwareDatetime
    running: bool = True


class ChainPosition(BaseModel):
    """What a run knows about itself: its agent, the agent that started it, its depth."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    parent_agent: str | None = None  # None: a root
    depth: int = Field(default=0, ge=0)
    started_at: AwareDatetime

    @property
    def own_pair(self) -> str | None:
        return None if self.parent_agent is None else pair_key(self.parent_agent, self.agent)


class PairRecency(BaseModel):
    """When the pair last started a run in the chain (None: never), among other runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    last_started: AwareDatetime | None = None


class ChainMeasurements(BaseModel):
    """Counts of runs *other than* the measuring run and its own children.

    A field is None when it was not counted (its limit is not configured, or only depth
    is checked yet); the rule it feeds is then left out. A run that continued-as-new is
    one run, one count.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs_in_chain: int | None = None
    pair_runs: int | None = None
    pair_recency: PairRecency | None = None
    tenant_started_in_window: int | None = None
    tenant_active: int | None = None


def chain_rules(
    limits: Sequence[ChainLimit],
    *,
    position: ChainPosition,
    target: str,
    children: Sequence[ChildRecord],
    measured: ChainMeasurements,
    now: datetime,
) -> list[ChainRule]:
    """The rules for delegating to agent `target` now, in the order of `limits`.

    A limit whose count is missing is left out (it admits).
    """
    pair = pair_key(position.agent, target)
    agents = (position.agent, target)
    with_target = [c for c in children if c.agent == target]
    mine_in_pair = int(position.own_pair == pair)
    rules: list[ChainRule] = []
    for limit in limits:
        if isinstance(limit, DepthLimit):
            rules.append(DepthRule(parent_depth=position.depth, max_depth=limit.max_depth))
        elif isinstance(limit, ChainBudgetLimit):
            if measured.runs_in_chain is not None:
                runs = measured.runs_in_chain + 1 + len(children)
                rules.append(ChainBudgetRule(runs_in_chain=runs, max_runs=limit.max_runs))
        elif isinstance(limit, PairSeenLimit):
            if measured.pair_runs is not None:
                pair_runs = measured.pair_runs + mine_in_pair + len(with_target)
                rules.append(PairSeenRule(agents=agents, pair_runs=pair_runs))
        elif isinstance(limit, PairCooldownLimit):
            if measured.pair_recency is not None:
                starts = [c.started_at for c in with_target]
                if mine_in_pair:
                    starts.append(position.started_at)
                if measured.pair_recency.last_started is not None:
                    starts.append(measured.pair_recency.last_started)
                # A start recorded by the server a moment after this task's `now` is
                # "just now", not a broken negative age.
                since = max(0.0, (now - max(starts)).total_seconds()) if starts else None
                rules.append(
                    PairCooldownRule(
                        agents=agents, seconds_since_last=since, cooldown_s=limit.cooldown_s
                    )
                )
        elif isinstance(limit, TenantRateLimit):
            if measured.tenant_started_in_window is not None:
                window_start = now - timedelta(seconds=limit.window_s)
                local = [position.started_at, *(c.started_at for c in children)]
                started = measured.tenant_started_in_window + sum(t >= window_start for t in local)
                rules.append(
                    TenantRateRule(
                        started_in_window=started,
                        window_s=limit.window_s,
                        max_started=limit.max_started,
                    )
                )
        elif measured.tenant_active is not None:  # TenantCeilingLimit
            active = measured.tenant_active + 1 + sum(c.running for c in children)
            rules.append(TenantCeilingRule(active=active, max_active=limit.max_active))
    return rules
