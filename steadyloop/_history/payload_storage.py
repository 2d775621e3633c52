"""Large payloads out of Temporal history: a content-addressed, chunked blob store.

A tool loop hands the model activity its whole transcript every turn. Recorded inline,
that makes history grow with the square of the turn count (a 4 KB-a-turn run is
terminated at 50 MB near turn 150). With `steadyloop_data_converter`, every payload
over a threshold (a model request, a `RunResult`, the state carried across
continue-as-new) is written here and history keeps a reference of a few hundred bytes,
so what a turn adds to history no longer depends on the turn number.

Content addressing in chunks, not whole payloads, because consecutive requests of one
run share their transcript as a byte prefix: the payload's data is cut at fixed
offsets into `chunk_bytes` pieces named by their sha256, so turn N stores only the
chunks its new messages touched plus a small manifest. Whole-payload addressing (what
`temporalio.contrib.aws.s3driver.S3StorageDriver` does) stores each turn's transcript
again, quadratic in bytes uploaded and stored. Identical payloads share one manifest.

Where the bytes live is an `ObjectStore` (`steadyloop._history.object_store`): a local
directory (the default, `$STEADYLOOP_HOME/blobs`), S3-compatible object storage
(`STEADYLOOP_BLOB_DIR=s3://bucket/prefix`, `steadyloop._history.bucket_store`), or memory
for tests. Workflow code is unchanged: Temporal's external storage calls this driver (a
coroutine, on the worker's event loop) when it encodes and decodes payloads, on the
worker (workflow and activity side), the client and the `Replayer`; all of them must
name the same store.

The obvious implementation is wrong in these ways, and this is what prevents each:

- *Uploading every chunk every turn*: with conditional puts nothing is overwritten, but
  the bytes still cross the network and a 2 MB transcript costs 2 MB a turn. The
  `ChunkCache` remembers which chunks this process wrote (for ten minutes, far under
  any sane garbage-collection grace period, so a chunk a collector may have deleted is
  not assumed present for long) and skips them; a chunk it does not know is written
  with `put_if_absent`, so two workers writing the same chunk never race.
- *A reused chunk left looking old*: a chunk another run stored a day ago, which a new
  payload names again, would keep its day-old last-modified time, and a collector's
  grace period would not cover the run now naming it. When the conditional put finds
  it already there, the writer `freshen`s it (its last-modified time becomes now), and
  remembers that for `KNOWN_PRESENT_S` (a chunk this process only *read* is not taken
  as fresh), so the freshening costs one request per chunk per worker per ten minutes,
  not one a turn. A chunk found gone meanwhile is written again.
- *Chunks one after another*: a turn's new chunks are uploaded concurrently (at most
  `MAX_IN_FLIGHT` requests per driver), and the manifest is written last, so a claim
  that reaches history never names a manifest whose chunks are not all stored.
- *Fetching the whole transcript every turn*: the cache keeps recently read and written
  chunks, bounded by bytes (`cache_bytes`, LRU), so a worker decoding turn N+1 fetches
  only what turn N added.
- *A gone or altered blob retried forever*: it is an `ApplicationError` of type
  `PayloadBlobMissing` or `PayloadBlobCorrupt`, non-retryable (waiting does not bring
  it back), naming the key and the store. A store that is down or throttling is
  retried inside the driver (`RetryingStore`) and then raised as the retryable
  `PayloadStoreUnavailable`, so Temporal retries the task or the activity instead of
  failing the run.
- *A tool's result lost to a store outage*: the SDK stores an activity's result after
  the activity returned, inside the attempt's timeout (a tool's declared timeout, a few
  seconds). A store down for longer made the attempt fail or time out *after* the
  tool's effect, so the run reported a tool that had returned as timed out. A payload
  of at most `INLINE_FALLBACK_BYTES` (every tool result, capped at 64 KB, and a model
  request up to that size) is retried for `INLINE_AFTER_S` only (a hanging request is
  cut at twice that), then kept in history inside its claim (`{"inline": ...}`), which
  `retrieve` reads without the store: the attempt completes with the real result, and
  the workflow task that schedules the next turn does not fail. History grows by those
  payloads only while the store is down (logged as a warning). A larger payload waits
  under the full budget and then fails retryably, as above.

The driver's name (`steadyloop-local-files`) and type, which every claim in history
records, name the chunk format, not the backend, so a history recorded against one
backend replays against another that holds the same keys.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.exceptions import ApplicationError

from steadyloop._failure_details import TolerantFailureConverter
from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._history.object_store import (
    CHUNK_PREFIX,
    MANIFEST_PREFIX,
    LocalDirectoryStore,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreUnavailable,
    RetryingStore,
)
from steadyloop.errors import (
    PAYLOAD_BLOB_CORRUPT,
    PAYLOAD_BLOB_MISSING,
    PAYLOAD_STORE_ERROR,
    PAYLOAD_STORE_UNAVAILABLE,
)

__all__ = [
    "BLOB_DIR_ENV",
    "BLOB_THRESHOLD_ENV",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_THRESHOLD_BYTES",
    "INLINE_FALLBACK_BYTES",
    "MAX_STORED_PAYLOAD_BYTES",
    "BlobSettings",
    "BlobStoreUsage",
    "ChunkCache",
    "ChunkedStorageDriver",
    "LocalFileStorageDriver",
    "blob_settings",
    "open_blob_store",
    "payload_limit",
    "steadyloop_data_converter",
]

BLOB_DIR_ENV = "STEADYLOOP_BLOB_DIR"
BLOB_THRESHOLD_ENV = "STEADYLOOP_BLOB_THRESHOLD"
HOME_ENV = "STEADYLOOP_HOME"
DEFAULT_HOME = Path("~/.steadyloop")
# Payloads at least this large leave history. Temporal's default is 256 KiB; a turn's
# request reaches that after a few dozen 4 KB turns, and every inline turn until then
# costs history its whole size, so steadyloop offloads from 32 KiB.
DEFAULT_THRESHOLD_BYTES = 32 * 1024
# Small enough that a turn rewrites little (on average half a chunk plus the tail of
# the request), large enough that a 2 MB transcript is a manifest of 128 names.
DEFAULT_CHUNK_BYTES = 16 * 1024
# A worker's chunk cache: a few dozen 2 MB transcripts' worth, a small share of a
# worker's memory, enough that a run's next turn finds every older chunk here.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
# Requests one driver keeps in flight: enough to upload a turn's new chunks at once,
# few enough that a 64 MB payload does not open 4,096 connections.
MAX_IN_FLIGHT = 16
# How long a chunk this process wrote or freshened is taken to be in the store, and
# young, without asking again. A collector's grace period must be longer (blobs gc).
KNOWN_PRESENT_S = 600.0
# While the store is down, a payload this small rides in history inside its claim
# (base64: 256 KB, Temporal's own warning size) after this many seconds of retries.
INLINE_FALLBACK_BYTES = 192 * 1024
INLINE_AFTER_S = 2.0
MANIFEST_VERSION = 1
# With external storage history keeps a reference, so Temporal's limit no longer bounds
# a payload; this does, so a runaway transcript (sent whole to the model every turn, held
# in memory by every worker that decodes it) still stops with a reason.
MAX_STORED_PAYLOAD_BYTES = 64 * 1024 * 1024
_OFF = {"off", "none", "disabled", "0"}
_HEX = frozenset("0123456789abcdef")
_T = TypeVar("_T")
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class BlobStoreUsage:
    """What the store holds: objects and bytes."""

    files: int
    bytes: int


class ChunkCache:
    """Recently written or read objects, least recently used first out, bounded by bytes.

    Also remembers, for `KNOWN_PRESENT_S`, which keys this process wrote or freshened
    (`add(..., fresh=True)`, the default), even after their bytes were evicted, so a
    turn does not upload or freshen them again. A key only read is not among them: its
    last-modified time in the store may be old.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"cache_bytes must be 0 or more, got {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._present: OrderedDict[str, float] = OrderedDict()

    def get(self, key: str) -> bytes | None:
        found = self._data.get(key)
        if found is not None:
            self._data.move_to_end(key)
        return found

    def add(self, key: str, content: bytes, *, fresh: bool = True) -> None:
        if fresh:
            self.mark_present(key)
        if len(content) > self.max_bytes:
            return
        previous = self._data.pop(key, None)
        if previous is not None:
            self.bytes -= len(previous)
        self._data[key] = content
        self.bytes += len(content)
        while self.bytes > self.max_bytes:
            _, evicted = self._data.popitem(last=False)
            self.bytes -= len(evicted)

    def mark_present(self, key: str) -> None:
        self._present[key] = time.monotonic()
        self._present.move_to_end(key)
        # One entry is ~150 bytes; a million is a bound no worker reaches in ten minutes.
        while len(self._present) > 1_000_000:
            self._present.popitem(last=False)

    def known_present(self, key: str) -> bool:
        seen = self._present.get(key)
        if seen is None:
            return False
        if time.monotonic() - seen > KNOWN_PRESENT_S:
            del self._present[key]
            return False
        return True

    def forget(self, key: str) -> None:
        """Drop `key` (it was found missing or altered in the store)."""
        self._present.pop(key, None)
        dropped = self._data.pop(key, None)
        if dropped is not None:
            self.bytes -= len(dropped)


