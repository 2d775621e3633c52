"""Chain rules: may this run start a child run? Pure, no I/O.

An agent that can delegate to another agent can recurse without bound, fan out
without bound, hand work back and forth between two agents forever, or let one
tenant start a thousand chains. Each rule bounds one of these, from one measurement:

| kind             | measurement                                | refuses when        | retry |
|------------------|--------------------------------------------|---------------------|-------|
| `depth`          | the parent's depth (root 0)                | parent >= max_depth | no    |
| `chain_budget`   | runs in the chain so far (root included)   | runs >= max_runs    | no    |
| `pair_seen`      | runs in the chain this pair already made   | runs >= 1           | no    |
| `pair_cooldown`  | seconds since the pair last started a run  | since < cooldown_s  | yes   |
| `tenant_rate`    | the tenant's runs started in the window    | runs >= max_started | yes   |
| `tenant_ceiling` | the tenant's runs active now               | runs >= max_active  | yes   |
| `ledger_bound`   | bytes the tenant's admission ledger holds  | bytes >= max_bytes  | yes   |

`ledger_bound` is not configured per chain: it is the admission entity's own bound
(`steadyloop._chains.admission`), so the counts it carries across continue-as-new stay
under Temporal's payload limit; it clears as chains close and are forgotten.

`retryable` is true exactly for the bounds that clear on their own (time passes, runs
finish); trying later never helps against depth, budget or a pair already used.

What the obvious implementation gets wrong, and where it is prevented:

- **Every rule evaluated, refusals merged or the last one kept.** The caller orders
  the rules to choose which reason the model reads; `admit_child_run` stops at the
  first refusal, and later rules are not even checked (their measurements may be
  broken without effect).
- **A broken measurement read as a number.** `NaN >= 3` is False, so a NaN count
  admits everything; a negative or fractional count, or an infinite duration, is a
  bug upstream, not a fact. `_broken` refuses on NaN, infinity, a negative value or a
  count that is not a whole number. Measurements are typed `float` (strict: a bool or
  a string is a type error) so such values reach the rule instead of failing to
  construct it.
- **"Could not measure" as a sentinel** (0, -1, NaN). A measurement that could not be
  taken at all is expressed by leaving its rule out, which admits: an outage of the
  visibility store must not stop every delegation, while a measurement that came back
  wrong must. The two are opposite answers to opposite questions.
- **Refusals without a way forward.** `Refused.reason` is written for the model: the
  rule, the measured value against its bound, and whether trying again later can help.

`PairCooldownRule.seconds_since_last` is None when the pair never started a run in
scope: nothing to cool down from. That is a measured answer, not a missing one.

Each configurable rule is its limit plus its measurement: `DepthRule` is a `DepthLimit`
(the bound a run is configured with, carried in its input) with `parent_depth` added, so
a bound is defined, typed and validated once, for the configuration and the rule alike.
`steadyloop._chains.limits` pairs a run's limits with their measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from steadyloop._run.bounds import MAX_COUNT, Seconds

__all__ = [
    "RETRYABLE_KINDS",
    "Admission",
    "Admitted",
    "ChainBudgetLimit",
    "ChainBudgetRule",
    "ChainRule",
    "ChainRuleKind",
    "DepthLimit",
    "DepthRule",
    "LedgerBoundRule",
    "PairCooldownLimit",
    "PairCooldownRule",
    "PairSeenLimit",
    "PairSeenRule",
    "Refused",
    "TenantCeilingLimit",
    "TenantCeilingRule",
    "TenantRateLimit",
    "TenantRateRule",
    "admit_child_run",
]

ChainRuleKind = Literal[
    "depth", "chain_budget", "pair_seen", "pair_cooldown", "tenant_rate", "tenant_ceiling"
]
RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"pair_cooldown", "tenant_rate", "tenant_ceiling", "ledger_bound"}
)

# A measured value: strict float, so NaN, infinity and 2.5 arrive and are judged.
Measured = Annotated[float, Field(strict=True)]
# A configured bound: wrong here is bad configuration, refused when the limit (or the
# rule) is built. Strict, so `2.0` or `True` is not taken for a count.
Count = Annotated[int, Field(strict=True, ge=1, le=MAX_COUNT)]

# A rule passed where its limit is expected is revalidated, and refused: its measurement
# is no field of the limit.
_CONFIG = ConfigDict(frozen=True, extra="forbid", revalidate_instances="subclass-instances")


class DepthLimit(BaseModel):
    """Runs at most `max_depth` generations below the root (1: children, no grandchildren)."""

    model_config = _CONFIG
    kind: Literal["depth"] = "depth"
    max_depth: Annotated[int, Field(strict=True, ge=0)]


class ChainBudgetLimit(BaseModel):
    """At most `max_runs` runs in one chain, the root included."""

    model_config = _CONFIG
    kind: Literal["chain_budget"] = "chain_budget"
    max_runs: Count


class PairSeenLimit(BaseModel):
    """Two agents work together at most once per chain."""

    model_config = _CONFIG
    kind: Literal["pair_seen"] = "pair_seen"


class PairCooldownLimit(BaseModel):
    """Two agents start a run together at most once every `cooldown_s` within a chain."""

    model_config = _CONFIG
    kind: Literal["pair_cooldown"] = "pair_cooldown"
    cooldown_s: Seconds


class TenantRateLimit(BaseModel):
    """A tenant starts at most `max_started` chain runs in any `window_s` seconds."""

    model_config = _CONFIG
    kind: Literal["tenant_rate"] = "tenant_rate"
    window_s: Seconds
    max_started: Count


class TenantCeilingLimit(BaseModel):
    """A tenant has at most `max_active` chain runs active at once."""

    model_config = _CONFIG
    kind: Literal["tenant_ceiling"] = "tenant_ceiling"
    max_active: Count


class _Rule(BaseModel):
    model_config = _CONFIG

    # Measurement fields, each "count" (a whole number) or "seconds".
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {}

    def _exceeded(self) -> str | None:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    def _broken(self) -> str | None:
        """Why a measurement cannot be trusted, or None when every one is usable."""
        for name, unit in self._measurements.items():
            value = getattr(self, name)
            if value is None:
                continue
            if math.isnan(value):
                why = "not a number"
            elif math.isinf(value):
                why = "infinite"
            elif value < 0:
                why = "negative"
            elif unit == "count" and not value.is_integer():
                why = "not a whole number"
            else:
                continue
            return f"its measurement {name}={value!r} is {why}, so the rule cannot be checked"
        return None


def _pair(agents: tuple[str, str]) -> str:
    return f"agents {agents[0]!r} and {agents[1]!r}"


class DepthRule(DepthLimit, _Rule):
    """Children may be at most `max_depth` generations below the root (the root is 0)."""

    parent_depth: Measured
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {"parent_depth": "count"}

    def _exceeded(self) -> str | None:
        if self.parent_depth + 1 <= self.max_depth:
            return None
        return (
            f"this run is at depth {self.parent_depth:.0f} of its chain and runs may be at "
            f"most {self.max_depth} deep, so a child (depth {self.parent_depth + 1:.0f}) "
            "is not allowed"
        )


class ChainBudgetRule(ChainBudgetLimit, _Rule):
    """A chain may hold at most `max_runs` runs in all, the root included."""

    runs_in_chain: Measured
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {"runs_in_chain": "count"}

    def _exceeded(self) -> str | None:
        if self.runs_in_chain < self.max_runs:
            return None
        return (
            f"this chain already has {self.runs_in_chain:.0f} run(s) and may have at most "
            f"{self.max_runs}"
        )


class PairSeenRule(PairSeenLimit, _Rule):
    """Two agents work together at most once per chain (no handing work back and forth)."""

    agents: tuple[str, str]
    pair_runs: Measured
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {"pair_runs": "count"}

    def _exceeded(self) -> str | None:
        if self.pair_runs < 1:
            return None
        return (
            f"{_pair(self.agents)} already worked together in this chain "
            f"({self.pair_runs:.0f} run(s)), and a pair may work together once per chain"
        )


class PairCooldownRule(PairCooldownLimit, _Rule):
    """A pair of agents starts a run together at most once every `cooldown_s` seconds."""

    agents: tuple[str, str]
    seconds_since_last: Measured | None  # None: the pair never started a run in scope
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {
        "seconds_since_last": "seconds"
    }

    def _exceeded(self) -> str | None:
        since = self.seconds_since_last
        if since is None or since >= self.cooldown_s:
            return None
        return (
            f"{_pair(self.agents)} last started a run together {since:g}s ago and must wait "
            f"{self.cooldown_s:g}s between runs ({self.cooldown_s - since:g}s to go)"
        )


class TenantRateRule(TenantRateLimit, _Rule):
    """A tenant starts at most `max_started` runs in any `window_s` seconds."""

    started_in_window: Measured
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {"started_in_window": "count"}

    def _exceeded(self) -> str | None:
        if self.started_in_window < self.max_started:
            return None
        return (
            f"this tenant started {self.started_in_window:.0f} run(s) in the last "
            f"{self.window_s:g}s and may start at most {self.max_started} in that window"
        )


class TenantCeilingRule(TenantCeilingLimit, _Rule):
    """A tenant has at most `max_active` runs active at once (this run included)."""

    active: Measured
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {"active": "count"}

    def _exceeded(self) -> str | None:
        if self.active < self.max_active:
            return None
        return (
            f"this tenant has {self.active:.0f} run(s) active now and may have at most "
            f"{self.max_active} at once"
        )


class LedgerBoundRule(_Rule):
    """The admission entity holds at most `max_bytes` of a tenant's runs (open chains,
    and closed ones inside the rate horizon): past that, no new run, until chains close."""

    kind: Literal["ledger_bound"] = "ledger_bound"
    runs_held: int
    bytes_held: Measured
    max_bytes: Count
    _measurements: ClassVar[dict[str, Literal["count", "seconds"]]] = {"bytes_held": "count"}

    def _exceeded(self) -> str | None:
        if self.bytes_held < self.max_bytes:
            return None
        return (
            f"this tenant's admission ledger holds {self.runs_held} run(s) of chains still "
            f"open in {self.bytes_held:.0f} bytes, its bound of {self.max_bytes}; runs are "
            "admitted again as chains end"
        )


ChainRule = Annotated[
    DepthRule
    | ChainBudgetRule
    | PairSeenRule
    | PairCooldownRule
    | TenantRateRule
    | TenantCeilingRule
    | LedgerBoundRule,
    Field(discriminator="kind"),
]


class Admitted(BaseModel):
    """Every rule given admits the child. Carries nothing else: only a refusal explains."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    admitted: Literal[True] = True


class Refused(BaseModel):
    """The first rule that refused, why (written for the model), and whether later helps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    admitted: Literal[False] = False
    rule: ChainRule
    reason: str
    retryable: bool


Admission = Annotated[Admitted | Refused, Field(discriminator="admitted")]


def admit_child_run(rules: Sequence[ChainRule]) -> Admitted | Refused:
    """Admit a child run unless a rule refuses; the first refusal, in order, wins.

    A rule left out of `rules` (its measurement could not be taken) admits; a rule
    whose measurement is broken (NaN, infinite, negative, a fractional count) refuses.
    """
    for rule in rules:
        why = rule._broken() or rule._exceeded()
        if why is None:
            continue
        retryable = rule.kind in RETRYABLE_KINDS
        later = (
            "Trying again later can succeed."
            if retryable
            else "Trying again later will not help: do the work in this run instead."
        )
        return Refused(
            rule=rule,
            reason=f"Delegation refused by chain rule {rule.kind!r}: {why}. {later}",
            retryable=retryable,
        )
    return Admitted()
