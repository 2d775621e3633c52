"""`collect`: delete the blobs of runs closed longer than a retention period.

The library call behind `steadyloop blobs gc`, so a Temporal Schedule (an activity that
calls it) or a cron job can run it, on any `ObjectStore` (the local directory, S3). It
lists the store, reads the manifests (each names its workflow), asks Temporal about each
workflow id (`describe`: the latest execution of the id, so a continue-as-new chain is
one question), applies `blob_retention.plan`, and deletes in the plan's order:
manifests, then chunks.

What the obvious implementation gets wrong here, beside the rules of `blob_retention`:

- **The age read at listing time is stale by the time of the delete**: a writer may
  store the same manifest or chunk again in between. Each delete re-reads the object's
  age first (`_delete_if_older`); on a local directory the file is renamed aside before
  its age is read, so a writer either made it young before the rename (it is put back)
  or finds it missing after and writes it again: no window is left.
- **Marking chunks from a listing taken before the deletes**: a run in flight writes
  its chunks, then its manifest, while the collection runs; a chunk it reused (already
  stored, so not rewritten and still old) would be named only by a manifest the first
  listing did not have. The manifests are listed again just before chunks are deleted,
  and every chunk a new one names is kept.
- **Asking Temporal one run at a time, serially**: thousands of runs would take minutes.
  `QUESTIONS_AT_ONCE` at a time.
- **A Temporal error read as "closed"**: only NOT_FOUND means Temporal does not know a
  run; any other error stops the collection before anything is deleted.
- **A reused chunk still looking old**: a writer whose conditional put finds a chunk
  already stored freshens it (`ObjectStore.freshen`: its last-modified time becomes
  now), so the grace period covers a run in flight that reuses a chunk of a run being
  collected, even before its manifest is written. A worker takes a chunk it wrote or
  freshened as fresh for `KNOWN_PRESENT_S` (10 minutes) without asking again: `grace`
  must be longer (the default is an hour).

Not guaranteed, on an object store: a writer that freshens a chunk in the instant
between a delete's re-read of its age and the delete itself names a chunk that is
gone; the run then fails with `PayloadBlobMissing` on its next read. Run collections
when few runs start, or with a long `grace`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._history.blob_retention import (
    GcPlan,
    Manifest,
    RunState,
    StoredObject,
    plan,
    read_manifest,
)
from steadyloop._history.object_store import (
    CHUNK_PREFIX,
    MANIFEST_PREFIX,
    LocalDirectoryStore,
    ObjectStore,
)

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "GcReport",
    "collect",
    "store_listing",
    "temporal_states",
]

DEFAULT_RETENTION = timedelta(days=30)
# Far longer than any one store (a payload is stored in one converter call, seconds).
DEFAULT_GRACE = timedelta(hours=1)
QUESTIONS_AT_ONCE = 32
# What became of each workflow id (for a collection without Temporal: tests, tools).
StatesOf = Callable[[list[str]], Awaitable[Mapping[str, RunState]]]
SHOWN_RUNS = 10  # expired workflow ids a report names


@dataclasses.dataclass
class GcReport:
    """What a collection did (or, dry, would do)."""

    plan: GcPlan
    dry_run: bool
    store: str
    deleted_manifests: int = 0
    deleted_chunks: int = 0
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
            f"kept {p.kept_bytes:,} bytes; {p.unowned_manifests} manifest(s) that name no "
            f"workflow (kept), {p.young_objects + self.skipped_young} object(s) younger "
            "than the grace period",
        ]
        if p.expired_runs:
            shown = ", ".join(p.expired_runs[:SHOWN_RUNS])
            more = len(p.expired_runs) - SHOWN_RUNS
            lines.append(f"expired: {shown}" + (f" and {more} more" if more > 0 else ""))
        return lines


async def temporal_states(client: Client, workflow_ids: Iterable[str]) -> dict[str, RunState]:
    """Each workflow id's run as Temporal describes it, in the client's namespace."""
    states: dict[str, RunState] = {}
    gate = asyncio.Semaphore(QUESTIONS_AT_ONCE)

    async def ask(workflow_id: str) -> None:
        async with gate:
            try:
                described = await client.get_workflow_handle(workflow_id).describe()
            except RPCError as error:
                if error.status == RPCStatusCode.NOT_FOUND:
                    states[workflow_id] = RunState("unknown")
                    return
                raise
        if described.status in (WorkflowExecutionStatus.RUNNING, None):
            states[workflow_id] = RunState("open")
        else:
            closed = described.close_time or datetime.now(UTC)
            states[workflow_id] = RunState("closed", closed_at=closed)

    await asyncio.gather(*(ask(w) for w in set(workflow_ids)))
    return states


async def store_listing(
    store: ObjectStore, *, known: Mapping[str, Manifest] | None = None
) -> tuple[list[StoredObject], dict[str, Manifest]]:
    """Every object of `store`, and what each manifest says (`known`: already read)."""
    objects: list[StoredObject] = []
    manifests: dict[str, Manifest] = {}
    async for info in store.list():
        if not (info.key.startswith(CHUNK_PREFIX) or info.key.startswith(MANIFEST_PREFIX)):
            continue
        objects.append(StoredObject(info.key, info.size, info.last_modified))
        if not info.key.startswith(MANIFEST_PREFIX):
            continue
        if known is not None and info.key in known:
            manifests[info.key] = known[info.key]
            continue
        content = await store.get(info.key)
        read = None if content is None else read_manifest(content)
        if read is not None:
            manifests[info.key] = read
        elif content is not None:  # unreadable: keep all it could name
            manifests[info.key] = Manifest(chunks=[], workflow_id=None)
    return objects, manifests


async def collect(
    store: ObjectStore,
    client: Client | None,
    *,
    retention: timedelta = DEFAULT_RETENTION,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
    forget_unknown: bool = False,
    now: datetime | None = None,
    states_of: StatesOf | None = None,
) -> GcReport:
    """Delete (or with `dry_run`, only count) what `blob_retention.plan` allows.

    `states_of` says what became of each workflow id; by default `temporal_states`
    asks `client` (None is allowed only with `states_of`)."""
    started = datetime.now(UTC) if now is None else now
    objects, manifests = await store_listing(store)
    owners = [m.workflow_id for m in manifests.values() if m.workflow_id is not None]
    if states_of is None:
        if client is None:
            raise ValueError("collect needs a Temporal client, or states_of")
        states = await temporal_states(client, owners)
    else:
        states = dict(await states_of(owners))
    decided = plan(
        objects,
        manifests,
        states,
        now=started,
        retention=retention,
        grace=grace,
        forget_unknown=forget_unknown,
    )
    report = GcReport(plan=decided, dry_run=dry_run, store=store.description)
    if dry_run:
        report.reclaimed_bytes = decided.reclaimed_bytes
        return report
    cutoff = started - grace
    came_back: set[str] = set()  # manifests written again between the listing and now
    for stored in decided.manifests:
        if await _delete_if_older(store, stored.key, cutoff):
            report.deleted_manifests += 1
            report.reclaimed_bytes += stored.size
        else:
            came_back.add(stored.key)
            report.skipped_young += 1
    # Manifests written since the first listing (runs in flight) keep what they name.
    _, now_listed = await store_listing(store, known=manifests)
    still_named = {c for key, m in now_listed.items() for c in m.chunks if key not in manifests}
    still_named.update(c for key in came_back for c in manifests[key].chunks)
    for stored in decided.chunks:
        if stored.key in still_named:
            report.skipped_young += 1
            continue
        if await _delete_if_older(store, stored.key, cutoff):
            report.deleted_chunks += 1
            report.reclaimed_bytes += stored.size
        else:
            report.skipped_young += 1
    return report


async def _delete_if_older(store: ObjectStore, key: str, cutoff: datetime) -> bool:
    """Delete `key` if it was last written before `cutoff`; whether it is gone."""
    if isinstance(store, LocalDirectoryStore):
        return await asyncio.to_thread(_delete_file_if_older, store.path(key), cutoff)
    info = await store.head(key)
    if info is None:
        return True
    if info.last_modified >= cutoff:
        return False
    await store.delete(key)
    return True


def _delete_file_if_older(path: Path, cutoff: datetime) -> bool:
    aside = path.with_name(f".gc-{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)  # from here, a writer finds it missing and writes it again
    except FileNotFoundError:
        return True
    if datetime.fromtimestamp(aside.stat().st_mtime, UTC) >= cutoff:  # written meanwhile
        os.replace(aside, path)  # the same bytes as anything written there since
        return False
    aside.unlink()
    return True
