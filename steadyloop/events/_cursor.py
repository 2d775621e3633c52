"""The cursor of a run's event log: `(epoch, offset)`, written as one opaque string.

`offset` is the item's position on the run's output host, global across the host's
continue-as-new *and* across a restart after an idle close: whoever starts the host
again carries the ended host's retained log forward, so offsets go on where they
stopped. `epoch` changes only when that was impossible (the ended host left no result:
terminated, failed), so its offsets started over: a cursor of an older epoch names
items that are gone, and the reader says so (`CursorExpired`) instead of reading the
new epoch's offset 0 as if it followed.

The text form `EEEEEE-OOOOOOOOOOOO` (decimal, zero-padded) is safe as an SSE `id:` (no
colon, space or line break) and sorts as the cursors do while epoch < 10^6 and offset
< 10^12; compare parsed cursors when in doubt. Parsing refuses anything else with the
value it was given, so a garbled `Last-Event-ID` is an error, never offset 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from steadyloop.events._errors import InvalidCursor

__all__ = ["MAX_CURSOR_CHARS", "Cursor", "format_cursor", "parse_cursor"]

MAX_CURSOR_CHARS = 64
_CURSOR = re.compile(r"(\d{6,18})-(\d{12,18})")


@dataclass(frozen=True, order=True)
class Cursor:
    """A position in a run's event log: the item at `offset` of host epoch `epoch`."""

    epoch: int
    offset: int

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.offset < 0:
            raise InvalidCursor(f"{self.epoch}-{self.offset}", "epoch and offset are >= 0")

    def __str__(self) -> str:
        return format_cursor(self)


def format_cursor(cursor: Cursor) -> str:
    """The cursor's opaque text (what an event's `cursor` field and SSE `id:` carry)."""
    return f"{cursor.epoch:06d}-{cursor.offset:012d}"


def parse_cursor(text: str) -> Cursor:
    """The cursor `text` names; `InvalidCursor` (naming the value) for anything else."""
    if not isinstance(text, str):
        raise InvalidCursor(repr(text), "a cursor is a string")
    shown = text if len(text) <= MAX_CURSOR_CHARS else text[:MAX_CURSOR_CHARS] + "..."
    match = _CURSOR.fullmatch(text)
    if match is None:
        raise InvalidCursor(
            shown, "expected EPOCH-OFFSET, 6 and 12 to 18 digits (an event's `cursor`)"
        )
    return Cursor(epoch=int(match.group(1)), offset=int(match.group(2)))
