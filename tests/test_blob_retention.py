"""The rules of `steadyloop blobs gc` as pure functions (issue 27 §3): which manifests,
owner records and chunks a collection may delete, given what the store and Temporal say.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from steadyloop.history.blob_retention import (
    OwnerRecord,
    RunState,
    StoredObject,
    manifest_chunks,
    owner_id,
    plan,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
RETENTION = 7 * DAY
GRACE = HOUR


def key(name: str) -> str:
    return (name * 64)[:64]


def obj(name: str, age: timedelta, size: int = 100) -> StoredObject:
    return StoredObject(key(name), size, NOW - age)


def owner(run: str, manifest: str, age: timedelta = 10 * DAY) -> OwnerRecord:
    o = owner_id("default", run)
    return OwnerRecord(f"owners/{o}/{key(manifest)}", o, key(manifest), NOW - age, "default", run)


def closed(ago: timedelta) -> RunState:
    return RunState("closed", closed_at=NOW - ago)


def collect(
    objects: list[StoredObject],
    manifests: dict[str, list[str]],
    owners: list[OwnerRecord],
    states: dict[str, RunState],
    **kwargs: bool,
) -> tuple[set[str], set[str], set[str]]:
    decided = plan(
        objects,
        {key(m): [key(c) for c in cs] for m, cs in manifests.items()},
        owners,
        {owner_id("default", run): s for run, s in states.items()},
        now=NOW,
        retention=RETENTION,
        grace=GRACE,
        **kwargs,
    )
    return (
        {o.key[0] for o in decided.manifests},
        {o.key[0] for o in decided.chunks},
        {r.workflow_id for r in decided.owner_records},
    )


# Two manifests: m (run "old") names chunks a, b; n (run "new") names b, c.
OBJECTS = [obj("m", 10 * DAY), obj("n", 10 * DAY)] + [obj(c, 10 * DAY) for c in "abc"]
MANIFESTS = {"m": ["a", "b"], "n": ["b", "c"]}
OWNERS = [owner("old", "m"), owner("new", "n")]


def test_a_run_closed_past_retention_loses_its_manifest_and_the_chunks_only_it_names() -> None:
    states = {"old": closed(8 * DAY), "new": closed(1 * DAY)}
    assert collect(OBJECTS, MANIFESTS, OWNERS, states) == ({"m"}, {"a"}, {"old"})


def test_an_open_run_keeps_everything_it_names_however_old() -> None:
    states = {"old": RunState("open"), "new": closed(30 * DAY)}
    assert collect(OBJECTS, MANIFESTS, OWNERS, states) == ({"n"}, {"c"}, {"new"})


def test_a_manifest_two_runs_stored_stays_while_either_is_retained() -> None:
    owners = [owner("old", "m"), owner("new", "m"), owner("new", "n")]
    states = {"old": closed(30 * DAY), "new": RunState("open")}
    assert collect(OBJECTS, MANIFESTS, owners, states) == (set(), set(), set())


def test_nothing_younger_than_the_grace_period_goes_whatever_temporal_says() -> None:
    # The client stored a start's input a minute ago; the start has not reached Temporal.
    young_owner = [owner("starting", "m", age=timedelta(minutes=1)), owner("new", "n")]
    states = {"new": closed(30 * DAY)}
    assert collect(OBJECTS, MANIFESTS, young_owner, states, forget_unknown=True) == (
        {"n"},
        {"c"},
        {"new"},
    )
    # A chunk nobody names yet, written a minute ago: a writer's manifest is coming.
    fresh = [*OBJECTS, obj("d", timedelta(minutes=1))]
    kept = collect(fresh, MANIFESTS, OWNERS, {"old": RunState("open"), "new": RunState("open")})
    assert kept == (set(), set(), set())
    # The same chunk an hour and a minute later is garbage.
    stale = [*OBJECTS, obj("d", GRACE + timedelta(minutes=1))]
    opened = {"old": RunState("open"), "new": RunState("open")}
    assert collect(stale, MANIFESTS, OWNERS, opened) == (set(), {"d"}, set())


def test_a_run_temporal_does_not_know_is_kept_unless_asked_to_forget_it() -> None:
    states = {"new": RunState("open")}  # "old" unknown: wrong namespace, or removed
    assert collect(OBJECTS, MANIFESTS, OWNERS, states) == (set(), set(), set())
    assert collect(OBJECTS, MANIFESTS, OWNERS, states, forget_unknown=True) == (
        {"m"},
        {"a"},
        {"old"},
    )


def test_a_manifest_with_no_owner_record_is_kept_with_its_chunks() -> None:
    owners = [owner("new", "n")]  # m was written before owner records existed
    assert collect(OBJECTS, MANIFESTS, owners, {"new": closed(30 * DAY)}) == (
        {"n"},
        {"c"},
        {"new"},
    )


def test_a_collection_cut_short_is_finished_by_the_next() -> None:
    # m was deleted; its owner record and chunk a were not.
    objects = [o for o in OBJECTS if o.key != key("m")]
    manifests = {"n": ["b", "c"]}
    states = {"old": closed(30 * DAY), "new": RunState("open")}
    assert collect(objects, manifests, OWNERS, states) == (set(), {"a"}, {"old"})


def test_retention_counts_from_the_close_and_a_negative_period_is_refused() -> None:
    states = {"old": closed(6 * DAY), "new": RunState("open")}
    assert collect(OBJECTS, MANIFESTS, OWNERS, states) == (set(), set(), set())
    with pytest.raises(ValueError, match="must not be negative"):
        plan([], {}, [], {}, now=NOW, retention=-DAY, grace=GRACE)


def test_the_reclaimed_bytes_are_what_the_deleted_objects_hold() -> None:
    objects = [obj("m", 10 * DAY, 300), obj("a", 10 * DAY, 16_384), obj("b", 10 * DAY, 5)]
    decided = plan(
        objects,
        {key("m"): [key("a"), key("b")]},
        [owner("old", "m")],
        {owner_id("default", "old"): closed(30 * DAY)},
        now=NOW,
        retention=RETENTION,
        grace=GRACE,
    )
    assert decided.reclaimed_bytes == 300 + 16_384 + 5
    assert decided.expired_runs == ["old"]


def test_only_a_well_formed_manifest_is_read_as_one() -> None:
    good = b'{"v":1,"head":"","size":3,"chunks":["' + key("a").encode() + b'"]}'
    assert manifest_chunks(good) == [key("a")]
    for chunk in (b"", b"\x00\xff", b'{"v":1,"chunks":["nope"]}', b'{"v":', b"[1]", good[1:]):
        assert manifest_chunks(chunk) is None


def test_a_reused_workflow_id_being_started_again_keeps_its_blobs_within_the_grace() -> None:
    # "old" closed a month ago; a client is starting a new run under the same id and has
    # just stored (freshened) its input: Temporal still describes the closed run.
    owners = [owner("old", "m", age=timedelta(minutes=1)), owner("new", "n")]
    states = {"old": closed(30 * DAY), "new": RunState("open")}
    assert collect(OBJECTS, MANIFESTS, owners, states) == (set(), set(), set())
