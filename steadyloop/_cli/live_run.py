"""Talking to a run that is still going: find it, and steer it, saying plainly why not.

The commands that act on a running run (`receipts`, `approve`, `send`, `pause`,
`unpause`, `interrupt`) share these, so each failure reads the same whichever command
met it: an unknown run is a usage error (`ConfigError`, exit 2); a run that ended, a
worker that does not answer, or a workflow that refuses is a `RunCommandFailure`
(exit 1), printed as one `steadyloop: ...` line.

What waits in a run (`approve` and `receipts` listings) is read through the client API
too (`waiting_now`: `RunHandle.snapshot()`), its typed errors said as one sentence.
Steering goes through the client API (`steadyloop.client.RunHandle`), so the command
line sends what a program would: each request under an idempotency key (its update id),
a decision bound to the call the person saw. `steer` turns the API's typed errors into
the command's sentence, naming the command that shows whether a late request landed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._cli.core_logs import cli_runtime
from steadyloop._cli.invocation import command
from steadyloop._run.models import RunResult
from steadyloop._stops.stop_text import status_header
from steadyloop._worker.config import (
    ConfigError,
    TemporalSettings,
    load_config,
    temporal_settings,
)
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client import RunHandle as ClientRunHandle
from steadyloop.client import RunSnapshot
from steadyloop.client._errors import (
    ClientError,
    NotTheCallReviewed,
    NoWorkerAnswered,
    RequestRefused,
    RunEnded,
)
from steadyloop.errors import SteadyloopError

EXIT_FAILED = 1
QUERY_TIMEOUT = timedelta(seconds=10)
UPDATE_TIMEOUT = timedelta(seconds=30)
QUERY_ERRORS = (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError)

RunHandle = WorkflowHandle[ToolLoopWorkflow, RunResult]


class RunCommandFailure(SteadyloopError):
    """The command could not do what was asked, through no fault of its flags (exit 1)."""


def connection_settings(args: argparse.Namespace) -> TemporalSettings:
    """What the connection flags, the environment and the config file say (Temporal, and
    the blob store every client shares with the workers)."""
    settings = temporal_settings(
        address=args.address,
        namespace=args.namespace,
        task_queue=args.task_queue,
        config=load_config(args.config, os.environ),
        environ=os.environ,
    )
    return dataclasses.replace(settings, runtime=cli_runtime())


def run_with_client(args: argparse.Namespace, command: Callable[[Client], Awaitable[int]]) -> int:
    """Connect as the connection flags say and run `command`: its exit code, or 1 (said on
    stderr) when it raises `RunCommandFailure`. `ConfigError` goes to `run_cli` (exit 2)."""
    temporal = connection_settings(args)

    async def connect_and_run() -> int:
        return await command(await temporal.connect())

    try:
        return asyncio.run(connect_and_run())
    except RunCommandFailure as failure:
        print(f"steadyloop: {failure}", file=sys.stderr, flush=True)
        return EXIT_FAILED


async def running_handle(client: Client, workflow_id: str, *, ended: str) -> RunHandle:
    """A handle on the run if it is a running steadyloop run; otherwise say why not.

    `ended` completes the sentence for a run that has ended (what can no longer be done).
    """
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
    try:
        description = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ConfigError(
                f"no workflow {workflow_id!r} in namespace {client.namespace!r}; check the "
                "ID (`steadyloop run --detach` prints it) and --namespace / --address"
            ) from None
        raise RunCommandFailure(f"cannot describe {workflow_id!r}: {exc}") from None
    if description.workflow_type != "ToolLoopWorkflow":
        raise ConfigError(f"{workflow_id!r} is a {description.workflow_type}, not a steadyloop run")
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name.lower() if description.status is not None else "unknown"
        if description.status == WorkflowExecutionStatus.COMPLETED:
            # "completed" says only that the workflow returned: say how the run stopped.
            status = status_header(await handle.result(rpc_timeout=QUERY_TIMEOUT), status)
        raise RunCommandFailure(
            f"run {workflow_id} has ended ({status}): {ended}. "
            f"`{command('show', workflow_id)}` shows how it ended."
        )
    return handle


async def waiting_now(client: Client, handle: RunHandle) -> RunSnapshot:
    """The run now, through the client API (`RunHandle.snapshot`): its pending approvals
    and ambiguous receipts. A failure is one sentence: a worker must be running to
    answer, or the run ended meanwhile (it then has nothing waiting)."""
    try:
        snapshot = await ClientRunHandle(client, handle.id, worker_bound=QUERY_TIMEOUT).snapshot()
    except NoWorkerAnswered as error:
        raise RunCommandFailure(
            f"run {handle.id} did not answer {error.what} within {error.waited_s:g}s. A "
            "worker must be running for its task queue (`steadyloop worker`) to answer."
        ) from None
    except ClientError as error:
        raise RunCommandFailure(str(error)) from None
    except RPCError as exc:
        raise RunCommandFailure(f"cannot read run {handle.id}: {exc}") from None
    if snapshot.status != "running":
        raise RunCommandFailure(
            f"run {handle.id} has ended ({snapshot.status}) meanwhile; nothing waits in it. "
            f"`{command('show', handle.id)}` shows how it ended."
        )
    return snapshot


def steering_handle(client: Client, handle: RunHandle) -> ClientRunHandle:
    """The client API's handle on the run `running_handle` found, for its typed steering
    (an update waits `UPDATE_TIMEOUT` for a worker, as the command line always has)."""
    return ClientRunHandle(client, handle.id, worker_bound=UPDATE_TIMEOUT)


async def steer(
    request: Awaitable[str], workflow_id: str, *, what: str, refused: str, check: str
) -> str:
    """Await one of the client's steering requests and return the run's answer; its typed
    error becomes the command's one sentence (`RunCommandFailure`).

    `what` names the request in messages ("the resolution"), `refused` begins the one for
    a refusal, and `check` is the command that shows whether a late request landed.
    """
    try:
        return await request
    except NotTheCallReviewed as error:
        raise RunCommandFailure(f"{refused}: {error}. Check with {check}") from None
    except RequestRefused as error:
        raise RunCommandFailure(f"{refused}: {error.reason}. Check with {check}") from None
    except NoWorkerAnswered:
        raise RunCommandFailure(
            f"no answer from run {workflow_id} within {UPDATE_TIMEOUT.total_seconds():g}s; is a "
            f"worker running for its task queue? {what.capitalize()} may still be applied "
            f"when one answers: check with {check}"
        ) from None
    except RunEnded as error:
        raise RunCommandFailure(
            f"run {workflow_id} ended ({error.how}) before {what} reached it; nothing was "
            f"recorded. {check} shows how it ended"
        ) from None
    except ClientError as error:
        raise RunCommandFailure(str(error)) from None
    except RPCError as exc:
        raise RunCommandFailure(f"cannot send {what} to run {workflow_id}: {exc}") from None
