"""What admitting one delegation costs: the admission entity against visibility counting.

Runs on Temporal's local dev server (in memory, the chain search attributes registered)
with one worker serving `ChainAdmissionWorkflow`. A chain of `--runs` runs of one
tenant sits in visibility (workflows nobody serves, so they stay Running with their
chain attributes). Each delegation, with `chain_budget`, `tenant_rate` and
`tenant_ceiling` configured, is decided two ways, interleaved over rounds:

- visibility (the baseline): the body of the unused visibility measurement activity
  (`steadyloop.activities.chain_measurement.measure`, three count queries at once)
  and the rules on its answer. Open to the sibling race; kept here only to compare.
- entity (after): the body of the admission activity (`ChainAdmissionActivities.admit`,
  one update-with-start on the tenant's entity, which decides and records the child).

Both are what the run's one activity does per delegation (the activity's own scheduling
costs the same either way and is left out). The two alternate call by call. It prints
ms per delegation (median of the rounds) and the ratio entity / visibility. Nothing
asserts a time.

    .venv/bin/python benchmarks/bench_admission.py            # 40 delegations x 5 rounds
    .venv/bin/python benchmarks/bench_admission.py --quick    # 10 x 2
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from steadyloop.activities.chain_admission import ChainAdmissionActivities
from steadyloop.activities.chain_measurement import measure
from steadyloop.chains.admission import AdmissionRequest, ChildAsk, RunEntry
from steadyloop.chains.limits import (
    ChainBudgetLimit,
    ChainLimit,
    ChainPosition,
    MeasureChainInput,
    TenantCeilingLimit,
    TenantRateLimit,
    chain_rules,
    pair_key,
)
from steadyloop.chains.rules import admit_child_run
from steadyloop.chains.search_attributes import chain_search_attributes
from steadyloop.worker.dev_server import dev_server
from steadyloop.workflows.chain_admission import ChainAdmissionWorkflow

TENANT = "bench"
LIMITS: list[ChainLimit] = [
    ChainBudgetLimit(max_runs=1_000_000),
    TenantRateLimit(window_s=3600, max_started=1_000_000),
    TenantCeilingLimit(max_active=1_000_000),
]


async def park_chain(client: Client, root: str, runs: int) -> None:
    """`runs` runs of one chain in visibility: the root and its children, all Running."""
    for index in range(runs):
        child = index > 0
        await client.start_workflow(
            "ParkedRun",
            id=root if not child else f"{root}/c{index}",
            task_queue="nobody-serves-this",
            search_attributes=chain_search_attributes(
                tenant=TENANT,
                chain_root=root,
                depth=int(child),
                agent="worker",
                parent=root if child else None,
                pair=pair_key("worker", "worker") if child else None,
            ),
        )


def position(started: datetime) -> ChainPosition:
    return ChainPosition(agent="worker", depth=0, started_at=started)


async def by_visibility(client: Client, root: str, started: datetime, _: int) -> None:
    now = datetime.now(UTC)
    measured = await measure(
        client,
        MeasureChainInput(
            tenant=TENANT,
            chain_root=root,
            run=root,
            kinds=["chain_budget", "tenant_rate", "tenant_ceiling"],
            pair=pair_key("worker", "worker"),
            window_start=now - timedelta(seconds=3600),
        ),
    )
    rules = chain_rules(
        LIMITS, position=position(started), target="worker", children=[], measured=measured, now=now
    )
    assert admit_child_run(rules).admitted


def by_entity(admission: ChainAdmissionActivities) -> Callable[..., Awaitable[None]]:
    async def admit(client: Client, root: str, started: datetime, index: int) -> None:
        answer = await admission.admit(
            AdmissionRequest(
                tenant=TENANT,
                run=RunEntry(workflow_id=root, chain_root=root, agent="worker", started_at=started),
                position=position(started),
                child=ChildAsk(workflow_id=f"{root}/d{index}", agent="worker", limits=LIMITS),
            )
        )
        assert answer.admission is not None and answer.admission.admitted

    return admit


async def main(delegations: int, rounds: int, runs: int) -> None:
    async with dev_server(ui=False) as server:
        client = server.client
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        admission = ChainAdmissionActivities(client, task_queue=task_queue)
        root = f"bench-root-{uuid.uuid4().hex[:8]}"
        started = datetime.now(UTC)
        await park_chain(client, root, runs)
        variants: dict[str, Callable[..., Awaitable[None]]] = {
            "visibility (before)": by_visibility,
            "entity (after)": by_entity(admission),
        }
        per_round: dict[str, list[float]] = {name: [] for name in variants}
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[ChainAdmissionWorkflow],
            activities=admission.activities(),
        ):
            counter = 0
            for variant in variants.values():  # warm up both paths
                counter += 1
                await variant(client, root, started, counter)
            for _ in range(rounds):
                spent = dict.fromkeys(variants, 0.0)
                # Alternated call by call, so load from elsewhere hits both paths alike.
                for _ in range(delegations):
                    for name, variant in variants.items():
                        counter += 1
                        begun = time.perf_counter()
                        await variant(client, root, started, counter)
                        spent[name] += time.perf_counter() - begun
                for name in variants:
                    per_round[name].append(spent[name] * 1000 / delegations)
        before = statistics.median(per_round["visibility (before)"])
        after = statistics.median(per_round["entity (after)"])
        print(
            f"admission cost, {delegations} delegations x {rounds} rounds, "
            f"{runs} runs of the chain in visibility (median of rounds):"
        )
        for name in variants:
            print(f"  {name:<22} {statistics.median(per_round[name]):7.2f} ms per delegation")
        print(f"  ratio entity / visibility: {after / before:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 delegations x 2 rounds")
    parser.add_argument("--runs", type=int, default=6, help="runs of the chain in visibility")
    options = parser.parse_args()
    count, repeats = (10, 2) if options.quick else (40, 5)
    asyncio.run(main(count, repeats, options.runs))
