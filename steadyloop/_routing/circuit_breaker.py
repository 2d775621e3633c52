"""A circuit breaker per model endpoint, as a pure state machine over workflow time.

Closed: calls go through; failures are counted over a sliding window, and
`failure_threshold` of them within `window_s` open it. Open: the route plan skips the
endpoint until `cool_off_s` has passed. Half-open (open, cool-off over): exactly one
probe is admitted; its success closes the breaker, its failure opens it for another
cool-off. Every transition is a function from (state, policy, time) to a new state,
so the entity workflow that holds the shared state (`EndpointHealthWorkflow`), the
plan (`plan_route`) and the tests all read it the same way.

What the obvious breaker gets wrong, and where this one prevents it:

- Counting consecutive failures and clearing them on a success lets a flapping
  endpoint (fail, succeed, fail, ...) stay closed forever. Failures are counted over a
  time window; successes while closed do not erase them.
- "Half-open" stored as a state needs a timer to enter it, and a timer per endpoint is
  history nobody needs. Half-open is derived: open with `open_until` in the past.
- Admitting "one probe" by a flag that is never cleared wedges the endpoint when the
  probe's worker dies: nobody reports, and no second probe is ever admitted. A probe
  holds a lease (`probe_lease_s`); once it lapses another probe may go.
- A failure that arrives while the breaker is already open (a straggler that started
  before it opened) must not extend the cool-off indefinitely, or a busy endpoint
  never gets its probe. It is counted in `failures_total` only.
- Which failures count is not decided here: `failure_disposition` says whether a
  failure is the endpoint's (a 5xx, a stall, a refused connection, also one that came
  after output was forwarded) or the request's (a 400, a content filter), and only the
  former is recorded.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from steadyloop._run.bounds import Seconds

__all__ = [
    "BreakerPhase",
    "BreakerPolicy",
    "BreakerState",
    "admit_probe",
    "breaker_phase",
    "record_failure",
    "record_success",
]

BreakerPhase = Literal["closed", "open", "half_open"]


class BreakerPolicy(BaseModel):
    """When an endpoint's breaker opens and how long it stays open."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failure_threshold: int = Field(default=5, ge=1)
    window_s: Seconds = 60.0
    cool_off_s: Seconds = 30.0
    # How long an admitted probe holds the half-open slot if it never reports.
    probe_lease_s: Seconds = 120.0


class BreakerState(BaseModel):
    """One endpoint's breaker. Times are workflow time (timezone-aware)."""

    model_config = ConfigDict(frozen=True)

    # Failures inside the current window, oldest first (closed only).
    recent_failures: list[AwareDatetime] = Field(default_factory=list)
    # Set while open (and half-open): when the cool-off ends.
    open_until: AwareDatetime | None = None
    # Set while a half-open probe is out: when its lease lapses.
    probe_until: AwareDatetime | None = None
    opened_count: int = 0
    failures_total: int = 0
    last_failure: str | None = None


def breaker_phase(state: BreakerState, now: datetime) -> BreakerPhase:
    if state.open_until is None:
        return "closed"
    return "open" if now < state.open_until else "half_open"


def record_failure(
    state: BreakerState, policy: BreakerPolicy, now: datetime, what: str = ""
) -> BreakerState:
    """The state after an attempt on this endpoint failed at `now`."""
    phase = breaker_phase(state, now)
    update: dict[str, object] = {
        "failures_total": state.failures_total + 1,
        "last_failure": what or state.last_failure,
    }
    if phase == "open":
        return state.model_copy(update=update)
    if phase == "half_open":
        return _open(state, policy, now, update)
    since = now - timedelta(seconds=policy.window_s)
    recent = [at for at in state.recent_failures if at > since] + [now]
    if len(recent) >= policy.failure_threshold:
        return _open(state, policy, now, update)
    return state.model_copy(update={**update, "recent_failures": recent})


def _open(
    state: BreakerState, policy: BreakerPolicy, now: datetime, update: dict[str, object]
) -> BreakerState:
    return state.model_copy(
        update={
            **update,
            "recent_failures": [],
            "open_until": now + timedelta(seconds=policy.cool_off_s),
            "probe_until": None,
            "opened_count": state.opened_count + 1,
        }
    )


def record_success(state: BreakerState, now: datetime) -> BreakerState:
    """The state after an attempt on this endpoint succeeded at `now`.

    Half-open: the probe worked, so the breaker closes with a clean window. Closed or
    still open: nothing changes (a success does not erase failures in the window, and
    a straggler's success does not cut a cool-off short).
    """
    if breaker_phase(state, now) != "half_open":
        return state
    return state.model_copy(update={"recent_failures": [], "open_until": None, "probe_until": None})


def admit_probe(
    state: BreakerState, policy: BreakerPolicy, now: datetime
) -> tuple[BreakerState, bool]:
    """Whether an attempt may go to this endpoint now, and the state after deciding.

    Closed: yes, and nothing changes. Open: no. Half-open: yes for the first asker,
    who holds the probe lease; no for everyone else until the probe reports or its
    lease lapses.
    """
    phase = breaker_phase(state, now)
    if phase == "closed":
        return state, True
    if phase == "open":
        return state, False
    if state.probe_until is not None and now < state.probe_until:
        return state, False
    leased = state.model_copy(update={"probe_until": now + timedelta(seconds=policy.probe_lease_s)})
    return leased, True
