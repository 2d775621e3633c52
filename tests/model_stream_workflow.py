"""A test-only workflow that runs the model activity once, so a test can prove that the
activity's input, its result and its failures round-trip through a real Temporal server
and the pydantic data converter. Kept in its own importable module: the workflow
sandbox refuses workflow classes defined in a test module it cannot re-import cleanly."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyloop._stream.completion import (
        STREAM_COMPLETION_ACTIVITY,
        AssembledTurn,
        CompletionRequest,
    )


class StreamOnceInput(BaseModel):
    request: CompletionRequest
    max_attempts: int = 1


@workflow.defn
class StreamOnceWorkflow:
    @workflow.run
    async def run(self, params: StreamOnceInput) -> AssembledTurn:
        result: AssembledTurn = await workflow.execute_activity(
            STREAM_COMPLETION_ACTIVITY,
            params.request,
            result_type=AssembledTurn,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=10),
                maximum_attempts=params.max_attempts,
            ),
        )
        return result
