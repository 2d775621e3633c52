"""Events: one ordered log per run, read from outside with a cursor that survives restarts.

Guarantees: every event of a run (its text and reasoning deltas, its tool calls once
final, their results, approvals waiting, ambiguous receipts, the timeline, people's
decisions, the stop) is one typed, JSON-friendly value of the `RunEventItem` union
(`models`), read in run order, each carrying the `Cursor` (`cursor`) that continues
right after it; a cursor older than what the run's host retains raises
`CursorExpired` naming the oldest cursor still held (`errors`), never a silent skip.
The loop hands its events to the host in one batch per step (`publishing`), deduplicated
by the host, so a retried publish never shows an event twice; a run that does not
forward keeps them in its own history instead (each batch on the next activity's
input), read back in history order, where a cursor never expires.

Not guaranteed: that a text delta appears once per token (one per network read), or
that events are kept forever (the host retains its newest items; the run's snapshot
holds the rest). Pure: nothing here imports temporalio.
"""

from steadyloop.events._cursor import Cursor, format_cursor, parse_cursor
from steadyloop.events._errors import CursorExpired, InvalidCursor
from steadyloop.events._models import (
    EVENTS_TOPIC,
    AmbiguousReceiptEvent,
    ApprovalWaitingEvent,
    DecisionEvent,
    LateResult,
    ReasoningDeltaEvent,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    TimelineEntryEvent,
    ToolCallEvent,
    ToolResultEvent,
    parse_event,
)

__all__ = [
    "EVENTS_TOPIC",
    "AmbiguousReceiptEvent",
    "ApprovalWaitingEvent",
    "Cursor",
    "CursorExpired",
    "DecisionEvent",
    "InvalidCursor",
    "LateResult",
    "ReasoningDeltaEvent",
    "RunEventItem",
    "StopEvent",
    "TextDeltaEvent",
    "TimelineEntryEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "format_cursor",
    "parse_cursor",
    "parse_event",
]
