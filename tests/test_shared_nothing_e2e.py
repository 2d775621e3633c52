"""Two workers that share no disk, one S3-compatible object store (SeaweedFS), and the
store's faults: what a run does when the store is down, slow, throttling or has lost a
chunk (`shared_nothing_harness`).

Each fault asserts which of the two outcomes the issue allows happens: the run waits and
completes with every page whole and no failed workflow task, or it fails with the named
error (`PayloadBlobMissing`). What each measured is said in the test's docstring.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from blob_e2e_tools import page_text
from shared_nothing_harness import (
    THRESHOLD_BYTES,
    SharedNothing,
    WorkerProcess,
    answer_text,
    failed_workflow_tasks,
    shared_nothing,
)
from temporalio.client import WorkflowHandle
from temporalio.worker import Replayer

from steadyloop.history.payload_storage import steadyloop_data_converter
from steadyloop.run.models import RunResult
from steadyloop.worker.process import RUN_WORKFLOWS
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

pytestmark = [pytest.mark.slow, pytest.mark.realserver]
PAGES = 6


async def until(probe: object, what: str, timeout_s: float = 60.0) -> None:
    assert callable(probe)
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.05)


def assert_whole(result: RunResult, pages: int) -> None:
    """Every page came back whole, once per call, and the answer is the last message."""
    tools = [m for m in result.transcript if m.role == "tool"]
    assert [m.content for m in tools] == [page_text(n) for n in range(1, pages + 1)]
    assert result.transcript[-1].content == answer_text(pages)


async def replays_from_the_store_alone(
    harness: SharedNothing, handle: WorkflowHandle[ToolLoopWorkflow, RunResult]
) -> None:
    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=RUN_WORKFLOWS,
        data_converter=steadyloop_data_converter(
            harness.store.url, threshold_bytes=THRESHOLD_BYTES
        ),
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure


async def test_a_killed_worker_s_run_completes_on_the_other_and_reads_anywhere(
    tmp_path: Path,
) -> None:
    async with shared_nothing(tmp_path, pages=PAGES) as harness:
        first = await harness.start_worker()
        second = await harness.start_worker()
        handle = await harness.start_run(PAGES)

        def running_page_three() -> WorkerProcess | None:
            for worker in (first, second):
                if 3 in worker.calls():
                    return worker
            return None

        await until(lambda: running_page_three() is not None, "page 3 to start")
        victim = running_page_three()
        assert victim is not None
        survivor = second if victim is first else first
        await victim.kill()
        result = await handle.result()
        assert_whole(result, PAGES)
        # The killed worker's page ran again on the survivor, which went on to the end.
        assert 3 in survivor.calls() and PAGES in survivor.calls()
        # The store never failed a workflow task (a lost worker's sticky task may time out).
        failed = await failed_workflow_tasks(handle)
        assert all(f == "workflow task timed out" for f in failed), failed
        print(f"killed worker: completed whole on the other, {len(failed)} timed-out task(s)")

        # A third machine, with no blob directory, reads the whole transcript.
        code, shown = await harness.run_command("show", handle.id)
        assert code == 0, shown
        assert answer_text(PAGES) in shown
        assert shown.count("read_page") >= PAGES, shown

        await replays_from_the_store_alone(harness, handle)

        # One chunk of the result gone: a reader that has not cached it fails, naming it.
        gone = await delete_one_chunk_of_the_result(harness, handle)
        code, shown = await harness.run_command("show", handle.id)
        assert code != 0
        assert gone in shown and harness.store.url in shown, shown


async def delete_one_chunk_of_the_result(
    harness: SharedNothing, handle: WorkflowHandle[ToolLoopWorkflow, RunResult]
) -> str:
    """Delete the first chunk of the run's stored result; its key."""
    history = await handle.fetch_history()
    completed = history.events[-1].workflow_execution_completed_event_attributes
    reference = json.loads(completed.result.payloads[0].data)
    manifest_key = f"manifests/{reference['claimData']['manifest']}"
    store = harness.store.store()
    try:
        manifest = await store.get(manifest_key)
        assert manifest is not None, manifest_key
        chunk = f"chunks/{json.loads(manifest)['chunks'][0]}"
        await store.delete(chunk)
    finally:
        await store.aclose()
    return chunk


async def outcome(
    harness: SharedNothing, handle: WorkflowHandle[ToolLoopWorkflow, RunResult], pages: int
) -> str:
    """Wait for the run and say what it did: every page whole, or which tool answers
    became a named timeout; and how many workflow tasks failed. A run never fails, and
    every tool message is the page or says why it is not."""
    result = await handle.result()
    assert result.transcript[-1].content == answer_text(pages)
    tools = [m.content for m in result.transcript if m.role == "tool"]
    lost = [n for n, text in enumerate(tools, 1) if text != page_text(n)]
    assert all("timed out" in str(tools[n - 1]) for n in lost), tools
    failed = await failed_workflow_tasks(handle)
    said = "completed whole" if not lost else f"completed, page(s) {lost} answered 'timed out'"
    said += f", {len(failed)} failed workflow task(s)"
    if failed:
        said += f" (first: {failed[0][:160]})"
    return said


async def test_the_store_s_faults_are_waited_out_and_nothing_is_lost(tmp_path: Path) -> None:
    """Measured here (printed with -s) for the store down at the worker's start (about
    12 s), answering 503 for 3 s, slow (200 ms a request) and stopped for 15 s mid-run.
    Every run completes (none fails, no workflow task fails for good); what each lost is
    printed: a tool whose result cannot be stored within the tool's own timeout (6 s
    here) is answered to the model as a timeout, like any tool that overruns."""
    pages = 4
    measured: dict[str, str] = {}
    async with shared_nothing(tmp_path, pages=pages) as harness:
        # Down when the worker starts: the worker starts (the store is opened lazily),
        # and the run waits for it.
        await harness.store.stop()
        await harness.start_worker()
        handle = await harness.start_run(pages)
        await asyncio.sleep(2)
        await harness.store.start()
        measured["down at worker start"] = await outcome(harness, handle, pages)

        # Answering 503 (SlowDown) for 3 s, from the first page on.
        handle = await harness.start_run(pages)
        harness.proxy.failing = True
        await asyncio.sleep(3)
        harness.proxy.failing = False
        measured["503 for 3 s"] = await outcome(harness, handle, pages)
        assert harness.proxy.refused > 0

        # Slow: 200 ms before every request.
        harness.proxy.delay_s = 0.2
        handle = await harness.start_run(pages)
        measured["200 ms a request"] = await outcome(harness, handle, pages)
        harness.proxy.delay_s = 0.0

        # Stopped for 15 s mid-run, then restarted on the same data.
        handle = await harness.start_run(pages)
        worker = harness.workers[0]
        already = len(worker.calls())
        await until(lambda: 2 in worker.calls()[already:], "page 2 of the fourth run")
        await harness.store.stop()
        await asyncio.sleep(15)
        await harness.store.start()
        measured["stopped 15 s mid-run"] = await outcome(harness, handle, pages)
    for fault, said in measured.items():
        print(f"object store {fault}: {said}")
