"""What every run and worker shares about one endpoint: its breaker and its degradations.

The state lives in one long-lived entity workflow per endpoint
(`steadyloop._workflows.endpoint_health.EndpointHealthWorkflow`, id
`health_workflow_id(name)`), so it is shared by every run and every worker and
survives restarts. Workflow code reaches it only through the health activities
(`steadyloop._activities.endpoint_health`), whose results are recorded in history, so
a replay reads the same health the original run read. These are the payloads and the
names both sides use, here so they cannot drift apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from steadyloop._routing.circuit_breaker import (
    BreakerPhase,
    BreakerPolicy,
    BreakerState,
    breaker_phase,
)
from steadyloop._routing.taxonomy import DegradableParameter

__all__ = [
    "ADMIT_PROBE_ACTIVITY",
    "ENDPOINT_HEALTH_WORKFLOW",
    "READ_ENDPOINT_HEALTH_ACTIVITY",
    "RECENT_REPORTS",
    "RECORD_ENDPOINT_OUTCOME_ACTIVITY",
    "DegradedParameter",
    "EndpointHealth",
    "EndpointHealthInput",
    "EndpointOutcome",
    "OutcomeBatch",
    "ProbeBatch",
    "ProbeGrant",
    "ProbeGrants",
    "ProbeRequest",
    "ReadHealthInput",
    "health_workflow_id",
]

ENDPOINT_HEALTH_WORKFLOW = "steadyloop.EndpointHealth"
READ_ENDPOINT_HEALTH_ACTIVITY = "steadyloop.read_endpoint_health"
RECORD_ENDPOINT_OUTCOME_ACTIVITY = "steadyloop.record_endpoint_outcome"
ADMIT_PROBE_ACTIVITY = "steadyloop.admit_probe"
HEALTH_WORKFLOW_ID_PREFIX = "steadyloop-endpoint-health/"
# Report ids the entity remembers (about 80 bytes each in its continue-as-new input).
RECENT_REPORTS = 1000


def health_workflow_id(endpoint: str, prefix: str = HEALTH_WORKFLOW_ID_PREFIX) -> str:
    """The entity workflow's id: one per endpoint name in the namespace."""
    return prefix + endpoint


class DegradedParameter(BaseModel):
    """A request parameter the endpoint rejected as unsupported, and no longer receives."""

    model_config = ConfigDict(frozen=True)

    parameter: DegradableParameter
    since: AwareDatetime
    # The provider's words when it refused the parameter.
    evidence: str = ""


class EndpointHealth(BaseModel):
    """One endpoint's shared state, as of `as_of` (the entity's workflow time).

    `known` is False when the entity could not be read (it does not exist yet, or
    Temporal did not answer): the endpoint is then treated as healthy, because health
    is advice, and a broken breaker must never stop a model call.
    """

    model_config = ConfigDict(frozen=True)

    endpoint: str
    breaker: BreakerState = Field(default_factory=BreakerState)
    policy: BreakerPolicy = Field(default_factory=BreakerPolicy)
    degraded: list[DegradedParameter] = Field(default_factory=list)
    as_of: AwareDatetime | None = None
    known: bool = True
    # How long a run may plan from this copy without reading again, in workflow time:
    # the reading worker's cache TTL, stamped by `read_endpoint_health`, so a run does not
    # ask again for a copy that cannot have changed. None (an unstamped copy: the entity's
    # own, before a read stamps it) means read before every turn.
    view_ttl_s: float | None = None

    def phase(self, now: datetime) -> BreakerPhase:
        return breaker_phase(self.breaker, now)

    @property
    def omitted(self) -> list[DegradableParameter]:
        return sorted(d.parameter for d in self.degraded)

    @property
    def quiet(self) -> bool:
        """Closed with no failure in its window: a success would change nothing."""
        return self.breaker.open_until is None and not self.breaker.recent_failures


class EndpointOutcome(BaseModel):
    """What one attempt on an endpoint told us: it worked, it failed (the endpoint's
    fault), or it refused a parameter (which a later attempt then left out)."""

    endpoint: str
    outcome: Literal["success", "failure", "degraded"]
    detail: str = ""
    parameter: DegradableParameter | None = None
    # Filled by the activity from the worker's configuration, not by workflow code.
    policy: BreakerPolicy | None = None
    # Filled by the activity: the reporting run and call, the same on each retry of
    # it, so a report sent again after a lost answer is counted once (None: always).
    report: str | None = None


class EndpointHealthInput(BaseModel):
    """The entity workflow's input: its endpoint, and the state it carries across
    continue-as-new."""

    endpoint: str
    carried: EndpointHealth | None = None
    # Handled messages (updates and signals) before it continues as new.
    continue_as_new_after: int = Field(default=500, ge=1)
    # The last `RECENT_REPORTS` report ids counted, carried so a retry across the
    # hand-over is still recognised.
    recent_reports: list[str] = Field(default_factory=list)


class ReadHealthInput(BaseModel):
    endpoints: list[str]


class ProbeRequest(BaseModel):
    endpoint: str
    policy: BreakerPolicy | None = None


class ProbeGrant(BaseModel):
    endpoint: str
    granted: bool
    health: EndpointHealth


class OutcomeBatch(BaseModel):
    """Outcomes one process queued for the entity, applied in this order (`record_many`)."""

    outcomes: list[EndpointOutcome]


class ProbeBatch(BaseModel):
    """Probe requests one process queued, decided in this order (`admit_probes`)."""

    requests: list[ProbeRequest]


class ProbeGrants(BaseModel):
    """One grant per request of a `ProbeBatch`, in its order."""

    grants: list[ProbeGrant]
