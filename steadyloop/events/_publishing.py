"""What the loop hands to the activity that publishes its events: one batch per step.

The loop gathers its events in workflow state and publishes them at a few points of a
turn (its tool calls once read, an approval or a receipt about to wait, the batch's
answers, the stop, before continuing-as-new), one local activity each: the loop's
history grows by one marker per publish, whatever the batch holds (a local
activity's input is not recorded). Each batch is one signal to the host with the
publisher id of the loop's execution and a sequence counted by it, so a publish retried
(the local activity again, a workflow task replayed) is dropped by the host as a
duplicate, and batches land in the order the loop made them.

A run that does not forward its output keeps its log in its own history instead
(`log_in_history`): no host, no signal. A step's batch rides on the command that
follows it anyway: the next model or tool activity's input, as its second payload
(`args=[request, events]`, which history records and the activity ignores), or the
run's result for the stop (`LOG_EVENTS_FIELD`); only a step with no such command (an
approval or receipt about to wait, before continuing-as-new, a pause) records it with
`RECORD_RUN_EVENTS_ACTIVITY`, a local activity that returns its input, so the marker
holds the batch. Followers read the history (`steadyloop.client._event_log`): a history
read is no billed action, and history is whole, so a cursor there never expires.

Why a payload of its own and not a field of the input: with external payload storage
a model request (the whole transcript) is a reference in history, so a follower would
fetch every request from the blob store to read the few events on it; the batch alone
is small, under the storage's threshold, so it stays inline and the follower reads no
blob for it (a batch over the threshold is stored, and fetched alone).

The SDK decodes an activity's input with the definition's type hints only when the
payload count matches its parameters (temporalio 1.35, checked here): the activities
take an optional second parameter, and a one-payload input (a local activity, a run
that forwards, a task scheduled by an earlier version) then arrives as plain JSON
values, which `activity_input` reads as the model.

A worker of an earlier version given a two-payload task fails that attempt before it
runs (`TypeError: stream_completion() takes 2 positional arguments but 3 were given`,
seen with temporalio 1.35): while old and new workers poll one task queue, a run that
keeps its log in history may see a model attempt fail (read as `lost`, which its route
retries) or a tool call answered as failed. Replace the workers at once (the old ones
stopped before the new start), or start the new version on a task queue of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, Field

from steadyloop._output.forwarding import HOST_IDLE_CLOSE_S
from steadyloop.events._models import RunEventItem

if TYPE_CHECKING:
    from steadyloop._run.models import RunInput

__all__ = [
    "LOG_EVENTS_FIELD",
    "LOG_MODE_MEMO",
    "PUBLISH_RUN_EVENTS_ACTIVITY",
    "RECORD_RUN_EVENTS_ACTIVITY",
    "LogMode",
    "PublishRunEvents",
    "RecordRunEvents",
    "activity_input",
    "log_in_history",
    "log_mode_memo",
    "log_mode_of_input",
    "publisher_id",
]

M = TypeVar("M", bound=BaseModel)

PUBLISH_RUN_EVENTS_ACTIVITY = "steadyloop.publish_run_events"
RECORD_RUN_EVENTS_ACTIVITY = "steadyloop.record_run_events"
# The memo key, set by whoever starts a run, naming where its log is (`log_mode_memo`).
LOG_MODE_MEMO = "steadyloop.event_log"
# Where a run keeps its event log: its own history, or its output host.
LogMode = Literal["history", "host"]
# The field of the run's result that carries the last events (the stop among them).
LOG_EVENTS_FIELD = "log_events"


def log_in_history(forwarding: bool, continued: bool | None = None) -> bool:
    """Where a run keeps its log, decided once from its input: in its own history unless
    it forwards its output (then beside the output, on the host). `continued`: what the
    execution before this one decided (None: this is the run's first), kept as it is, so
    the log never moves mid-run. The loop (`EventLog.begin`), the starters' memo and a
    follower reading a run's input all ask this one rule, so they cannot disagree."""
    return continued if continued is not None else not forwarding


def log_mode_memo(run: RunInput) -> dict[str, Any]:
    """The memo every start of the loop sets (merged into its own memo, if any): where
    the run keeps its log, so a follower learns it from the run's start event.

    A memo, not a patch marker or a command of the run's first task: a memo is part of
    the start request (no billed action, nothing in workflow code to keep on replay),
    and the start event holds it inline beside the input, however large the input is."""
    carried = run.carried
    continued = None if carried is None else carried.log_in_history
    mode: LogMode = "history" if log_in_history(run.forwarding.enabled, continued) else "host"
    return {LOG_MODE_MEMO: mode}


def log_mode_of_input(value: Any) -> bool:
    """Whether the run whose input (`RunInput`, as decoded plain JSON values) is `value`
    keeps its log in history: for a run started without `log_mode_memo` (by a client of
    its own), read by the same rule as the loop reads it. Read without validating the
    whole input, so a field of another version does not hide the two it needs."""
    if not isinstance(value, dict):
        return False
    carried = value.get("carried")
    continued = carried.get("log_in_history") if isinstance(carried, dict) else None
    forwarding = value.get("forwarding")
    enabled = isinstance(forwarding, dict) and bool(forwarding.get("enabled", False))
    return log_in_history(enabled, None if continued is None else bool(continued))


def activity_input(model: type[M], value: M | object) -> M:
    """An activity's first argument as `model`: decoded without type hints (plain JSON
    values) when the input had fewer payloads than the activity has parameters."""
    return value if isinstance(value, model) else model.model_validate(value)


def publisher_id(execution_run_id: str) -> str:
    """The host's dedup key for one loop execution (its sequence starts at 1 in each)."""
    return f"loop:{execution_run_id}"


class PublishRunEvents(BaseModel):
    """One batch of the loop's events for its output host (a local activity's input)."""

    stream_id: str
    task_queue: str
    host_max_events: int = Field(default=2_000, ge=50)
    host_idle_close_s: float = Field(default=HOST_IDLE_CLOSE_S, gt=0)
    publisher_id: str
    sequence: int = Field(ge=1)
    events: list[RunEventItem]


class RecordRunEvents(BaseModel):
    """One batch of the loop's events recorded in its history: the local activity
    returns it, and the marker holding that result is what followers read."""

    events: list[RunEventItem]
