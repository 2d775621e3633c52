"""Two workers that share no disk, one S3-compatible object store (SeaweedFS), and the
store's faults: what a run does when the store is down, slow, throttling or has lost a
chunk (`shared_nothing_harness`).

Each fault asserts which of the two outcomes the issue allows happens: the run waits and
completes with every page whole and no failed workflow task, or it fails with the named
error (`PayloadBlobMissing`). What each measured is said in the test's docstring.

One SeaweedFS, dev server and scripted model serve the whole module (`harness`); each
test's workers and runs have a task queue of their own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
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

from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._run.models import RunResult
from steadyloop._worker.process import RUN_WORKFLOWS
from steadyloop._workflows.tool_loop import ToolLoopWorkflow

pytestmark = [
    pytest.mark.slow,
    pytest.mark.realserver,
    pytest.mark.asyncio(loop_scope="module"),
]
PAGES = 4


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def harness(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedNothing]:
    async with shared_nothing(tmp_path_factory.mktemp("shared-nothing"), pages=PAGES) as made:
        yield made


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
    harness: SharedNothing,
) -> None:
    queue = harness.new_queue()
    first, second = await asyncio.gather(
        harness.start_worker(task_queue=queue), harness.start_worker(task_queue=queue)
    )
    handle = await harness.start_run(PAGES, task_queue=queue)

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

    # A third machine, with no blob directory, reads the whole transcript; the recorded
    # history replays with only the store (both read, so at once).
    (code, shown), _ = await asyncio.gather(
        harness.run_command("show", handle.id), replays_from_the_store_alone(harness, handle)
    )
    assert code == 0, shown
    assert answer_text(PAGES) in shown
    assert shown.count("read_page") >= PAGES, shown

    # One chunk of the result gone: a reader that has not cached it fails, naming it.
    gone = await delete_one_chunk_of_the_result(harness, handle)
    code, shown = await harness.run_command("show", handle.id)
    assert code != 0
    assert gone in shown and harness.store.url in shown and "PayloadBlobMissing" in shown, shown
    print("object store lost one chunk: fails with PayloadBlobMissing, naming it and the store")


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
    handle: WorkflowHandle[ToolLoopWorkflow, RunResult], pages: int
) -> tuple[list[int], list[str]]:
    """Wait for the run: the pages whose tool message is not the page, and the failed or
    timed-out workflow tasks. The run itself never fails."""
    result = await handle.result()
    assert result.transcript[-1].content == answer_text(pages)
    tools = [m.content for m in result.transcript if m.role == "tool"]
    lost = [n for n, text in enumerate(tools, 1) if text != page_text(n)]
    return lost, await failed_workflow_tasks(handle)


async def test_the_store_s_faults_are_waited_out_and_nothing_is_lost(
    harness: SharedNothing,
) -> None:
    """The store answering 503 for 3 s, slow (200 ms a request), stopped for 15 s mid-run
    and restarted, and down when a worker starts: every run completes with every page
    whole (no tool answered "timed out" or "failed") and no workflow task failed or timed
    out. The 503 and slow runs have workers and proxies of their own and run at once; the
    worker that starts on a stopped store starts during the 15 s outage.

    While the store is down, a payload of at most 192 KB (a tool's result, a short run's
    request) rides in history after 2 s of retries (`INLINE_FALLBACK_BYTES`), which is
    what keeps the tool's real result: before, the SDK's store of the result ran past the
    tool's 6 s timeout and the model was told page 2 had timed out."""
    pages = PAGES
    throttled, slow = await harness.add_proxy(), await harness.add_proxy()
    queues = {name: harness.new_queue() for name in ("503", "slow", "stop", "down")}
    throttled_worker, slow_worker, stopped = await asyncio.gather(
        harness.start_worker(proxy=throttled, task_queue=queues["503"]),
        harness.start_worker(proxy=slow, task_queue=queues["slow"]),
        harness.start_worker(task_queue=queues["stop"]),
    )
    runs: dict[str, WorkflowHandle[ToolLoopWorkflow, RunResult]] = {}

    # Answering 503 (SlowDown) for 3 s from its first store request on; and 200 ms before
    # every request.
    slow.delay_s = 0.2
    throttled.failing = True
    runs["answering 503 for 3 s"] = await harness.start_run(pages, task_queue=queues["503"])
    runs["slow, 200 ms a request"] = await harness.start_run(pages, task_queue=queues["slow"])
    await until(lambda: throttled.refused > 0, "the first request the throttled store refuses")
    await asyncio.sleep(3)
    throttled.failing = False

    # Stopped for 15 s mid-run (page 2 is running), then restarted on the same data; a
    # worker started meanwhile, with a run of its own waiting for it.
    runs["stopped 15 s mid-run"] = await harness.start_run(pages, task_queue=queues["stop"])
    await until(lambda: 2 in stopped.calls(), "page 2 of the run the outage hits")
    await harness.store.stop()
    outage = time.monotonic()
    started_down = await harness.start_worker(task_queue=queues["down"])
    runs["down when the worker starts"] = await harness.start_run(pages, task_queue=queues["down"])
    await asyncio.sleep(max(0.0, 15 - (time.monotonic() - outage)))
    await harness.store.start()

    measured = {fault: await outcome(handle, pages) for fault, handle in runs.items()}
    workers = [throttled_worker, slow_worker, stopped, started_down]
    for (fault, (lost, failed)), worker in zip(measured.items(), workers, strict=True):
        said = "completed whole" if not lost else f"completed, page(s) {lost} not the page"
        print(
            f"object store {fault}: {said}, {len(failed)} failed workflow task(s), "
            f"tool calls {worker.calls()}"
        )
    assert all(lost == [] and failed == [] for lost, failed in measured.values()), measured
    # A tool that returned was never run again (its attempt never timed out or failed).
    assert all(worker.calls() == list(range(1, pages + 1)) for worker in workers)
