"""Driving a running ToolLoopWorkflow the way a person would: wait for a state, then
act. Shared by the people-in-the-loop tests, the CLI tests and the replay recorder."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

from loop_harness import ALL_TOOLS, PEOPLE_TOOLS, run_input
from temporalio.client import Client, WorkflowHandle

from steadyloop._cli.follow import follow
from steadyloop._cli.progress import ProgressDisplay
from steadyloop._run.models import RunInput, RunProgress, RunResult
from steadyloop._run.steering import PendingApproval
from steadyloop.testing import (
    Pause,
    ScriptedResponse,
    chunk,
    finish_chunk,
    role_chunk,
    sse_response,
)

GUARD_S = 60  # how long a wait may take before the test gives up: a guard, not a measure


def people_run(**limits: Any) -> RunInput:
    """A run offered the people-in-the-loop tools as well as the usual ones."""
    return run_input(**limits).model_copy(update={"tools": [*ALL_TOOLS, *PEOPLE_TOOLS]})


def trickle(words: int, gap_s: float = 0.05) -> ScriptedResponse:
    """An answer streamed one word every `gap_s`: a stream long enough to interrupt."""
    parts: list[Any] = [role_chunk()]
    for number in range(words):
        parts += [Pause(gap_s), chunk({"content": f"w{number} "})]
    return sse_response([*parts, finish_chunk("stop")])


async def eventually(check: Callable[[], Any], what: str) -> None:
    """Poll `check` (sync or async) in real time until it is truthy."""
    give_up_at = asyncio.get_running_loop().time() + GUARD_S
    while asyncio.get_running_loop().time() < give_up_at:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting until {what}")


async def progress(handle: WorkflowHandle[Any, Any]) -> RunProgress:
    result: RunProgress = await handle.query("progress", result_type=RunProgress)
    return result


async def wait_for_phase(handle: WorkflowHandle[Any, Any], phase: str) -> RunProgress:
    seen: list[RunProgress] = []

    async def reached() -> bool:
        seen.append(await progress(handle))
        return seen[-1].phase == phase

    await eventually(reached, f"the run's phase is {phase!r}")
    return seen[-1]


async def wait_for_approvals(
    handle: WorkflowHandle[Any, Any], count: int = 1
) -> list[PendingApproval]:
    seen: list[list[PendingApproval]] = []

    async def waiting() -> bool:
        seen.append(await handle.query("pending_approvals", result_type=list[PendingApproval]))
        return len(seen[-1]) >= count

    await eventually(waiting, f"{count} call(s) wait for approval")
    return seen[-1]


async def shown(client: Client, handle: WorkflowHandle[Any, RunResult]) -> list[str]:
    """What `steadyloop show` prints of an ended run: its event log, read from the
    log's host as the command line reads it."""
    out = io.StringIO()
    await follow(client, handle, ProgressDisplay(out, live=False), ended=True)
    return out.getvalue().splitlines()
