"""`OutputStreamWorkflow`: the companion workflow that carries a run's forwarded output.

Streaming costs history: every publish is a signal and every subscriber poll an
update (Temporal allows 2,000 updates per execution). Hosting the stream in the loop
workflow would grow the loop's history with tokens and push it toward its limits, so
each run gets this host instead (`output_stream_id(workflow id, first execution run
id)`, so a workflow id used again gets a new one), started by the model activity or
by the loop's first publish of its events (`steadyloop.events`), whichever comes
first (start-or-attach, so no ordering between publishers and subscribers matters).

The host bounds itself: when its history passes `max_events` (or Temporal suggests
it), it keeps the newest `retain_items` items (at most `retain_bytes`), releases its
pollers and continues-as-new with that state; subscribers follow the chain. It ends
when the run signals `close`, or after `idle_close_s` with nothing published (a run
that failed without closing it). Subscribers of an ended host drain what it retained.

An ended host returns what it retained (`OutputStreamSummary.state`, within the same
bounds), so whoever starts it again for the same run (a run that waited for a person
past `idle_close_s`, then went on) carries that log forward (`ensure_host`): offsets
continue where they stopped instead of starting at 0, and a follower's cursor stays
valid. `epoch` (also the host's memo, `HOST_EPOCH_MEMO`) changes only when a host had
to start over without that log (the ended one left no result: terminated).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

with workflow.unsafe.imports_passed_through():
    from steadyloop._output.forwarding import CLOSE_OUTPUT_STREAM_SIGNAL, OUTPUT_STREAM_WORKFLOW


class OutputStreamInput(BaseModel):
    max_events: int = Field(default=2_000, ge=50)
    retain_items: int = Field(default=2_000, ge=1)
    retain_bytes: int = Field(default=1_000_000, ge=1_000)
    idle_close_s: float = Field(default=3_600.0, gt=0)
    prior: WorkflowStreamState | None = None
    epoch: int = Field(default=0, ge=0)


class OutputStreamSummary(BaseModel):
    """How the host ended: the stream's final offset and why."""

    offset: int
    reason: str
    epoch: int = 0
    # What the host retained at its end: a follower of an ended run reads it here, from
    # the host's result, with no worker to answer a query.
    state: WorkflowStreamState


@workflow.defn(name=OUTPUT_STREAM_WORKFLOW)
class OutputStreamWorkflow:
    @workflow.init
    def __init__(self, params: OutputStreamInput) -> None:
        self._stream = WorkflowStream(params.prior)
        self._closing = False

    @workflow.signal(name=CLOSE_OUTPUT_STREAM_SIGNAL)
    def close(self) -> None:
        self._closing = True

    @workflow.run
    async def run(self, params: OutputStreamInput) -> OutputStreamSummary:
        idle = timedelta(seconds=params.idle_close_s)
        while True:
            mark = self._offset()
            try:
                await workflow.wait_condition(
                    lambda: self._closing or self._history_full(params), timeout=idle
                )
            except TimeoutError:
                if self._offset() == mark:
                    return await self._end(params, "idle")
                continue
            if self._closing:
                return await self._end(params, "closed")
            await self._roll_over(params)

    def _offset(self) -> int:
        # The stream's global offset: what its `__temporal_workflow_stream_offset` answers.
        return self._stream._on_offset()

    def _history_full(self, params: OutputStreamInput) -> bool:
        info = workflow.info()
        return (
            info.get_current_history_length() >= params.max_events
            or info.is_continue_as_new_suggested()
        )

    async def _roll_over(self, params: OutputStreamInput) -> None:
        """Keep the newest items within the retention bounds, then continue-as-new."""
        self._retain(params)

        def next_input(state: WorkflowStreamState) -> list[OutputStreamInput]:
            return [params.model_copy(update={"prior": state})]

        await self._stream.continue_as_new(next_input)

    def _retain(self, params: OutputStreamInput) -> None:
        """Drop the oldest items past `retain_items` and `retain_bytes` (offsets stay)."""
        offset = self._offset()
        self._stream.truncate(max(0, offset - params.retain_items))
        state = self._stream.get_state()
        size = sum(len(item.data) for item in state.log)
        dropped = 0
        while size > params.retain_bytes and dropped < len(state.log):
            size -= len(state.log[dropped].data)
            dropped += 1
        if dropped:
            self._stream.truncate(state.base_offset + dropped)

    async def _end(self, params: OutputStreamInput, reason: str) -> OutputStreamSummary:
        """Release waiting subscribers (they drain the rest by query) and finish, with
        what was retained for a host started again for the same run."""
        self._stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._retain(params)
        return OutputStreamSummary(
            offset=self._offset(),
            reason=reason,
            epoch=params.epoch,
            state=self._stream.get_state(),
        )
