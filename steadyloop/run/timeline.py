"""The run's timeline: what the guarantees did, in the order they did it, for a person to read.

The transcript says what the model asked and what each call answered; it does not say
*how* an answer came about. A call answered from its receipt looks like a call that ran;
a model attempt that was cut and retried leaves no trace in the transcript; a healed
transcript, a breaker that skipped an endpoint, a stalled stream are invisible. The
workflow appends one `RunEvent` for each of these as it happens (workflow state only:
no activity, no timer, so recording changes no command and histories still replay),
the `timeline` query reads them while the run goes on, and `RunResult.timeline` keeps
them for `steadyloop show` once it has ended.

Ordering: a `model` event names the transcript position its turn's assistant message
will take (`at`: the transcript's length when it happened), and a `tools` event the tool
call id whose answer it explains, so a reader places each in the transcript's order
(before that message; with that answer) whatever order it learns of them in. `seq`
counts every event of the run (across continue-as-new), so a follower reads only what
is new (`after`), and the bound on what is kept (`MAX_EVENTS`, oldest dropped) never
renumbers anything.

Pure and deterministic: imported by workflow code and by the CLI.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["MAX_EVENTS", "EventKind", "EventPhase", "RunEvent", "Timeline"]

# Events kept (the newest): they travel in every continue-as-new input and the result,
# so at most about 100 KB (a run whose state nears the payload limit drops them first).
MAX_EVENTS = 150
# Longest text of one event: a line a person reads, not a log.
MAX_TEXT_CHARS = 240

EventKind = Literal[
    # A tool call answered from its receipt instead of running again.
    "replay",
    # A tool attempt ended without an outcome (timed out, worker lost) and ran again.
    "tool_retry",
    # A model attempt failed and the route tried again (same endpoint or the next).
    "model_retry",
    # A model attempt failed and the route stopped (no retry).
    "model_failed",
    # A candidate endpoint skipped (breaker open, probe taken) or a failure recorded on
    # an endpoint's breaker.
    "breaker",
    # A usable-looking completion was defective and replaced by a fresh one.
    "defect_retry",
    # The transcript was changed before a request so the provider accepts it.
    "healed",
    # A person decided a call: approved or rejected it, or resolved an ambiguous one
    # (it happened, it did not, or it is given up).
    "decision",
]
EventPhase = Literal["model", "tools"]


class RunEvent(BaseModel):
    """One thing a guarantee did. `phase`: `model` events explain the turn's model call
    (shown before its text), `tools` events explain the answer to `call_id`."""

    seq: int = Field(ge=1)
    turn: int = Field(ge=0)
    at: int = Field(default=0, ge=0)
    phase: EventPhase
    kind: EventKind
    text: str
    call_id: str | None = None


class Timeline(BaseModel):
    """The run's events, newest `MAX_EVENTS` kept; `count` is every event ever added."""

    events: list[RunEvent] = Field(default_factory=list)
    count: int = 0

    def add(
        self,
        turn: int,
        phase: EventPhase,
        kind: EventKind,
        text: str,
        *,
        at: int,
        call_id: str | None = None,
    ) -> RunEvent:
        self.count += 1
        if len(text) > MAX_TEXT_CHARS:
            text = text[: MAX_TEXT_CHARS - 3] + "..."
        event = RunEvent(
            seq=self.count, turn=turn, at=at, phase=phase, kind=kind, text=text, call_id=call_id
        )
        self.events.append(event)
        if len(self.events) > MAX_EVENTS:
            del self.events[: len(self.events) - MAX_EVENTS]
        return event

    def after(self, seq: int) -> list[RunEvent]:
        """Events numbered above `seq`, oldest first."""
        return [event for event in self.events if event.seq > seq]
