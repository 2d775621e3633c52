"""steadyloop against a fault injector nobody here wrote: `llmock`, over real HTTP.

For each fault llmock injects on request (`POST /_llmock/scenario`): 429 and 503 with
`retry-after` and `retry-after-ms`, a slow first token, a mid-stream disconnect, a
clean end with no finish reason and no `[DONE]`, a malformed chunk, a stall, malformed
tool arguments, an unknown tool; the model activity's classification (failure kind,
`ApplicationError` type, `non_retryable`, `next_retry_delay`, defects) is checked in
`realserver_cases.py`, and what the loop then does (retried after the provider's
delay, stopped, a fresh completion, the model told) by whole runs on the dev server.

These runs name a single endpoint, so their model turns take the route of that endpoint
alone: a failure is retried there or stops the run, by the same table that sends a
routed run to its next candidate (`steadyloop._routing.disposition`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from loop_harness import assert_every_call_answered
from real_servers import loop_on_dev_server
from realserver_cases import (
    LLMOCK,
    LLMOCK_CASES,
    MODELS,
    SOURCES,
    Case,
    keep_as_fixture,
    run_case,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from wire_capture import RecordingTransport

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits, RunResult
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.tools import ToolRegistry, tool

pytestmark = [pytest.mark.realserver, pytest.mark.slow]


@asynccontextmanager
async def llmock_admin(url: str, faults: list[dict[str, Any]]) -> AsyncIterator[httpx.AsyncClient]:
    """A clean llmock with these faults queued; on exit, every one of them was taken
    (a fault left queued means the test did not exercise it)."""
    async with httpx.AsyncClient(base_url=url) as admin:
        (await admin.post("/_llmock/reset")).raise_for_status()
        if faults:
            (await admin.post("/_llmock/scenario", json={"behaviors": faults})).raise_for_status()
        yield admin
        pending = (await admin.get("/_llmock/scenario")).json()["pending"]
        assert pending == [], f"faults never taken: {pending}"


@pytest.mark.parametrize("case", LLMOCK_CASES, ids=[case.name for case in LLMOCK_CASES])
async def test_the_model_activity_classifies_llmock_faults(case: Case, llmock_url: str) -> None:
    transport = RecordingTransport(SOURCES[LLMOCK])
    async with llmock_admin(llmock_url, case.faults):
        outcome = await run_case(case, transport, llmock_url + "/v1")
    case.check(outcome, transport.last)
    keep_as_fixture(case, transport.last)


# -- what the loop does with them -----------------------------------------------------


@tool(effect="pure")
async def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny in {city}."


async def run_against_llmock(llmock_url: str) -> tuple[RunResult, list[int]]:
    """One run against llmock on a fresh dev server: its result, and for each model
    activity the attempt it ended on (history records an activity's last start only)."""
    endpoint = EndpointConfig(name=LLMOCK, base_url=llmock_url + "/v1")
    async with (
        ModelActivities(EndpointRegistry([endpoint]), environ={}) as model,
        loop_on_dev_server(model, ToolRegistry([get_weather])) as (client, task_queue),
    ):
        handle = await client.start_workflow(
            ToolLoopWorkflow.run,
            RunInput(
                endpoint=LLMOCK,
                model=MODELS[LLMOCK],
                prompt="What is the weather in Paris?",
                tools=["get_weather"],
                limits=RunLimits(max_turns=4),
            ),
            id=f"llmock-run-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        result: RunResult = await handle.result()
        return result, await model_attempts(handle)


async def model_attempts(handle: WorkflowHandle[Any, Any]) -> list[int]:
    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    attempts: list[int] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[event.event_id] = name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if scheduled.get(started.scheduled_event_id) == STREAM_COMPLETION_ACTIVITY:
                attempts.append(started.attempt)
    return attempts


async def chat_requests(admin: httpx.AsyncClient) -> list[dict[str, Any]]:
    records = (await admin.get("/_llmock/requests")).json()["requests"]
    return [r for r in records if r["path"].endswith("/chat/completions")]


async def test_a_429_is_retried_after_the_providers_delay_and_the_run_completes(
    llmock_url: str,
) -> None:
    fault = {"type": "fail", "status": 429, "retry_after": 1.2, "code": "rate_limit_exceeded"}
    async with llmock_admin(llmock_url, [fault]) as admin:
        result, attempts = await run_against_llmock(llmock_url)
        requests = await chat_requests(admin)

    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    # The workflow owns retries (one activity attempt each, so a lost attempt's last
    # heartbeat reaches it): the first turn took two model activities, later turns one.
    assert attempts == [1] * len(attempts) and len(attempts) == len(requests)
    first, second = requests[0], requests[1]
    assert (first["status"], second["status"]) == (429, 200)
    assert second["started_at"] - first["started_at"] >= 1.2  # retry-after-ms, not sooner


async def test_a_malformed_chunk_stops_the_run_after_one_attempt(llmock_url: str) -> None:
    fault = {"type": "stream_fault", "kind": "malformed", "after_chunks": 2}
    async with llmock_admin(llmock_url, [fault]) as admin:
        result, attempts = await run_against_llmock(llmock_url)
        requests = await chat_requests(admin)

    assert result.stop_reason == "failed"
    assert "invalid_chunk" in result.detail
    assert attempts == [1] and len(requests) == 1  # non-retryable: never asked again
    assert [m.role for m in result.transcript] == ["user"]


async def test_a_failed_runs_detail_names_the_failure_kind_once(llmock_url: str) -> None:
    fault = {"type": "stream_fault", "kind": "malformed", "after_chunks": 2}
    async with llmock_admin(llmock_url, [fault]):
        result, _ = await run_against_llmock(llmock_url)

    assert result.stop_reason == "failed"
    assert result.detail.count("invalid_chunk") == 1, result.detail


async def test_malformed_tool_arguments_are_never_dispatched(llmock_url: str) -> None:
    fault = {"type": "tool_fault", "kind": "malformed_arguments"}
    async with llmock_admin(llmock_url, [fault]):
        result, _ = await run_against_llmock(llmock_url)

    # The defective turn was replaced by a fresh completion, not answered as a call.
    assert result.stop_reason == "final_answer"
    assert result.stats.defect_retries == {"truncated_tool_call": 1}
    assert_every_call_answered(result.transcript)
    (call,) = [c for m in result.transcript if m.role == "assistant" for c in m.tool_calls]
    (answer,) = [m for m in result.transcript if m.role == "tool"]
    city = json.loads(call.arguments)["city"]
    assert (call.name, answer.content) == ("get_weather", f"Sunny in {city}.")


async def test_a_call_to_an_unknown_tool_is_answered_to_the_model(llmock_url: str) -> None:
    fault = {"type": "tool_fault", "kind": "unknown_tool"}
    async with llmock_admin(llmock_url, [fault]) as admin:
        result, _ = await run_against_llmock(llmock_url)
        requests = await chat_requests(admin)

    assert result.stop_reason == "final_answer"
    assert_every_call_answered(result.transcript)
    (call,) = [c for m in result.transcript if m.role == "assistant" for c in m.tool_calls]
    (answer,) = [m for m in result.transcript if m.role == "tool"]
    assert call.name == "llmock_unknown_tool" and answer.tool_call_id == call.id
    assert answer.content == "Unknown tool 'llmock_unknown_tool'. Available tools: get_weather."
    # The model read that answer on its next request.
    sent = requests[-1]["body"]["messages"]
    assert sent[-1] == {"role": "tool", "content": answer.content, "tool_call_id": call.id}
