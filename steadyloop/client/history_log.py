"""Reading the event log of a run that keeps it in its own history (`HISTORY_LOG_PATCH`).

Such a run publishes by recording: a step's batch rides on the input of the next model
or tool activity it schedules (`LOG_EVENTS_FIELD`), the last one (the stop) on the run's
result, and a step with no such command is one `RECORD_RUN_EVENTS_ACTIVITY` marker.
The log is the run's history chain (first execution, then each continue-as-new) read in
order, so an event's position in it is
its cursor (`Cursor(0, index)`), and a cursor never expires while the history is kept.
A history read is no billed action: following costs no query and no update per poll.

What the obvious reader gets wrong, and what this one does instead:
- Asking which log a run keeps by its input: a run that forwards its output, and every
  run recorded before, keep theirs on the host. The patch's marker in the run's first
  workflow task decides (`keeps_log_in_history`), read once that task has completed.
- Decoding every activity input: the model's carries the transcript. Only an input
  whose payload names the field is parsed, or one that is not JSON as it stands (a
  codec's, or a reference to external payload storage): that is decoded by the client's
  data converter, so a follower needs the same codec and store as the worker, and
  fetches a stored model request to read the events riding on it.
- A payload that does not read as events (another version's, a codec's failure) is
  skipped, the same way on every read, so cursors stay consistent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client
from temporalio.service import RPCError

from steadyloop.events.cursor import Cursor, format_cursor
from steadyloop.events.models import RunEventItem, StopEvent, parse_event
from steadyloop.events.publishing import (
    HISTORY_LOG_PATCH,
    LOG_EVENTS_FIELD,
    RECORD_RUN_EVENTS_ACTIVITY,
)

__all__ = ["history_events", "history_latest_cursor", "keeps_log_in_history"]

logger = logging.getLogger(__name__)

_FIELD = f'"{LOG_EVENTS_FIELD}":'.encode()
_LOCAL_ACTIVITY_MARKER = "core_local_activity"
_PATCH_MARKER = "core_patch"
# Failed history reads in a row before reading gives up.
MAX_READ_FAILURES = 10
# The longest pause between two reads of a run's history while nothing new comes.
MAX_IDLE_POLL_S = 1.0
_CLOSED = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)


async def keeps_log_in_history(
    client: Client,
    workflow_id: str,
    run_id: str,
    *,
    over: Callable[[], Awaitable[bool]],
    poll_s: float,
) -> bool:
    """Whether the run keeps its log in history: its first workflow task asked the patch.
    Waits for that task to complete; a run over before it did has no such log."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    while True:
        completed = False
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                if completed:
                    break  # past the first task: its markers were all before this
                completed = True
            elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and _is_patch(event):
                return True
        if completed:
            return False
        if await over():
            return False
        await asyncio.sleep(poll_s)


async def history_events(
    client: Client,
    workflow_id: str,
    run_id: str,
    after: Cursor | None,
    *,
    poll_s: float | None,
) -> AsyncGenerator[RunEventItem, None]:
    """The run's events after `after`, read from its history chain in order; ends after
    the `stop` event, or when the chain ends (`poll_s=None`: with what is there now)."""
    next_index = 0 if after is None else after.offset + 1
    failures = 0
    while True:
        index = 0
        try:
            async for event in _chain_events(client, workflow_id, run_id, poll_s):
                if index >= next_index:
                    stamped = event.model_copy(update={"cursor": format_cursor(Cursor(0, index))})
                    next_index = index + 1
                    failures = 0
                    yield stamped
                    if isinstance(stamped, StopEvent):
                        return
                index += 1
            return
        except RPCError as error:
            failures += 1
            if failures >= MAX_READ_FAILURES:
                raise
            logger.info("history read failed (reading again from %d): %s", next_index, error)
            await asyncio.sleep(min(0.1 * 2**failures, 5.0))


async def history_latest_cursor(client: Client, workflow_id: str, run_id: str) -> str | None:
    """The cursor of the newest event the run's history holds (None: none yet)."""
    last: str | None = None
    async for event in history_events(client, workflow_id, run_id, None, poll_s=None):
        last = event.cursor
    return last


