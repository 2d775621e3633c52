"""What makes a collection safe beside writers, on the local store (issue 27 §3): the
driver records who stored each manifest and freshens what it reuses, and the store
re-reads an object's age at the moment it deletes it. No server."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import StorageDriverStoreContext, StorageDriverWorkflowInfo

from steadyloop.client.blob_gc import LocalGcStore
from steadyloop.history.blob_retention import owner_id
from steadyloop.history.payload_storage import LocalFileStorageDriver

DAY = 86400.0


def payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


def store(driver: LocalFileStorageDriver, text: str, workflow_id: str | None) -> str:
    target = (
        None
        if workflow_id is None
        else StorageDriverWorkflowInfo(namespace="default", id=workflow_id, run_id=None)
    )
    (claim,) = asyncio.run(driver.store(StorageDriverStoreContext(target=target), [payload(text)]))
    return claim.claim_data["manifest"]


def age_everything(directory: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in directory.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def test_a_stored_payload_names_the_workflow_it_was_stored_for(tmp_path: Path) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=4)
    manifest = store(driver, "the transcript", "run-1/with a slash")
    store(driver, "no workflow", None)  # a payload stored for no workflow: no record
    records = asyncio.run(LocalGcStore(tmp_path).owner_records())
    assert [(r.workflow_id, r.namespace, r.manifest) for r in records] == [
        ("run-1/with a slash", "default", manifest)
    ]
    assert records[0].owner == owner_id("default", "run-1/with a slash")
    objects = asyncio.run(LocalGcStore(tmp_path).objects())
    assert len(objects) == 2 + 4 + 3  # two manifests, "the transcript" and "no workflow" chunks
    assert driver.usage().files == len(objects)  # owner records are not counted as blobs


def test_storing_what_is_already_there_makes_it_young_again(tmp_path: Path) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=4)
    store(driver, "shared prefix", "run-1")
    age_everything(tmp_path, 10 * DAY)
    store(driver, "shared prefix", "run-2")  # a later run reuses every chunk
    objects = asyncio.run(LocalGcStore(tmp_path).objects())
    cutoff = datetime.now(UTC) - timedelta(minutes=1)
    assert objects and all(o.modified > cutoff for o in objects)


def test_a_delete_rereads_the_age_and_keeps_what_was_written_since_the_listing(
    tmp_path: Path,
) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=4)
    manifest = store(driver, "abcdefgh", "run-1")
    age_everything(tmp_path, 10 * DAY)
    gc = LocalGcStore(tmp_path)
    listed = {o.key: o for o in asyncio.run(gc.objects())}
    cutoff = datetime.now(UTC) - timedelta(hours=1)
    assert all(o.modified < cutoff for o in listed.values())  # all old when listed
    store(driver, "abcdefgh", "run-2")  # ...then a writer reuses them
    assert not asyncio.run(gc.delete_if_older(manifest, cutoff))
    assert manifest in {o.key for o in asyncio.run(gc.objects())}
    age_everything(tmp_path, 10 * DAY)
    assert asyncio.run(gc.delete_if_older(manifest, cutoff))
    assert manifest not in {o.key for o in asyncio.run(gc.objects())}
    assert not list(tmp_path.glob("??/.gc-*"))  # nothing left aside
