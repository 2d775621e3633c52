"""The typed events of one run, as a follower reads them (one discriminated union).

Every event is JSON-friendly (it goes over SSE as JSON too) and names its kind in
`type`, so `RunEventItem` decodes any of them. `cursor` is empty as published and
set by the reader to the position right after which `events(after=cursor)` continues.

What a follower can rely on, kind by kind:
- `text_delta` / `reasoning_delta`: the text of one network read of one model attempt
  (`turn`, `attempt`), as forwarded; reasoning of an attempt that was retried is
  superseded by the next attempt's.
- `tool_call`: a call once final (the model's turn is assembled and its arguments
  read): `sha` is the receipt's hash of the canonical arguments, the value a person
  approving the call names; `said` the model's text beside the calls when it was not
  forwarded as deltas.
- `tool_result`: the one answer to that call id; `replayed` says it came from its
  receipt without running again, and `replay_reason` why.
- `approval_waiting` / `ambiguous_receipt`: the run waits for a person about this call
  (an `approval_waiting` read after the run ended says how the call was `decided`);
  an ambiguous receipt carries the call's arguments, how its attempt was lost and, once
  it arrives, the late result (the receipt is published again then).
- `timeline`: what a guarantee did (a replay, a retry, a stall, a breaker, healing),
  numbered (`seq`) across the whole run; the run's timeline is these events of its log.
- `decision`: what a person decided, as the run applied it.
- `stop`: the run's last event: why it stopped, what was shown of an unfinished answer.

Hostile text (a lone surrogate from a tool's output) is replaced, never a failed
publish; long text is cut with `truncated=True`, so one event stays a line, not a log.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from steadyloop._stream.surrogates import rejoin_surrogates

__all__ = [
    "EVENTS_TOPIC",
    "MAX_ARGUMENTS_CHARS",
    "MAX_RESULT_CHARS",
    "MAX_TIMELINE_CHARS",
    "AmbiguousReceiptEvent",
    "ApprovalWaitingEvent",
    "DecisionEvent",
    "DecisionKind",
    "EventKind",
    "EventPhase",
    "LateResult",
    "ReasoningDeltaEvent",
    "RunEventItem",
    "StopEvent",
    "TextDeltaEvent",
    "TimelineEntryEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "bounded",
    "parse_event",
]

# The topic, on the run's output host, of every event that is not a text delta (those
# stay on `steadyloop._output.forwarding.OUTPUT_TOPIC`).
EVENTS_TOPIC = "events"
# The longest tool result text an event carries (the transcript holds all of it).
MAX_RESULT_CHARS = 4_000
# The longest arguments text an event carries.
MAX_ARGUMENTS_CHARS = 16_000
# The longest text of a timeline event: a line a person reads, not a log.
MAX_TIMELINE_CHARS = 240
_CUT_MARK = "..."


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return rejoin_surrogates(value, json_escape=False).replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def bounded(text: str, limit: int) -> tuple[str, bool]:
    """`text` made serializable (lone surrogates replaced) and cut to `limit` characters."""
    text = _clean(text)
    if len(text) <= limit:
        return text, False
    return text[: limit - len(_CUT_MARK)] + _CUT_MARK, True


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cursor: str = ""

    @model_validator(mode="before")
    @classmethod
    def _serializable_text(cls, data: Any) -> Any:
        # Any text field: a lone surrogate or NUL would fail the publish, so replace it.
        if isinstance(data, dict):
            return {key: _clean(value) for key, value in data.items()}
        return data


class TextDeltaEvent(_Event):
    type: Literal["text_delta"] = "text_delta"
    turn: int = Field(ge=0)
    attempt: int = Field(ge=0)
    text: str


class ReasoningDeltaEvent(_Event):
    type: Literal["reasoning_delta"] = "reasoning_delta"
    turn: int = Field(ge=0)
    attempt: int = Field(ge=0)
    text: str


class ToolCallEvent(_Event):
    type: Literal["tool_call"] = "tool_call"
    turn: int = Field(ge=0)
    call_id: str
    name: str
    # The arguments as the model wrote them (JSON text; `{}` for a zero-argument call).
    arguments: str
    arguments_truncated: bool = False
    # The receipt's hash of the canonical arguments; None when they could not be read
    # (the call is answered with the reading error, never run).
    sha: str | None = None
    # What the model said beside its calls when that text was not forwarded as deltas
    # (a `--no-stream` run): on the turn's first call only, None on the others.
    said: str | None = None
    said_truncated: bool = False


class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    turn: int = Field(ge=0)
    call_id: str
    name: str
    # How the call ended: ok, tool_error, invalid_arguments, unknown_tool.
    status: str = "ok"
    text: str
    truncated: bool = False
    replayed: bool = False
    # Why the answer came from its receipt (None when the tool ran).
    replay_reason: str | None = None


class ApprovalWaitingEvent(_Event):
    """The run waits for a person to approve or reject this call (`sha` is what they
    review). `decided` is how the call was decided, when the reader already holds that
    decision (the run's log is read after the run ended: its `decision` event for the
    call is paired with this one): code that approves on this event must skip a call
    whose `decided` is set, as nothing waits for it. None while it waits, or when it
    was never decided (the run ended first); a live follower reads the `decision` event
    for the call (same `turn` and `call_id`) once a person decides."""

    type: Literal["approval_waiting"] = "approval_waiting"
    turn: int = Field(ge=0)
    call_id: str
    tool: str
    sha: str
    decided: Literal["approved", "rejected"] | None = None


class LateResult(BaseModel):
    """What a timed-out attempt's tool returned after its timeout (`LateToolResult`),
    its text bounded; `returned` False when the worker cancelled it before it returned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: str
    text: str
    truncated: bool = False
    returned: bool = True
    overrun_s: float = Field(ge=0, le=1e9, allow_inf_nan=False)


