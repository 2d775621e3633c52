"""An approval sent while no worker runs: 202, kept, and applied once one starts; the
tool then runs once. On the dev server, through the routes and the client API."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from steadyloop._chains.search_attributes import CHAIN_SEARCH_ATTRIBUTE_KEYS
from steadyloop._cli.demo_tour_tools import registry
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointConfig, EndpointRegistry
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._web.app import create_app
from steadyloop._web.client_backend import ClientBackend, RunDefaults
from steadyloop._web.settings import web_settings
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop.client import SteadyloopClient
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)
from steadyloop.tools.examples import OUTBOX_DIR_ENV

pytestmark = pytest.mark.slow


def model(request: RecordedRequest) -> ScriptedResponse:
    if any(m.get("role") == "tool" for m in request.messages):
        return text_response("Refunded.")
    call = ScriptedCall("refund", {"order_id": "A1", "cents": 500}, id="call_0")
    return tool_calls_response(call)


async def test_an_approval_without_a_worker_is_kept_and_the_tool_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUTBOX_DIR_ENV, str(tmp_path))
    async with ScriptedServer(model) as provider:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(),
            data_converter=steadyloop_data_converter(tmp_path / "blobs"),
            search_attributes=CHAIN_SEARCH_ATTRIBUTE_KEYS,
            dev_server_extra_args=dev_server_args(),
        )
        async with env:
            queue = f"web-no-worker-{uuid.uuid4().hex[:6]}"
            options = WorkerOptions(
                task_queue=queue,
                endpoints=EndpointRegistry(
                    [EndpointConfig(name="scripted", base_url=provider.base_url, model="m")]
                ),
                tools=registry,
            )
            backend = ClientBackend(
                SteadyloopClient(env.client, task_queue=queue, worker_bound=timedelta(seconds=2)),
                defaults=RunDefaults(endpoint="scripted", model="m", tools=["refund"]),
            )
            app = create_app(backend, web_settings({}, {"STEADYLOOP_WEB_TOKENS": "acme=t"}))
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://test",
                headers={"Authorization": "Bearer t"},
                timeout=60,
            ) as http:
                thread = (await http.post("/v1/threads", json={"thread_id": "o"})).json()
                tid = thread["thread_id"]
                async with running_worker(env.client, options):
                    started = await http.post(f"/v1/threads/{tid}/runs", json={"prompt": "go"})
                    run = started.json()["run_id"]
                    waiting = await _approval_waiting(backend, tid, run)
                # No worker now.
                snapshot = await http.get(f"/v1/threads/{tid}/runs/{run}")
                assert snapshot.status_code == 503, snapshot.text  # its queries need one
                assert snapshot.json()["error"]["code"] == "no_worker"
                url = f"/v1/threads/{tid}/runs/{run}/approvals/{waiting['call_id']}"
                unbound = await http.post(url, json={"approve": True, "sha256": waiting["sha"]})
                assert unbound.status_code == 503, unbound.text  # nothing decided
                body = {
                    "approve": True,
                    "sha256": waiting["sha"],
                    "tool": waiting["tool"],
                    "turn": waiting["turn"],
                }
                click = {"Idempotency-Key": "approve-1"}
                kept = await http.post(url, json=body, headers=click)
                assert kept.status_code == 202, kept.text
                assert kept.json()["status"] == "waiting_for_worker"
                async with running_worker(env.client, options):
                    again = await http.post(url, json=body, headers=click)
                    assert again.status_code == 200, again.text  # the same decision
                    result = (
                        await SteadyloopClient(env.client, task_queue=queue)
                        .run(f"web/acme/o/{run}")
                        .result()
                    )
                assert result.stop_reason == "final_answer"
                lines = (tmp_path / "refunds.txt").read_text().splitlines()
                assert lines == ["refund 500 cents on A1"]


async def _approval_waiting(backend: ClientBackend, thread: str, run: str) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in backend.events("acme", thread, run, None):
            if event.type == "approval_waiting":
                return event.data
        raise AssertionError("the run ended without waiting for approval")

    return await asyncio.wait_for(first(), 60)
