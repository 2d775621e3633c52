"""`steadyloop blobs gc` on a dev server and a local blob store.

Three runs write blobs: A and B close a second apart, C waits in a tool. A collection
whose retention falls between A's close and B's deletes what only A stored: C still
completes, B still replays from the store, A no longer can, and the bytes reclaimed are
printed (the dry run first prints the same figure and deletes nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import loop_harness
import pytest
from loop_harness import Loop, files_run, running_loop
from temporalio.client import WorkflowHandle
from temporalio.worker import Replayer

from steadyloop._cli.main import run_cli
from steadyloop._history.object_store import LocalDirectoryStore, ObjectStore
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._run.models import RunInput, RunResult
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client._blob_gc import collect
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


def call(name: str, arguments: dict[str, str], call_id: str) -> ScriptedResponse:
    scripted = ScriptedCall(name, arguments, id=call_id)
    return tool_calls_response(scripted)


def files_and_hold_run() -> RunInput:
    run = files_run()
    return run.model_copy(update={"tools": [*run.tools, "long_hold"]})


async def replays(
    loop: Loop, blobs: Path, handle: WorkflowHandle[ToolLoopWorkflow, RunResult]
) -> bool:
    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=[ToolLoopWorkflow], data_converter=steadyloop_data_converter(blobs)
    )
    outcome = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return outcome.replay_failure is None


async def bytes_in(store: ObjectStore) -> int:
    return sum([info.size async for info in store.list()])


def gc_cli(loop: Loop, *flags: str) -> tuple[int, str]:
    out = io.StringIO()
    target = loop.client.service_client.config.target_host
    with contextlib.redirect_stdout(out):
        code = run_cli(["blobs", "gc", "--address", target, "--grace", "0s", *flags])
    return code, out.getvalue()


async def test_gc_reclaims_a_closed_runs_blobs_and_keeps_open_and_retained_runs_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_harness, "start_environment", loop_harness.dev_server_environment)
    blobs = tmp_path / "blobs"
    monkeypatch.setenv("STEADYLOOP_BLOB_DIR", str(blobs))
    monkeypatch.setenv("STEADYLOOP_HOME", str(tmp_path / "home"))
    script = [
        call("read_scratch", {"path": "a"}, "ra"),
        text_response("A done"),
        call("read_scratch", {"path": "b"}, "rb"),
        text_response("B done"),
        call("long_hold", {"label": "c"}, "lc"),
        text_response("C done"),
    ]
    async with running_loop(script, blob_threshold=1024, blob_dir=blobs) as loop:
        loop.effects.files["a"] = "".join(f"a{i:06d} " for i in range(5_000))
        loop.effects.files["b"] = "".join(f"b{i:06d} " for i in range(5_000))
        a = await loop.start(files_and_hold_run())
        await a.result()
        await asyncio.sleep(1.5)  # B closes well after A: a retention can fall between
        b = await loop.start(files_and_hold_run())
        await b.result()
        c = await loop.start(files_and_hold_run())
        while not loop.effects.started["long_hold"]:
            await asyncio.sleep(0.05)
        closed_a = (await a.describe()).close_time
        closed_b = (await b.describe()).close_time
        assert closed_a is not None and closed_b is not None
        store = LocalDirectoryStore(blobs)
        stored_before = await bytes_in(store)

        # Retention: closed more than (now - the midpoint of the two closes) ago.
        now = datetime.now(UTC)
        retention = now - (closed_a + (closed_b - closed_a) / 2)
        flag = f"{retention.total_seconds():.3f}s"
        code, dry = await asyncio.to_thread(gc_cli, loop, "--retention", flag, "--dry-run")
        assert code == 0, dry
        assert await bytes_in(store) == stored_before  # dry: untouched
        code, done = await asyncio.to_thread(gc_cli, loop, "--retention", flag)
        assert code == 0, done
        stored_after = await bytes_in(store)

        loop.effects.release.set()
        result_c = await asyncio.wait_for(c.result(), 30)
        b_replays = await replays(loop, blobs, b)
        a_replays = await replays(loop, blobs, a)
        c_replays = await replays(loop, blobs, c)

    print(dry, done, sep="\n")  # the figures, as a user sees them
    reclaimed = stored_before - stored_after
    assert reclaimed > 40_000  # at least A's own transcript and result
    assert f"would reclaim {reclaimed:,} bytes" in dry
    assert f"reclaimed {reclaimed:,} bytes" in done
    expired = done.split("expired: ", 1)[1]
    assert a.id in expired and b.id not in expired and c.id not in expired
    assert result_c.final_answer == "C done"
    assert b_replays and c_replays
    assert not a_replays  # its blobs are what was reclaimed


async def test_gc_with_a_long_grace_deletes_nothing_even_of_expired_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_harness, "start_environment", loop_harness.dev_server_environment)
    blobs = tmp_path / "blobs"
    script = [call("read_scratch", {"path": "a"}, "ra"), text_response("A done")]
    async with running_loop(script, blob_threshold=1024, blob_dir=blobs) as loop:
        loop.effects.files["a"] = "x" * 30_000
        await loop.run(files_and_hold_run())
        store = LocalDirectoryStore(blobs)
        stored = await bytes_in(store)
        report = await collect(store, loop.client, retention=timedelta(0), grace=timedelta(hours=1))
        assert report.reclaimed_bytes == 0 and await bytes_in(store) == stored
        later = datetime.now(UTC) + timedelta(hours=2)
        dry = await collect(store, loop.client, retention=timedelta(0), dry_run=True, now=later)
        assert dry.reclaimed_bytes > 30_000 and await bytes_in(store) == stored
