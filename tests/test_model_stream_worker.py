"""The model activity inside a real Temporal worker (the time-skipping test server).

`ActivityEnvironment` tests call the activity as a function; these prove what only a
server shows: the request and the assembled turn survive the pydantic data converter,
a failure reaches the workflow as `ActivityError` caused by an `ApplicationError` that
carries the classified failure, and `non_retryable` really stops Temporal's retries,
whatever failed: the workflow's route table is the one retry decider.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from model_stream_workflow import StreamOnceInput, StreamOnceWorkflow
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities import ModelActivities
from steadyloop._chat import ChatMessage
from steadyloop._routing.disposition import failure_row
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    error_response,
    tool_calls_response,
)


@dataclass
class Harness:
    env: WorkflowEnvironment
    server: ScriptedServer
    model: ModelActivities
    task_queue: str

    async def run(self, request: CompletionRequest, max_attempts: int = 1) -> AssembledTurn:
        result: AssembledTurn = await self.env.client.execute_workflow(
            StreamOnceWorkflow.run,
            StreamOnceInput(request=request, max_attempts=max_attempts),
            id=f"stream-once-{uuid.uuid4()}",
            task_queue=self.task_queue,
        )
        return result


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    async with ScriptedServer() as server:
        registry = EndpointRegistry([server.endpoint("scripted")])
        async with ModelActivities(registry, environ={}) as model:
            env = await WorkflowEnvironment.start_time_skipping(
                data_converter=pydantic_data_converter,
                test_server_existing_path=time_skipping_server_path(),
            )
            async with env:
                task_queue = f"model-stream-{uuid.uuid4()}"
                async with Worker(
                    env.client,
                    task_queue=task_queue,
                    workflows=[StreamOnceWorkflow],
                    activities=[model.stream_completion],
                ):
                    yield Harness(env, server, model, task_queue)


def request() -> CompletionRequest:
    return CompletionRequest(
        endpoint="scripted",
        model="scripted-model",
        messages=[ChatMessage(role="user", content="What is 2 + 40?")],
    )


def answer() -> ScriptedResponse:
    calls = [ScriptedCall("add", {"a": 2, "b": 40}), ScriptedCall("note", "")]
    return tool_calls_response(
        *calls, text="Let me add.", index="zero", fragment_size=3, usage=(20, 9)
    )


async def test_the_assembled_turn_round_trips_through_temporal(harness: Harness) -> None:
    harness.server.enqueue(answer(), answer())

    through_temporal = await harness.run(request())
    direct = await ActivityEnvironment().run(harness.model.stream_completion, request())

    # Everything but the timings is what the activity returned, rebuilt as pydantic
    # models on the workflow side and again on the client side.
    assert through_temporal.model_dump(exclude={"stats"}) == direct.model_dump(exclude={"stats"})
    assert [call.name for call in through_temporal.tool_calls] == ["add", "note"]
    assert through_temporal.usage is not None and through_temporal.usage.total_tokens == 29
    assert through_temporal.stats.bytes == direct.stats.bytes > 0
    assert harness.server.requests[0].json == harness.server.requests[1].json


async def test_a_non_retryable_failure_arrives_with_its_details_and_is_not_retried(
    harness: Harness,
) -> None:
    harness.server.enqueue(
        *[error_response(400, "Unknown parameter: 'foo'.", code="unknown_parameter")] * 3
    )

    with pytest.raises(WorkflowFailureError) as info:
        await harness.run(request(), max_attempts=3)

    activity_error = info.value.cause
    assert isinstance(activity_error, ActivityError)
    cause = activity_error.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "http_status" and cause.non_retryable is True
    failure = StreamFailure.model_validate(cause.details[0])
    assert (failure.status, failure.message, failure.provider_code) == (
        400,
        "Unknown parameter: 'foo'.",
        "unknown_parameter",
    )
    assert len(harness.server.requests) == 1  # non_retryable stopped Temporal's retries


async def test_a_failure_worth_retrying_is_still_not_retried_by_temporal(
    harness: Harness,
) -> None:
    """A 503 is a retry row of the route table, and only the route table retries it: under
    a policy of three attempts, Temporal sends the request once."""
    harness.server.enqueue(
        error_response(503, "overloaded", type="server_error", retry_after="0.05"), answer()
    )

    with pytest.raises(WorkflowFailureError) as info:
        await harness.run(request(), max_attempts=3)

    activity_error = info.value.cause
    assert isinstance(activity_error, ActivityError)
    cause = activity_error.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable is True
    failure = StreamFailure.model_validate(cause.details[0])
    assert (failure.category, failure_row(failure)) == ("server_error", "server_error")
    assert len(harness.server.requests) == 1
