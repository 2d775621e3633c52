"""Reading the event log of a run that keeps it in its own history (`log_in_history`).

Such a run publishes by recording: a step's batch rides with the next model or tool
activity it schedules (the input's second payload), the last one (the stop) on the
run's result (its `LOG_EVENTS_FIELD`), and a step with no such command is one
`RECORD_RUN_EVENTS_ACTIVITY` marker. The log is the run's
history chain (first execution, then each continue-as-new) read in order, so an
event's position in it is its cursor (`Cursor(0, index)`), and a cursor never expires
while the history is kept. A history read is no billed action: following costs no
query and no update per poll.

What the obvious reader gets wrong, and what this one does instead:
- Asking the running workflow which log it keeps (a query: a billed action, and a
  worker must answer): the run's start event says it, in the memo its starter set
  (`LOG_MODE_MEMO`), or else in its input, by the loop's own rule
  (`keeps_log_in_history`). One history read, answered by the server alone.
- Reading the history again from its first event at every poll, skipping what was
  seen: a follower's cost grows with the run's length (a live 4-turn run of 65 events
  sent it 649). Each read goes on from the page token the last one returned, with the
  history long poll, so each event is sent once (`_execution_events`; a server that
  does not answer long polls, the time-skipping test server, is still read that way).
- Decoding every activity input: the model's carries the transcript, which external
  payload storage keeps as a reference, so a follower fetched every request (11 stored
  payloads for a 10-turn run). Only the input's second payload is read, small, inline;
  the run's result only when it names the field or is not JSON as it stands (a codec's,
  or stored): that is decoded by the client's data converter, so a follower needs the
  same codec and store as the worker.
- A payload that does not read as events (another version's, a codec's failure) is
  skipped, the same way on every read, so cursors stay consistent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import (
    GetSystemInfoRequest,
    GetWorkflowExecutionHistoryRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError

from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop.events._cursor import Cursor, format_cursor
from steadyloop.events._models import RunEventItem, StopEvent, parse_event
from steadyloop.events._publishing import (
    LOG_EVENTS_FIELD,
    LOG_MODE_MEMO,
    RECORD_RUN_EVENTS_ACTIVITY,
    log_mode_of_input,
)
from steadyloop.tools._payloads import RUN_TOOL_ACTIVITY

__all__ = ["history_events", "history_latest_cursor", "keeps_log_in_history"]

logger = logging.getLogger(__name__)

_FIELD = f'"{LOG_EVENTS_FIELD}":'.encode()
# The `field` of a payload that is the list of events itself (an input's second payload).
_WHOLE = ""
# The activities whose second payload is the events riding with them.
_RIDDEN = frozenset({STREAM_COMPLETION_ACTIVITY, RUN_TOOL_ACTIVITY})
_LOCAL_ACTIVITY_MARKER = "core_local_activity"
# Failed history reads in a row before reading gives up.
MAX_READ_FAILURES = 10
# The longest pause before reading again after a failed read.
MAX_BACKOFF_S = 5.0
# The longest pause between two reads of a run's history while nothing new comes, on a
# server that is polled (`_answers_long_polls`).
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


async def keeps_log_in_history(client: Client, workflow_id: str, run_id: str) -> bool:
    """Whether the run that began as execution `run_id` keeps its log in its history.

    Read from that execution's start event, known from the moment the run exists (no
    wait for its first workflow task): the memo every starter in this library sets
    (`log_mode_memo`: the client, the CLI, the web server, a delegated child, the test
    kit), or, for a run started without it, the input's forwarding flag by the loop's
    rule (`log_mode_of_input`), decoded by the client's data converter, so a follower
    needs the worker's codec and payload store (as it does to read the log itself)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(page_size=1):
        started = event.workflow_execution_started_event_attributes
        memo = started.memo.fields.get(LOG_MODE_MEMO)
        if memo is not None:
            return bool((await client.data_converter.decode([memo]))[0] == "history")
        if not started.input.payloads:
            return False
        value = (await client.data_converter.decode([started.input.payloads[0]]))[0]
        return log_mode_of_input(value)
    return False


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
    index = 0
    async for event in _chain_events(client, workflow_id, run_id, poll_s):
        if index >= next_index:
            stamped = event.model_copy(update={"cursor": format_cursor(Cursor(0, index))})
            yield stamped
            if isinstance(stamped, StopEvent):
                return
        index += 1


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
    long_poll = poll_s is not None and await _answers_long_polls(client)
    execution: str | None = run_id
    while execution is not None:
        events = _execution_events(client, workflow_id, execution, poll_s, long_poll=long_poll)
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
    client: Client, workflow_id: str, run_id: str, poll_s: float | None, *, long_poll: bool
) -> AsyncGenerator[HistoryEvent, None]:
    """One execution's history events in order, each once; with `poll_s`, waiting for
    new ones until its close event.

    With `long_poll`, each read goes on from the page token the one before returned, so
    every event is sent once, whatever the run's length. Waiting is the history long
    poll (`wait_new_event`), measured on the dev server (Server 1.32): the first one,
    with no token, answers at once with the events so far; each next one, with the token
    it returned, answers as new events are written (within 10 ms of them), or empty
    after 20 s; a token comes with every answer until the close. A read that does not
    wait ends with no token while the run goes on, so it cannot be taken up again: it
    is for `poll_s=None`, which reads what is there now and returns.

    Without (`_answers_long_polls`), each read takes the history from its start and
    skips by id what was yielded, every `poll_s`, the pause doubling up to
    `MAX_IDLE_POLL_S` while nothing comes. So does a long poll that ends with no token
    before the close (no server seen here does that). A failed read is retried with the
    same token, up to `MAX_READ_FAILURES` in a row, with backoff. The RPC is awaited in
    the caller's task, never in one of its own: a follower that stops while a long poll
    is pending cancels it, and leaves nothing running."""
    execution = WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
    wait = poll_s is not None and long_poll
    last_id = seen = 0
    token = b""
    failures = 0
    pause = poll_s
    while True:
        try:
            response = await client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace=client.namespace,
                    execution=execution,
                    next_page_token=token,
                    wait_new_event=wait,
                ),
                retry=True,
            )
        except RPCError as error:
            failures += 1
            if failures >= MAX_READ_FAILURES:
                raise
            logger.info("history read failed (reading again after %d): %s", last_id, error)
            await asyncio.sleep(min(0.1 * 2**failures, MAX_BACKOFF_S))
            continue
        failures = 0
        fresh = False
        for event in response.history.events:
            if event.event_id <= last_id:
                continue
            fresh = True
            last_id = event.event_id
            yield event
            if event.event_type in _CLOSED:
                return
        token = response.next_page_token
        if token and (fresh or not wait):
            continue  # the next page, or the next long poll
        if poll_s is None or pause is None:
            return
        if token:  # a long poll the server answered empty (after its 20 s)
            await asyncio.sleep(poll_s)
            continue
        # The end of what there is, and no token to go on from: read it all again, a
        # quiet run less often (up to once a second), as often as asked once one came.
        pause = poll_s if last_id > seen else min(2 * pause, max(poll_s, MAX_IDLE_POLL_S))
        seen = last_id
        await asyncio.sleep(pause)


