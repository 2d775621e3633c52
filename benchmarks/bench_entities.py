"""The ceiling of the two single workflows every run talks to (issue 27 §5).

Runs on Temporal's local dev server (in memory) with one worker serving
`ChainAdmissionWorkflow` and `EndpointHealthWorkflow`, and prints:

- admissions per second one tenant's admission entity sustains: `--admissions`
  delegations (distinct children of one chain), all asked at once, the way a burst of
  runs would ask, through the admission activity's body (one update-with-start each);
  against the same entity asked one at a time (the baseline, so the ratio says what
  concurrency buys when every admission is decided one at a time by one workflow);
- failure reports per second one endpoint's health entity takes when `--runs` runs hit
  an outage at once: each reports one failure (`record_endpoint_outcome`'s body), all
  concurrently; against reports sent one at a time.

Every figure is measured in this run; nothing asserts a time. Updates are what the
entities serialize, so the concurrent figure is the ceiling: a tenant starting more
delegations per second than it, or an outage reported by more runs per second, queues
behind the entity (each caller waits, nothing is lost or refused).

    .venv/bin/python benchmarks/bench_entities.py                 # 20 at once
    .venv/bin/python benchmarks/bench_entities.py --at-once 500   # the issue's 500 runs

Seen on the shared 2-core machine this was written on: 20 at once finishes; at 100 and
500 at once the entities did not answer every update within the phase limit (updates
refused past Temporal's 10 in flight per workflow, aborted, workflow tasks lost), so
those runs print no rate: the burst is where these entities need sharding or batching.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bench_admission import LIMITS, TENANT  # the same tenant and limits, all generous
from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from steadyloop.activities.chain_admission import ChainAdmissionActivities
from steadyloop.activities.endpoint_health import EndpointHealthActivities
from steadyloop.chains.admission import AdmissionRequest, ChildAsk, RunEntry
from steadyloop.chains.limits import ChainPosition
from steadyloop.routing.endpoint_health import EndpointOutcome
from steadyloop.worker.dev_server import dev_server
from steadyloop.workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop.workflows.endpoint_health import EndpointHealthWorkflow

RETRIED = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED)
SERIAL_SHARE = 5  # the one-at-a-time baseline sends a fifth as many
PHASE_LIMIT_S = 120.0


class Aborts:
    """Updates the server refused or aborted, sent again after a pause as the admission
    and health activities' retries would: RESOURCE_EXHAUSTED (Temporal admits at most
    10 updates in flight per workflow on the dev server, `history.maxInFlightUpdates`,
    after the client's own retries) and UNAVAILABLE (`workflow update was aborted`: the
    entity continued as new, or lost its workflow task, with the update in flight), and
    an update whose RPC timed out waiting for the entity."""

    def __init__(self) -> None:
        self.count = 0

    def retrying(self, one: Callable[[int], Awaitable[None]]) -> Callable[[int], Awaitable[None]]:
        async def again(index: int) -> None:
            while True:
                try:
                    return await one(index)
                except WorkflowUpdateRPCTimeoutOrCancelledError:
                    self.count += 1  # the update's RPC timed out waiting: sent again
                except RPCError as error:
                    if error.status not in RETRIED:
                        raise
                    self.count += 1
                await asyncio.sleep(0.1)

        return again


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


async def main(admission_count: int, runs: int) -> None:
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
            admit, fail = Aborts(), Aborts()
            await per_second(3, False, admissions(admission, root))  # start and warm both
            await per_second(3, False, failures(health, endpoint))
            serial_admit = await per_second(
                admission_count // SERIAL_SHARE, False, admissions(admission, root)
            )
            burst_admit = await per_second(
                admission_count, True, admit.retrying(admissions(admission, root))
            )
            serial_fail = await per_second(runs // SERIAL_SHARE, False, failures(health, endpoint))
            burst_fail = await per_second(runs, True, fail.retrying(failures(health, endpoint)))
        print(f"single-entity ceilings on the dev server (one worker, {task_queue}):")
        print(
            f"  admissions/s, one tenant, {admission_count} at once: "
            f"{figure(burst_admit, serial_admit)}; "
            f"{admit.count} update(s) refused or aborted by the server and sent again"
        )
        print(
            f"  failure reports/s, {runs} runs hitting an outage at once: "
            f"{figure(burst_fail, serial_fail)}; "
            f"{fail.count} update(s) refused or aborted by the server and sent again"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 admissions, 10 runs")
    parser.add_argument("--at-once", type=int, help="admissions and runs at once (default 20)")
    options = parser.parse_args()
    count = options.at_once or (10 if options.quick else 20)
    asyncio.run(main(count, count))
