"""The conftest guard that fails a test writing into the user's `~/.steadyloop`: what it
compares must change for each way a test writes there (a blob, a note appended, a file
removed), or the guard passes a test that wrote."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import home_fingerprint


def test_every_way_of_writing_into_the_home_changes_its_fingerprint(tmp_path: Path) -> None:
    home = tmp_path / ".steadyloop"
    assert home_fingerprint(home) == {}  # absent: nothing to compare, nothing written
    (home / "blobs" / "ab").mkdir(parents=True)
    (home / "outbox").mkdir()
    notes = home / "outbox" / "notes.txt"
    notes.write_text("one\n")
    seen = [home_fingerprint(home)]

    def written(change: object) -> None:
        after = home_fingerprint(home)
        assert after != seen[-1], change
        seen.append(after)

    # A blob: blobs/<2 hex>/<sha256>, three levels down (its directory changes).
    (home / "blobs" / "ab" / ("ab" + "0" * 62)).write_bytes(b"x")
    written("a blob stored")
    with notes.open("a") as appended:
        appended.write("two\n")
    os.utime(notes, ns=(0, 0))  # the size alone tells, whatever the clock's resolution
    written("a note appended")
    notes.unlink()
    written("a file removed")
    (home / "blobs" / "cd").mkdir()
    written("a blob directory made")
    assert home_fingerprint(home) == seen[-1]  # and reading changes nothing
