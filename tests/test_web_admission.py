"""Roots started through the server pass the tenant's ceiling and rate, decided by the
tenant's admission entity on a Temporal server; the entity's history replays."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from parked_workflow import ParkedWorkflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import admission_workflow_id
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._web.admission import RootAdmission
from steadyloop._web.backend import TooManyRuns
from steadyloop._web.settings import web_settings
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow


@dataclass
class Lab:
    client: Client
    task_queue: str


@pytest.fixture
async def lab() -> AsyncIterator[Lab]:
    converter = steadyloop_data_converter(None)
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=converter, test_server_existing_path=time_skipping_server_path()
    ) as env:
        task_queue = f"web-admission-{uuid.uuid4().hex[:8]}"
        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=[ChainAdmissionWorkflow, ParkedWorkflow],
            activities=ChainAdmissionActivities(env.client, task_queue=task_queue).activities(),
        ):
            yield Lab(env.client, task_queue)


def admission(lab: Lab, **limits: object) -> RootAdmission:
    settings = web_settings({"tenants": {"acme": limits}}, {"STEADYLOOP_WEB_TOKENS": "acme=secret"})
    return RootAdmission(lab.client, task_queue=lab.task_queue, settings=settings)


async def start_root(lab: Lab, roots: RootAdmission, thread: str) -> None:
    await roots.admit("acme", thread, None)
    await lab.client.start_workflow(
        ParkedWorkflow.run, False, id=f"{thread}/1", task_queue=lab.task_queue
    )


async def test_roots_past_the_tenants_ceiling_are_refused_until_one_ends(lab: Lab) -> None:
    roots = admission(lab, max_active_runs=2)
    await start_root(lab, roots, "web/acme/a")
    await start_root(lab, roots, "web/acme/b")
    with pytest.raises(TooManyRuns, match="tenant_ceiling") as refused:
        await roots.admit("acme", "web/acme/c", None)
    assert refused.value.retry_after_s > 0
    await lab.client.get_workflow_handle("web/acme/a/1").signal(ParkedWorkflow.release)
    await lab.client.get_workflow_handle("web/acme/a/1").result()
    await start_root(lab, roots, "web/acme/c")  # a ended: the entity learns it and admits
    entity = lab.client.get_workflow_handle(admission_workflow_id("acme"))
    history = await entity.fetch_history()
    replayed = await Replayer(
        workflows=[ChainAdmissionWorkflow], data_converter=lab.client.data_converter
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_roots_past_the_tenants_rate_are_refused(lab: Lab) -> None:
    roots = admission(lab, max_started_runs=1, rate_window_s=3600)
    await start_root(lab, roots, "web/acme/a")
    with pytest.raises(TooManyRuns, match="tenant_rate") as refused:
        await roots.admit("acme", "web/acme/b", None)
    assert refused.value.retry_after_s == 3600
