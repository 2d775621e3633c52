"""What admitting one delegation costs: one decision of the tenant's admission entity.

Runs on Temporal's local dev server (in memory) with one worker serving
`ChainAdmissionWorkflow`. Each delegation, with `chain_budget`, `tenant_rate` and
`tenant_ceiling` configured, is the body of the admission activity
(`ChainAdmissionActivities.admit`: one update-with-start on the tenant's entity, which
decides and records the child), what the run's one activity does per delegation (the
activity's own scheduling is left out). It prints ms per delegation (median of the
rounds, and the fastest and slowest round). Nothing asserts a time.

    .venv/bin/python benchmarks/bench_admission.py            # 40 delegations x 5 rounds
    .venv/bin/python benchmarks/bench_admission.py --quick    # 10 x 2
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime

from temporalio.worker import Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import AdmissionRequest, ChildAsk, RunEntry
from steadyloop._chains.limits import (
    ChainBudgetLimit,
    ChainLimit,
    ChainPosition,
    TenantCeilingLimit,
    TenantRateLimit,
)
from steadyloop._worker.dev_server import dev_server
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow

TENANT = "bench"
LIMITS: list[ChainLimit] = [
    ChainBudgetLimit(max_runs=1_000_000),
    TenantRateLimit(window_s=3600, max_started=1_000_000),
    TenantCeilingLimit(max_active=1_000_000),
]


async def admit(
    admission: ChainAdmissionActivities, root: str, started: datetime, index: int
) -> None:
    """One delegation of `root`'s run, decided and recorded by the tenant's entity."""
    answer = await admission.admit(
        AdmissionRequest(
            tenant=TENANT,
            run=RunEntry(workflow_id=root, chain_root=root, agent="worker", started_at=started),
            position=ChainPosition(agent="worker", depth=0, started_at=started),
            child=ChildAsk(workflow_id=f"{root}/d{index}", agent="worker", limits=LIMITS),
        )
    )
    assert answer.admission is not None and answer.admission.admitted


async def main(delegations: int, rounds: int) -> None:
    async with dev_server(ui=False) as server:
        client = server.client
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        admission = ChainAdmissionActivities(client, task_queue=task_queue)
        root = f"bench-root-{uuid.uuid4().hex[:8]}"
        started = datetime.now(UTC)
        per_round: list[float] = []
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[ChainAdmissionWorkflow],
            activities=admission.activities(),
        ):
            counter = 1
            await admit(admission, root, started, counter)  # warm up: starts the entity
            for _ in range(rounds):
                begun = time.perf_counter()
                for _ in range(delegations):
                    counter += 1
                    await admit(admission, root, started, counter)
                per_round.append((time.perf_counter() - begun) * 1000 / delegations)
        print(f"admission cost, {delegations} delegations x {rounds} rounds (median of rounds):")
        print(
            f"  entity {statistics.median(per_round):7.2f} ms per delegation "
            f"(rounds {min(per_round):.2f}-{max(per_round):.2f})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 delegations x 2 rounds")
    options = parser.parse_args()
    count, repeats = (10, 2) if options.quick else (40, 5)
    asyncio.run(main(count, repeats))
