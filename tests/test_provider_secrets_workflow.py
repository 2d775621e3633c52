"""Provider secrets, end to end: a run on the time-skipping server against a
provider that echoes the API key everywhere it can, with the key set in the worker's
environment as users set it (`export`; the worker reads `os.environ`).

The property: the key (any 8+ character fragment of it) appears nowhere in the run's
history, nor in the endpoint-health entity's, read whole (every event as JSON, every
payload decoded), nor in any log line or in the worker process's output. And a
`Retry-After: 1e300` is a too-long Retry-After (one request, a named rule), not an
attempt lost to an `OverflowError` and retried three times.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from loop_harness import ENDPOINT, Effects, build_tools, run_input
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.endpoint_health import EndpointHealthActivities
from steadyloop._activities.model_stream import ModelActivities
from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoint_health import health_workflow_id
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunResult
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._worker.process import HEARTBEAT_THROTTLE, RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    ScriptedResponse,
    ScriptedServer,
    error_response,
    raw_response,
    sse_event,
    text_chunks,
)

pytestmark = pytest.mark.slow

KEY_ENV = "STEADYLOOP_SECRET_WORKFLOW_KEY"
KEY = "sk-proj-Q7vLm2Xc9RtBw4Zn8KdHf3Jy6PsEa1UoGiTqVxW"


def leaked(text: str) -> list[str]:
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]


def _decoded_payloads(node: Any) -> Iterable[str]:
    """Every payload in a history's JSON (`{"metadata": {...}, "data": <base64>}`),
    decoded, metadata included."""
    if isinstance(node, dict):
        data, metadata = node.get("data"), node.get("metadata")
        if isinstance(data, str) and isinstance(metadata, dict):
            yield base64.b64decode(data).decode("utf-8", "replace")
            for value in metadata.values():
                if isinstance(value, str):
                    yield base64.b64decode(value).decode("utf-8", "replace")
        for value in node.values():
            yield from _decoded_payloads(value)
    elif isinstance(node, list):
        for value in node:
            yield from _decoded_payloads(value)


async def whole_history(client: Client, workflow_id: str) -> str:
    """A workflow's history as text: every event as JSON, then every payload decoded."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    raw = history.to_json()
    return raw + "\n" + "\n".join(_decoded_payloads(json.loads(raw)))


@asynccontextmanager
async def worker_with_key_in_env(
    script: list[ScriptedResponse], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Client, str, ScriptedServer]]:
    """What `steadyloop worker` runs, with the endpoint's key in `os.environ`."""
    monkeypatch.setenv(KEY_ENV, KEY)
    async with ScriptedServer(script) as server:
        endpoints = EndpointRegistry([server.endpoint(ENDPOINT, api_key_env=KEY_ENV)])
        async with ModelActivities(endpoints) as model:  # reads os.environ at call time
            env = await WorkflowEnvironment.start_time_skipping(
                data_converter=steadyloop_data_converter(None),  # every payload inline
                test_server_existing_path=time_skipping_server_path(),
            )
            async with env:
                task_queue = f"tq-{uuid.uuid4()}"
                health = EndpointHealthActivities(env.client, task_queue=task_queue)
                async with Worker(
                    env.client,
                    task_queue=task_queue,
                    workflows=RUN_WORKFLOWS,
                    activities=[
                        *model.activities(),
                        *ToolActivities(build_tools(Effects())).activities(),
                        *health.activities(),
                    ],
                    max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
                ):
                    yield env.client, task_queue, server


async def run(client: Client, task_queue: str) -> tuple[RunResult, str]:
    handle: WorkflowHandle[ToolLoopWorkflow, RunResult] = await client.start_workflow(
        ToolLoopWorkflow.run, run_input(), id=f"loop-{uuid.uuid4()}", task_queue=task_queue
    )
    return await handle.result(), handle.id


async def test_a_provider_echoing_the_key_leaves_no_trace_in_history_or_logs(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = {"X-Echo": KEY, "WWW-Authenticate": f'Bearer realm="{KEY}"'}
    everywhere = {"message": f"Incorrect API key: {KEY}", "type": KEY, "code": KEY, "param": KEY}
    script = [
        # A 503 whose body and headers echo the key: retried (server_error).
        error_response(503, body={"error": everywhere}, headers=echo),
        # An in-stream `event: error` echoing it: retried (stream_error).
        raw_response(
            b"".join(sse_event(c) for c in text_chunks("par"))
            + sse_event({"error": everywhere}, event="error")
        ),
        # The exact repro: a 401 with the key in code, type and param, a key at the
        # excerpt's cut, and a Location header: the run stops (auth, no other endpoint).
        error_response(
            401,
            body={"error": {"message": "x" * 440 + KEY, "type": KEY, "code": KEY, "param": KEY}},
            headers={**echo, "Location": f"https://x.example/?k={KEY}"},
        ),
    ]
    async with worker_with_key_in_env(script, monkeypatch) as (client, task_queue, server):
        result, workflow_id = await run(client, task_queue)
        assert len(server.requests) == 3
        assert server.requests[0].header("authorization") == f"Bearer {KEY}"  # it was sent
        history = await whole_history(client, workflow_id)
        entity = await whole_history(client, health_workflow_id(ENDPOINT))

    assert result.stop_reason == "failed"
    assert "auth" in result.detail and "[redacted]" in history
    assert "activityTaskFailedEventAttributes" in history  # the failures are in it
    assert leaked(history) == []
    assert leaked(entity) == []
    assert leaked(result.model_dump_json()) == []
    assert leaked("\n".join(r.getMessage() for r in caplog.records)) == []
    out, err = capfd.readouterr()
    assert leaked(out + err) == []


async def test_retry_after_1e300_stops_on_the_too_long_rule_after_one_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limited = error_response(
        429, "Rate limit reached", type="requests", code="rate_limit_exceeded", retry_after="1e300"
    )
    async with worker_with_key_in_env([limited, limited, limited], monkeypatch) as (
        client,
        task_queue,
        server,
    ):
        result, workflow_id = await run(client, task_queue)
        assert len(server.requests) == 1  # not retried three times ignoring the header
        history = await whole_history(client, workflow_id)

    assert result.stop_reason == "failed"
    assert "Retry-After asks for" in result.detail and "rate_limit" in result.detail
    assert result.stats.model_attempts == 1
    assert "OverflowError" not in history and "lost" not in result.detail