async def _chain_events(
    client: Client, workflow_id: str, run_id: str, poll_s: float | None
) -> AsyncGenerator[RunEventItem, None]:
    """Every event the chain from execution `run_id` records, in order."""
    execution: str | None = run_id
    while execution is not None:
        events = _execution_events(client, workflow_id, execution, poll_s)
        execution = None
        async for event in events:
            payload, field = _carrier(event)
            if payload is not None:
                value: Any = None
                if not _plain(payload):  # a codec's, or a reference to external storage
                    # Not skipped when it fails: a batch left out would move every
                    # cursor after it; the follower fails loudly instead.
                    value = (await client.data_converter.decode([payload]))[0]
                for item in _events(payload, field, value):
                    yield item
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                attributes = event.workflow_execution_continued_as_new_event_attributes
                execution = attributes.new_execution_run_id


async def _execution_events(
    client: Client, workflow_id: str, run_id: str, poll_s: float | None
) -> AsyncGenerator[HistoryEvent, None]:
    """One execution's history events in order, each once; with `poll_s`, read again
    every `poll_s` until its close event.

    Not a long poll: on the dev server checked here (Server 1.32) a history long poll
    without a page token answered only at the close, and a read that is not one ends
    with no token while the run goes on. So each read takes the history from its start
    and skips the events already yielded, by id (no billed action, a history read);
    while nothing new comes the pause doubles, up to `MAX_IDLE_POLL_S`."""
    execution = WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
    last_id = 0
    pause = poll_s
    while True:
        token = b""
        seen = last_id
        while True:
            response = await client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace=client.namespace, execution=execution, next_page_token=token
                ),
                retry=True,
            )
            for event in response.history.events:
                if event.event_id <= last_id:
                    continue
                last_id = event.event_id
                yield event
                if event.event_type in _CLOSED:
                    return
            token = response.next_page_token
            if not token:
                break
        if poll_s is None or pause is None:
            return
        # Each read takes the whole history: a quiet run is read less often, up to once
        # a second, and as often as asked again once something came.
        pause = poll_s if last_id > seen else min(2 * pause, max(poll_s, MAX_IDLE_POLL_S))
        await asyncio.sleep(pause)


def _carrier(event: HistoryEvent) -> tuple[Payload | None, str]:
    """The payload of `event` that may carry events, and the field holding them."""
    payloads: Sequence[Payload] = ()
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        payloads = event.activity_task_scheduled_event_attributes.input.payloads
    elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        payloads = event.workflow_execution_completed_event_attributes.result.payloads
    if payloads:
        if _FIELD in payloads[0].data or not _plain(payloads[0]):
            return payloads[0], LOG_EVENTS_FIELD
    elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
        marker = event.marker_recorded_event_attributes
        if marker.marker_name != _LOCAL_ACTIVITY_MARKER or "result" not in marker.details:
            return None, ""
        data = marker.details["data"].payloads if "data" in marker.details else []
        if data and RECORD_RUN_EVENTS_ACTIVITY.encode() in data[0].data:
            result = marker.details["result"].payloads
            if result:
                return result[0], "events"
    return None, ""


def _plain(payload: Payload) -> bool:
    """Whether `payload` is JSON as it stands (no codec, not stored outside history)."""
    return payload.metadata.get("encoding") == b"json/plain"


def _events(payload: Payload, field: str, value: Any = None) -> list[RunEventItem]:
    """The events `payload` (or its decoded `value`) carries under `field`; none when
    it does not read as such."""
    try:
        if value is None:
            value = json.loads(payload.data)
        items = value.get(field) if isinstance(value, dict) else None
        return [parse_event(item) for item in items or []]
    except ValueError as error:  # JSON, or pydantic's ValidationError
        logger.warning("a history payload did not read as run events (skipped): %s", error)
        return []


def _is_patch(event: HistoryEvent) -> bool:
    marker = event.marker_recorded_event_attributes
    if marker.marker_name != _PATCH_MARKER or "patch-data" not in marker.details:
        return False
    data = marker.details["patch-data"].payloads
    try:
        patch = json.loads(data[0].data) if data else None
    except ValueError:
        return False
    return isinstance(patch, dict) and patch.get("id") == HISTORY_LOG_PATCH
