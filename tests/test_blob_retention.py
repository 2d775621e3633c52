"""The rules of `steadyloop blobs gc` as pure functions: which manifests,
owner records and chunks a collection may delete, given what the store and Temporal say.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from steadyloop._history.blob_retention import (
    Manifest,
    RunState,
    StoredObject,
    plan,
    read_manifest,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
RETENTION = 7 * DAY
GRACE = HOUR


def key(name: str) -> str:
    """`m`, `n`: manifests; other letters: chunks."""
    prefix = "manifests/" if name in "mnop" else "chunks/"
    return prefix + (name * 64)[:64]


def obj(name: str, age: timedelta, size: int = 100) -> StoredObject:
    return StoredObject(key(name), size, NOW - age)


def closed(ago: timedelta) -> RunState:
    return RunState("closed", closed_at=NOW - ago)


def collect(
    objects: list[StoredObject],
    manifests: dict[str, tuple[str | None, list[str]]],
    states: dict[str, RunState],
    **kwargs: bool,
) -> tuple[set[str], set[str], list[str]]:
    """(manifests deleted, chunks deleted, expired runs), by letter and id."""
    decided = plan(
        objects,
        {key(m): Manifest([key(c) for c in cs], owner) for m, (owner, cs) in manifests.items()},
        states,
        now=NOW,
        retention=RETENTION,
        grace=GRACE,
        **kwargs,
    )
    return (
        {o.key.split("/")[1][0] for o in decided.manifests},
        {o.key.split("/")[1][0] for o in decided.chunks},
        decided.expired_runs,
    )


# Two manifests: m (run "old") names chunks a, b; n (run "new") names b, c.
OBJECTS = [obj("m", 10 * DAY), obj("n", 10 * DAY)] + [obj(c, 10 * DAY) for c in "abc"]
MANIFESTS: dict[str, tuple[str | None, list[str]]] = {
    "m": ("old", ["a", "b"]),
    "n": ("new", ["b", "c"]),
}


def test_a_run_closed_past_retention_loses_its_manifest_and_the_chunks_only_it_names() -> None:
    states = {"old": closed(8 * DAY), "new": closed(1 * DAY)}
    assert collect(OBJECTS, MANIFESTS, states) == ({"m"}, {"a"}, ["old"])


def test_an_open_run_keeps_everything_it_names_however_old() -> None:
    states = {"old": RunState("open"), "new": closed(30 * DAY)}
    assert collect(OBJECTS, MANIFESTS, states) == ({"n"}, {"c"}, ["new"])


def test_a_chunk_two_runs_share_stays_while_either_is_retained() -> None:
    states = {"old": closed(30 * DAY), "new": RunState("open")}
    # b is named by both: it stays, and so does everything of the open run.
    assert collect(OBJECTS, MANIFESTS, states) == ({"m"}, {"a"}, ["old"])


def test_nothing_younger_than_the_grace_period_goes_whatever_temporal_says() -> None:
    # A client stored a start's input a minute ago; the start has not reached Temporal.
    young = [obj("m", timedelta(minutes=1)), *OBJECTS[1:]]
    states = {"new": closed(30 * DAY)}
    assert collect(young, MANIFESTS, states, forget_unknown=True) == ({"n"}, {"c"}, ["new"])
    # A chunk nobody names yet, written a minute ago: a writer's manifest is coming.
    opened = {"old": RunState("open"), "new": RunState("open")}
    fresh = [*OBJECTS, obj("d", timedelta(minutes=1))]
    assert collect(fresh, MANIFESTS, opened) == (set(), set(), [])
    # The same chunk an hour and a minute later is garbage.
    stale = [*OBJECTS, obj("d", GRACE + timedelta(minutes=1))]
    assert collect(stale, MANIFESTS, opened) == (set(), {"d"}, [])


def test_a_run_temporal_does_not_know_is_kept_unless_asked_to_forget_it() -> None:
    states = {"new": RunState("open")}  # "old" unknown: wrong namespace, or removed
    assert collect(OBJECTS, MANIFESTS, states) == (set(), set(), [])
    assert collect(OBJECTS, MANIFESTS, states, forget_unknown=True) == ({"m"}, {"a"}, ["old"])


def test_a_manifest_that_names_no_workflow_is_kept_with_its_chunks() -> None:
    # m was stored for no workflow (no workflow id).
    manifests = {**MANIFESTS, "m": (None, ["a", "b"])}
    assert collect(OBJECTS, manifests, {"new": closed(30 * DAY)}) == ({"n"}, {"c"}, ["new"])


def test_a_collection_cut_short_is_finished_by_the_next() -> None:
    # m was deleted; chunk a was not.
    objects = [o for o in OBJECTS if o.key != key("m")]
    manifests = {"n": MANIFESTS["n"]}
    assert collect(objects, manifests, {"new": RunState("open")}) == (set(), {"a"}, [])


def test_retention_counts_from_the_close_and_a_negative_period_is_refused() -> None:
    states = {"old": closed(6 * DAY), "new": RunState("open")}
    assert collect(OBJECTS, MANIFESTS, states) == (set(), set(), [])
    with pytest.raises(ValueError, match="must not be negative"):
        plan([], {}, {}, now=NOW, retention=-DAY, grace=GRACE)


def test_the_reclaimed_bytes_are_what_the_deleted_objects_hold() -> None:
    objects = [obj("m", 10 * DAY, 300), obj("a", 10 * DAY, 16_384), obj("b", 10 * DAY, 5)]
    decided = plan(
        objects,
        {key("m"): Manifest([key("a"), key("b")], "old")},
        {"old": closed(30 * DAY)},
        now=NOW,
        retention=RETENTION,
        grace=GRACE,
    )
    assert decided.reclaimed_bytes == 300 + 16_384 + 5
    assert decided.expired_runs == ["old"]


def test_only_a_well_formed_manifest_is_read_as_one() -> None:
    name = "a" * 64
    good = b'{"v":1,"head":"","size":3,"chunks":["' + name.encode() + b'"],"workflow_id":"w/1"}'
    assert read_manifest(good) == Manifest(["chunks/" + name], "w/1")
    unowned = b'{"v":1,"head":"","size":3,"chunks":["' + name.encode() + b'"]}'
    assert read_manifest(unowned) == Manifest(["chunks/" + name], None)
    for chunk in (b"", b"\x00\xff", b'{"v":1,"chunks":["nope"]}', b'{"v":', b"[1]", good[1:]):
        assert read_manifest(chunk) is None


def test_a_reused_workflow_id_being_started_again_keeps_its_blobs_within_the_grace() -> None:
    # "old" closed a month ago; a client is starting a new run under the same id and has
    # just stored its input: Temporal still describes the closed run.
    objects = [*OBJECTS, obj("o", timedelta(minutes=1)), obj("e", timedelta(minutes=1))]
    manifests = {**MANIFESTS, "o": ("old", ["e", "a"])}
    states = {"old": closed(30 * DAY), "new": RunState("open")}
    assert collect(objects, manifests, states) == ({"m"}, set(), ["old"])
