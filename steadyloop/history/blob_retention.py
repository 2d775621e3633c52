"""Which blobs a garbage collection may delete: pure rules over what the store and
Temporal say. No I/O; `steadyloop.client.blob_gc` lists, asks and deletes.

The store is content-addressed: a *manifest* (one offloaded payload) names its *chunks*,
and identical payloads of different runs share one manifest, identical chunks one chunk.
So a manifest does not belong to a run by its name. It belongs to whoever stored it: the
storage driver writes an *owner record* (`owners/<owner>/<manifest>`) for the workflow
Temporal stored the payload on behalf of (`StorageDriverStoreContext.target`: the
workflow itself for its input, its commands, its activities' inputs and results and its
continue-as-new state; the child for a child's input; the parent for a child's result).
That is exactly the set of payloads a workflow decodes when it is replayed, so keeping a
workflow's owned manifests keeps it replayable. Continue-as-new keeps the workflow id,
so one owner covers the whole chain of executions; Temporal's `describe` of the id says
whether its latest execution is open, and when it closed.

The obvious collector is wrong in these ways, each prevented where named:

- **Deleting a manifest another run still uses** (two runs storing the same payload):
  a manifest goes only when *every* owner record naming it has expired (`plan`).
- **Deleting what a run in flight is writing**: its owner record, manifest or chunks may
  be seconds old, and its run not yet known to Temporal (the client stores the input
  before the start reaches the server). Nothing younger than `grace` is ever deleted,
  whatever Temporal says (`_expired`, `plan`), and the store re-checks the age of each
  object at the moment it deletes it (`delete_if_older` of the store).
- **A chunk a writer just reused**: a writer that finds a chunk already stored does not
  write it again, so its age would say nothing. The local driver freshens a chunk it
  reuses (its mtime), so a reused chunk is young again and falls under `grace`.
- **Trusting "not found"**: a collector pointed at the wrong Temporal server or
  namespace would find no run at all and delete everything. A workflow Temporal does
  not know is kept and reported (`unknown`), unless the caller says to reclaim those too
  (`forget_unknown`, for runs Temporal's own retention already removed).
- **Manifests nobody owns** (written before owner records existed, or for no workflow):
  nothing says when they may go, so they are kept and counted (`unowned`).
- **Order**: manifests are deleted before their owner records, and chunks are marked
  from every manifest that remains, so a collection cut short leaves nothing dangling
  and the next one finishes the job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Literal

__all__ = [
    "OWNERS_PREFIX",
    "GcPlan",
    "OwnerRecord",
    "RunState",
    "StoredObject",
    "manifest_chunks",
    "owner_id",
    "plan",
]

OWNERS_PREFIX = "owners/"
_HEX = frozenset("0123456789abcdef")


@dataclasses.dataclass(frozen=True)
class StoredObject:
    """One object of the store: its key, size in bytes, and when it was last written."""

    key: str
    size: int
    modified: datetime


@dataclasses.dataclass(frozen=True)
class OwnerRecord:
    """`owners/<owner>/<manifest>`: the workflow `workflow_id` stored `manifest`."""

    key: str
    owner: str
    manifest: str
    modified: datetime
    namespace: str = ""
    workflow_id: str = ""


@dataclasses.dataclass(frozen=True)
class RunState:
    """What Temporal says of an owner's workflow id: its latest execution is `open`, or
    `closed` at `closed_at`, or Temporal does not know it (`unknown`)."""

    status: Literal["open", "closed", "unknown"]
    closed_at: datetime | None = None


@dataclasses.dataclass
class GcPlan:
    """What a collection deletes, in this order, and what it keeps and why (counts)."""

    manifests: list[StoredObject] = dataclasses.field(default_factory=list)
    owner_records: list[OwnerRecord] = dataclasses.field(default_factory=list)
    chunks: list[StoredObject] = dataclasses.field(default_factory=list)
    expired_runs: list[str] = dataclasses.field(default_factory=list)  # workflow ids
    open_runs: int = 0
    retained_runs: int = 0  # closed within the retention period
    unknown_runs: int = 0
    young_objects: int = 0  # unreferenced, but younger than the grace period
    unowned_manifests: int = 0
    kept_bytes: int = 0

    @property
    def reclaimed_bytes(self) -> int:
        return sum(o.size for o in self.manifests) + sum(o.size for o in self.chunks)


def owner_id(namespace: str, workflow_id: str) -> str:
    """The owner part of a record's key: a digest, because a workflow id may hold any
    character (slashes, 1,000 of them) and a key must not."""
    return hashlib.sha256(f"{namespace}\0{workflow_id}".encode()).hexdigest()[:40]


def owner_record_body(namespace: str, workflow_id: str) -> bytes:
    """What an owner record holds: the id to ask Temporal about (the key has its digest)."""
    return json.dumps({"namespace": namespace, "workflow_id": workflow_id}).encode()


def is_sha256(key: str) -> bool:
    return len(key) == 64 and all(c in _HEX for c in key)


def manifest_chunks(content: bytes) -> list[str] | None:
    """The chunk keys `content` names if it is a manifest, else None (it is a chunk).

    A chunk that happens to read like a manifest only keeps more chunks alive: the safe
    way to be wrong."""
    if not content.startswith(b'{"v":'):
        return None
    try:
        parsed = json.loads(content)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("chunks"), list):
        return None
    chunks = parsed["chunks"]
    if not all(isinstance(c, str) and is_sha256(c) for c in chunks):
        return None
    return list(chunks)


def _expired(
    record: OwnerRecord,
    state: RunState,
    *,
    now: datetime,
    retention: timedelta,
    grace: timedelta,
    forget_unknown: bool,
) -> bool:
    if now - record.modified <= grace:
        return False  # a run in flight may have just written it, before Temporal knew it
    if state.status == "open":
        return False
    if state.status == "unknown":
        return forget_unknown and now - record.modified > retention
    assert state.closed_at is not None
    return now - state.closed_at > retention


def plan(
    objects: Iterable[StoredObject],
    manifests: Mapping[str, list[str]],
    owners: Iterable[OwnerRecord],
    states: Mapping[str, RunState],
    *,
    now: datetime,
    retention: timedelta,
    grace: timedelta,
    forget_unknown: bool = False,
) -> GcPlan:
    """What to delete: manifests every owner of which expired, their owner records, then
    chunks no remaining manifest names. `objects`: every content object (chunks and
    manifests, not owner records); `manifests`: the chunk keys of each of them that is a
    manifest; `states`: each owner's run, by `OwnerRecord.owner` (absent: unknown)."""
    if retention < timedelta(0) or grace < timedelta(0):
        raise ValueError(f"retention ({retention}) and grace ({grace}) must not be negative")
    result = GcPlan()
    by_key = {o.key: o for o in objects}
    owners_of: dict[str, list[OwnerRecord]] = {}
    verdict: dict[str, bool] = {}  # owner -> expired (per run, by its newest record)
    newest: dict[str, datetime] = {}
    records = list(owners)
    for record in records:
        owners_of.setdefault(record.manifest, []).append(record)
        if record.owner not in newest or record.modified > newest[record.owner]:
            newest[record.owner] = record.modified
    for owner, modified in newest.items():
        state = states.get(owner, RunState("unknown"))
        probe = OwnerRecord(key="", owner=owner, manifest="", modified=modified)
        verdict[owner] = _expired(
            probe, state, now=now, retention=retention, grace=grace, forget_unknown=forget_unknown
        )
        if verdict[owner]:
            result.expired_runs.append(owner)
        elif state.status == "open":
            result.open_runs += 1
        elif state.status == "closed":
            result.retained_runs += 1
        else:
            result.unknown_runs += 1
    workflow_ids = {r.owner: r.workflow_id for r in records}
    result.expired_runs = sorted(workflow_ids.get(o) or o for o in result.expired_runs)

    # Manifests: deleted when every record naming them expired and they are old.
    remaining: set[str] = set()
    for key, _chunks in manifests.items():
        stored = by_key.get(key)
        named_by = owners_of.get(key, [])
        if not named_by:
            result.unowned_manifests += 1
            remaining.add(key)
            continue
        if not all(verdict[r.owner] for r in named_by):
            remaining.add(key)
            continue
        if stored is None or now - stored.modified <= grace:
            result.young_objects += stored is not None
            remaining.add(key)
            continue
        result.manifests.append(stored)
        result.owner_records.extend(named_by)
    # Records of expired runs whose manifest is already gone (a collection cut short).
    for key, named_by in owners_of.items():
        if key not in manifests and all(verdict[r.owner] for r in named_by):
            result.owner_records.extend(named_by)

    # Chunks: marked from every manifest that stays; the rest go once old enough.
    live = set(remaining)
    for key in remaining:
        live.update(manifests[key])
    for stored in by_key.values():
        if stored.key in live or stored.key in manifests:
            if stored.key in live:
                result.kept_bytes += stored.size
            continue
        if now - stored.modified <= grace:
            result.young_objects += 1
            result.kept_bytes += stored.size
            continue
        result.chunks.append(stored)
    return result
