"""The ceiling of the two single workflows every run talks to.

Runs on Temporal's local dev server (in memory) with one worker serving
`ChainAdmissionWorkflow` and `EndpointHealthWorkflow`, and prints:

- admissions per second one tenant's admission entity sustains: `--at-once`
  delegations (distinct children of one chain), all asked at once, the way a burst of
  runs would ask, through the admission activity's body (`ChainAdmissionActivities.admit`,
  which queues them into `admit_many` batches, one update in flight per tenant);
  against the same entity asked one at a time (the baseline, one update each);
- failure reports per second one endpoint's health entity takes when `--at-once` runs
  hit an outage at once: each reports one failure (`record_endpoint_outcome`'s body,
  batched into `record_many`), all concurrently; against reports sent one at a time.

Each phase also prints the updates it cost, how many of them the server refused and
were sent again (the batcher's backoff), and, for the reports, how many the entity
counted (every report, or the figure is for a path that loses them). Every figure is
measured in this run; nothing asserts a time.

    .venv/bin/python benchmarks/bench_entities.py                 # 500 at once
    .venv/bin/python benchmarks/bench_entities.py --quick         # 10 at once

Before batching (one update per caller), 20 at once finished at 15.9 admissions/s and
14.6 reports/s, and at 100 and 500 at once the entities wedged: updates past Temporal's
10 in flight per workflow (`history.maxInFlightUpdates`) were refused, aborted and sent
again until workflow tasks were lost.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bench_admission import LIMITS, TENANT  # the same tenant and limits, all generous
from temporalio.worker import Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._chains.admission import AdmissionRequest, ChildAsk, RunEntry
from steadyloop._chains.limits import ChainPosition
from steadyloop._routing.endpoint_health import EndpointHealth, EndpointOutcome, health_workflow_id
from steadyloop._worker.dev_server import dev_server
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow

SERIAL_SHARE = 5  # the one-at-a-time baseline sends a fifth as many
PHASE_LIMIT_S = 120.0


async def per_second(
    count: int, at_once: bool, one: Callable[[int], Awaitable[None]]
) -> float | str:
    """Calls per second, or what was done when it did not finish within `PHASE_LIMIT_S`
    (a wedged entity is a result too, not a hang)."""
    done = 0

    async def counted(index: int) -> None:
        nonlocal done
        await one(index)
        done += 1

    async def all_of_them() -> None:
        if at_once:
            await asyncio.gather(*(counted(i) for i in range(count)))
        else:
            for i in range(count):
                await counted(i)

    begun = time.perf_counter()
    try:
        await asyncio.wait_for(all_of_them(), PHASE_LIMIT_S)
    except TimeoutError:
        return f"did not finish in {PHASE_LIMIT_S:.0f} s ({done} of {count} answered)"
    return count / (time.perf_counter() - begun)


def figure(burst: float | str, serial: float | str) -> str:
    if isinstance(burst, str) or isinstance(serial, str):
        return f"{burst}  (one at a time: {serial})"
    return f"{burst:8.1f}  (one at a time: {serial:.1f}; ratio {burst / serial:.2f})"


def admissions(admission: ChainAdmissionActivities, root: str) -> Callable[[int], Awaitable[None]]:
    started = datetime.now(UTC)
    batch = uuid.uuid4().hex[:6]

    async def admit(index: int) -> None:
        answer = await admission.admit(
            AdmissionRequest(
                tenant=TENANT,
                run=RunEntry(workflow_id=root, chain_root=root, agent="worker", started_at=started),
                position=ChainPosition(agent="worker", depth=0, started_at=started),
                child=ChildAsk(
                    workflow_id=f"{root}/{batch}-{index}", agent="worker", limits=LIMITS
                ),
            )
        )
        assert answer.admission is not None and answer.admission.admitted

    return admit


def failures(health: EndpointHealthActivities, endpoint: str) -> Callable[[int], Awaitable[None]]:
    async def report(index: int) -> None:
        await health.record_endpoint_outcome(
            EndpointOutcome(endpoint=endpoint, outcome="failure", detail=f"HTTP 503 (run {index})")
        )

    return report


async def main(admission_count: int, runs: int) -> list[str]:
    """Measure and print; returns the lines printed (for the benchmark's own test)."""
    async with dev_server(ui=False) as server:
        client = server.client
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        admission = ChainAdmissionActivities(client, task_queue=task_queue)
        health = EndpointHealthActivities(client, task_queue=task_queue)
        root = f"bench-root-{uuid.uuid4().hex[:8]}"
        endpoint = f"bench-endpoint-{uuid.uuid4().hex[:8]}"
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[ChainAdmissionWorkflow, EndpointHealthWorkflow],
            activities=[*admission.activities(), *health.activities()],
            max_concurrent_workflow_tasks=8,
        ):
            await per_second(3, False, admissions(admission, root))  # start and warm both
            await per_second(3, False, failures(health, endpoint))
            serial_admit = await per_second(
                admission_count // SERIAL_SHARE, False, admissions(admission, root)
            )
            admit_before = (admission.batches.updates_sent, admission.batches.refusals)
            burst_admit = await per_second(admission_count, True, admissions(admission, root))
            admit_updates = admission.batches.updates_sent - admit_before[0]
            admit_refused = admission.batches.refusals - admit_before[1]
            serial_fail = await per_second(runs // SERIAL_SHARE, False, failures(health, endpoint))
            fail_before = (health.records.updates_sent, health.records.refusals)
            burst_fail = await per_second(runs, True, failures(health, endpoint))
            fail_updates = health.records.updates_sent - fail_before[0]
            fail_refused = health.records.refusals - fail_before[1]
            entity = client.get_workflow_handle(health_workflow_id(endpoint))
            counted = (await entity.query("health", result_type=EndpointHealth)).breaker
        reported = 3 + runs // SERIAL_SHARE + runs
        lines = [
            f"single-entity ceilings on the dev server (one worker, {task_queue}):",
            f"  admissions/s, one tenant, {admission_count} at once: "
            f"{figure(burst_admit, serial_admit)}; {admit_updates} update(s), "
            f"{admit_refused} refused by the server and sent again",
            f"  failure reports/s, {runs} runs hitting an outage at once: "
            f"{figure(burst_fail, serial_fail)}; {fail_updates} update(s), "
            f"{fail_refused} refused by the server and sent again; "
            f"the entity counted {counted.failures_total} of {reported} reports",
        ]
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 admissions, 10 runs")
    parser.add_argument("--at-once", type=int, help="admissions and runs at once (default 500)")
    options = parser.parse_args()
    count = options.at_once or (10 if options.quick else 500)
    asyncio.run(main(count, count))