class AmbiguousReceiptEvent(_Event):
    """A call waiting for a person about whether it took effect; published again when
    a late result arrives for it (`late`), so a follower needs no query to say either."""

    type: Literal["ambiguous_receipt"] = "ambiguous_receipt"
    turn: int = Field(ge=0)
    key: str
    tool: str
    attempt: int = Field(ge=0)
    reason: str
    call_ids: list[str] = Field(default_factory=list)
    # The call's arguments (JSON text, bounded like a tool call's).
    arguments: str = "{}"
    arguments_truncated: bool = False
    # How the attempt ended when it timed out; None when not known.
    lost: str | None = None
    late: LateResult | None = None


EventKind = Literal[
    # A tool call answered from its receipt instead of running again.
    "replay",
    # A tool attempt ended without an outcome (timed out, worker lost) and ran again.
    "tool_retry",
    # An opaque tool's attempt ran past its timeout (or went silent): no outcome yet.
    "tool_timeout",
    # A timed-out opaque attempt's tool returned after all; its result is kept.
    "tool_late",
    # A model attempt failed and the route tried again (same endpoint or the next).
    "model_retry",
    # A model attempt failed and the route stopped (no retry).
    "model_failed",
    # A candidate endpoint skipped (breaker open, probe taken) or a failure recorded on
    # an endpoint's breaker.
    "breaker",
    # A usable-looking completion was defective and replaced by a fresh one.
    "defect_retry",
    # A typed run's answer did not match its schema: the model was told why and asked again.
    "output_retry",
    # The transcript was changed before a request so the provider accepts it.
    "healed",
]
EventPhase = Literal["model", "tools"]


class TimelineEntryEvent(_Event):
    """What a guarantee did, where the transcript cannot show it: a call answered from
    its receipt looks like one that ran, a model attempt cut and retried leaves no trace
    there, nor does a healed transcript or a skipped endpoint. `phase`: a `model` event
    explains the turn's model call (said before its text), a `tools` event the answer
    to `call_id` (said with it). `seq` numbers them across the run (continue-as-new
    included)."""

    type: Literal["timeline"] = "timeline"
    seq: int = Field(ge=1)
    turn: int = Field(ge=0)
    phase: EventPhase
    kind: EventKind
    text: str
    call_id: str | None = None


DecisionKind = Literal["approved", "rejected", "resolved", "message_sent", "interrupt"]


class DecisionEvent(_Event):
    """A person's decision as the run applied it (`call_id` or receipt `key` it was about)."""

    type: Literal["decision"] = "decision"
    turn: int = Field(ge=0)
    decision: DecisionKind
    call_id: str | None = None
    key: str | None = None
    detail: str = ""


class StopEvent(_Event):
    """The run's last event. `partial` is the text shown of an answer that did not
    finish (None when there is none); `shown` says a person may have read it."""

    type: Literal["stop"] = "stop"
    turn: int = Field(ge=0)
    reason: str
    final_answer: str | None = None
    partial: str | None = None
    shown: bool = False
    detail: str = ""


RunEventItem = Annotated[
    TextDeltaEvent
    | ReasoningDeltaEvent
    | ToolCallEvent
    | ToolResultEvent
    | ApprovalWaitingEvent
    | AmbiguousReceiptEvent
    | TimelineEntryEvent
    | DecisionEvent
    | StopEvent,
    Field(discriminator="type"),
]

_ADAPTER: TypeAdapter[RunEventItem] = TypeAdapter(RunEventItem)


def parse_event(data: str | bytes | dict[str, Any]) -> RunEventItem:
    """Any event from its JSON text or dict (what an SSE client receives)."""
    if isinstance(data, dict):
        return _ADAPTER.validate_python(data)
    return _ADAPTER.validate_json(data)
