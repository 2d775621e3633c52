"""The small object store the chunked payload store sits on: local directory, memory, S3.

`steadyloop._history.payload_storage` cuts a payload into content-addressed chunks and a
manifest; this module is where those bytes live. Seven operations, all async, all keyed
by a `/`-separated name relative to the store's root: `get`, `put_if_absent` (a
conditional put), `put`, `freshen` (make an existing object's last-modified time now),
`head`, `list` (by prefix, with size and last-modified, which retention needs) and
`delete`. Backends: `LocalDirectoryStore` (the blob directory), `MemoryStore` (tests),
and `steadyloop._history.bucket_store.S3Store` (any S3-compatible service).
`RetryingStore` wraps any of them with retries.

Key names (what `payload_storage` writes and a garbage collector walks):
`chunks/<sha256>` for chunks and `manifests/<sha256>` for manifests. The local
backend keeps `chunks/<sha256>` at `<dir>/<first two hex digits>/<sha256>`: a store holds
far more chunks than manifests, and 256 folders keep each one small enough to list.

The obvious implementations are wrong in these ways, and this is what prevents each:

- *A put that overwrites races a second writer*: two workers storing the same chunk
  would both upload, and a reader between them could see a half-written object (local
  disk) or pay for two uploads. `put_if_absent` is a conditional put (S3
  `If-None-Match: *`, answering 412 when the key exists; locally a temporary file
  hard-linked into place, which fails if the name exists) and reports whether it wrote.
- *Every failure retried the same way*: a missing key is an answer (`get` returns
  None), not an error to retry; a refused credential is permanent (`ObjectStoreError`);
  only a store that is down, slow or throttling is `ObjectStoreUnavailable`, the one
  error `RetryingStore` retries, with capped exponential backoff and full jitter, within
  a time budget, so a worker waits out a restart but a task never hangs past its
  timeout.
- *A reused object keeps its old age*: a writer whose conditional put finds a chunk
  already stored (another run wrote it a day ago) would leave it looking a day old, and
  a collector's grace period ("nothing younger is deleted") would not cover the run
  that now names it. `freshen` makes its last-modified time now without moving bytes:
  locally `os.utime`; on S3 a copy of the object onto itself (`CopyObject`,
  `MetadataDirective=REPLACE`), a server-side copy that sets `LastModified` (checked
  on SeaweedFS) where a separate marker object would need every collector to read it.
- *Listing by walking the disk as strings*: `list` yields `ObjectInfo` with the size and
  the UTC last-modified time, so a collector can honour a grace period without a second
  request per key; the local backend skips its own temporary files (`.incoming-*`).
- *Keys from outside trusted*: a key with `..`, a leading `/`, a backslash, NUL or an
  empty segment is refused (`ValueError`) before any path or URL is built from it.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import os
import random
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from steadyloop.errors import SteadyloopError

__all__ = [
    "CHUNK_PREFIX",
    "MANIFEST_PREFIX",
    "ForwardingStore",
    "LocalDirectoryStore",
    "MemoryStore",
    "ObjectInfo",
    "ObjectStore",
    "ObjectStoreError",
    "ObjectStoreUnavailable",
    "RetryPolicy",
    "RetryingStore",
    "check_key",
]

CHUNK_PREFIX = "chunks/"
MANIFEST_PREFIX = "manifests/"
_T = TypeVar("_T")


class ObjectStoreError(SteadyloopError):
    """The store refused an operation for a reason waiting will not fix (permissions,
    no such bucket, a malformed answer). The message names the store and the key."""


class ObjectStoreUnavailable(ObjectStoreError):
    """The store is down, slow, answering 5xx or throttling: worth retrying later."""


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """One stored object: its key (relative to the store's root), size, last change (UTC)."""

    key: str
    size: int
    last_modified: datetime


def check_key(key: str) -> str:
    """`key` if it is a safe relative name, else `ValueError` naming it."""
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or "\x00" in key
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(f"object store key {key!r} is not a relative name like 'chunks/ab12'")
    return key


class ObjectStore(ABC):
    """Where chunks and manifests live. Every method is a coroutine (or an async
    iterator) so one worker can keep many requests in flight on one event loop."""

    @property
    @abstractmethod
    def description(self) -> str:
        """What an error message names: `directory /x`, `s3://bucket/prefix`, `memory`."""

    def locate(self, key: str) -> str:
        """Where `key` lives, for an error message: a path or a URL."""
        return f"{self.description}: {key}"

    @abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The object's bytes, or None if there is no such key."""

    @abstractmethod
    async def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write `data` unless `key` exists; True if this call wrote it. Never overwrites."""

    @abstractmethod
    async def put(self, key: str, data: bytes) -> None:
        """Write `data` at `key`, replacing what was there."""

    async def freshen(self, key: str) -> bool:
        """Make `key`'s last-modified time now, keeping its bytes; False if it is gone.

        This default reads and rewrites the object (the same bytes: keys are content
        names); backends override it with something that moves no bytes."""
        data = await self.get(key)
        if data is None:
            return False
        await self.put(key, data)
        return True

    @abstractmethod
    async def head(self, key: str) -> ObjectInfo | None:
        """Size and last-modified time of `key`, or None if there is no such key."""

    @abstractmethod
    def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """Every object whose key starts with `prefix`, in no particular order."""

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove `key`; a key that is already gone is not an error."""

    async def aclose(self) -> None:  # noqa: B027 - most backends hold nothing to close
        """Release connections (the S3 backend's); the store is unusable afterwards."""


# -- memory --------------------------------------------------------------------------------


class MemoryStore(ObjectStore):
    """A dict, for tests: the same answers as a real store, none of the I/O."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, datetime]] = {}

    @property
    def description(self) -> str:
        return "memory"

    async def get(self, key: str) -> bytes | None:
        found = self.objects.get(check_key(key))
        return None if found is None else found[0]

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        if check_key(key) in self.objects:
            return False
        self.objects[key] = (bytes(data), datetime.now(UTC))
        return True

    async def put(self, key: str, data: bytes) -> None:
        self.objects[check_key(key)] = (bytes(data), datetime.now(UTC))

    async def freshen(self, key: str) -> bool:
        found = self.objects.get(check_key(key))
        if found is None:
            return False
        self.objects[key] = (found[0], datetime.now(UTC))
        return True

    async def head(self, key: str) -> ObjectInfo | None:
        found = self.objects.get(check_key(key))
        return None if found is None else ObjectInfo(key, len(found[0]), found[1])

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        for key, (data, when) in list(self.objects.items()):
            if key.startswith(prefix):
                yield ObjectInfo(key, len(data), when)

    async def delete(self, key: str) -> None:
        self.objects.pop(check_key(key), None)


# -- a local directory ---------------------------------------------------------------------


class LocalDirectoryStore(ObjectStore):
    """Objects as files under `directory`; `chunks/<sha>` at `<dir>/<sha[:2]>/<sha>`.

    Blocking file calls run in a thread (`asyncio.to_thread`), so a slow disk does not
    stall the worker's event loop. A write goes to a temporary file in the target's
    folder and is then linked (`put_if_absent`: `os.link`, which fails if the name
    exists) or renamed (`put`) into place, so a reader never sees half a file.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser()

    @property
    def description(self) -> str:
        return f"directory {self.directory}"

    def locate(self, key: str) -> str:
        return f"file {self.path(key)}"

    def path(self, key: str) -> Path:
        """The file that holds `key`."""
        check_key(key)
        if key.startswith(CHUNK_PREFIX) and "/" not in key[len(CHUNK_PREFIX) :]:
            name = key[len(CHUNK_PREFIX) :]
            return self.directory / name[:2] / name
        return self.directory.joinpath(*key.split("/"))

    def _key(self, path: Path) -> str | None:
        relative = path.relative_to(self.directory).parts
        if relative[-1].startswith("."):
            return None
        if len(relative) == 2 and len(relative[0]) == 2 and relative[1].startswith(relative[0]):
            return CHUNK_PREFIX + relative[1]
        return "/".join(relative)

    async def get(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ObjectStoreError(f"{self.description}: cannot read {path}: {exc}") from None

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        return await asyncio.to_thread(self._write, self.path(key), data, False)

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self.path(key), data, True)

    def _write(self, path: Path, data: bytes, replace: bool) -> bool:
        if not replace and path.exists():
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        except OSError as exc:
            raise ObjectStoreError(f"{self.description}: cannot write {path}: {exc}") from None
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            if replace:
                os.replace(temporary, path)
                return True
            try:
                os.link(temporary, path)
            except FileExistsError:
                return False
            return True
        except OSError as exc:
            raise ObjectStoreError(f"{self.description}: cannot write {path}: {exc}") from None
        finally:
            Path(temporary).unlink(missing_ok=True)

    async def freshen(self, key: str) -> bool:
        path = self.path(key)
        try:
            await asyncio.to_thread(os.utime, path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise ObjectStoreError(f"{self.description}: cannot touch {path}: {exc}") from None
        return True

    async def head(self, key: str) -> ObjectInfo | None:
        path = self.path(key)
        try:
            stat = await asyncio.to_thread(path.stat)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return ObjectInfo(key, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        for info in await asyncio.to_thread(self._list, prefix):
            yield info

    def _list(self, prefix: str) -> builtins.list[ObjectInfo]:
        if not self.directory.is_dir():
            return []
        found: builtins.list[ObjectInfo] = []
        for root, _folders, files in os.walk(self.directory):
            for name in files:
                path = Path(root) / name
                key = self._key(path)
                if key is None or not key.startswith(prefix):
                    continue
                try:
                    stat = path.stat()
                except FileNotFoundError:  # deleted while we walked
                    continue
                found.append(
                    ObjectInfo(key, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))
                )
        return found

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self.path(key).unlink, missing_ok=True)


# -- wrappers ------------------------------------------------------------------------------


class ForwardingStore(ObjectStore):
    """Every call passed to `inner`: the base of a wrapper that counts, delays or holds
    some calls (tests, benchmarks) and must forward the rest, `freshen` included, as is."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    @property
    def description(self) -> str:
        return self.inner.description

    def locate(self, key: str) -> str:
        return self.inner.locate(key)

    async def get(self, key: str) -> bytes | None:
        return await self.inner.get(key)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        return await self.inner.put_if_absent(key, data)

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)

    async def freshen(self, key: str) -> bool:
        return await self.inner.freshen(key)

    async def head(self, key: str) -> ObjectInfo | None:
        return await self.inner.head(key)

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        async for info in self.inner.list(prefix):
            yield info

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- retries -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with full jitter, within `budget_s` per operation.

    The default budget (8 s) is below Temporal's default workflow-task timeout (10 s): a
    workflow task that cannot reach the store fails and is retried by Temporal rather
    than timing out while the worker still waits; an activity is retried by its policy.
    """

    first_delay_s: float = 0.1
    max_delay_s: float = 2.0
    budget_s: float = 8.0

    def __post_init__(self) -> None:
        for name in ("first_delay_s", "max_delay_s", "budget_s"):
            value = getattr(self, name)
            if not (0 <= value <= 3600):  # also refuses NaN
                raise ValueError(f"RetryPolicy.{name} must be 0 to 3600 seconds, got {value!r}")


class RetryingStore(ObjectStore):
    """`inner`, with every `ObjectStoreUnavailable` retried under `policy`.

    After the budget the last `ObjectStoreUnavailable` is raised, naming how long it
    tried. `attempts` and `retries` count requests, for tests and benchmarks.
    """

    def __init__(
        self,
        inner: ObjectStore,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self.attempts = 0
        self.retries = 0

    def within(self, budget_s: float) -> RetryingStore:
        """The same store and backoff, giving up after at most `budget_s` of retries."""
        policy = dataclasses.replace(self.policy, budget_s=min(budget_s, self.policy.budget_s))
        return RetryingStore(self.inner, policy, sleep=self._sleep)

    @property
    def description(self) -> str:
        return self.inner.description

    def locate(self, key: str) -> str:
        return self.inner.locate(key)

    async def _retry(self, call: Callable[[], Awaitable[_T]]) -> _T:
        started = time.monotonic()
        delay = self.policy.first_delay_s
        while True:
            self.attempts += 1
            try:
                return await call()
            except ObjectStoreUnavailable as exc:
                waited = time.monotonic() - started
                pause = random.uniform(0, delay)
                if waited + pause > self.policy.budget_s:
                    raise ObjectStoreUnavailable(
                        f"{exc} (still failing after {waited:.1f} s of retries)"
                    ) from None
                self.retries += 1
                await self._sleep(pause)
                delay = min(delay * 2, self.policy.max_delay_s)

    async def get(self, key: str) -> bytes | None:
        return await self._retry(lambda: self.inner.get(key))

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        return await self._retry(lambda: self.inner.put_if_absent(key, data))

    async def put(self, key: str, data: bytes) -> None:
        await self._retry(lambda: self.inner.put(key, data))

    async def freshen(self, key: str) -> bool:
        return await self._retry(lambda: self.inner.freshen(key))

    async def head(self, key: str) -> ObjectInfo | None:
        return await self._retry(lambda: self.inner.head(key))

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        # Collected whole inside the retry: a listing that fails on its third page and is
        # retried never yields the first two pages' keys twice.
        items = await self._retry(lambda: _collect(self.inner.list(prefix)))
        for info in items:
            yield info

    async def delete(self, key: str) -> None:
        await self._retry(lambda: self.inner.delete(key))

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _collect(items: AsyncIterator[ObjectInfo]) -> list[ObjectInfo]:
    return [info async for info in items]
