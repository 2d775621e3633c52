"""`collect`: delete the blobs of runs closed longer than a retention period.

The library call behind `steadyloop blobs gc`, so a Temporal Schedule (an activity that
calls it) or a cron job can run it. It lists the store, asks Temporal about each owner
(`describe` of its workflow id: the latest execution of the id, so a continue-as-new
chain is one question), applies `blob_retention.plan`, and deletes in the plan's order:
manifests, their owner records, then chunks.

What the obvious implementation gets wrong here, beside the rules of `blob_retention`:

- **The age read at listing time is stale by the time of the delete**: a writer may
  reuse (freshen) a chunk in between. `LocalGcStore.delete_if_older` renames the file
  aside first, then reads its age: a writer that touched it before the rename made it
  young (it is put back), and one that comes after finds it missing and writes it
  again. No window is left on a local directory.
- **Asking Temporal one run at a time, serially**: thousands of owners would take
  minutes. `collect` asks `QUESTIONS_AT_ONCE` at a time.
- **A Temporal error read as "closed"**: only NOT_FOUND means Temporal does not know a
  run; any other error stops the collection before anything is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from steadyloop.history.blob_retention import (
    OWNERS_PREFIX,
    GcPlan,
    OwnerRecord,
    RunState,
    StoredObject,
    is_sha256,
    manifest_chunks,
    plan,
)

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "GcReport",
    "GcStore",
    "LocalGcStore",
    "collect",
    "temporal_states",
]

DEFAULT_RETENTION = timedelta(days=30)
# Far longer than any one store (a payload is stored in one converter call, seconds).
DEFAULT_GRACE = timedelta(hours=1)
QUESTIONS_AT_ONCE = 32
SHOWN_RUNS = 10  # expired workflow ids a report names


class GcStore(Protocol):
    """What a collection needs of a blob store (the local directory, or an object store)."""

    def describe(self) -> str: ...

    async def objects(self) -> list[StoredObject]:
        """Every chunk and manifest (not owner records), with size and last write."""
        ...

    async def owner_records(self) -> list[OwnerRecord]: ...

    async def read(self, key: str) -> bytes: ...

    async def delete_if_older(self, key: str, cutoff: datetime) -> bool:
        """Delete `key` if it was last written before `cutoff`; whether it was."""
        ...


@dataclasses.dataclass
class GcReport:
    """What a collection did (or, dry, would do)."""

    plan: GcPlan
    dry_run: bool
    store: str
    deleted_manifests: int = 0
    deleted_chunks: int = 0
    deleted_owner_records: int = 0
    reclaimed_bytes: int = 0  # dry run: what the plan would reclaim
    skipped_young: int = 0  # written again between the listing and the delete

    def lines(self) -> list[str]:
        """The report as `steadyloop blobs gc` prints it."""
        p = self.plan
        verb = "would reclaim" if self.dry_run else "reclaimed"
        manifests = len(p.manifests) if self.dry_run else self.deleted_manifests
        chunks = len(p.chunks) if self.dry_run else self.deleted_chunks
        lines = [
            f"blob store {self.store}",
            f"runs: {len(p.expired_runs)} expired, {p.retained_runs} closed within the "
            f"retention period, {p.open_runs} open, {p.unknown_runs} unknown to Temporal (kept)",
            f"{verb} {self.reclaimed_bytes:,} bytes: {manifests} manifest(s), {chunks} chunk(s)",
            f"kept {p.kept_bytes:,} bytes; {p.unowned_manifests} manifest(s) with no owner "
            f"record (kept), {p.young_objects + self.skipped_young} object(s) younger than "
            "the grace period",
        ]
        if p.expired_runs:
            shown = ", ".join(p.expired_runs[:SHOWN_RUNS])
            more = len(p.expired_runs) - SHOWN_RUNS
            lines.append(f"expired: {shown}" + (f" and {more} more" if more > 0 else ""))
        return lines


async def temporal_states(client: Client, records: Iterable[OwnerRecord]) -> dict[str, RunState]:
    """Each owner's run as Temporal describes its workflow id (owners of another
    namespace than the client's are not asked, and stay unknown: kept)."""
    ids = {r.owner: r.workflow_id for r in records if r.namespace == client.namespace}
    states: dict[str, RunState] = {}
    gate = asyncio.Semaphore(QUESTIONS_AT_ONCE)

    async def ask(owner: str, workflow_id: str) -> None:
        async with gate:
            try:
                described = await client.get_workflow_handle(workflow_id).describe()
            except RPCError as error:
                if error.status == RPCStatusCode.NOT_FOUND:
                    states[owner] = RunState("unknown")
                    return
                raise
        if described.status in (WorkflowExecutionStatus.RUNNING, None):
            states[owner] = RunState("open")
        else:
            closed = described.close_time or datetime.now(UTC)
            states[owner] = RunState("closed", closed_at=closed)

    await asyncio.gather(*(ask(o, w) for o, w in ids.items() if w))
    return states


