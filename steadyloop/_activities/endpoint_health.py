"""The health activities: read, record and probe an endpoint's shared breaker state.

Workflow code must not read process memory, and a query per model call would cost a
round trip to Temporal each time. So these activities (run as local activities by
`steadyloop._workflows.routed_turn`, their results recorded in history) keep a
short-lived per-process cache (`HealthCache`, `cache_ttl_s`, 2 s by default) in front
of the entity workflows (`EndpointHealthWorkflow`). A query is a billed action on
Temporal Cloud, and with a 2 s cache nearly every run of a worker that starts a run
now and then would pay one to learn that nothing changed. So a *quiet* copy
(known, closed, no failure in its window) is kept `quiet_cache_ttl_s` (30 s by
default): a breaker opens only after failures, and this worker's own failures replace
its copy at once (`record_endpoint_outcome`); what the longer TTL delays is only other
workers' failures reaching this worker's runs, by up to 30 s instead of 2. A copy that
is not quiet, or could not be read, keeps the short TTL.

- `read_endpoint_health`: each endpoint's health, from the cache or by one query.
  An entity that does not exist yet is a healthy endpoint. Health is advice: when
  Temporal does not answer, the endpoint is reported healthy (`known=False`) and the
  miss is cached for the TTL too, so a broken breaker never stops a model call and an
  unreachable one is not asked again on every request.
- `record_endpoint_outcome`: an update-with-start on the entity (created on first use),
  `record_many` carrying every outcome this process queued for the endpoint meanwhile
  (`steadyloop._activities.update_batches`: one update in flight per endpoint and
  process, so an outage reported by 500 runs at once costs a few updates);
  the health it returns replaces the cached copy, so this process sees its own
  failures at once. Other workers see them within the TTL.
- `admit_probe`: the entity decides, one update at a time, so of several runs that see
  a half-open breaker exactly one is admitted.

An outcome's `detail` is a failure's description, made of what a provider sent; the
model activity already redacted the key from it, and `record_endpoint_outcome` cleans
and bounds it again (`steadyloop._redaction.safe_text`) before it reaches the entity's
history, so a detail built elsewhere cannot carry lone surrogates or megabytes there.

The breaker policy comes from the worker (`policy`, or `policies` per endpoint) and
travels with each outcome, so a policy change takes effect without touching the
entities, and workflow code never carries it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._activities.update_batches import UpdateBatcher
from steadyloop._redaction import safe_text
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoint_health import (
    ADMIT_PROBE_ACTIVITY,
    ENDPOINT_HEALTH_WORKFLOW,
    HEALTH_WORKFLOW_ID_PREFIX,
    READ_ENDPOINT_HEALTH_ACTIVITY,
    RECORD_ENDPOINT_OUTCOME_ACTIVITY,
    EndpointHealth,
    EndpointHealthInput,
    EndpointOutcome,
    OutcomeBatch,
    ProbeBatch,
    ProbeGrant,
    ProbeGrants,
    ProbeRequest,
    ReadHealthInput,
    health_workflow_id,
)
from steadyloop._stream.failures import MESSAGE_CHARS

__all__ = [
    "DEFAULT_CACHE_TTL_S",
    "DEFAULT_QUIET_CACHE_TTL_S",
    "EndpointHealthActivities",
    "HealthCache",
]

DEFAULT_CACHE_TTL_S = 2.0
DEFAULT_QUIET_CACHE_TTL_S = 30.0
R = TypeVar("R", bound=BaseModel)
QUERY_TIMEOUT = timedelta(seconds=5)


def _report_id() -> str | None:
    """The reporting run and call: the same on each retry of this activity, so the entity
    counts a report once however often it is sent (None outside an activity)."""
    if not activity.in_activity():
        return None
    info = activity.info()
    return f"{info.workflow_run_id}/{info.activity_id}"


def _json_size(value: BaseModel) -> int:
    return len(value.model_dump_json())


class HealthCache:
    """Endpoint health copies that expire `ttl_s` after they were stored, or `quiet_ttl_s`
    (when longer; None: the same; never when `ttl_s` is 0) for a quiet copy: known,
    closed, no failure in its window."""

    def __init__(
        self,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        quiet_ttl_s: float | None = None,
    ) -> None:
        if not ttl_s >= 0:
            raise ValueError(f"cache_ttl_s must be 0 or more, got {ttl_s!r}")
        if quiet_ttl_s is not None and not quiet_ttl_s >= 0:
            raise ValueError(f"quiet_cache_ttl_s must be 0 or more, got {quiet_ttl_s!r}")
        self.ttl_s = ttl_s
        # A worker that caches nothing (0) caches nothing, quiet or not.
        keep_quiet = quiet_ttl_s is not None and ttl_s > 0
        self.quiet_ttl_s = max(ttl_s, quiet_ttl_s) if keep_quiet and quiet_ttl_s else ttl_s
        self._clock = clock
        self._entries: dict[str, tuple[float, EndpointHealth]] = {}

    def ttl_for(self, health: EndpointHealth) -> float:
        """How long `health` is kept: longer when a success would change nothing."""
        return self.quiet_ttl_s if health.known and health.quiet else self.ttl_s

    def get(self, endpoint: str) -> EndpointHealth | None:
        entry = self._entries.get(endpoint)
        if entry is None or self._clock() - entry[0] >= self.ttl_for(entry[1]):
            return None
        return entry[1]

    def put(self, health: EndpointHealth) -> None:
        self._entries[health.endpoint] = (self._clock(), health)


class EndpointHealthActivities:
    """The health activities, bound to a client and the task queue the entities run on."""

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        policy: BreakerPolicy | None = None,
        policies: Mapping[str, BreakerPolicy] | None = None,
        cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
        quiet_cache_ttl_s: float | None = DEFAULT_QUIET_CACHE_TTL_S,
        id_prefix: str = HEALTH_WORKFLOW_ID_PREFIX,
        clock: Callable[[], float] = time.monotonic,
        continue_as_new_after: int = 500,
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.policy = policy or BreakerPolicy()
        self.policies = dict(policies or {})
        self.cache = HealthCache(cache_ttl_s, clock, quiet_ttl_s=quiet_cache_ttl_s)
        self.id_prefix = id_prefix
        self.continue_as_new_after = continue_as_new_after  # for an entity it starts
        self.queries = 0  # how many reads went past the cache (tests, benchmarks)
        # One update in flight per endpoint from this process; the rest wait for the next.
        self.records: UpdateBatcher[EndpointOutcome, EndpointHealth] = UpdateBatcher(
            self._send_records, size=_json_size
        )
        self.probes: UpdateBatcher[ProbeRequest, ProbeGrant] = UpdateBatcher(
            self._send_probes, size=_json_size
        )

    def activities(self) -> Sequence[Callable[..., Any]]:
        return [self.read_endpoint_health, self.record_endpoint_outcome, self.admit_probe]

    def policy_for(self, endpoint: str) -> BreakerPolicy:
        return self.policies.get(endpoint, self.policy)

    @activity.defn(name=READ_ENDPOINT_HEALTH_ACTIVITY)
    async def read_endpoint_health(self, request: ReadHealthInput) -> list[EndpointHealth]:
        read = await asyncio.gather(*(self._read(name) for name in request.endpoints))
        # The run may reuse what it read for as long as this cache would have answered
        # with the same copy (`routed_turn.HealthView`).
        return [
            health.model_copy(update={"view_ttl_s": self.cache.ttl_for(health)}) for health in read
        ]

    @activity.defn(name=RECORD_ENDPOINT_OUTCOME_ACTIVITY)
    async def record_endpoint_outcome(self, outcome: EndpointOutcome) -> EndpointHealth:
        if outcome.outcome == "degraded" and outcome.parameter is None:
            # Refused here, not by the entity: one bad outcome must not fail a batch.
            raise ValueError("a 'degraded' outcome names the parameter")
        outcome = outcome.model_copy(
            update={
                "policy": self.policy_for(outcome.endpoint),
                "detail": safe_text(outcome.detail, None, MESSAGE_CHARS),
                "report": _report_id(),
            }
        )
        health = await self.records.call(outcome.endpoint, outcome)
        self.cache.put(health)
        return health

    @activity.defn(name=ADMIT_PROBE_ACTIVITY)
    async def admit_probe(self, request: ProbeRequest) -> ProbeGrant:
        request = request.model_copy(update={"policy": self.policy_for(request.endpoint)})
        grant = await self.probes.call(request.endpoint, request)
        self.cache.put(grant.health)
        return grant

    # -- helpers ---------------------------------------------------------------------

    async def _send_records(
        self, endpoint: str, outcomes: list[EndpointOutcome]
    ) -> list[EndpointHealth]:
        batch = OutcomeBatch(outcomes=outcomes)
        health = await self._update("record_many", batch, endpoint, EndpointHealth)
        return [health] * len(outcomes)  # each caller learns the health after the batch

    async def _send_probes(self, endpoint: str, requests: list[ProbeRequest]) -> list[ProbeGrant]:
        batch = ProbeBatch(requests=requests)
        return (await self._update("admit_probes", batch, endpoint, ProbeGrants)).grants

    async def _update(self, update: str, arg: BaseModel, endpoint: str, result: type[R]) -> R:
        """An update on the endpoint's entity, starting it if it does not run yet."""
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            ENDPOINT_HEALTH_WORKFLOW,
            EndpointHealthInput(
                endpoint=endpoint, continue_as_new_after=self.continue_as_new_after
            ),
            id=health_workflow_id(endpoint, self.id_prefix),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        answer: R = await self.client.execute_update_with_start_workflow(
            update, arg, start_workflow_operation=start, result_type=result
        )
        return answer

    async def _read(self, endpoint: str) -> EndpointHealth:
        cached = self.cache.get(endpoint)
        if cached is not None:
            return cached
        self.queries += 1
        handle = self.client.get_workflow_handle(health_workflow_id(endpoint, self.id_prefix))
        try:
            health: EndpointHealth = await handle.query(
                "health", result_type=EndpointHealth, rpc_timeout=QUERY_TIMEOUT
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                health = self._unknown(endpoint, exc)
            else:  # nobody has recorded anything: a healthy endpoint
                health = EndpointHealth(endpoint=endpoint, policy=self.policy_for(endpoint))
        except Exception as exc:  # health is advice; never fail a model call over it
            health = self._unknown(endpoint, exc)
        self.cache.put(health)
        return health

    def _unknown(self, endpoint: str, exc: BaseException) -> EndpointHealth:
        activity.logger.warning(
            "could not read the health of endpoint %r (%s: %s); treating it as healthy",
            endpoint,
            type(exc).__name__,
            exc,
        )
        return EndpointHealth(endpoint=endpoint, policy=self.policy_for(endpoint), known=False)
