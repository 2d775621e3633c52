"""The activity side of forwarding: start-or-attach the run's output host, publish, read back.

Three jobs, all Temporal client calls made from inside an activity:
- `ensure_host` starts the run's `OutputStreamWorkflow` or attaches to the running
  one (`USE_EXISTING`), so neither the model activity nor a subscriber has to come first.
  A host that ended (idle) is started again with the log it retained, so its offsets
  (the cursors of `steadyloop.events`) go on instead of starting at 0.
- `publish_events` puts the loop's events (`steadyloop.events`) on the same host, one
  signal per batch, deduplicated by the batch's publisher id and sequence.
- `OutputPublisher` gathers `OutputDelta`s and publishes them in batches through
  `WorkflowStreamClient` (one signal per batch, deduplicated by the host).
- `read_forwarded` reads back, by query, what the host retained of one turn: the
  partial text a person saw when the worker died mid-stream, and the check a new
  attempt makes before streaming (anything an earlier attempt of the same turn showed
  means this attempt must not run).

A publishing failure never fails the model call: the answer matters more than its
live view, and the attempt is already marked as having produced output, the
conservative side.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from datetime import timedelta
from types import TracebackType

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.workflow_streams import (
    PollInput,
    PollResult,
    PublishEntry,
    PublishInput,
    WorkflowStreamClient,
)
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._output.forwarding import (
    HOST_EPOCH_MEMO,
    HOST_IDLE_CLOSE_S,
    OUTPUT_STREAM_WORKFLOW,
    OUTPUT_TOPIC,
    ForwardedOutput,
    ForwardTarget,
    OutputDelta,
)
from steadyloop._workflows.output_stream import OutputStreamInput, OutputStreamSummary
from steadyloop.events._models import EVENTS_TOPIC
from steadyloop.events._publishing import PublishRunEvents

logger = logging.getLogger(__name__)

_POLL_QUERY = "__temporal_workflow_stream_poll"
_PUBLISH_SIGNAL = "__temporal_workflow_stream_publish"
# One query of the host; a host whose worker died answers once Temporal moves its
# workflow task to a live worker (seconds), so callers retry within their own bound.
QUERY_TIMEOUT = timedelta(seconds=5)
# How long a batch may be retried before the publisher gives up on it.
PUBLISH_RETRY = timedelta(seconds=30)


async def ensure_host(client: Client, target: ForwardTarget, task_queue: str) -> None:
    """Start the run's output host, or attach to it when it is already running."""
    await ensure_stream_host(
        client, target.stream_id, task_queue, target.host_max_events, target.host_idle_close_s
    )


async def ensure_stream_host(
    client: Client,
    stream_id: str,
    task_queue: str,
    max_events: int,
    idle_close_s: float = HOST_IDLE_CLOSE_S,
) -> None:
    """Start host `stream_id`, go on with the one that ended, or attach to the running one.

    An ended host that returned its retained log (an idle close) is continued: the new
    execution starts from that state, same epoch. One that left no log (terminated or
    failed) is replaced by a new epoch at offset 0, so a cursor into the old one is
    refused as expired, never read as the new offsets.
    Two starters racing both start the same input; `USE_EXISTING` keeps one.
    """
    params = OutputStreamInput(max_events=max_events, idle_close_s=idle_close_s)
    handle: WorkflowHandle[object, object] = client.get_workflow_handle(stream_id)
    try:
        described = await handle.describe()
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
        described = None
    if described is not None:
        if described.status == WorkflowExecutionStatus.RUNNING:
            return
        epoch = await described.memo_value(HOST_EPOCH_MEMO, 0, type_hint=int)
        summary: OutputStreamSummary | None = None
        if described.status == WorkflowExecutionStatus.COMPLETED:
            ended = client.get_workflow_handle(
                stream_id, run_id=described.run_id, result_type=OutputStreamSummary
            )
            summary = await ended.result(follow_runs=False)
        if summary is not None:
            params = params.model_copy(update={"prior": summary.state, "epoch": summary.epoch})
        else:
            params = params.model_copy(update={"epoch": epoch + 1})
    await client.start_workflow(
        OUTPUT_STREAM_WORKFLOW,
        params,
        id=stream_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        memo={HOST_EPOCH_MEMO: params.epoch},
    )


async def publish_events(client: Client, batch: PublishRunEvents) -> None:
    """One batch of the loop's events onto its host (started or continued first).

    The batch is one signal with the loop's own publisher id and sequence, so a retried
    publish (the local activity retried, a workflow task replayed) lands once.
    """
    await ensure_stream_host(
        client, batch.stream_id, batch.task_queue, batch.host_max_events, batch.host_idle_close_s
    )
    converter = client.data_converter.payload_converter
    entries = [
        PublishEntry(
            topic=EVENTS_TOPIC,
            data=base64.b64encode(converter.to_payloads([event])[0].SerializeToString()).decode(
                "ascii"
            ),
        )
        for event in batch.events
    ]
    handle: WorkflowHandle[object, object] = client.get_workflow_handle(batch.stream_id)
    await handle.signal(
        _PUBLISH_SIGNAL,
        PublishInput(items=entries, publisher_id=batch.publisher_id, sequence=batch.sequence),
    )