async def collect(
    store: GcStore,
    client: Client,
    *,
    retention: timedelta = DEFAULT_RETENTION,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
    forget_unknown: bool = False,
    now: datetime | None = None,
) -> GcReport:
    """Delete (or with `dry_run`, only count) what `blob_retention.plan` allows."""
    started = datetime.now(UTC) if now is None else now
    records = await store.owner_records()
    objects = await store.objects()
    manifests: dict[str, list[str]] = {}
    for stored in objects:
        chunks = manifest_chunks(await store.read(stored.key))
        if chunks is not None:
            manifests[stored.key] = chunks
    states = await temporal_states(client, records)
    decided = plan(
        objects,
        manifests,
        records,
        states,
        now=started,
        retention=retention,
        grace=grace,
        forget_unknown=forget_unknown,
    )
    report = GcReport(plan=decided, dry_run=dry_run, store=store.describe())
    if dry_run:
        report.reclaimed_bytes = decided.reclaimed_bytes
        return report
    cutoff = started - grace
    came_back: set[str] = set()  # manifests written again between the listing and now
    for stored in decided.manifests:
        if await store.delete_if_older(stored.key, cutoff):
            report.deleted_manifests += 1
            report.reclaimed_bytes += stored.size
        else:
            came_back.add(stored.key)
            report.skipped_young += 1
    for record in decided.owner_records:
        if record.manifest not in came_back and await store.delete_if_older(record.key, started):
            report.deleted_owner_records += 1
    still_named = {chunk for key in came_back for chunk in manifests[key]}
    for stored in decided.chunks:
        if stored.key in still_named:
            continue
        if await store.delete_if_older(stored.key, cutoff):
            report.deleted_chunks += 1
            report.reclaimed_bytes += stored.size
        else:
            report.skipped_young += 1
    return report


class LocalGcStore:
    """The local blob directory (`LocalFileStorageDriver`'s layout) as a `GcStore`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser()

    def describe(self) -> str:
        return str(self.directory)

    async def objects(self) -> list[StoredObject]:
        return await asyncio.to_thread(self._objects)

    async def owner_records(self) -> list[OwnerRecord]:
        return await asyncio.to_thread(self._owner_records)

    async def read(self, key: str) -> bytes:
        return await asyncio.to_thread(self._path(key).read_bytes)

    async def delete_if_older(self, key: str, cutoff: datetime) -> bool:
        return await asyncio.to_thread(self._delete_if_older, key, cutoff)

    # -- internals ---------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        if key.startswith(OWNERS_PREFIX):
            return self.directory / key
        if not is_sha256(key):
            raise ValueError(f"{key!r} is not a blob key (a sha256, or {OWNERS_PREFIX}...)")
        return self.directory / key[:2] / key

    def _objects(self) -> list[StoredObject]:
        found: list[StoredObject] = []
        if not self.directory.is_dir():
            return found
        for path in self.directory.glob("??/*"):
            if not is_sha256(path.name) or path.parent.name != path.name[:2]:
                continue  # a write in progress (.incoming-), or not ours
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # deleted since the listing
            found.append(StoredObject(path.name, stat.st_size, _mtime(stat.st_mtime)))
        return found

    def _owner_records(self) -> list[OwnerRecord]:
        records: list[OwnerRecord] = []
        root = self.directory / OWNERS_PREFIX
        if not root.is_dir():
            return records
        for owner_dir in root.iterdir():
            names: tuple[str, str] | None = None
            for path in owner_dir.iterdir():
                if not is_sha256(path.name):
                    continue
                try:
                    stat = path.stat()
                    if names is None:
                        names = _owner_names(path.read_bytes())
                except FileNotFoundError:
                    continue
                namespace, workflow_id = names if names is not None else ("", "")
                records.append(
                    OwnerRecord(
                        key=f"{OWNERS_PREFIX}{owner_dir.name}/{path.name}",
                        owner=owner_dir.name,
                        manifest=path.name,
                        modified=_mtime(stat.st_mtime),
                        namespace=namespace,
                        workflow_id=workflow_id,
                    )
                )
        return records

    def _delete_if_older(self, key: str, cutoff: datetime) -> bool:
        path = self._path(key)
        aside = path.with_name(f".gc-{uuid.uuid4().hex}")
        try:
            os.rename(path, aside)  # from here, a writer finds it missing and rewrites it
        except FileNotFoundError:
            return True  # already gone
        if _mtime(aside.stat().st_mtime) >= cutoff:  # reused between listing and now
            os.replace(aside, path)  # same content as anything written there since
            return False
        aside.unlink()
        if key.startswith(OWNERS_PREFIX):
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # the owner's last record: its directory goes too
        return True


def _owner_names(body: bytes) -> tuple[str, str] | None:
    try:
        parsed = json.loads(body)
        return str(parsed["namespace"]), str(parsed["workflow_id"])
    except (ValueError, KeyError, TypeError):
        return None


def _mtime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
