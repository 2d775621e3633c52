"""Which blobs a garbage collection may delete: pure rules over what the store and
Temporal say. No I/O; `steadyloop.client._blob_gc` lists, asks and deletes.

The store is content-addressed: a *manifest* (`manifests/<sha256>`, one offloaded
payload) names its *chunks* (`chunks/<sha256>`), and identical chunks of different
payloads and runs are one object. A manifest belongs to the workflow Temporal stored the
payload for: the driver writes that id into the manifest (`workflow_id`, from
`StorageDriverStoreContext.target`: the workflow itself for its input, its commands, its
activities' inputs and results and its continue-as-new state; the child for a child's
input; the parent for a child's result). That is the set of payloads a workflow decodes
when it is replayed, so keeping a workflow's manifests (and their chunks) keeps it
replayable. Continue-as-new keeps the workflow id, so one id covers a chain of
executions; Temporal's `describe` of the id says whether its latest execution is open,
and when it closed.

The obvious collector is wrong in these ways, each prevented where named:

- **Deleting a chunk another run still uses** (every run's first chunk, its system
  prompt and tools, is the same bytes): chunks are marked from *every* manifest that
  stays, whoever owns it (`plan`).
- **Deleting what a run in flight is writing**: its manifest or chunks may be seconds
  old, and its run not yet known to Temporal (the client stores the input before the
  start reaches the server). Nothing younger than `grace` is deleted, whatever Temporal
  says (`plan`), and the collector re-reads each object's age as it deletes it and
  re-lists the manifests before it deletes chunks (`steadyloop.client._blob_gc`).
- **Trusting "not found"**: a collector pointed at the wrong Temporal server or
  namespace would find no run at all and delete everything. A workflow Temporal does
  not know is kept and counted (`unknown_runs`), unless the caller says to reclaim those
  too (`forget_unknown`, for runs Temporal's own retention already removed).
- **Manifests nobody owns** (stored for no workflow, or unreadable): nothing says when
  they may go, so they are kept with their chunks and counted (`unowned_manifests`).
- **Order**: manifests are deleted before chunks, and chunks are marked from every
  manifest that remains, so a collection cut short leaves nothing dangling and the next
  one finishes the job.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Literal

from steadyloop._history.object_store import CHUNK_PREFIX

__all__ = [
    "GcPlan",
    "Manifest",
    "RunState",
    "StoredObject",
    "plan",
    "read_manifest",
]

_HEX = frozenset("0123456789abcdef")


@dataclasses.dataclass(frozen=True)
class StoredObject:
    """One object of the store: its key, size in bytes, and when it was last written."""

    key: str
    size: int
    modified: datetime


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What a manifest says: the chunk keys it names and whose it is (None: nobody's)."""

    chunks: list[str]
    workflow_id: str | None


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


def is_sha256(key: str) -> bool:
    return len(key) == 64 and all(c in _HEX for c in key)


def read_manifest(content: bytes) -> Manifest | None:
    """What manifest `content` says, or None when it does not read as one.

    Chunk names become store keys (`chunks/<sha256>`)."""
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
    owner = parsed.get("workflow_id")
    return Manifest(
        chunks=[CHUNK_PREFIX + c for c in chunks],
        workflow_id=owner if isinstance(owner, str) and owner else None,
    )


def _expired(
    manifest: StoredObject,
    state: RunState,
    *,
    now: datetime,
    retention: timedelta,
    grace: timedelta,
    forget_unknown: bool,
) -> bool:
    if now - manifest.modified <= grace:
        return False  # a run in flight may have just written it, before Temporal knew it
    if state.status == "open":
        return False
    if state.status == "unknown":
        return forget_unknown and now - manifest.modified > retention
    assert state.closed_at is not None
    return now - state.closed_at > retention


def plan(
    objects: Iterable[StoredObject],
    manifests: Mapping[str, Manifest],
    states: Mapping[str, RunState],
    *,
    now: datetime,
    retention: timedelta,
    grace: timedelta,
    forget_unknown: bool = False,
) -> GcPlan:
    """What to delete: the manifests of expired runs, then the chunks no remaining
    manifest names. `objects`: every object of the store, by key; `manifests`: what
    each of them that is a manifest says; `states`: each owner's run, by workflow id
    (absent: unknown)."""
    if retention < timedelta(0) or grace < timedelta(0):
        raise ValueError(f"retention ({retention}) and grace ({grace}) must not be negative")
    result = GcPlan()
    by_key = {o.key: o for o in objects}
    remaining: set[str] = set()
    for key, manifest in manifests.items():
        stored = by_key.get(key)
        owner = manifest.workflow_id
        if owner is None:
            result.unowned_manifests += 1
            remaining.add(key)
            continue
        state = states.get(owner, RunState("unknown"))
        if stored is not None and _expired(
            stored, state, now=now, retention=retention, grace=grace, forget_unknown=forget_unknown
        ):
            result.manifests.append(stored)
            continue
        remaining.add(key)
        if stored is not None and now - stored.modified <= grace:
            result.young_objects += 1
    expired = {manifests[m.key].workflow_id for m in result.manifests}
    result.expired_runs = sorted(o for o in expired if o is not None)
    owners = {m.workflow_id for m in manifests.values() if m.workflow_id is not None}
    for owner in owners - expired:
        status = states.get(owner, RunState("unknown")).status
        if status == "open":
            result.open_runs += 1
        elif status == "closed":
            result.retained_runs += 1
        else:
            result.unknown_runs += 1

    # Chunks: marked from every manifest that stays; the rest go once old enough.
    live = set(remaining)
    for key in remaining:
        live.update(manifests[key].chunks)
    for stored in by_key.values():
        if stored.key in live:
            result.kept_bytes += stored.size
            continue
        if stored.key in manifests:
            continue  # a manifest being deleted
        if now - stored.modified <= grace:
            result.young_objects += 1
            result.kept_bytes += stored.size
            continue
        result.chunks.append(stored)
    return result
