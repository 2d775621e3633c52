"""Route plans: which endpoints a model turn tries, in which order, sending what.

`plan_route(config, request)` is pure and deterministic: the same configuration and
the same health snapshot give the same plan, so a workflow can compute it in workflow
code and a replay computes it again identically. The health it reads is an input (the
health activities' recorded result and `workflow.now()`), never process memory.

What a plan decides, and why here rather than at call time:

- Order is the configuration's: the first candidate is the preferred one. A plan
  never reorders by latency or load, because a reorder that depends on anything but
  its inputs would make two replays of one run disagree.
- An endpoint whose breaker is open is skipped (and listed in `skipped` with the end
  of its cool-off); one that is half-open stays in place marked `probe`, and the route
  executor asks for the probe slot before sending anything to it.
- Parameters an endpoint is known to refuse (`EndpointHealth.degraded`) are left out of
  every request to it (`omit_parameters`), so a rejection learned once is not paid for
  again on every turn.
- A candidate lists its own attempt budget, backoff and the longest `Retry-After` it
  will wait, because a local model and a hosted API deserve different patience.
"""

from __future__ import annotations

from datetime import datetime
from typing import Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from steadyloop._routing.endpoint_health import EndpointHealth
from steadyloop._routing.taxonomy import DegradableParameter
from steadyloop._run.bounds import Count, Identity, Seconds, SecondsOrZero

__all__ = [
    "Backoff",
    "PlannedCandidate",
    "RouteCandidate",
    "RouteConfig",
    "RoutePlan",
    "RouteRequest",
    "SkippedCandidate",
    "plan_route",
]


class Backoff(BaseModel):
    """Exponential backoff between attempts on one candidate; no jitter, so it is
    deterministic (Temporal timers are durable, and runs are not synchronised)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_s: Seconds = 1.0
    multiplier: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    max_s: Seconds = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        exponent = max(0, attempt - 1)
        if self.multiplier > 1 and exponent > 64:
            return self.max_s  # (avoid a float overflow on absurd attempt numbers)
        return float(min(self.max_s, self.initial_s * self.multiplier**exponent))


class RouteCandidate(BaseModel):
    """One endpoint and model to try, with its own patience."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: Identity
    model: Identity
    attempts: Count = 3
    backoff: Backoff = Field(default_factory=Backoff)
    # A Retry-After longer than this traverses instead of waiting.
    max_retry_after_s: SecondsOrZero = 60.0
    # The model's context window in tokens, when known: a context-length failure may
    # then go on to a later candidate with a larger window (never blindly).
    context_tokens: int | None = Field(default=None, ge=1)


class RouteConfig(BaseModel):
    """The candidates, in order of preference."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidates: list[RouteCandidate] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        seen: set[tuple[str, str]] = set()
        for candidate in self.candidates:
            key = (candidate.endpoint, candidate.model)
            if key in seen:
                raise ValueError(
                    f"route candidate {candidate.endpoint!r}/{candidate.model!r} is listed "
                    "twice; give it more attempts instead"
                )
            seen.add(key)
        return self

    @classmethod
    def single(cls, endpoint: str, model: str, attempts: int = 3) -> RouteConfig:
        """The route of a run that names one endpoint and model."""
        return cls(candidates=[RouteCandidate(endpoint=endpoint, model=model, attempts=attempts)])

    @property
    def endpoints(self) -> list[str]:
        """Each endpoint once, in order of first appearance."""
        return list(dict.fromkeys(c.endpoint for c in self.candidates))


class RouteRequest(BaseModel):
    """What a plan depends on besides the configuration: the time and shared health.

    `health` lists snapshots by endpoint; a later entry for the same endpoint replaces
    an earlier one. An endpoint without a snapshot is healthy.
    """

    model_config = ConfigDict(frozen=True)

    now: AwareDatetime
    health: list[EndpointHealth] = Field(default_factory=list)


class PlannedCandidate(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate: RouteCandidate
    omit_parameters: list[DegradableParameter] = Field(default_factory=list)
    # Half-open: ask the endpoint's breaker for the probe slot before sending.
    probe: bool = False


class SkippedCandidate(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate: RouteCandidate
    reason: str
    open_until: AwareDatetime | None = None


class RoutePlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidates: list[PlannedCandidate] = Field(default_factory=list)
    skipped: list[SkippedCandidate] = Field(default_factory=list)

    @property
    def next_open_at(self) -> datetime | None:
        """When the first skipped endpoint's cool-off ends (for a plan with no candidate)."""
        ends = [s.open_until for s in self.skipped if s.open_until is not None]
        return min(ends) if ends else None


def plan_route(config: RouteConfig, request: RouteRequest) -> RoutePlan:
    """The candidates to try, in order, with what to leave out of each request."""
    health = {h.endpoint: h for h in request.health}
    planned: list[PlannedCandidate] = []
    skipped: list[SkippedCandidate] = []
    for candidate in config.candidates:
        known = health.get(candidate.endpoint)
        if known is None:
            planned.append(PlannedCandidate(candidate=candidate))
            continue
        phase = known.phase(request.now)
        if phase == "open":
            skipped.append(
                SkippedCandidate(
                    candidate=candidate,
                    reason=f"breaker open (last failure: {known.breaker.last_failure or '?'})",
                    open_until=known.breaker.open_until,
                )
            )
            continue
        planned.append(
            PlannedCandidate(
                candidate=candidate,
                omit_parameters=known.omitted,
                probe=phase == "half_open",
            )
        )
    return RoutePlan(candidates=planned, skipped=skipped)
