"""Starting a run under a workflow id a person chose (`run --id`, `resume --id`).

A run is its workflow id to every command that names it (`show`, `receipts`,
`approve`...), so an id reads as "this run". Temporal's default reuse policy lets a
finished workflow's id start a new execution with nothing of the old one: an empty
receipt ledger, so a tool whose receipt the first run completed runs again (an email
sent twice), and a new run a person may take for the old one. So the command line
starts runs with `REJECT_DUPLICATE`: an id whose run has ended is refused, in one line
that names the run and how it stopped, unless the person asks for reuse (`--reuse-id`)
knowing that it starts a new run whose receipts start empty. To go on with a run and its
receipts' results in the conversation, `resume` it (a new id, the transcript carried).

A run still going is refused under either policy (Temporal never starts a second
execution beside a running one).
"""

from __future__ import annotations

import argparse

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from steadyloop._cli.invocation import command
from steadyloop._run.models import RunInput, RunResult
from steadyloop._stops.stop_text import status_header
from steadyloop._worker.config import ConfigError
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.events._publishing import log_mode_memo

REUSE_FLAG = "--reuse-id"


def add_reuse_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        REUSE_FLAG,
        action="store_true",
        help="allow --id to name a run that has ended: a new run starts under it, with "
        "empty receipts (its tools run again; the old run is no longer what the id shows)",
    )


def check_reuse(args: argparse.Namespace) -> None:
    """`--reuse-id` names no id by itself: refused (exit 2) before anything connects."""
    if getattr(args, "reuse_id", False) and not args.id:
        raise ConfigError(f"{REUSE_FLAG} goes with --id ID: without --id a run gets a new id")


def reuse_policy(reuse: bool) -> WorkflowIDReusePolicy:
    """`REJECT_DUPLICATE` unless reuse was asked for on purpose."""
    if reuse:
        return WorkflowIDReusePolicy.ALLOW_DUPLICATE
    return WorkflowIDReusePolicy.REJECT_DUPLICATE


async def start_run(
    client: Client, run: RunInput, *, workflow_id: str, task_queue: str, reuse: bool
) -> None:
    """Start `run` as `workflow_id`; a `ConfigError` saying why when the id is taken."""
    try:
        await client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=workflow_id,
            task_queue=task_queue,
            id_reuse_policy=reuse_policy(reuse),
            memo=log_mode_memo(run),
        )
    except WorkflowAlreadyStartedError:
        raise ConfigError(await taken_id_text(client, workflow_id)) from None


async def taken_id_text(client: Client, workflow_id: str) -> str:
    """Why `workflow_id` cannot start a run: it is running, or how its run ended."""
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
    try:
        description = await handle.describe()
    except RPCError:  # gone between the refusal and this look-up: say what is known
        return f"the workflow id {workflow_id!r} is taken; choose another --id"
    if description.status in (None, WorkflowExecutionStatus.RUNNING):
        return (
            f"a workflow {workflow_id!r} is already running; choose another --id, or attach "
            f"with `{command('show', workflow_id)}`"
        )
    how = description.status.name.lower()
    resume = command("resume", workflow_id)
    if description.status == WorkflowExecutionStatus.COMPLETED:
        result: RunResult | None = None
        try:
            result = await handle.result()
        except Exception:  # a result this client cannot read: Temporal's status says enough
            result = None
        how = status_header(result, how)
        if result is not None and result.stop_reason == "final_answer":
            resume += ' --prompt "..."'  # an answered run goes on with a follow-up
    ended = description.close_time
    when = f" at {ended:%Y-%m-%d %H:%M:%S}" if ended is not None else ""
    return (
        f"run {workflow_id!r} has already run and ended ({how}){when}; a new run under "
        "its id would start with empty receipts and run its tools again. Choose another "
        f"--id, continue it with `{resume}`, or pass {REUSE_FLAG} "
        "to start a new run under this id anyway"
    )
