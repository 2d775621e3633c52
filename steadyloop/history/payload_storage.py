"""Large payloads out of Temporal history: a content-addressed, chunked blob store on disk.

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
again, quadratic on disk. Identical payloads share one manifest; nothing is rewritten.

Workflow code is unchanged: Temporal's external storage calls this driver when it
encodes and decodes payloads, on the worker (workflow and activity side), the client and
the `Replayer`; all of them need the same directory. It works on one machine (or a
shared volume); across machines use an object store, e.g. `S3StorageDriver` in an
`ExternalStorage` of your own (`DataConverter(external_storage=...)`).

A blob that is gone or altered is an `ApplicationError` with type `PayloadBlobMissing`
or `PayloadBlobCorrupt`, non-retryable: waiting does not bring it back, and the error
names the file and the directory the worker was given.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

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

from steadyloop.failure_details import TolerantFailureConverter
from steadyloop.history.blob_retention import OWNERS_PREFIX, owner_id, owner_record_body
from steadyloop.history.budget import MAX_INLINE_PAYLOAD_BYTES

__all__ = [
    "BLOB_DIR_ENV",
    "BLOB_THRESHOLD_ENV",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_THRESHOLD_BYTES",
    "MAX_STORED_PAYLOAD_BYTES",
    "BlobStoreUsage",
    "LocalFileStorageDriver",
    "blob_settings",
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
MANIFEST_VERSION = 1
# With external storage history keeps a reference, so Temporal's limit no longer bounds
# a payload; this does, so a runaway transcript (sent whole to the model every turn, held
# in memory by every worker that decodes it) still stops with a reason.
MAX_STORED_PAYLOAD_BYTES = 64 * 1024 * 1024
_OFF = {"off", "none", "disabled", "0"}


@dataclasses.dataclass(frozen=True)
class BlobStoreUsage:
    """What the directory holds: files and bytes on disk."""

    files: int
    bytes: int


class LocalFileStorageDriver(StorageDriver):
    """Stores payloads under `directory` as sha256-named chunks and manifests.

    Layout: `<directory>/<first two hex digits>/<sha256>`, for chunks and manifests
    alike; a file is written once (to a temporary name, then renamed), so concurrent
    workers writing the same content do not conflict and a reader never sees half a file.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        name: str = "steadyloop-local-files",
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
        self.directory = Path(directory).expanduser()
        self.chunk_bytes = chunk_bytes
        self._name = name

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "steadyloop.local_files"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._store_all, payloads, _owner_of(context))

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(self._retrieve_all, claims)

    def usage(self) -> BlobStoreUsage:
        """Files and bytes under the directory (for benchmarks and operators)."""
        files = size = 0
        if self.directory.is_dir():
            for path in self.directory.glob("??/*"):
                if path.is_file() and not path.name.startswith("."):
                    files += 1
                    size += path.stat().st_size
        return BlobStoreUsage(files=files, bytes=size)

    # -- storing -----------------------------------------------------------------------

    def _store_all(
        self, payloads: Sequence[Payload], owner: tuple[str, str] | None = None
    ) -> list[StorageDriverClaim]:
        return [self._store_one(payload, owner) for payload in payloads]

    def _store_one(
        self, payload: Payload, owner: tuple[str, str] | None = None
    ) -> StorageDriverClaim:
        data = payload.data
        head = Payload()
        head.CopyFrom(payload)
        head.data = b""
        pieces = [
            data[start : start + self.chunk_bytes]
            for start in range(0, len(data), self.chunk_bytes)
        ]
        chunks = [hashlib.sha256(piece).hexdigest() for piece in pieces]
        manifest = json.dumps(
            {
                "v": MANIFEST_VERSION,
                "head": base64.b64encode(head.SerializeToString()).decode("ascii"),
                "size": len(data),
                "chunks": chunks,
            },
            separators=(",", ":"),
        ).encode()
        key = hashlib.sha256(manifest).hexdigest()
        if owner is not None:  # first, so a collection never sees the manifest unowned
            self._write_owner(key, *owner)
        for piece, chunk in zip(pieces, chunks, strict=True):
            self._write(piece, chunk)
        self._write(manifest, key)
        return StorageDriverClaim(claim_data={"manifest": key, "size": str(len(data))})

    def _write_owner(self, manifest: str, namespace: str, workflow_id: str) -> None:
        """`owners/<owner>/<manifest>`: whom `steadyloop blobs gc` asks Temporal about."""
        path = self.directory / OWNERS_PREFIX / owner_id(namespace, workflow_id) / manifest
        if _freshen(path):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._put(path, owner_record_body(namespace, workflow_id))

    def _write(self, content: bytes, key: str) -> None:
        path = self._path(key)
        # Reused content is freshened, not skipped: a collection deletes only what is
        # older than its grace period, and a reused chunk is about to be named again.
        if _freshen(path):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._put(path, content)

    @staticmethod
    def _put(path: Path, content: bytes) -> None:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(content)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    # -- retrieving --------------------------------------------------------------------

    def _retrieve_all(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return [self._retrieve_one(claim.claim_data) for claim in claims]

    def _retrieve_one(self, claim: Mapping[str, str]) -> Payload:
        key = claim.get("manifest", "")
        manifest = json.loads(self._read(key, "manifest"))
        if manifest.get("v") != MANIFEST_VERSION:
            raise _corrupt(f"manifest {key} has version {manifest.get('v')!r}")
        data = b"".join(self._read(chunk, "chunk") for chunk in manifest["chunks"])
        if len(data) != manifest["size"]:
            raise _corrupt(f"manifest {key} names {manifest['size']} bytes, got {len(data)}")
        payload = Payload()
        payload.ParseFromString(base64.b64decode(manifest["head"]))
        payload.data = data
        return payload

    def _read(self, key: str, what: str) -> bytes:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise _corrupt(f"a payload reference names {what} {key!r}, not a sha256")
        path = self._path(key)
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            raise ApplicationError(
                f"payload {what} {key} is missing: no file {path} (blob directory "
                f"{self.directory}). Every worker, client and replayer of this run must "
                f"use the same directory ({BLOB_DIR_ENV}); a deleted blob cannot be "
                "recovered by retrying.",
                type="PayloadBlobMissing",
                non_retryable=True,
            ) from None
        if hashlib.sha256(content).hexdigest() != key:
            raise _corrupt(f"{path} does not hash to its name: the file was altered")
        return content

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / key


def _freshen(path: Path) -> bool:
    """Touch `path` if it exists (True), so its age counts from this reuse. A store the
    process may read but not write (a replayer's read-only mount) is used as it is."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    except OSError:
        return path.exists()
    return True


def _owner_of(context: StorageDriverStoreContext) -> tuple[str, str] | None:
    """(namespace, workflow id) Temporal stores the payload for, if it is a workflow."""
    target = context.target
    if isinstance(target, StorageDriverWorkflowInfo) and target.id:
        return target.namespace, target.id
    return None


def _corrupt(detail: str) -> ApplicationError:
    return ApplicationError(
        f"payload blob store: {detail}", type="PayloadBlobCorrupt", non_retryable=True
    )


@dataclasses.dataclass(frozen=True)
class BlobSettings:
    """Where large payloads go (`directory` None: they stay in history) and from what size."""

    directory: Path | None
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES


def blob_settings(environ: Mapping[str, str]) -> BlobSettings:
    """`STEADYLOOP_BLOB_DIR` (`off` keeps payloads in history), else `$STEADYLOOP_HOME/blobs`,
    else `~/.steadyloop/blobs`; `STEADYLOOP_BLOB_THRESHOLD` in bytes."""
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
    chosen = environ.get(BLOB_DIR_ENV, "").strip()
    if chosen.lower() in _OFF:
        return BlobSettings(directory=None, threshold_bytes=threshold)
    if chosen:
        directory = Path(chosen)
    else:
        home = environ.get(HOME_ENV, "").strip()
        directory = (Path(home) if home else DEFAULT_HOME) / "blobs"
    return BlobSettings(directory=directory.expanduser(), threshold_bytes=threshold)


def steadyloop_data_converter(
    directory: str | os.PathLike[str] | None,
    *,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> DataConverter:
    """The pydantic data converter, offloading payloads of `threshold_bytes` or more to
    `directory` (None: the plain pydantic converter, everything inline). Failure details
    it cannot decode become a marker (`steadyloop.failure_details`)."""
    tolerant = dataclasses.replace(
        pydantic_data_converter, failure_converter_class=TolerantFailureConverter
    )
    if directory is None:
        return tolerant
    driver = LocalFileStorageDriver(directory, chunk_bytes=chunk_bytes)
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
