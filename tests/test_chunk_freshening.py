"""A chunk reused by a new payload is made young again, so a collection's grace period
("nothing younger is deleted") covers the run in flight that now names it.

The case that decides it: a run closed long ago stored a chunk; a new run stores a
payload with the same bytes (the conditional put finds the chunk there) and has not yet
written its manifest (chunks first, manifest last) when a collection runs. No remaining
manifest names the chunk, so only its age can keep it: without freshening it is a day
old and deleted, and the new run's manifest then names a chunk that is gone.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from seaweed_harness import restore_environ, seaweed
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from steadyloop._history.blob_retention import RunState
from steadyloop._history.object_store import (
    MANIFEST_PREFIX,
    ForwardingStore,
    LocalDirectoryStore,
    MemoryStore,
    ObjectStore,
)
from steadyloop._history.payload_storage import ChunkedStorageDriver
from steadyloop.client._blob_gc import collect

SHARED = "the same bytes in both runs: system prompt, tools, the first turns. " * 4
CHUNK = 64


class HeldManifests(ForwardingStore):
    """`inner`, where a manifest write waits for `release` (a writer caught between its
    chunks and its manifest), recording every freshening."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.release = asyncio.Event()
        self.release.set()
        self.chunks_written = asyncio.Event()
        self.freshened: list[str] = []

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        if key.startswith(MANIFEST_PREFIX):
            self.chunks_written.set()
            await self.release.wait()
        return await self.inner.put_if_absent(key, data)

    async def freshen(self, key: str) -> bool:
        self.freshened.append(key)
        return await self.inner.freshen(key)


def payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


async def put(driver: ChunkedStorageDriver, text: str, owner: str) -> StorageDriverClaim:
    target = StorageDriverWorkflowInfo(namespace="default", id=owner)
    (claim,) = await driver.store(StorageDriverStoreContext(target=target), [payload(text)])
    return claim


async def read_back(store: ObjectStore, claim: StorageDriverClaim) -> str:
    fresh = ChunkedStorageDriver(store, chunk_bytes=CHUNK)  # nothing cached
    (got,) = await fresh.retrieve(StorageDriverRetrieveContext(), [claim])
    return got.data.decode()


async def states(ids: list[str]) -> dict[str, RunState]:
    closed = datetime.now(UTC) - timedelta(days=30)
    return {i: RunState("closed", closed) if i == "old" else RunState("open") for i in ids}


async def reused_chunk_survives_a_collection(
    store: ObjectStore, age: Callable[[], Awaitable[None]], grace: timedelta
) -> None:
    """`age()` makes everything stored so far older than `grace`."""
    old = await put(ChunkedStorageDriver(store, chunk_bytes=CHUNK), SHARED + "old run", "old")
    await age()
    held = HeldManifests(store)
    held.release.clear()
    writer = ChunkedStorageDriver(held, chunk_bytes=CHUNK)
    # The writer's worker read the old payload first: having read a chunk says nothing
    # of its age, so it is still freshened.
    await writer.retrieve(StorageDriverRetrieveContext(), [old])
    storing = asyncio.ensure_future(put(writer, SHARED + "a run in flight", "new"))
    await held.chunks_written.wait()  # its chunks are stored, its manifest is not
    report = await collect(store, None, states_of=states, retention=timedelta(0), grace=grace)
    assert report.plan.expired_runs == ["old"]  # the old run's manifest went
    held.release.set()
    claim = await storing
    assert held.freshened  # the shared chunks were found stored, and made young
    assert await read_back(store, claim) == SHARED + "a run in flight"


@pytest.mark.parametrize("backend", ["memory", "local"])
async def test_a_reused_old_chunk_is_not_collected_under_a_run_in_flight(
    backend: str, tmp_path: Path
) -> None:
    if backend == "memory":
        memory = MemoryStore()

        async def age() -> None:
            for key, (data, when) in list(memory.objects.items()):
                memory.objects[key] = (data, when - timedelta(days=2))

        await reused_chunk_survives_a_collection(memory, age, timedelta(hours=1))
        return
    local = LocalDirectoryStore(tmp_path)

    async def age_files() -> None:
        old = (datetime.now(UTC) - timedelta(days=2)).timestamp()
        for path in tmp_path.rglob("*"):
            if path.is_file():
                os.utime(path, (old, old))

    await reused_chunk_survives_a_collection(local, age_files, timedelta(hours=1))


async def test_a_chunk_is_freshened_once_per_worker_not_once_a_turn() -> None:
    """Freshening is a request per reused chunk; a worker that freshened (or wrote) a
    chunk takes it as fresh for KNOWN_PRESENT_S, as it takes it as stored."""
    store = MemoryStore()
    await put(ChunkedStorageDriver(store, chunk_bytes=CHUNK), SHARED, "old")
    held = HeldManifests(store)
    writer = ChunkedStorageDriver(held, chunk_bytes=CHUNK)
    for turn in range(5):
        await put(writer, SHARED + f"turn {turn}", "new")
    shared_chunks = len(SHARED.encode()) // CHUNK  # the whole chunks both payloads share
    assert len(held.freshened) == len(set(held.freshened)) == shared_chunks


@pytest.mark.slow
@pytest.mark.realserver
async def test_a_reused_old_chunk_is_not_collected_on_seaweedfs(tmp_path: Path) -> None:
    """The same on a real S3 store, where freshening is a copy of the object onto itself
    (SeaweedFS sets `LastModified` to the copy's time). Ages are real here: a grace period
    of 2 s, and the old run's objects 3 s old when the new run reuses them."""
    async with seaweed(tmp_path) as server:
        saved = {name: os.environ.get(name) for name in server.environ}
        os.environ.update(server.environ)
        store = server.store()
        try:
            await reused_chunk_survives_a_collection(
                store, lambda: asyncio.sleep(3), timedelta(seconds=2)
            )
        finally:
            await store.aclose()
            restore_environ(saved)
