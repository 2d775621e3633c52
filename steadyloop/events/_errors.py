"""The typed errors of reading a run's event log, in one module so raiser and handler agree."""

from __future__ import annotations

from steadyloop.errors import SteadyloopError

__all__ = ["CursorExpired", "InvalidCursor"]


class InvalidCursor(SteadyloopError, ValueError):
    """A cursor that is not one this library wrote (garbled, truncated, hostile)."""

    def __init__(self, value: str, reason: str) -> None:
        super().__init__(f"invalid event cursor {value!r}: {reason}")
        self.value = value
        self.reason = reason


class CursorExpired(SteadyloopError):
    """The events right after `cursor` are no longer held by the run's output host.

    Reading on would skip them silently, so the reader stops here. `oldest` is the
    cursor of the oldest event still held (None when the host holds nothing of the run
    any more). The way on is the run's snapshot (transcript, progress, approvals, the
    stop), which carries its own current cursor: follow `after=` that cursor.
    """

    def __init__(self, cursor: str | None, oldest: str | None, detail: str = "") -> None:
        after = "the start of the run" if cursor is None else f"cursor {cursor}"
        held = (
            f"the oldest event still held is at cursor {oldest}"
            if oldest is not None
            else "no event of the run is held any more"
        )
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"events after {after} are no longer retained{why}; {held}: read the run's "
            "snapshot instead, then follow after the snapshot's cursor"
        )
        self.cursor = cursor
        self.oldest = oldest
        self.detail = detail
