"""`steadyloop show` and `steadyloop resume`: a run that exists, followed again or carried on.

`show` reads a run's event log from its first event (an ended run's with no worker);
`resume` starts a new run from a stopped one's configuration and conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._cli.arguments import (
    ArgumentParser,
    workflow_id_argument,
)
from steadyloop._cli.failure_text import failure_text
from steadyloop._cli.follow import RunHandle
from steadyloop._cli.invocation import command
from steadyloop._cli.outcome import EXIT_OK, UI_URL_ENV, follow_and_report, say, temporal_of
from steadyloop._cli.run_flags import run_not_valid
from steadyloop._cli.run_ids import add_reuse_flag, check_reuse, start_run
from steadyloop._run.models import (
    RunInput,
)
from steadyloop._run.resume import TRUTHFUL, NothingToResume, resume_input
from steadyloop._stops.stop_text import status_header
from steadyloop._worker.config import (
    ConfigError,
    TemporalSettings,
    load_config,
)
from steadyloop._worker.dev_server import (
    workflow_url,
)
from steadyloop._workflows.tool_loop import ToolLoopWorkflow


def add_show_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `show` on `commands`, with the shared Temporal connection flags."""
    show = commands.add_parser(
        "show",
        parents=[connection],
        help="attach to a run: follow it live, or show how it ended",
    )
    show.add_argument("workflow_id", metavar="ID", type=workflow_id_argument)
    show.add_argument("--ui-url", help=f"Temporal UI address, to print links (env {UI_URL_ENV})")
    show.set_defaults(handler=show_command)
    return show


def add_resume_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `resume` on `commands`, with the shared Temporal connection flags."""
    resume = commands.add_parser(
        "resume",
        parents=[connection],
        help="carry on from a run that stopped, as a new run (an answer cut off, an interrupt, "
        "a deadline, a spent budget; a finished run takes a follow-up --prompt)",
        description="Start a new run with a stopped run's configuration and conversation, "
        "the partial answer that was shown included, and follow it.",
    )
    resume.add_argument(
        "workflow_id", metavar="ID", type=workflow_id_argument, help="the stopped run"
    )
    resume.add_argument(
        "--prompt",
        help="the user message that asks to go on (default: one that says how the run "
        "stopped; required to ask a follow-up of a run that ended with a final answer)",
    )
    resume.add_argument(
        "--id",
        type=workflow_id_argument,
        help="the new run's workflow id (default: ID-resumed-<n>)",
    )
    add_reuse_flag(resume)
    resume.add_argument("--detach", action="store_true", help="print the new id and exit")
    resume.set_defaults(handler=resume_command)
    return resume


def show_command(args: argparse.Namespace) -> int:
    """The `show` handler."""
    return asyncio.run(_show(args))


async def _existing_run(
    args: argparse.Namespace,
) -> tuple[Client, TemporalSettings, RunHandle, WorkflowExecutionDescription]:
    """The run named by `args.workflow_id`, described; a clear error when it is not one."""
    config = load_config(args.config, os.environ)
    temporal = temporal_of(args, config)
    client = await temporal.connect()
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, args.workflow_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ConfigError(
                f"no workflow {args.workflow_id!r} in namespace {temporal.namespace!r} "
                f"at {temporal.address}"
            ) from None
        raise ConfigError(f"cannot describe {args.workflow_id!r}: {exc}") from None
    if description.workflow_type != "ToolLoopWorkflow":
        raise ConfigError(
            f"{args.workflow_id!r} is a {description.workflow_type}, not a steadyloop run"
        )
    return client, temporal, handle, description


async def _show(args: argparse.Namespace) -> int:
    client, temporal, handle, description = await _existing_run(args)
    status = description.status.name.lower() if description.status is not None else "unknown"
    if description.status == WorkflowExecutionStatus.COMPLETED:
        # Temporal's "completed" says only that the workflow returned: say how the run
        # stopped (an interrupted run is not a completed answer).
        status = status_header(await handle.result(), status)
    say(f"run {args.workflow_id} ({status}, started {description.start_time:%Y-%m-%d %H:%M:%S})")
    url = workflow_url(
        args.ui_url or os.environ.get(UI_URL_ENV), temporal.namespace, args.workflow_id
    )
    if url:
        say(f"Temporal UI: {url}")
    # Its event log, from the first event: an ended run's is read from its host's
    # result, with no worker.
    ended = description.status != WorkflowExecutionStatus.RUNNING
    return await follow_and_report(client, handle, description.task_queue, ended=ended)


def resume_command(args: argparse.Namespace) -> int:
    """The `resume` handler."""
    return asyncio.run(_resume(args))


async def _resume(args: argparse.Namespace) -> int:
    check_reuse(args)
    client, _, stopped, description = await _existing_run(args)
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise ConfigError(
            f"run {args.workflow_id!r} is still running; it can be resumed once it stops"
        )
    try:
        result = await stopped.result()
    except WorkflowFailureError as exc:
        raise ConfigError(
            f"run {args.workflow_id!r} did not complete: {failure_text(exc)}"
        ) from None
    original = await _run_input_of(client, stopped)
    prompt = TRUTHFUL if args.prompt is None else args.prompt
    try:  # `resume_input` copies without validating: check the new run as `run` does
        run = RunInput.model_validate(
            resume_input(original, result, prompt=prompt).model_dump(mode="python")
        )
    except NothingToResume as exc:
        raise ConfigError(
            f"run {args.workflow_id!r} ended with a final answer, so there is nothing to "
            f"continue; to ask a follow-up: {command('resume', args.workflow_id)} "
            '--prompt "..."'
        ) from exc
    except ValidationError as exc:
        raise run_not_valid(exc) from None
    workflow_id = args.id or await _free_id(client, f"{args.workflow_id}-resumed")
    await start_run(
        client, run, workflow_id=workflow_id, task_queue=description.task_queue, reuse=args.reuse_id
    )
    if args.detach:
        print(workflow_id, flush=True)
        return EXIT_OK
    say(f"run {workflow_id} resumes {args.workflow_id} ({result.stop_reason})")
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
    return await follow_and_report(
        client,
        handle,
        description.task_queue,
    )


async def _run_input_of(client: Client, handle: RunHandle) -> RunInput:
    """The input the run's latest execution started with (its configuration); decoded with
    the client's converter, since a continued run's input sits in the blob directory."""
    async for event in handle.fetch_history_events():
        started = event.workflow_execution_started_event_attributes
        decoded = await client.data_converter.decode(started.input.payloads, [RunInput])
        return RunInput.model_validate(decoded[0])
    raise ConfigError(f"run {handle.id!r} has no history")


async def _free_id(client: Client, stem: str) -> str:
    """`stem-1`, `stem-2`...: the first id no workflow has."""
    number = 1
    while True:
        candidate = f"{stem}-{number}"
        try:
            await client.get_workflow_handle(candidate).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return candidate
            raise
        number += 1
