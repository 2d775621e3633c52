"""Chain measurements: the visibility queries the `steadyloop.measure_chain` activity runs.

The counts are taken against a real Temporal dev server started by
`steadyloop.worker.dev_server` (which must register the chain search attributes for
these runs to start at all): runs carrying the attributes are parked, then measured
from the point of view of one run of a chain. The time-skipping test server cannot
count workflows, so this is where the query text meets a real visibility store.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from parked_workflow import ParkedWorkflow
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from steadyloop.activities.chain_measurement import measure
from steadyloop.chains.limits import ChainMeasurements, MeasureChainInput, PairRecency
from steadyloop.chains.queries import (
    TENANT,
    UnquotableValue,
    others_in_chain,
    others_of_tenant,
    quotable,
    quoted,
)
from steadyloop.chains.search_attributes import chain_search_attributes
from steadyloop.worker.dev_server import dev_server

ALL_KINDS: list[Any] = [
    "chain_budget",
    "pair_seen",
    "pair_cooldown",
    "tenant_rate",
    "tenant_ceiling",
]


# ---------------------------------------------------------------- query text (no server)


@pytest.mark.parametrize("value", ["it's", 'say "hi"', "back\\slash", "line\nbreak", "nul\x00"])
def test_a_value_no_query_can_match_exactly_is_refused_not_mangled(value: str) -> None:
    assert not quotable(value)
    with pytest.raises(UnquotableValue):
        quoted(value)


@pytest.mark.parametrize("value", ["plain", "sp ace", "ünï-ç", "pct%_x", "pi|pe", "semi;--x"])
def test_other_values_are_quoted_as_written(value: str) -> None:
    assert quoted(value) == f"'{value}'"


def test_others_exclude_this_run_its_children_and_continued_executions() -> None:
    query = others_in_chain("root-1", "me", pair="a|b")
    assert "SteadyloopChainRoot = 'root-1'" in query
    assert "WorkflowId != 'me'" in query
    assert "(SteadyloopParent IS NULL OR SteadyloopParent != 'me')" in query
    assert "ExecutionStatus != 'ContinuedAsNew'" in query
    assert query.endswith("AND SteadyloopPair = 'a|b'")


def test_a_window_start_must_be_workflow_time() -> None:
    with pytest.raises(ValueError, match="tz-aware"):
        others_of_tenant("t", "me", started_since=datetime(2026, 1, 1))
    since = datetime(2026, 1, 1, tzinfo=UTC)
    query = others_of_tenant("t", "me", started_since=since)
    assert "StartTime >= '2026-01-01T00:00:00+00:00'" in query


@dataclass
class FlakyClient:
    """Answers counts and listings, except queries containing `broken`."""

    broken: str

    async def count_workflows(self, query: str) -> Any:
        if self.broken in query:
            raise RuntimeError("visibility store timed out")
        return type("Count", (), {"count": 2})()

    def list_workflows(self, query: str, *, limit: int) -> Any:
        if self.broken in query:
            raise RuntimeError("visibility store timed out")

        async def executions() -> AsyncIterator[Any]:
            for minute in (5, 9, 7):
                start = datetime(2026, 1, 1, 12, minute, tzinfo=UTC)
                yield type("Execution", (), {"start_time": start})()

        return executions()


def request(**fields: Any) -> MeasureChainInput:
    defaults: dict[str, Any] = {
        "tenant": "t",
        "chain_root": "r",
        "run": "me",
        "kinds": ALL_KINDS,
        "pair": "a|b",
        "window_start": datetime(2026, 1, 1, tzinfo=UTC),
    }
    return MeasureChainInput(**(defaults | fields))


async def test_a_failed_query_leaves_only_its_own_measurement_out() -> None:
    flaky: Any = FlakyClient(broken="ExecutionStatus = 'Running'")
    measured = await measure(flaky, request())
    assert measured.tenant_active is None
    assert "tenant_active" in measured.failed and "timed out" in measured.failed["tenant_active"]
    counts = (measured.runs_in_chain, measured.pair_runs, measured.tenant_started_in_window)
    assert counts == (2, 2, 2)
    latest = datetime(2026, 1, 1, 12, 9, tzinfo=UTC)  # the latest listed, not the first
    assert measured.pair_recency == PairRecency(last_started=latest)


async def test_a_failed_listing_leaves_the_cooldown_out() -> None:
    flaky: Any = FlakyClient(broken="SteadyloopPair")
    measured = await measure(flaky, request())
    assert measured.pair_recency is None and measured.pair_runs is None
    assert set(measured.failed) == {"pair_recency", "pair_runs"}
    assert measured.runs_in_chain == 2


async def test_only_the_configured_kinds_are_measured() -> None:
    flaky: Any = FlakyClient(broken="nothing")
    measured = await measure(flaky, request(kinds=["tenant_ceiling"]))
    assert measured == ChainMeasurements(tenant_active=2)


# ---------------------------------------------------------------- against the dev server


async def park(
    client: Client,
    task_queue: str,
    workflow_id: str,
    *,
    continue_as_new_once: bool = False,
    **attributes: Any,
) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        ParkedWorkflow.run,
        continue_as_new_once,
        id=workflow_id,
        task_queue=task_queue,
        search_attributes=chain_search_attributes(**attributes),
    )


async def settled(client: Client, query: str, expected: int) -> None:
    """Visibility is eventually consistent: wait until it shows what was started."""
    for _ in range(200):
        if (await client.count_workflows(query)).count == expected:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"visibility never showed {expected} for {query}")


@pytest.mark.slow
async def test_measurements_count_the_right_runs_on_a_real_visibility_store() -> None:
    tag = uuid.uuid4().hex[:6]
    tenant = f"acme {tag} ünï"  # a space and non-ASCII in every value the queries carry
    root = f"root {tag}|%_"
    c1, c2, g1 = f"{root}/c1", f"{root}/c2", f"{root}/c1/g1"
    async with dev_server(ui=False) as server:
        client = server.client
        queue = f"parked-{tag}"
        async with Worker(client, task_queue=queue, workflows=[ParkedWorkflow]):
            chain: dict[str, Any] = {"tenant": tenant, "chain_root": root}
            r = await park(client, queue, root, depth=0, agent="a", **chain)
            await park(client, queue, c1, depth=1, agent="b", parent=root, pair="a|b", **chain)
            done = await park(
                client, queue, c2, depth=1, agent="c", parent=root, pair="a|c", **chain
            )
            grandchild = {"depth": 2, "agent": "b", "parent": c1, "pair": "b|b"}
            await park(client, queue, g1, continue_as_new_once=True, **grandchild, **chain)
            await done.signal(ParkedWorkflow.release)
            await done.result()
            c2_started = (await done.describe()).start_time
            await asyncio.sleep(1.1)
            mid = datetime.now(UTC)
            other_root = f"other-{tag}"
            s = await park(
                client, queue, other_root, depth=0, agent="a", tenant=tenant, chain_root=other_root
            )
            elsewhere = f"u-{tag}"  # another tenant
            u = await park(
                client, queue, elsewhere, depth=0, agent="a", tenant=elsewhere, chain_root=elsewhere
            )
            # Six executions of the tenant: g1 continued once (two executions).
            await settled(client, f"{TENANT} = {quoted(tenant)}", 6)

            as_c1 = await measure(
                client,
                request(tenant=tenant, chain_root=root, run=c1, pair="a|c", window_start=mid),
            )
            an_hour = mid - timedelta(hours=1)
            as_root = await measure(
                client,
                request(tenant=tenant, chain_root=root, run=root, pair="b|b", window_start=an_hour),
            )
            for handle in (r, s, u):
                await handle.signal(ParkedWorkflow.release)
            for wid in (c1, g1):
                await client.get_workflow_handle(wid).signal(ParkedWorkflow.release)
    assert as_c1.failed == {} and as_root.failed == {}
    # c1 sees the rest of its chain: the root and its sibling, not itself nor g1 (its child).
    assert as_c1.runs_in_chain == 2
    assert as_c1.pair_runs == 1  # c2 is the root's pair with c
    assert as_c1.pair_recency is not None and as_c1.pair_recency.last_started is not None
    assert abs(as_c1.pair_recency.last_started - c2_started) < timedelta(milliseconds=1)
    assert as_c1.tenant_started_in_window == 1  # only the other chain's root started since
    assert as_c1.tenant_active == 2  # the root and the other chain's root (c2 finished)
    # The root sees only its grandchild, once although it continued-as-new.
    assert as_root.runs_in_chain == 1
    assert as_root.pair_runs == 1
    assert as_root.tenant_started_in_window == 2  # g1 (once) and the other chain's root
    assert as_root.tenant_active == 2  # g1 and the other root; not c2 (done), not u (tenant)