class ChunkedStorageDriver(StorageDriver):
    """Stores payloads in `store` as sha256-named chunks (`chunks/<sha>`) and a manifest
    (`manifests/<sha>`, JSON: version, the payload without its data, size, chunk names,
    and the workflow id when Temporal says which workflow it stores for)."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        name: str = "steadyloop-local-files",
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
        self.objects = store if isinstance(store, RetryingStore) else RetryingStore(store)
        self.chunk_bytes = chunk_bytes
        self.cache = ChunkCache(cache_bytes)
        self._name = name
        self._in_flight: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "steadyloop.local_files"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        workflow_id = (
            context.target.id if isinstance(context.target, StorageDriverWorkflowInfo) else None
        )
        return await self._guard(
            asyncio.gather(*(self._store_one(payload, workflow_id) for payload in payloads))
        )

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await self._guard(
            asyncio.gather(*(self._retrieve_one(claim.claim_data) for claim in claims))
        )

    async def store_usage(self) -> BlobStoreUsage:
        """Objects and bytes in the store (for benchmarks and operators)."""
        files = size = 0
        async for info in self.objects.list():
            files += 1
            size += info.size
        return BlobStoreUsage(files=files, bytes=size)

    async def _guard(self, work: Awaitable[_T]) -> _T:
        """`work`, with the store's own errors said as the errors Temporal acts on."""
        try:
            return await work
        except ObjectStoreUnavailable as exc:
            raise ApplicationError(
                f"payload blob store {self.objects.description} is unavailable: {exc}. "
                "Temporal retries this task; nothing was lost.",
                type=PAYLOAD_STORE_UNAVAILABLE,
            ) from None
        except ObjectStoreError as exc:
            # Retryable too: a refused credential or a missing bucket is fixed by
            # configuration, and a run should outlive a misconfigured worker.
            raise ApplicationError(
                f"payload blob store {self.objects.description} refused a request: {exc}",
                type=PAYLOAD_STORE_ERROR,
            ) from None

    def _limiter(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._in_flight is None or self._loop is not loop:
            self._in_flight, self._loop = asyncio.Semaphore(MAX_IN_FLIGHT), loop
        return self._in_flight

    # -- storing -----------------------------------------------------------------------

    async def _store_one(self, payload: Payload, workflow_id: str | None) -> StorageDriverClaim:
        """The payload's chunks and manifest; a small one, while the store is down, kept
        inside its claim (see the module docstring)."""
        if payload.ByteSize() > INLINE_FALLBACK_BYTES:
            return await self._store_chunked(payload, workflow_id, self.objects)
        try:
            # A request that hangs (not refused) is cut too: the manifest goes last, so
            # an upload cut short leaves no claim naming a missing chunk.
            async with asyncio.timeout(2 * INLINE_AFTER_S):
                return await self._store_chunked(
                    payload, workflow_id, self.objects.within(INLINE_AFTER_S)
                )
        except (ObjectStoreUnavailable, TimeoutError) as exc:
            _log.warning(
                "payload blob store %s unavailable; a %d-byte payload stays in history: %s",
                self.objects.description,
                payload.ByteSize(),
                exc or "timed out",
            )
            return StorageDriverClaim(
                claim_data={
                    "inline": base64.b64encode(payload.SerializeToString()).decode("ascii"),
                    "size": str(len(payload.data)),
                }
            )

    async def _store_chunked(
        self, payload: Payload, workflow_id: str | None, objects: RetryingStore
    ) -> StorageDriverClaim:
        data = payload.data
        pieces = [data[i : i + self.chunk_bytes] for i in range(0, len(data), self.chunk_bytes)]
        names = [hashlib.sha256(piece).hexdigest() for piece in pieces]
        unique = {name: piece for name, piece in zip(names, pieces, strict=True)}
        await asyncio.gather(
            *(self._write(CHUNK_PREFIX + name, piece, objects) for name, piece in unique.items())
        )
        head = Payload()
        head.CopyFrom(payload)
        head.data = b""
        fields: dict[str, object] = {
            "v": MANIFEST_VERSION,
            "head": base64.b64encode(head.SerializeToString()).decode("ascii"),
            "size": len(data),
            "chunks": names,
        }
        if workflow_id is not None:
            fields["workflow_id"] = workflow_id
        manifest = json.dumps(fields, separators=(",", ":")).encode()
        key = hashlib.sha256(manifest).hexdigest()
        # Last, and only after every chunk is stored: a manifest never names a lost chunk.
        await self._write(MANIFEST_PREFIX + key, manifest, objects)
        return StorageDriverClaim(claim_data={"manifest": key, "size": str(len(data))})

    async def _write(self, key: str, content: bytes, objects: RetryingStore) -> None:
        if self.cache.known_present(key):
            return
        async with self._limiter():
            # Already stored (another run's chunk): make it young, so a collector's grace
            # period covers this payload too; gone meanwhile: write it again.
            if not await objects.put_if_absent(key, content) and not await objects.freshen(key):
                await objects.put(key, content)  # the same bytes: the key is their hash
        self.cache.add(key, content)

    # -- retrieving --------------------------------------------------------------------

    async def _retrieve_one(self, claim: Mapping[str, str]) -> Payload:
        inline = claim.get("inline")
        if inline is not None:
            return self._inline(inline)
        key = claim.get("manifest", "")
        raw = await self._read(key, MANIFEST_PREFIX, "manifest")
        try:
            manifest = json.loads(raw)
            version = manifest.get("v")
        except (ValueError, AttributeError):
            raise self._corrupt(f"manifest {MANIFEST_PREFIX}{key} is not a JSON object") from None
        if version != MANIFEST_VERSION:
            raise self._corrupt(f"manifest {MANIFEST_PREFIX}{key} has version {version!r}")
        chunks = manifest.get("chunks")
        size = manifest.get("size")
        if not isinstance(chunks, list) or not isinstance(size, int):
            raise self._corrupt(f"manifest {MANIFEST_PREFIX}{key} has no chunk list or size")
        parts = await asyncio.gather(
            *(self._read(str(chunk), CHUNK_PREFIX, "chunk") for chunk in chunks)
        )
        data = b"".join(parts)
        if len(data) != size:
            raise self._corrupt(
                f"manifest {MANIFEST_PREFIX}{key} names {size} bytes, got {len(data)}"
            )
        payload = Payload()
        payload.ParseFromString(base64.b64decode(manifest["head"]))
        payload.data = data
        return payload

    async def _read(self, name: str, prefix: str, what: str) -> bytes:
        if len(name) != 64 or not _HEX.issuperset(name):
            raise self._corrupt(f"a payload reference names {what} {name!r}, not a sha256")
        key = prefix + name
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        async with self._limiter():
            content = await self.objects.get(key)
        if content is None:
            self.cache.forget(key)
            raise ApplicationError(
                f"payload {what} {key} is missing: no {self.objects.locate(key)} (blob store "
                f"{self.objects.description}). Every "
                f"worker, client and replayer of this run must use the same store "
                f"({BLOB_DIR_ENV}); a deleted blob cannot be recovered by retrying.",
                type=PAYLOAD_BLOB_MISSING,
                non_retryable=True,
            )
        if hashlib.sha256(content).hexdigest() != name:
            self.cache.forget(key)
            raise self._corrupt(f"{what} {key} does not hash to its name: it was altered")
        self.cache.add(key, content, fresh=False)
        return content

    def _inline(self, encoded: str) -> Payload:
        """A payload kept in its claim while the store was down."""
        payload = Payload()
        try:
            payload.ParseFromString(base64.b64decode(encoded, validate=True))
        except Exception:  # binascii.Error, protobuf's DecodeError: the claim was altered
            raise self._corrupt("a payload reference's inline copy does not decode") from None
        return payload

    def _corrupt(self, detail: str) -> ApplicationError:
        return ApplicationError(
            f"payload blob store {self.objects.description}: {detail}",
            type=PAYLOAD_BLOB_CORRUPT,
            non_retryable=True,
        )


class LocalFileStorageDriver(ChunkedStorageDriver):
    """The chunked store on a local directory: `<directory>/<first two hex digits>/<sha256>`
    for chunks, `<directory>/manifests/<sha256>` for manifests (`LocalDirectoryStore`)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        name: str = "steadyloop-local-files",
    ) -> None:
        self.directory = Path(directory).expanduser()
        super().__init__(
            LocalDirectoryStore(self.directory),
            chunk_bytes=chunk_bytes,
            cache_bytes=cache_bytes,
            name=name,
        )

    def usage(self) -> BlobStoreUsage:
        """Files and bytes under the directory, read from the disk at once."""
        files = size = 0
        if self.directory.is_dir():
            for path in self.directory.rglob("*"):
                if path.is_file() and not path.name.startswith("."):
                    files += 1
                    size += path.stat().st_size
        return BlobStoreUsage(files=files, bytes=size)


@dataclasses.dataclass(frozen=True)
class BlobSettings:
    """Where large payloads go and from what size: `directory` (a local folder), or
    `url` (`s3://bucket/prefix`), or neither (they stay in history)."""

    directory: Path | None
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    url: str | None = None

    @property
    def location(self) -> Path | str | None:
        """What `steadyloop_data_converter` takes: the URL, the directory, or None."""
        return self.url if self.url is not None else self.directory


def blob_settings(environ: Mapping[str, str], *, configured: str | None = None) -> BlobSettings:
    """`STEADYLOOP_BLOB_DIR`, else `configured` (the config file's `blob_dir`), else
    `$STEADYLOOP_HOME/blobs`, else `~/.steadyloop/blobs`: a directory, `s3://bucket/prefix`,
    or `off` (payloads stay in history); `STEADYLOOP_BLOB_THRESHOLD` in bytes."""
    raw_threshold = environ.get(BLOB_THRESHOLD_ENV, "").strip()
    threshold = DEFAULT_THRESHOLD_BYTES
    if raw_threshold:
        try:
            threshold = int(raw_threshold)
        except ValueError:
            threshold = -1
        if threshold < 0:
            raise ValueError(
                f"{BLOB_THRESHOLD_ENV}={raw_threshold!r}: expected a number of bytes (0 or more)"
            )
    chosen = environ.get(BLOB_DIR_ENV, "").strip() or (configured or "").strip()
    if chosen.lower() in _OFF:
        return BlobSettings(directory=None, threshold_bytes=threshold)
    if "://" in chosen:
        from steadyloop._history.bucket_store import parse_s3_url

        parse_s3_url(chosen)  # refuses a malformed URL now, naming it, not at first use
        return BlobSettings(directory=None, threshold_bytes=threshold, url=chosen)
    if chosen:
        directory = Path(chosen)
    else:
        home = environ.get(HOME_ENV, "").strip()
        directory = (Path(home) if home else DEFAULT_HOME) / "blobs"
    return BlobSettings(directory=directory.expanduser(), threshold_bytes=threshold)


def open_blob_store(location: str | os.PathLike[str]) -> ObjectStore:
    """The object store `location` names: `s3://bucket/prefix` or a local directory."""
    text = os.fspath(location)
    if "://" in text:
        from steadyloop._history.bucket_store import S3Store

        return S3Store.from_url(text)
    return LocalDirectoryStore(text)


def steadyloop_data_converter(
    location: str | os.PathLike[str] | ObjectStore | None,
    *,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> DataConverter:
    """The pydantic data converter, offloading payloads of `threshold_bytes` or more to
    `location` (a directory, `s3://bucket/prefix`, or an `ObjectStore`; None: the plain
    pydantic converter, everything inline). Failure details it cannot decode become a
    marker (`steadyloop._failure_details`)."""
    tolerant = dataclasses.replace(
        pydantic_data_converter, failure_converter_class=TolerantFailureConverter
    )
    if location is None:
        return tolerant
    driver: ChunkedStorageDriver
    if isinstance(location, ObjectStore):
        driver = ChunkedStorageDriver(location, chunk_bytes=chunk_bytes, cache_bytes=cache_bytes)
    elif "://" in os.fspath(location):
        driver = ChunkedStorageDriver(
            open_blob_store(location), chunk_bytes=chunk_bytes, cache_bytes=cache_bytes
        )
    else:
        driver = LocalFileStorageDriver(location, chunk_bytes=chunk_bytes, cache_bytes=cache_bytes)
    return dataclasses.replace(
        tolerant,
        external_storage=ExternalStorage(drivers=[driver], payload_size_threshold=threshold_bytes),
    )


def payload_limit(converter: DataConverter, *, stored_max: int = MAX_STORED_PAYLOAD_BYTES) -> int:
    """The largest single payload `converter` can hand Temporal without its refusal.

    `stored_max` when every payload over `MAX_INLINE_PAYLOAD_BYTES` leaves history
    (external storage with no driver selector and a threshold below that size), else
    `MAX_INLINE_PAYLOAD_BYTES`: a selector may keep any payload inline, so only the
    inline limit is certain then."""
    storage = converter.external_storage
    if (
        storage is None
        or storage.driver_selector is not None
        or storage.payload_size_threshold > MAX_INLINE_PAYLOAD_BYTES
    ):
        return MAX_INLINE_PAYLOAD_BYTES
    return max(stored_max, MAX_INLINE_PAYLOAD_BYTES)
