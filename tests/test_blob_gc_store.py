"""A collection over the chunked driver's own stores, memory and local:
what it deletes still reads back for the runs it keeps, a writer in flight during the
collection loses nothing, and a delete re-reads the age it was planned on. No server."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.exceptions import ApplicationError

from steadyloop._history.blob_retention import RunState
from steadyloop._history.object_store import LocalDirectoryStore, MemoryStore, ObjectStore
from steadyloop._history.payload_storage import ChunkedStorageDriver
from steadyloop.client import _blob_gc as blob_gc
from steadyloop.client._blob_gc import collect
from steadyloop.errors import PAYLOAD_BLOB_MISSING

LATER = timedelta(days=40)  # the collection runs this long after everything was written
STATES = {"old": RunState("closed", closed_at=datetime.now(UTC)), "new": RunState("open")}


def payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


async def put(store: ObjectStore, text: str, workflow_id: str | None) -> StorageDriverClaim:
    target = (
        None
        if workflow_id is None
        else StorageDriverWorkflowInfo(namespace="default", id=workflow_id)
    )
    driver = ChunkedStorageDriver(store, chunk_bytes=8)
    (claim,) = await driver.store(StorageDriverStoreContext(target=target), [payload(text)])
    return claim


async def read_back(store: ObjectStore, claim: StorageDriverClaim) -> str:
    driver = ChunkedStorageDriver(store, chunk_bytes=8)  # a fresh worker: nothing cached
    (got,) = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    return got.data.decode()


async def bytes_in(store: ObjectStore) -> int:
    return sum([info.size async for info in store.list()])


async def states(ids: list[str]) -> Mapping[str, RunState]:
    return {i: STATES[i] for i in ids if i in STATES}


@pytest.mark.parametrize("backend", ["memory", "local"])
async def test_a_collection_deletes_only_what_the_expired_run_alone_named(
    backend: str, tmp_path: Path
) -> None:
    store: ObjectStore = MemoryStore() if backend == "memory" else LocalDirectoryStore(tmp_path)
    shared = "system prompt and tools|"  # the first chunks of every run's requests
    old = await put(store, shared * 2 + "the old run's own transcript", "old")
    new = await put(store, shared * 2 + "the open run's transcript", "new")
    nobody = await put(store, "stored for no workflow", None)
    before = await bytes_in(store)
    dry = await collect(store, None, states_of=states, now=datetime.now(UTC) + LATER, dry_run=True)
    assert await bytes_in(store) == before and dry.reclaimed_bytes > 0
    report = await collect(store, None, states_of=states, now=datetime.now(UTC) + LATER)
    assert report.reclaimed_bytes == dry.reclaimed_bytes == before - await bytes_in(store)
    assert report.plan.expired_runs == ["old"] and report.plan.open_runs == 1
    assert await read_back(store, new) == shared * 2 + "the open run's transcript"
    assert await read_back(store, nobody) == "stored for no workflow"
    with pytest.raises(ApplicationError) as gone:
        await read_back(store, old)
    assert gone.value.type == PAYLOAD_BLOB_MISSING
    assert any("expired: old" in line for line in report.lines())


async def test_a_run_writing_during_the_collection_keeps_the_old_chunks_it_reuses() -> None:
    store = MemoryStore()
    text = "a transcript only the old run had, so far"
    await put(store, text, "old")
    written: list[StorageDriverClaim] = []

    async def meanwhile(ids: list[str]) -> Mapping[str, RunState]:
        # While the collector asks Temporal, a new run stores a payload that reuses every
        # chunk of the expired run (already stored: not written again, still old).
        written.append(await put(store, text + "!", "new"))
        return await states(ids)

    report = await collect(store, None, states_of=meanwhile, now=datetime.now(UTC) + LATER)
    assert report.deleted_manifests == 1  # the old run's manifest went...
    assert await read_back(store, written[0]) == text + "!"  # ...its chunks did not


def test_a_local_delete_rereads_the_age_and_keeps_what_was_written_since(tmp_path: Path) -> None:
    store = LocalDirectoryStore(tmp_path)
    asyncio.run(store.put_if_absent("chunks/" + "ab" * 32, b"bytes"))
    path = store.path("chunks/" + "ab" * 32)
    cutoff = datetime.now(UTC) - timedelta(hours=1)
    # Listed as old, then written again (by a writer that found it missing) before the delete.
    assert not blob_gc._delete_file_if_older(path, cutoff)
    assert path.read_bytes() == b"bytes"
    then = time.time() - 86400
    os.utime(path, (then, then))
    assert blob_gc._delete_file_if_older(path, cutoff)
    assert not path.exists() and not list(tmp_path.rglob(".gc-*"))