async def _answers_long_polls(client: Client) -> bool:
    """Whether the server answers history long polls: one that names its version.

    Temporal's time-skipping test server (the Java one the tests use) names none, and
    its long poll waits for the next event, then fails with UNKNOWN and no message
    (measured here): it is read by polling. Asked once per follower (one cheap RPC); a
    server that cannot say is polled, which costs more reads, never an event."""
    try:
        info = await client.workflow_service.get_system_info(GetSystemInfoRequest(), retry=True)
    except RPCError:
        return False
    return bool(info.server_version)


def _carrier(event: HistoryEvent) -> tuple[Payload | None, str]:
    """The payload of `event` that may carry events, and the field holding them
    (`_WHOLE`: the payload is the list): a model or tool input's second payload (its
    first, a model request, holds the transcript and is never read), the run's result
    (`LOG_EVENTS_FIELD`), or a `RECORD_RUN_EVENTS_ACTIVITY` marker's result."""
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        scheduled = event.activity_task_scheduled_event_attributes
        payloads = scheduled.input.payloads
        if len(payloads) == 2 and scheduled.activity_type.name in _RIDDEN:
            return payloads[1], _WHOLE  # the input, then the events riding with it
        return None, ""
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        result = event.workflow_execution_completed_event_attributes.result.payloads
        if result and (_FIELD in result[0].data or not _plain(result[0])):
            return result[0], LOG_EVENTS_FIELD
        return None, ""
    if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
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
        if field == _WHOLE:
            items = value if isinstance(value, list) else None
        else:
            items = value.get(field) if isinstance(value, dict) else None
        return [parse_event(item) for item in items or []]
    except ValueError as error:  # JSON, or pydantic's ValidationError
        logger.warning("a history payload did not read as run events (skipped): %s", error)
        return []
