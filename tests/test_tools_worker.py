"""The tool activities registered on a real worker, called from a sandboxed workflow.

Proves the parts the `ActivityEnvironment` tests cannot: the activity names a workflow
schedules resolve on a worker, the payloads cross the pydantic data converter both
ways, and the workflow side needs only `steadyloop.tools._payloads` (no user code).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._temporal_binaries import time_skipping_server_path

with workflow.unsafe.imports_passed_through():
    from steadyloop._activities.tool_execution import ToolActivities
    from steadyloop.tools._payloads import (
        DESCRIBE_TOOLS_ACTIVITY,
        RUN_TOOL_ACTIVITY,
        DescribeToolsInput,
        DescribeToolsResult,
        ToolInvocation,
        ToolOutcome,
    )
    from steadyloop.tools.examples import OUTBOX_DIR_ENV, example_registry


@workflow.defn(sandboxed=True)
class DescribeThenRun:
    @workflow.run
    async def run(self, calls: list[ToolInvocation]) -> list[ToolOutcome]:
        described = await workflow.execute_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            DescribeToolsInput(names=[call.tool for call in calls]),
            result_type=DescribeToolsResult,
            start_to_close_timeout=timedelta(seconds=10),
        )
        timeouts = {tool.name: tool.timeout for tool in described.tools}
        outcomes = []
        for call in calls:
            outcomes.append(
                await workflow.execute_activity(
                    RUN_TOOL_ACTIVITY,
                    call,
                    result_type=ToolOutcome,
                    start_to_close_timeout=timeouts.get(call.tool, timedelta(seconds=10)),
                )
            )
        return outcomes


@pytest.mark.slow
async def test_workflow_describes_and_runs_tools_on_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUTBOX_DIR_ENV, str(tmp_path))
    calls = [
        ToolInvocation(
            tool=name, arguments=arguments, call_id=f"call_{n}", workflow_id="wf", tenant_id="t"
        )
        for n, (name, arguments) in enumerate(
            [
                ("calculate", {"expression": "6 * 7"}),
                ("append_note", {"text": "once"}),
                ("list_notes", {}),
                ("no_such_tool", {}),
                ("add", {"a": "two"}),
            ]
        )
    ]
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=time_skipping_server_path(),
    ) as env:
        client: Client = env.client
        queue = f"tools-{uuid.uuid4()}"
        async with Worker(
            client,
            task_queue=queue,
            workflows=[DescribeThenRun],
            activities=ToolActivities(example_registry()).activities(),
        ):
            outcomes = await client.execute_workflow(
                DescribeThenRun.run,
                calls,
                id=f"tools-{uuid.uuid4()}",
                task_queue=queue,
            )
    assert [(o.status, o.content) for o in outcomes[:3]] == [
        ("ok", "42"),
        ("ok", "Saved note: once"),
        ("ok", '["once"]'),
    ]
    assert [o.status for o in outcomes[3:]] == ["unknown_tool", "invalid_arguments"]
    assert (tmp_path / "notes.txt").read_text() == "once\n"
