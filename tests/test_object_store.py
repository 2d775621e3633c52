"""The object store under the chunked payload store (`steadyloop._history.object_store`),
and the driver's use of it: conditional puts, parallel chunks with the manifest last,
retries, the bounded chunk cache, the typed errors, the local directory layout."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
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

from steadyloop._history.object_store import (
    LocalDirectoryStore,
    MemoryStore,
    ObjectInfo,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreUnavailable,
    RetryingStore,
    RetryPolicy,
)
from steadyloop._history.payload_storage import (
    INLINE_FALLBACK_BYTES,
    ChunkCache,
    ChunkedStorageDriver,
    LocalFileStorageDriver,
    blob_settings,
)
from steadyloop.errors import PAYLOAD_BLOB_CORRUPT, PAYLOAD_BLOB_MISSING, PAYLOAD_STORE_UNAVAILABLE

CHUNK = 1024


def payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


def transcript(turns: int) -> bytes:
    return b"".join(f"turn {i:05d}: ".encode() + b"r" * 500 for i in range(turns))


async def store(driver: ChunkedStorageDriver, *payloads: Payload) -> list[StorageDriverClaim]:
    return await driver.store(StorageDriverStoreContext(), list(payloads))


async def retrieve(driver: ChunkedStorageDriver, *claims: StorageDriverClaim) -> list[Payload]:
    return await driver.retrieve(StorageDriverRetrieveContext(), list(claims))


class Recording(ObjectStore):
    """A memory store that counts requests and bytes, can fail, and can be slow."""

    def __init__(self, *, delay_s: float = 0.0) -> None:
        self.inner = MemoryStore()
        self.delay_s = delay_s
        self.puts: list[str] = []
        self.gets: list[str] = []
        self.bytes_put = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.finished_puts: list[str] = []
        self.failures_left = 0
        self.failure: type[ObjectStoreError] = ObjectStoreUnavailable

    @property
    def description(self) -> str:
        return "recording memory"

    async def _enter(self) -> None:
        if self.failures_left:
            self.failures_left -= 1
            raise self.failure("503 Service Unavailable")
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1

    async def get(self, key: str) -> bytes | None:
        await self._enter()
        self.gets.append(key)
        return await self.inner.get(key)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        await self._enter()
        self.puts.append(key)
        self.bytes_put += len(data)
        wrote = await self.inner.put_if_absent(key, data)
        self.finished_puts.append(key)
        return wrote

    async def put(self, key: str, data: bytes) -> None:
        await self._enter()
        await self.inner.put(key, data)

    async def head(self, key: str) -> ObjectInfo | None:
        await self._enter()
        return await self.inner.head(key)

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        await self._enter()
        async for info in self.inner.list(prefix):
            yield info

    async def delete(self, key: str) -> None:
        await self._enter()
        await self.inner.delete(key)


def no_wait() -> RetryPolicy:
    return RetryPolicy(first_delay_s=0.0, max_delay_s=0.0, budget_s=5.0)


# -- the interface, on every backend that needs no server ---------------------------------


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    return MemoryStore() if request.param == "memory" else LocalDirectoryStore(tmp_path)


async def test_put_if_absent_writes_once_and_never_overwrites(backend: ObjectStore) -> None:
    assert await backend.get("chunks/ab12") is None
    assert await backend.head("chunks/ab12") is None
    assert await backend.put_if_absent("chunks/ab12", b"first") is True
    assert await backend.put_if_absent("chunks/ab12", b"second") is False
    assert await backend.get("chunks/ab12") == b"first"
    await backend.put("manifests/cd34", b"m1")
    await backend.put("manifests/cd34", b"m2")  # a plain put replaces
    assert await backend.get("manifests/cd34") == b"m2"
    head = await backend.head("chunks/ab12")
    assert head is not None and head.size == 5 and head.last_modified.tzinfo is not None


async def test_list_by_prefix_with_sizes_and_delete(backend: ObjectStore) -> None:
    await backend.put_if_absent("chunks/ab01", b"x" * 3)
    await backend.put_if_absent("chunks/cd02", b"y" * 4)
    await backend.put_if_absent("manifests/ef03", b"z")
    chunks = sorted([(i.key, i.size) async for i in backend.list("chunks/")])
    assert chunks == [("chunks/ab01", 3), ("chunks/cd02", 4)]
    assert {i.key async for i in backend.list()} == {"chunks/ab01", "chunks/cd02", "manifests/ef03"}
    await backend.delete("chunks/ab01")
    await backend.delete("chunks/ab01")  # already gone: not an error
    assert [i.key async for i in backend.list("chunks/")] == ["chunks/cd02"]


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "a\\b", "nul\x00", "./x", "x/"])
async def test_unsafe_keys_are_refused(backend: ObjectStore, key: str) -> None:
    with pytest.raises(ValueError, match="not a relative name"):
        await backend.put_if_absent(key, b"x")


async def test_two_writers_of_one_key_both_succeed_and_one_writes(tmp_path: Path) -> None:
    stores = [LocalDirectoryStore(tmp_path) for _ in range(8)]
    wrote = await asyncio.gather(*(s.put_if_absent("chunks/ab99", b"same") for s in stores))
    assert sorted(wrote) == [False] * 7 + [True]
    assert [p.name for p in tmp_path.rglob("*")] == ["ab", "ab99"]  # no temporary left


# -- the local layout --------------------------------------------------------------------------


async def test_chunks_sit_in_a_folder_per_prefix_and_manifests_in_their_own(tmp_path: Path) -> None:
    driver = LocalFileStorageDriver(tmp_path, chunk_bytes=CHUNK)
    (claim,) = await store(driver, payload(transcript(4)))
    chunks = [p for p in tmp_path.glob("??/*") if p.is_file()]
    assert chunks and all(p.name.startswith(p.parent.name) for p in chunks)
    assert (tmp_path / "manifests" / claim.claim_data["manifest"]).is_file()


# -- the driver on the interface ---------------------------------------------------------------


async def test_chunks_go_up_in_parallel_and_the_manifest_last() -> None:
    objects = Recording(delay_s=0.01)
    driver = ChunkedStorageDriver(objects, chunk_bytes=CHUNK)
    await store(driver, payload(transcript(40)))
    assert objects.most_in_flight > 4  # 20 chunks, not one after another
    assert objects.puts[-1].startswith("manifests/")
    assert all(k.startswith("chunks/") for k in objects.finished_puts[:-1])
    assert len(objects.finished_puts) == len(objects.puts)


async def test_a_grown_transcript_uploads_only_its_new_chunks() -> None:
    """Turn after turn, what is uploaded is what the turn added (flat), not the whole
    transcript again: the cache knows which chunks are already stored."""
    objects = Recording()
    driver = ChunkedStorageDriver(objects, chunk_bytes=CHUNK)
    uploaded: list[int] = []
    for turns in range(10, 60, 2):
        before = objects.bytes_put
        await store(driver, payload(transcript(turns)))
        uploaded.append(objects.bytes_put - before)
    whole_last = len(transcript(58))
    assert max(uploaded[1:]) < 4 * CHUNK < whole_last / 6


async def test_a_second_worker_fetches_only_what_it_has_not_seen() -> None:
    objects = Recording()
    writer = ChunkedStorageDriver(objects, chunk_bytes=CHUNK)
    reader = ChunkedStorageDriver(objects, chunk_bytes=CHUNK)
    first = await store(writer, payload(transcript(20)))
    await retrieve(reader, *first)
    fetched_first = len(objects.gets)
    second = await store(writer, payload(transcript(22)))
    (back,) = await retrieve(reader, *second)
    assert back.data == transcript(22)
    assert len(objects.gets) - fetched_first <= 4  # the manifest and the changed tail
    objects.gets.clear()
    await retrieve(writer, *second)  # the writer cached what it wrote
    assert objects.gets == []


def test_the_cache_is_bounded_by_bytes() -> None:
    cache = ChunkCache(max_bytes=10 * CHUNK)
    for i in range(100):
        cache.add(f"chunks/{i}", bytes(CHUNK))
        assert cache.bytes <= 10 * CHUNK
    assert cache.get("chunks/99") is not None and cache.get("chunks/0") is None
    assert cache.known_present("chunks/0")  # evicted bytes, still known to be stored
    cache.add("chunks/huge", bytes(11 * CHUNK))
    assert cache.get("chunks/huge") is None and cache.bytes <= 10 * CHUNK


async def test_a_missing_chunk_is_typed_non_retryable_and_names_key_and_store() -> None:
    objects = MemoryStore()
    (claim,) = await store(ChunkedStorageDriver(objects, chunk_bytes=CHUNK), payload(transcript(5)))
    gone = next(key for key in objects.objects if key.startswith("chunks/"))
    del objects.objects[gone]
    with pytest.raises(ApplicationError) as raised:
        await retrieve(ChunkedStorageDriver(objects, chunk_bytes=CHUNK), claim)
    assert raised.value.type == PAYLOAD_BLOB_MISSING and raised.value.non_retryable
    assert gone in str(raised.value) and "memory" in str(raised.value)


async def test_a_corrupt_chunk_is_typed_non_retryable() -> None:
    objects = MemoryStore()
    (claim,) = await store(ChunkedStorageDriver(objects, chunk_bytes=CHUNK), payload(transcript(5)))
    altered = next(key for key in objects.objects if key.startswith("chunks/"))
    objects.objects[altered] = (b"not what was stored", objects.objects[altered][1])
    with pytest.raises(ApplicationError) as raised:
        await retrieve(ChunkedStorageDriver(objects, chunk_bytes=CHUNK), claim)
    assert raised.value.type == PAYLOAD_BLOB_CORRUPT and raised.value.non_retryable
    assert altered in str(raised.value)


async def test_a_workflow_target_is_written_into_the_manifest() -> None:
    objects = MemoryStore()
    driver = ChunkedStorageDriver(objects, chunk_bytes=CHUNK)
    target = StorageDriverWorkflowInfo(namespace="default", id="run-7")
    (claim,) = await driver.store(StorageDriverStoreContext(target=target), [payload(b"x" * 99)])
    manifest = await objects.get(f"manifests/{claim.claim_data['manifest']}")
    assert manifest is not None and json.loads(manifest)["workflow_id"] == "run-7"


# -- retries ------------------------------------------------------------------------------------


async def test_a_store_answering_503_is_retried_until_it_answers() -> None:
    objects = Recording()
    objects.failures_left = 5
    driver = ChunkedStorageDriver(RetryingStore(objects, no_wait()), chunk_bytes=CHUNK)
    (claim,) = await store(driver, payload(transcript(6)))
    objects.failures_left = 3
    (back,) = await retrieve(ChunkedStorageDriver(RetryingStore(objects, no_wait())), claim)
    assert back.data == transcript(6)


async def test_a_store_down_past_the_budget_is_a_retryable_named_error() -> None:
    objects = Recording()
    objects.failures_left = 10**6
    policy = RetryPolicy(first_delay_s=0.001, max_delay_s=0.01, budget_s=0.2)
    driver = ChunkedStorageDriver(RetryingStore(objects, policy), chunk_bytes=CHUNK)
    with pytest.raises(ApplicationError) as raised:  # too large to ride in history
        await store(driver, payload(b"x" * (INLINE_FALLBACK_BYTES + 1)))
    assert raised.value.type == PAYLOAD_STORE_UNAVAILABLE and not raised.value.non_retryable
    assert "recording memory" in str(raised.value) and "retries" in str(raised.value)


async def test_a_small_payload_rides_in_its_claim_while_the_store_is_down() -> None:
    """A tool's result (at most 64 KB) is stored by the SDK after the tool returned,
    inside its attempt's timeout: while the store is down it is kept in the claim, so the
    attempt completes with the real result: a 15 s outage loses none."""
    objects = Recording()
    objects.failures_left = 10**6
    policy = RetryPolicy(first_delay_s=0.001, max_delay_s=0.01, budget_s=30)
    driver = ChunkedStorageDriver(RetryingStore(objects, policy), chunk_bytes=CHUNK)
    result = payload(b"r" * (64 * 1024 + 4096))
    (claim,) = await store(driver, result)  # after INLINE_AFTER_S, not the 30 s budget
    assert "manifest" not in claim.claim_data and objects.inner.objects == {}
    # Read back with no store at all: everything needed is in the claim (so in history).
    (back,) = await retrieve(ChunkedStorageDriver(MemoryStore()), claim)
    assert back == result
    objects.failures_left = 0
    (stored,) = await store(driver, result)  # the store is back: chunks and a manifest
    assert "inline" not in stored.claim_data and "manifest" in stored.claim_data


async def test_an_altered_inline_claim_is_corrupt_not_a_crash() -> None:
    claim = StorageDriverClaim(claim_data={"inline": "not base64!"})
    with pytest.raises(ApplicationError) as raised:
        await retrieve(ChunkedStorageDriver(MemoryStore()), claim)
    assert raised.value.type == PAYLOAD_BLOB_CORRUPT and raised.value.non_retryable


async def test_a_refusal_is_not_retried() -> None:
    objects = Recording()
    objects.failures_left = 1
    objects.failure = ObjectStoreError
    retrying = RetryingStore(objects, no_wait())
    with pytest.raises(ObjectStoreError):
        await retrying.get("chunks/ab")
    assert retrying.attempts == 1 and retrying.retries == 0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), 1e300])
def test_a_retry_policy_refuses_nonsense(bad: float) -> None:
    with pytest.raises(ValueError, match="budget_s"):
        RetryPolicy(budget_s=bad)


# -- settings -----------------------------------------------------------------------------------


def test_the_setting_takes_an_s3_url_from_the_environment_or_the_file(tmp_path: Path) -> None:
    from_env = blob_settings({"STEADYLOOP_BLOB_DIR": "s3://runs/prod/blobs"})
    assert from_env.url == "s3://runs/prod/blobs" and from_env.directory is None
    assert from_env.location == "s3://runs/prod/blobs"
    from_file = blob_settings({}, configured="s3://runs")
    assert from_file.location == "s3://runs"
    assert blob_settings(
        {"STEADYLOOP_BLOB_DIR": str(tmp_path)}, configured="s3://runs"
    ).location == (tmp_path)
    assert blob_settings({}, configured="off").location is None


@pytest.mark.parametrize(
    "bad", ["s3://", "s3:///prefix", "gs://bucket", "s3://Bad_Bucket", "s3://b/../x", "s3://b?x=1"]
)
def test_a_malformed_store_url_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(ValueError) as raised:
        blob_settings({"STEADYLOOP_BLOB_DIR": bad})
    assert repr(bad) in str(raised.value)