class OutputPublisher:
    """Publishes one attempt's output to its host; use as `async with`.

    Flushing is driven here rather than by `WorkflowStreamClient`'s own context manager:
    its flusher waits with `asyncio.wait_for`, which on Python 3.11 can swallow the
    cancellation that stops it when a wake-up arrives at the same moment (a forced first
    flush right before a short stream ends), leaving the activity waiting until Temporal
    times it out. `asyncio.timeout` has no such race.

    Deltas wait in a queue of our own and reach the stream client's buffer only when a
    batch is sent: its `flush()` sends until its buffer is empty, so text arriving
    faster than a signal's round trip would keep one flush sending a signal per round
    trip, and the host's history would grow with the stream's speed instead of once per
    `batch_interval_s`.

    Given the task queue, a send refused because the host ended (a model silent for
    longer than the run's `host_idle_close_s`) starts the host again with its log
    before the batch is retried, so the rest of the answer is still shown live.
    """

    def __init__(
        self, client: Client, target: ForwardTarget, task_queue: str | None = None
    ) -> None:
        self._client = client
        self._target = target
        self._task_queue = task_queue
        self._stream = WorkflowStreamClient.create(
            client, target.stream_id, max_retry_duration=PUBLISH_RETRY
        )
        self._topic = self._stream.topic(OUTPUT_TOPIC, type=OutputDelta)
        self._interval = target.batch_interval_s
        self._queued: list[OutputDelta] = []
        self._wake = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self.failed: BaseException | None = None

    def publish(self, delta: OutputDelta, *, now: bool = False) -> None:
        """Queue `delta`; `now` flushes at once (the first output a person will see)."""
        self._queued.append(delta)
        if now:
            self._wake.set()

    async def _send(self) -> None:
        """One batch: what was queued until now (after a batch a failed send left pending)."""
        queued, self._queued = self._queued, []
        for delta in queued:
            self._topic.publish(delta)
        await self._stream.flush()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._send()
            except RPCError as error:
                logger.warning("forwarded output not yet published (will retry): %s", error)
                await self._restart_host()
            except Exception as error:  # e.g. a piece that cannot be serialized
                # Not retried (it would fail again), and never the model call's failure:
                # the live view is lost from here, the answer is not.
                self.failed = error
                logger.warning("forwarded output could not be published: %s", error)

    async def _restart_host(self) -> None:
        """Start the host again if it ended (attaching is a no-op while it runs)."""
        if self._task_queue is None:
            return
        try:
            await ensure_host(self._client, self._target, self._task_queue)
        except RPCError as error:
            logger.warning("the output host could not be started again yet: %s", error)

    async def __aenter__(self) -> OutputPublisher:
        self._pump = asyncio.create_task(self._run(), name="steadyloop-output-publisher")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        try:
            try:
                await self._send()
            except RPCError:
                if self._task_queue is None:
                    raise
                await self._restart_host()  # the host ended since the last batch: once more
                await self._send()
        except Exception as error:  # the live view failed; the answer goes on
            self.failed = error
            logger.warning("forwarded output could not be published: %s", error)


async def read_forwarded(
    client: Client,
    converter: PayloadConverter,
    stream_id: str,
    turn: int,
    *,
    before_attempt: int | None = None,
) -> ForwardedOutput:
    """What the host retained of `turn` (attempts below `before_attempt`), oldest first.

    A host that never started means nothing was forwarded. Items truncated by a
    roll-over make the answer `complete=False`.
    """
    handle: WorkflowHandle[object, object] = client.get_workflow_handle(stream_id)
    text: list[str] = []
    reasoning: list[str] = []
    attempts: list[int] = []
    offset = 0
    first = True
    complete = True
    while True:
        try:
            result = await handle.query(
                _POLL_QUERY,
                PollInput(from_offset=offset),
                result_type=PollResult,
                rpc_timeout=QUERY_TIMEOUT,
            )
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return ForwardedOutput()
            raise
        for item in result.items:
            if item.topic != OUTPUT_TOPIC:
                continue
            delta = converter.from_payload(_payload(item.data), OutputDelta)
            if first and item.offset > 0 and delta.turn == turn:
                complete = False  # items before this one, maybe of this turn, are gone
            first = False
            if delta.turn != turn:
                continue
            if before_attempt is not None and delta.attempt >= before_attempt:
                continue
            if delta.attempt not in attempts:
                attempts.append(delta.attempt)
            (text if delta.kind == "text" else reasoning).append(delta.text)
        offset = result.next_offset
        if not result.more_ready:
            break
    return ForwardedOutput(
        text="".join(text), reasoning="".join(reasoning), attempts=attempts, complete=complete
    )


def _payload(wire: str) -> Payload:
    payload = Payload()
    payload.ParseFromString(base64.b64decode(wire))
    return payload
