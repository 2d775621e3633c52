"""The endpoint-health entity workflow and the activities in front of it: shared state by
update-with-start, one probe at a time, continue-as-new that keeps the state, a cache
that spares a query per model call, and advice that never fails a call."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import (
    DEFAULT_CACHE_TTL_S,
    DEFAULT_QUIET_CACHE_TTL_S,
    EndpointHealthActivities,
    HealthCache,
)
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoint_health import (
    ADMIT_PROBE_ACTIVITY,
    READ_ENDPOINT_HEALTH_ACTIVITY,
    RECORD_ENDPOINT_OUTCOME_ACTIVITY,
    EndpointHealth,
    EndpointHealthInput,
    EndpointOutcome,
    ProbeRequest,
    ReadHealthInput,
    health_workflow_id,
)
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._worker.process import WorkerOptions, build_worker
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop.tools._registry import ToolRegistry

POLICY = BreakerPolicy(failure_threshold=2, window_s=60, cool_off_s=30, probe_lease_s=60)


@dataclass
class Health:
    env: WorkflowEnvironment
    activities: EndpointHealthActivities
    task_queue: str

    async def record(
        self, endpoint: str, outcome: Literal["success", "failure", "degraded"], **extra: Any
    ) -> EndpointHealth:
        return await self.activities.record_endpoint_outcome(
            EndpointOutcome(endpoint=endpoint, outcome=outcome, **extra)
        )

    async def entity(self, endpoint: str) -> EndpointHealth:
        handle = self.env.client.get_workflow_handle(health_workflow_id(endpoint))
        result: EndpointHealth = await handle.query(EndpointHealthWorkflow.health)
        return result


@pytest.fixture
async def health() -> AsyncIterator[Health]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=time_skipping_server_path(),
    )
    async with env:
        task_queue = f"health-{uuid.uuid4()}"
        activities = EndpointHealthActivities(env.client, task_queue=task_queue, policy=POLICY)
        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=[EndpointHealthWorkflow],
            activities=list(activities.activities()),
        ):
            yield Health(env, activities, task_queue)


async def test_the_first_record_starts_the_entity_and_the_policy_comes_from_the_worker(
    health: Health,
) -> None:
    after = await health.record("a", "failure", detail="HTTP 500")
    assert after.endpoint == "a" and after.policy == POLICY
    assert len(after.breaker.recent_failures) == 1
    assert await health.entity("a") == after.model_copy(update={"as_of": after.as_of})

    opened = await health.record("a", "failure", detail="HTTP 502")
    assert opened.breaker.open_until is not None
    assert opened.breaker.last_failure == "HTTP 502"


async def test_only_one_probe_is_admitted_while_half_open(health: Health) -> None:
    await health.record("a", "failure")
    await health.record("a", "failure")
    grant = await health.activities.admit_probe(ProbeRequest(endpoint="a"))
    assert grant.granted is False  # open

    await health.env.sleep(timedelta(seconds=31))
    first = await health.activities.admit_probe(ProbeRequest(endpoint="a"))
    second = await health.activities.admit_probe(ProbeRequest(endpoint="a"))
    assert (first.granted, second.granted) == (True, False)

    closed = await health.record("a", "success")
    assert closed.breaker.open_until is None
    assert (await health.activities.admit_probe(ProbeRequest(endpoint="a"))).granted


async def test_a_closed_endpoint_admits_everyone(health: Health) -> None:
    grants = [await health.activities.admit_probe(ProbeRequest(endpoint="x")) for _ in range(3)]
    assert all(g.granted for g in grants)


async def test_degradations_are_remembered_queried_and_forgotten_on_request(
    health: Health,
) -> None:
    after = await health.record(
        "a", "degraded", parameter="stream_options", detail="Unrecognized: stream_options"
    )
    again = await health.record("a", "degraded", parameter="stream_options", detail="again")
    assert after.omitted == again.omitted == ["stream_options"]
    assert again.degraded[0].evidence == "Unrecognized: stream_options"  # the first words kept

    handle = health.env.client.get_workflow_handle(health_workflow_id("a"))
    await handle.signal("forget_degradation", "stream_options")
    assert (await health.entity("a")).omitted == []


async def test_an_outcome_for_another_endpoint_is_rejected_and_not_recorded(
    health: Health,
) -> None:
    await health.record("a", "failure")
    handle = health.env.client.get_workflow_handle(health_workflow_id("a"))
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(
            EndpointHealthWorkflow.record,
            EndpointOutcome(endpoint="b", outcome="failure"),
        )
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(
            EndpointHealthWorkflow.record, EndpointOutcome(endpoint="a", outcome="degraded")
        )
    assert (await health.entity("a")).breaker.failures_total == 1


async def test_reports_at_once_share_updates_and_a_report_sent_twice_counts_once(
    health: Health,
) -> None:
    """Outcomes reported at once travel in few updates (`record_many`), each
    counted; a report sent again after its answer was lost (same run and call) is not."""
    await asyncio.gather(*(health.record("a", "failure", detail=f"run {i}") for i in range(12)))
    assert health.activities.records.updates_sent < 12
    again = EndpointOutcome(endpoint="a", outcome="failure", report="run-x/4")
    await health.activities.records.call("a", again)
    await health.activities.records.call("a", again)
    assert (await health.entity("a")).breaker.failures_total == 13


async def test_it_continues_as_new_and_keeps_its_state(health: Health) -> None:
    handle = await health.env.client.start_workflow(
        EndpointHealthWorkflow.run,
        EndpointHealthInput(endpoint="a", continue_as_new_after=3),
        id=health_workflow_id("a"),
        task_queue=health.task_queue,
    )
    first_run = handle.first_execution_run_id or (await handle.describe()).run_id
    await health.record("a", "degraded", parameter="reasoning_effort", detail="no")
    await health.record("a", "failure", detail="one")
    await health.record("a", "failure", detail="two")  # the third message: hand over

    latest = health.env.client.get_workflow_handle(health_workflow_id("a"))
    for _ in range(100):  # a guard, not a measure: the hand-over follows the update
        if (await latest.describe()).run_id != first_run:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("no continue-as-new after the third message")
    await health.record("a", "failure", detail="three")  # lands on the new run
    state = await health.entity("a")
    assert state.omitted == ["reasoning_effort"]
    assert state.breaker.failures_total == 3
    assert state.breaker.opened_count == 1


async def test_reads_come_from_the_cache_until_it_expires(health: Health) -> None:
    now = [0.0]
    activities = EndpointHealthActivities(
        health.env.client,
        task_queue=health.task_queue,
        policy=POLICY,
        cache_ttl_s=2.0,
        quiet_cache_ttl_s=None,  # this test is about the base TTL
        clock=lambda: now[0],
    )
    first = await activities.read_endpoint_health(ReadHealthInput(endpoints=["a", "b"]))
    assert [h.endpoint for h in first] == ["a", "b"]
    assert all(h.known and h.quiet for h in first)  # no entity yet: healthy
    assert all(h.view_ttl_s == 2.0 for h in first)  # the cache's TTL, for `HealthView`
    assert activities.queries == 2

    await activities.read_endpoint_health(ReadHealthInput(endpoints=["a", "b"]))
    assert activities.queries == 2  # served from the cache

    recorded = await activities.record_endpoint_outcome(
        EndpointOutcome(endpoint="a", outcome="failure", detail="HTTP 500")
    )
    cached = await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    # Its own record, at once; a read carries the TTL the run may reuse it for.
    assert cached == [recorded.model_copy(update={"view_ttl_s": 2.0})]
    assert activities.queries == 2

    now[0] = 2.0
    fresh = await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert activities.queries == 3
    assert fresh[0].breaker.failures_total == 1


async def test_a_health_read_that_fails_reports_healthy_and_is_cached() -> None:
    class Unreachable:
        def get_workflow_handle(self, workflow_id: str) -> Unreachable:
            return self

        async def query(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("Temporal is not answering")

    activities = EndpointHealthActivities(Unreachable(), task_queue="q")  # type: ignore[arg-type]
    [read] = await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert read.known is False and read.quiet
    assert read.phase(datetime.now(UTC)) == "closed"
    await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert activities.queries == 1  # the miss is cached too


async def test_a_quiet_endpoint_is_read_once_per_quiet_ttl_and_a_failing_one_per_ttl(
    health: Health,
) -> None:
    # A query is a billed action; a run that finds nothing changed should not
    # have paid one. A quiet copy is kept 30 s, a copy with failures only 2 s.
    now = [0.0]
    activities = EndpointHealthActivities(
        health.env.client, task_queue=health.task_queue, policy=POLICY, clock=lambda: now[0]
    )
    [first] = await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert first.quiet and first.view_ttl_s == DEFAULT_QUIET_CACHE_TTL_S == 30.0
    now[0] = 29.9
    await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert activities.queries == 1  # still quiet: no query
    now[0] = 30.0
    await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert activities.queries == 2

    await activities.record_endpoint_outcome(EndpointOutcome(endpoint="a", outcome="failure"))
    [failing] = await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert not failing.quiet and failing.view_ttl_s == DEFAULT_CACHE_TTL_S
    now[0] = 32.0
    await activities.read_endpoint_health(ReadHealthInput(endpoints=["a"]))
    assert activities.queries == 3  # not quiet: the short TTL


def test_the_quiet_ttl_applies_to_known_quiet_copies_only() -> None:
    cache = HealthCache(2.0, quiet_ttl_s=30.0)
    assert cache.ttl_for(EndpointHealth(endpoint="a")) == 30.0
    assert cache.ttl_for(EndpointHealth(endpoint="a", known=False)) == 2.0
    assert HealthCache(0.0, quiet_ttl_s=30.0).ttl_for(EndpointHealth(endpoint="a")) == 0.0
    assert HealthCache(5.0, quiet_ttl_s=1.0).ttl_for(EndpointHealth(endpoint="a")) == 5.0
    with pytest.raises(ValueError, match="quiet_cache_ttl_s"):
        HealthCache(2.0, quiet_ttl_s=float("nan"))


def test_the_cache_expires_after_its_ttl() -> None:
    now = [10.0]
    cache = HealthCache(1.5, clock=lambda: now[0])
    entry = EndpointHealth(endpoint="a")
    cache.put(entry)
    now[0] = 11.4
    assert cache.get("a") == entry
    now[0] = 11.5
    assert cache.get("a") is None
    with pytest.raises(ValueError):
        HealthCache(float("nan"))


async def test_the_worker_registers_the_entity_and_the_health_activities(
    health: Health,
) -> None:
    options = WorkerOptions(task_queue="q", endpoints=EndpointRegistry(), tools=ToolRegistry([]))
    async with ModelActivities(EndpointRegistry()) as model:
        worker = build_worker(health.env.client, options, model)
    config = worker.config(active_config=True)  # as the plugin left it
    assert EndpointHealthWorkflow in list(config.get("workflows") or [])
    names = {
        getattr(fn, "__temporal_activity_definition").name for fn in config["activities"] or []
    }
    assert {
        READ_ENDPOINT_HEALTH_ACTIVITY,
        RECORD_ENDPOINT_OUTCOME_ACTIVITY,
        ADMIT_PROBE_ACTIVITY,
    } <= names
