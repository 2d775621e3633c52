"""The loop's side of its event log: gather events as they happen, publish per step.

Events are workflow state until published; publishing is a local activity
(`PUBLISH_RUN_EVENTS_ACTIVITY`) at the points a follower needs to see them (a batch's
calls once read, a call about to wait for a person, the batch's answers, the stop,
before continuing-as-new). What the obvious version gets wrong:

- A signal from the loop to its host per event: each costs two history events and
  records the event's text in the loop's history. A local activity per step costs one
  marker, and its input (the batch) is not recorded.
- Publishing from concurrent call tasks: two publishes in flight can land out of order,
  and the host drops a batch whose sequence is below one it saw. `flush` is serialized.
- A failed publish failing the run: the events are for people watching; the run's own
  state (transcript, receipts) is whole without them. A batch that cannot be published
  after its retries is logged and dropped, never the run's failure.
- A host for a run nobody forwards: its start, idle timer, close signal and a signal
  plus a marker per publish are each a billed action (6 per tool round, 11 per 1-turn
  run, measured by `benchmarks/bench_actions.py`). A run that does not forward keeps
  its log in its own history (`in_history`): a step's batch rides with the next
  activity's input as its second payload (`carried`, `flush(carried=True)`), and a
  step with no such command records it with one local activity
  (`RECORD_RUN_EVENTS_ACTIVITY`).
- Marking which log a run keeps with a patch, or any command of its own: a patch's
  marker costs a billed action unless another marker shares its task, and one asked
  after a local activity can land one workflow task later live than on replay, which
  then fails forever. The mode is a rule of the run's input (`log_in_history`), which
  the starter also writes in the run's memo (`log_mode_memo`) for followers: nothing
  is recorded for it, and the loop reads it without asking Temporal anything.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from pydantic import JsonValue

    from steadyloop._output.forwarding import HOST_IDLE_CLOSE_S, output_stream_id
    from steadyloop.events._models import RunEventItem
    from steadyloop.events._publishing import (
        PUBLISH_RUN_EVENTS_ACTIVITY,
        RECORD_RUN_EVENTS_ACTIVITY,
        PublishRunEvents,
        RecordRunEvents,
        log_in_history,
        publisher_id,
    )

__all__ = ["EventLog"]

# One publish: a few seconds of retries (a host restarting), then given up.
PUBLISH_TIMEOUT = timedelta(seconds=20)
PUBLISH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2)
)


class EventLog:
    """Events of the run not yet published, and the publishing of them."""

    def __init__(self) -> None:
        self._pending: list[RunEventItem] = []
        self._sequence = 0
        self._lock = asyncio.Lock()
        self.in_history = False  # the log lives in the loop's history, not on a host
        self.stream_id = ""
        self.host_max_events = 2_000
        self.host_idle_close_s = HOST_IDLE_CLOSE_S
        self.dropped = 0  # events whose publish failed after its retries

    def begin(
        self,
        host_max_events: int,
        host_idle_close_s: float = HOST_IDLE_CLOSE_S,
        *,
        forwarding: bool = False,
        continued: bool | None = None,
    ) -> None:
        """Decide, once at the start of the execution, whether this run keeps the log.

        Decided once, not at each publish, so a run's log never moves mid-run, and by
        the rule followers read from the run's memo or input (`log_in_history`): in
        history unless the run forwards. The host is keyed to the run's first execution
        (a workflow id used again gets a new host).
        `continued`: what the execution before this one decided (None: this is the run's
        first), kept without deciding again.
        """
        info = workflow.info()
        self.host_max_events = host_max_events
        self.host_idle_close_s = host_idle_close_s
        self.in_history = log_in_history(forwarding, continued)
        self.stream_id = output_stream_id(info.workflow_id, info.first_execution_run_id)

    def note(self, event: RunEventItem) -> None:
        """Keep `event` for the next publish (workflow state only: no command)."""
        self._pending.append(event)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def carried(self) -> list[JsonValue] | None:
        """What the next activity carries as its input's second payload: the events noted
        so far when the log is in history (they are published by being recorded), else
        None (the input stays one payload). Taken at the moment the command is made, so
        the order stays the run's. A payload of its own, not a field of the input: with
        external payload storage the input (a model request holds the transcript) is a
        reference in history, and a follower would fetch it whole to read a few events;
        the batch is small, so the storage keeps it inline."""
        if not self.in_history:
            return None
        batch, self._pending = self._pending, []
        return [event.model_dump(mode="json") for event in batch]

    async def flush(self, *, carried: bool = False) -> None:
        """Publish what was noted, in order.

        `carried`: an activity follows at once, so a log in history leaves the events
        for its input (`carried()`) rather than spending a local activity on them."""
        if not self._pending:
            return
        if carried and self.in_history:
            return
        async with self._lock:
            batch, self._pending = self._pending, []
            if not batch:
                return
            if self.in_history:
                await self._run(RECORD_RUN_EVENTS_ACTIVITY, RecordRunEvents(events=batch), batch)
                return
            self._sequence += 1
            info = workflow.info()
            published = PublishRunEvents(
                stream_id=self.stream_id,
                task_queue=info.task_queue,
                host_max_events=self.host_max_events,
                host_idle_close_s=self.host_idle_close_s,
                publisher_id=publisher_id(info.run_id),
                sequence=self._sequence,
                events=batch,
            )
            await self._run(PUBLISH_RUN_EVENTS_ACTIVITY, published, batch)

    async def _run(
        self, name: str, arg: PublishRunEvents | RecordRunEvents, batch: list[RunEventItem]
    ) -> None:
        """One publish or record (a local activity); a batch it could not land after its
        retries is counted and logged, never the run's failure."""
        try:
            await workflow.execute_local_activity(
                name,
                arg,
                schedule_to_close_timeout=PUBLISH_TIMEOUT,
                retry_policy=PUBLISH_RETRY,
            )
        except ActivityError as error:
            self.dropped += len(batch)
            workflow.logger.warning(
                "%d run event(s) not published (%s): %s", len(batch), name, error
            )
