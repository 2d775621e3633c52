"""What routing costs a healthy model turn: time and history, against a direct call.

Runs on Temporal's local dev server (in memory) with one worker and a scripted provider
on 127.0.0.1. Three workflows make N model turns each, interleaved over R rounds:

- direct: one model activity per turn (the floor: what the loop does today);
- routed (cached): `routed_completion` over two candidates with healthy endpoints; the
  health read is a local activity answered from the worker's cache (TTL 60 s here);
- routed (no cache): the same with a cache TTL of 0, so every turn queries both
  endpoints' entity workflows (the round trip the cache exists to avoid).

It prints ms per turn (median of the rounds) and the ratio to direct, history events per
turn, and how many health queries each routed variant made. Nothing asserts a time.

    .venv/bin/python benchmarks/bench_routing.py            # 20 turns x 5 rounds
    .venv/bin/python benchmarks/bench_routing.py --quick    # 10 turns x 2 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from routing_workflows import DirectTurnsWorkflow, RoutedTurnsWorkflow, TurnsInput
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._chat import ChatMessage
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._stream.completion import CompletionRequest
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop.testing import ScriptedServer, finish_chunk, sse_response, text_chunks

ROUTE = RouteConfig(
    candidates=[
        RouteCandidate(endpoint="primary", model="m"),
        RouteCandidate(endpoint="fallback", model="m"),
    ]
)
REQUEST = CompletionRequest(
    endpoint="primary", model="m", messages=[ChatMessage(role="user", content="hi")]
)


@dataclass
class Variant:
    name: str
    task_queue: str
    health: EndpointHealthActivities | None
    ms_per_turn: list[float]
    events_per_turn: float = 0.0


@asynccontextmanager
async def bench() -> AsyncIterator[tuple[Client, list[Variant]]]:
    answer = sse_response([*text_chunks("ok"), finish_chunk("stop")])
    async with ScriptedServer(lambda _request: answer) as server:
        endpoints = EndpointRegistry([server.endpoint("primary"), server.endpoint("fallback")])
        async with ModelActivities(endpoints, environ={}) as model:
            env = await WorkflowEnvironment.start_local(
                dev_server_existing_path=dev_server_path(),
                data_converter=pydantic_data_converter,
                dev_server_log_level="error",
                dev_server_extra_args=dev_server_args(),
            )
            async with env:
                variants: list[Variant] = []
                workers: list[Worker] = []
                for name, ttl in (
                    ("direct", None),
                    ("routed (cached)", 60.0),
                    ("routed (no cache)", 0.0),
                ):
                    queue = f"bench-routing-{uuid.uuid4()}"
                    health = (
                        None
                        if ttl is None
                        else EndpointHealthActivities(env.client, task_queue=queue, cache_ttl_s=ttl)
                    )
                    workers.append(
                        Worker(
                            env.client,
                            task_queue=queue,
                            workflows=[
                                DirectTurnsWorkflow,
                                RoutedTurnsWorkflow,
                                EndpointHealthWorkflow,
                            ],
                            activities=[
                                model.stream_completion,
                                *(health.activities() if health else []),
                            ],
                        )
                    )
                    variants.append(Variant(name, queue, health, []))
                for worker in workers:
                    await worker.__aenter__()
                try:
                    yield env.client, variants
                finally:
                    for worker in workers:
                        await worker.__aexit__(None, None, None)


async def run_once(client: Client, variant: Variant, turns: int) -> tuple[float, int]:
    """Seconds for one workflow of `turns` turns, and its history's event count."""
    workflow = DirectTurnsWorkflow.run if variant.health is None else RoutedTurnsWorkflow.run
    params = TurnsInput(request=REQUEST, turns=turns, route=ROUTE)
    started = time.perf_counter()
    handle = await client.start_workflow(
        workflow,
        params,
        id=f"bench-{uuid.uuid4()}",
        task_queue=variant.task_queue,
    )
    done = await handle.result()
    elapsed = time.perf_counter() - started
    assert done == turns, f"{variant.name}: {done} of {turns} turns answered"
    history = await handle.fetch_history()
    return elapsed, len(history.events)


async def main(turns: int, rounds: int) -> None:
    async with bench() as (client, variants):
        for variant in variants:  # warm-up: imports, connections, entity creation
            await run_once(client, variant, 2)
        queries_before = {v.name: v.health.queries if v.health else 0 for v in variants}
        for _ in range(rounds):
            for variant in variants:
                seconds, events = await run_once(client, variant, turns)
                variant.ms_per_turn.append(1000 * seconds / turns)
                variant.events_per_turn = events / turns
    base = statistics.median(variants[0].ms_per_turn)
    print(f"{turns} turns x {rounds} rounds, local dev server, scripted provider on loopback")
    print(f"{'variant':<20} {'ms/turn':>8} {'x direct':>9} {'events/turn':>12} {'queries':>8}")
    for variant in variants:
        median = statistics.median(variant.ms_per_turn)
        queries = (variant.health.queries if variant.health else 0) - queries_before[variant.name]
        print(
            f"{variant.name:<20} {median:8.1f} {median / base:9.2f} "
            f"{variant.events_per_turn:12.1f} {queries:8d}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 turns x 2 rounds")
    args = parser.parse_args()
    asyncio.run(main(10, 2) if args.quick else main(20, 5))
