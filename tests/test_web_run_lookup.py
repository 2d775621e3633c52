"""A run is described once per server process, not once per request: every client of a
run checks it (the tenancy check of each connection, each reader of its log), so a
lookup per request made Temporal's cost per run grow with the clients. On the dev
server, no worker needed (a started run exists before any worker takes it)."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from steadyloop._chains.search_attributes import CHAIN_SEARCH_ATTRIBUTE_KEYS
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._temporal_binaries import dev_server_args, dev_server_path
from steadyloop._web.backend import RunRequest, ThreadNotFound, UnknownRun
from steadyloop._web.client_backend import ClientBackend, RunDefaults
from steadyloop.client import SteadyloopClient

pytestmark = pytest.mark.slow


async def test_a_run_is_described_once_however_many_clients_check_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    described: Counter[str] = Counter()
    describe = WorkflowHandle.describe

    async def counted(self: WorkflowHandle[Any, Any], **kwargs: Any) -> Any:
        described[self.id] += 1
        return await describe(self, **kwargs)

    monkeypatch.setattr(WorkflowHandle, "describe", counted)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(),
        data_converter=steadyloop_data_converter(tmp_path / "blobs"),
        search_attributes=CHAIN_SEARCH_ATTRIBUTE_KEYS,
        dev_server_extra_args=dev_server_args(),
    )
    async with env:
        queue = f"web-lookup-{uuid.uuid4().hex[:6]}"
        backend = ClientBackend(
            SteadyloopClient(env.client, task_queue=queue),
            defaults=RunDefaults(endpoint="scripted", model="m", tools=[]),
        )
        thread = await backend.create_thread("acme", "orders")
        with pytest.raises(UnknownRun):  # not started yet: not remembered as missing
            await backend.check_run("acme", thread, "1")
        started = await backend.start("acme", thread, RunRequest(prompt="go"), "k-1")
        run_id = f"web/acme/orders/{started.run_id}"
        before = described[run_id]
        for _ in range(10):  # ten clients connect
            await backend.check_run("acme", thread, started.run_id)
        # Another tenant's lookup of the same names is its own, and finds nothing.
        with pytest.raises(ThreadNotFound):
            await backend.check_run("globex", thread, started.run_id)
    assert described[run_id] - before == 1, described  # the first client's, no more
