"""The blob store that keeps large payloads out of history (`steadyloop._history`)."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import StorageDriverClaim, StorageDriverRetrieveContext
from temporalio.converter import StorageDriverStoreContext as StoreContext
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._chat import ChatMessage
from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._history.payload_storage import (
    DEFAULT_THRESHOLD_BYTES,
    LocalFileStorageDriver,
    blob_settings,
    payload_limit,
    steadyloop_data_converter,
)
from steadyloop._run.models import RunInput
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._worker.process import RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.errors import PAYLOAD_BLOB_CORRUPT, PAYLOAD_BLOB_MISSING

CHUNK = 1024


def payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"json/plain", "x": b"\x00\xff"}, data=data)


async def store(driver: LocalFileStorageDriver, *payloads: Payload) -> list[StorageDriverClaim]:
    return await driver.store(StoreContext(), list(payloads))


async def retrieve(driver: LocalFileStorageDriver, *claims: StorageDriverClaim) -> list[Payload]:
    return await driver.retrieve(StorageDriverRetrieveContext(), list(claims))


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 17])
async def test_a_payload_comes_back_exactly(tmp_path: Path, size: int) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=CHUNK)
    original = payload(bytes(range(256)) * (size // 256) + b"z" * (size % 256))
    (claim,) = await store(driver, original)
    (back,) = await retrieve(driver, claim)
    assert back == original


async def test_a_grown_transcript_stores_only_what_changed(tmp_path: Path) -> None:
    """Consecutive requests share their prefix: the next one adds its new chunks and a
    manifest, not a copy of the transcript; an identical payload adds nothing."""
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=CHUNK)
    prefix = b"".join(f"message {i:06d};".encode() for i in range(2_000))  # about 32 KB
    await store(driver, payload(prefix + b"tail-1"))
    before = driver.usage()
    claims = await store(driver, payload(prefix + b"a new message" * 20 + b"tail-2"))
    after = driver.usage()
    assert after.files - before.files <= 3  # the last chunk or two, and a manifest
    assert after.bytes - before.bytes < 2 * CHUNK + 2_000
    assert (await retrieve(driver, *claims))[0].data.endswith(b"tail-2")

    again = await store(driver, payload(prefix + b"tail-1"))
    assert driver.usage() == after
    assert (await retrieve(driver, *again))[0].data == prefix + b"tail-1"


async def test_a_missing_blob_is_a_clear_non_retryable_error(tmp_path: Path) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=CHUNK)
    (claim,) = await store(driver, payload(b"q" * (3 * CHUNK)))
    chunk = next(p for p in tmp_path.glob("??/*") if p.stat().st_size == CHUNK)
    chunk.unlink()
    with pytest.raises(ApplicationError) as raised:  # read as another worker would
        await retrieve(LocalFileStorageDriver(tmp_path), claim)
    assert raised.value.type == PAYLOAD_BLOB_MISSING
    assert raised.value.non_retryable
    assert str(chunk) in str(raised.value) and "STEADYLOOP_BLOB_DIR" in str(raised.value)


async def test_an_altered_blob_is_refused(tmp_path: Path) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=CHUNK)
    (claim,) = await store(driver, payload(b"q" * (3 * CHUNK)))
    chunk = next(p for p in tmp_path.glob("??/*") if p.stat().st_size == CHUNK)
    chunk.write_bytes(b"r" * CHUNK)
    with pytest.raises(ApplicationError) as raised:
        await retrieve(LocalFileStorageDriver(tmp_path), claim)
    assert raised.value.type == PAYLOAD_BLOB_CORRUPT and raised.value.non_retryable


async def test_the_converter_offloads_only_payloads_over_the_threshold(tmp_path: Path) -> None:
    converter = steadyloop_data_converter(tmp_path, threshold_bytes=4_000)
    small = [ChatMessage(role="user", content="x" * 100)]
    large = [ChatMessage(role="user", content="x" * 5_000)]
    encoded_small, encoded_large = await converter.encode([small, large])
    assert not encoded_small.external_payloads and encoded_small.ByteSize() < 4_000
    assert encoded_large.external_payloads and encoded_large.ByteSize() < 1_000
    decoded = await converter.decode(
        [encoded_small, encoded_large], [list[ChatMessage], list[ChatMessage]]
    )
    assert decoded == [small, large]


def test_settings_from_the_environment(tmp_path: Path) -> None:
    assert blob_settings({}).directory == Path("~/.steadyloop/blobs").expanduser()
    assert blob_settings({}).threshold_bytes == DEFAULT_THRESHOLD_BYTES
    home = {"STEADYLOOP_HOME": str(tmp_path)}
    assert blob_settings(home).directory == tmp_path / "blobs"
    chosen = {**home, "STEADYLOOP_BLOB_DIR": str(tmp_path / "b"), "STEADYLOOP_BLOB_THRESHOLD": "9"}
    assert blob_settings(chosen) == dataclasses.replace(
        blob_settings(home), directory=tmp_path / "b", threshold_bytes=9
    )
    assert blob_settings({"STEADYLOOP_BLOB_DIR": "off"}).directory is None
    for bad in ("-1", "lots"):
        with pytest.raises(ValueError, match="STEADYLOOP_BLOB_THRESHOLD"):
            blob_settings({"STEADYLOOP_BLOB_THRESHOLD": bad})


@pytest.mark.slow
async def test_a_run_whose_input_blob_the_worker_cannot_read_fails_naming_it(
    tmp_path: Path,
) -> None:
    """A worker given another directory than the client's fails the run at once, with
    the missing blob named, instead of retrying its workflow task forever."""
    writer = steadyloop_data_converter(tmp_path / "client", threshold_bytes=1_000)
    reader = steadyloop_data_converter(tmp_path / "worker", threshold_bytes=1_000)
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=writer, test_server_existing_path=time_skipping_server_path()
    ) as env:
        config = env.client.config()
        config["data_converter"] = reader
        worker_client = Client(**config)
        queue = f"tq-{uuid.uuid4()}"
        async with Worker(worker_client, task_queue=queue, workflows=RUN_WORKFLOWS):
            with pytest.raises(WorkflowFailureError) as failed:
                await env.client.execute_workflow(
                    ToolLoopWorkflow.run,
                    RunInput(endpoint="none", model="m", prompt="p" * 5_000),
                    id=f"blob-{uuid.uuid4()}",
                    task_queue=queue,
                )
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.type == PAYLOAD_BLOB_MISSING and cause.non_retryable
    assert str(tmp_path / "worker") in str(cause)


def test_payload_limit_is_inline_unless_every_large_payload_leaves_history(
    tmp_path: Path,
) -> None:
    assert payload_limit(steadyloop_data_converter(None)) == MAX_INLINE_PAYLOAD_BYTES
    assert payload_limit(steadyloop_data_converter(tmp_path), stored_max=9_000_000) == 9_000_000
    kept_inline = steadyloop_data_converter(tmp_path, threshold_bytes=MAX_INLINE_PAYLOAD_BYTES + 1)
    assert payload_limit(kept_inline) == MAX_INLINE_PAYLOAD_BYTES
    storage = steadyloop_data_converter(tmp_path).external_storage
    assert storage is not None
    selective = dataclasses.replace(
        steadyloop_data_converter(tmp_path),
        external_storage=dataclasses.replace(
            storage, driver_selector=lambda _context, _payload: None
        ),
    )
    assert payload_limit(selective) == MAX_INLINE_PAYLOAD_BYTES
