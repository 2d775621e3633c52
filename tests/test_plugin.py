"""`SteadyloopPlugin` on a user's own client and worker, as a Temporal user adds it.

What decides the outcome: the plugin sets the converter a run needs while the user's
codec and failure converter stay in force (payloads in history are the codec's); a
converter it cannot carry runs with is refused at `Client.connect`, naming the fix, not
discovered mid-run; a worker built the user's way (their queue, their workflows, no
other wiring) runs an agent; their sandbox runner keeps its own passthrough and gains
steadyloop's; the worker settings a run depends on are applied."""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

import pytest
from agent_workflows import AskWorkflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultPayloadConverter,
    PayloadCodec,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkerConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from steadyloop.plugin import ConverterRefused, SteadyloopPlugin
from steadyloop.testing import ScriptedModel, ScriptedServer, time_skipping_server_path


class Zlib(PayloadCodec):
    """A user's codec: every payload compressed, marked so."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(
                metadata={"encoding": b"binary/zlib"}, data=zlib.compress(p.SerializeToString())
            )
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for p in payloads:
            inner = Payload()
            inner.ParseFromString(zlib.decompress(p.data))
            decoded.append(inner)
        return decoded


class MyFailures(DefaultFailureConverter):
    """A user's failure converter."""


class OwnJson(DefaultPayloadConverter):
    """A payload converter of the user's own that is not pydantic's."""


def plugin(**kwargs: object) -> SteadyloopPlugin:
    return SteadyloopPlugin(endpoints=[], blobs="off", **kwargs)  # type: ignore[arg-type]


def test_the_converter_becomes_pydantic_and_keeps_the_users_codec_and_failures() -> None:
    mine = DataConverter(payload_codec=Zlib(), failure_converter_class=MyFailures)
    config = plugin().configure_client({"data_converter": mine})  # type: ignore[typeddict-item]
    converter = config["data_converter"]
    assert issubclass(converter.payload_converter_class, PydanticPayloadConverter)
    assert isinstance(converter.payload_codec, Zlib)
    assert converter.failure_converter_class is MyFailures


def test_a_default_failure_converter_gets_the_tolerant_one_and_blobs_their_store(
    tmp_path: object,
) -> None:
    config = SteadyloopPlugin(endpoints=[], blobs=str(tmp_path)).configure_client({})  # type: ignore[typeddict-item]
    converter = config["data_converter"]
    assert converter.failure_converter_class is not DefaultFailureConverter
    assert converter.external_storage is not None  # large payloads leave history


async def test_a_converter_it_cannot_carry_runs_with_is_refused_when_the_client_connects() -> None:
    foreign = DataConverter(payload_converter_class=OwnJson)
    with pytest.raises(ConverterRefused) as refused:
        # Refused as the client is made, before any request (lazy: nothing is dialled).
        await Client.connect("127.0.0.1:1", data_converter=foreign, plugins=[plugin()], lazy=True)
    message = str(refused.value)
    assert "OwnJson" in message and "PydanticPayloadConverter" in message


def test_a_worker_given_the_plugin_on_a_client_without_it_is_refused_with_the_fix() -> None:
    class DefaultClient:
        data_converter = DataConverter.default

    with pytest.raises(ConverterRefused, match=r"Client\.connect\(plugins="):
        plugin().configure_worker({"client": DefaultClient(), "task_queue": "q"})  # type: ignore[typeddict-item]


def test_the_users_sandbox_runner_keeps_its_passthrough_and_gains_steadyloops() -> None:
    theirs = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("their_models")
    )
    config = plugin().configure_worker(_worker_config(workflow_runner=theirs))
    runner = config["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    passed = runner.restrictions.passthrough_modules
    assert {"their_models", "steadyloop.workflow", "steadyloop._workflows.tool_loop"} <= passed


def test_the_worker_settings_a_run_depends_on_are_applied_and_a_longer_grace_kept() -> None:
    config = plugin().configure_worker(
        _worker_config(
            max_heartbeat_throttle_interval=timedelta(seconds=60),
            graceful_shutdown_timeout=timedelta(0),
        )
    )
    assert config["max_heartbeat_throttle_interval"] == timedelta(seconds=1)
    assert config["graceful_shutdown_timeout"] == timedelta(seconds=30)
    longer = plugin().configure_worker(
        _worker_config(graceful_shutdown_timeout=timedelta(minutes=5))
    )
    assert longer["graceful_shutdown_timeout"] == timedelta(minutes=5)


class _PydanticClient:
    data_converter = pydantic_data_converter


def _worker_config(**items: Any) -> WorkerConfig:
    """A worker's config as `Worker(...)` hands it to the plugin, on a pydantic client."""
    return cast(WorkerConfig, {"client": _PydanticClient(), "task_queue": "q", **items})


@pytest.mark.slow
async def test_a_worker_built_the_users_way_runs_an_agent_with_their_codec_in_force() -> None:
    model = ScriptedModel().says("forty-two")
    async with ScriptedServer(model.respond) as server:
        steadyloop = SteadyloopPlugin(endpoints=[server.endpoint("default")], blobs="off")
        async with await WorkflowEnvironment.start_time_skipping(
            data_converter=DataConverter(payload_codec=Zlib()),
            plugins=[steadyloop],
            test_server_existing_path=time_skipping_server_path(),
        ) as env:
            # The user's worker: their queue, their workflow, nothing of steadyloop's named.
            async with Worker(env.client, task_queue="orders", workflows=[AskWorkflow]):
                parent = f"order-{uuid.uuid4().hex[:8]}"
                answer = await env.client.execute_workflow(
                    AskWorkflow.run, "6 * 7?", id=parent, task_queue="orders"
                )
            assert answer == "forty-two"
            encodings = {
                payload.metadata.get("encoding")
                async for event in env.client.get_workflow_handle(parent).fetch_history_events()
                if event.HasField("workflow_execution_started_event_attributes")
                for payload in event.workflow_execution_started_event_attributes.input.payloads
            }
            assert encodings == {b"binary/zlib"}  # the user's codec wrote the history
