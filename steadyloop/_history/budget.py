"""When a run hands over to a fresh execution (continue-as-new), decided from plain numbers.

Pure, no Temporal import: the workflow reads the numbers (`workflow.info()`'s history
length and size, its own count of updates, the turns of this execution) and asks here.
Temporal terminates an execution at 50 MB or 51,200 events and refuses more than 2,000
updates; its own suggestion (`is_continue_as_new_suggested`) depends on server settings
a run cannot see. So a run also hands over at its own thresholds (`RunLimits`), well
below the server's, and the reason is counted in the run's stats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Temporal refuses payloads over 2 MB; leave room for the envelope around one. Here rather
# than beside the blob store so pure code (tool payloads, the run's vocabulary) can read it
# without importing Temporal.
MAX_INLINE_PAYLOAD_BYTES = 1_900_000

ContinueAsNewReason = Literal["suggested", "turns", "events", "bytes", "updates"]


@dataclass(frozen=True)
class HistoryReading:
    """The execution so far: turns taken in it, history events and bytes, updates handled."""

    turns: int
    events: int
    bytes: int
    updates: int
    suggested: bool


@dataclass(frozen=True)
class HistoryThresholds:
    """Hand over at or past any of these (None: that bound is off)."""

    turns: int | None = None
    events: int | None = None
    bytes: int | None = None
    updates: int | None = None


def continue_as_new_reason(
    reading: HistoryReading, thresholds: HistoryThresholds
) -> ContinueAsNewReason | None:
    """Why this execution should hand over now, or None to keep going.

    Never before the execution's first turn: a run that handed over at once, every time,
    would make no progress (a carried state alone can be past a threshold).
    """
    if reading.turns == 0:
        return None
    if reading.suggested:
        return "suggested"
    checks: tuple[tuple[ContinueAsNewReason, int, int | None], ...] = (
        ("turns", reading.turns, thresholds.turns),
        ("events", reading.events, thresholds.events),
        ("bytes", reading.bytes, thresholds.bytes),
        ("updates", reading.updates, thresholds.updates),
    )
    for reason, value, bound in checks:
        if bound is not None and value >= bound:
            return reason
    return None
