"""People in the loop from the command line: `approve`, `send`, `pause`, `unpause`, `interrupt`.

- `steadyloop approve ID` lists the calls waiting for a person's approval (tools
  declared `approval=True`); `steadyloop approve ID CALL` approves one (it runs under
  its receipt), `--reject REASON` rejects it (the model reads REASON).
- `steadyloop send ID MESSAGE` (`-`: from standard input) gives the agent a message; it
  is appended before the run's next model request.
- `steadyloop pause ID` holds the run at its next turn boundary (nothing in flight; the
  deadline still runs); `steadyloop unpause ID` lets it go on. (`steadyloop resume` is
  something else: a new run carrying on from a stopped one.)
- `steadyloop interrupt ID` stops the run now: the model stream or tool batch in flight
  is cancelled, every call is answered, and the run ends with `interrupted`. The
  command waits (`--wait`, 0: not at all) for the run to end and prints how it ended.

Exit codes follow the `steadyloop` table: 0 done; 1 the run has ended, no worker
answered, or the workflow refused; 2 a usage error (flags, an unknown run, a call that
does not wait for approval).

Parsing and formatting are pure functions, tested without a server; `run_steering` is
a command's whole path from a connected client, so a test can drive it against a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TextIO

from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError

from steadyloop._cli import live_run
from steadyloop._cli.arguments import ArgumentParser, read_text_from, workflow_id_argument
from steadyloop._cli.failure_text import failure_text
from steadyloop._cli.invocation import command
from steadyloop._cli.live_run import RunCommandFailure, RunHandle
from steadyloop._cli.progress import arguments_text, result_lines
from steadyloop._run.bounds import seconds_problem
from steadyloop._run.steering import PendingApproval, UserMessage
from steadyloop._worker.config import ConfigError
from steadyloop.client import RunEnded
from steadyloop.client import RunHandle as ClientRunHandle

EXIT_OK = 0
EXIT_FAILED = 1
DEFAULT_WAIT_S = 30.0

Command = Literal["approve", "send", "pause", "unpause", "interrupt"]


@dataclass(frozen=True)
class SteeringRequest:
    """One steering command, checked: what to send to which run."""

    command: Command
    workflow_id: str
    call_id: str | None = None  # approve: the call (None: list the waiting calls)
    reject: str | None = None  # approve: the rejection's reason
    message: str | None = None  # send
    reason: str = "interrupted from the command line"  # interrupt
    wait_s: float = DEFAULT_WAIT_S  # interrupt: how long to wait for the run to end
    as_json: bool = False  # approve: list as JSON
    sha: str | None = None  # approve: the arguments_sha256 (a prefix) the person reviewed


def add_steering_parsers(
    commands: argparse._SubParsersAction[ArgumentParser],
    connection: ArgumentParser,
) -> None:
    """Register `approve`, `send`, `pause`, `unpause` and `interrupt` on `commands`."""

    def command(
        name: str, help: str, description: str | None = None, epilog: str | None = None
    ) -> argparse.ArgumentParser:
        parser = commands.add_parser(
            name, parents=[connection], help=help, description=description, epilog=epilog
        )
        parser.add_argument(
            "workflow_id", metavar="ID", type=workflow_id_argument, help="the run's workflow id"
        )
        parser.set_defaults(handler=steering_command)
        return parser

    approve = command(
        "approve",
        "list a run's calls waiting for approval, or approve or reject one",
        description="Calls of tools declared approval=True wait for a person. Without "
        "CALL, list them; with CALL, approve it (it runs), or reject it with --reject.",
        epilog="Exit codes: 0 done, 1 the run has ended / no worker answered / the workflow "
        "refused, 2 usage (flags, unknown run, a CALL that does not wait).",
    )
    approve.add_argument("call_id", metavar="CALL", nargs="?", help="the waiting call's id")
    approve.add_argument("--reject", metavar="REASON", help="reject it; the model reads REASON")
    approve.add_argument("--json", action="store_true", help="list the waiting calls as JSON")
    approve.add_argument(
        "--sha",
        metavar="HASH",
        help="the call's SHA as listed (8+ characters): refused if what waits under CALL "
        "now has other arguments (servers reuse call ids such as call_0 every turn)",
    )
    send = command("send", "give a running agent a message (sent before its next model request)")
    send.add_argument("message", metavar="MESSAGE", help="what to say (- : standard input)")
    command("pause", "hold a run at its next turn boundary (its deadline still runs)")
    command("unpause", "let a paused run go on")
    interrupt = command(
        "interrupt", "stop a run now: what is in flight is cancelled, every call answered"
    )
    interrupt.add_argument("--reason", help="why (in the run's stop detail)")
    interrupt.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help=f"how long to wait for the run to end (default {DEFAULT_WAIT_S:g}; 0: do not)",
    )


def steering_request(args: argparse.Namespace, stdin: TextIO | None = None) -> SteeringRequest:
    """The request the parsed flags describe; `ConfigError` when they do not fit together."""
    command: Command = args.command
    workflow_id = str(args.workflow_id).strip()
    if not workflow_id:
        raise ConfigError("ID is blank: name the run, as `steadyloop run --detach` printed it")
    if command == "approve":
        return _approve_request(args, workflow_id)
    if command == "send":
        text = (
            read_text_from(stdin or sys.stdin, "MESSAGE") if args.message == "-" else args.message
        )
        try:
            UserMessage(content=text)
        except ValidationError as exc:
            raise ConfigError(f"MESSAGE: {exc.errors(include_url=False)[0]['msg']}") from None
        return SteeringRequest(command, workflow_id, message=text)
    if command == "interrupt":
        problem = seconds_problem(args.wait, zero_allowed=True)
        if problem is not None:  # NaN passed `< 0`, and inf overflowed the wait
            raise ConfigError(f"--wait {problem}")
        reason = (args.reason or "").strip() or SteeringRequest.reason
        return SteeringRequest(command, workflow_id, reason=reason, wait_s=args.wait)
    return SteeringRequest(command, workflow_id)


def _approve_request(args: argparse.Namespace, workflow_id: str) -> SteeringRequest:
    call_id = None if args.call_id is None else args.call_id.strip()
    if call_id is None:
        if args.reject is not None:
            raise ConfigError("--reject REASON needs the CALL it rejects: approve ID CALL")
        return SteeringRequest("approve", workflow_id, as_json=args.json)
    if not call_id:
        raise ConfigError("CALL is blank: copy it from `steadyloop approve ID`")
    if args.json:
        raise ConfigError("--json lists the waiting calls; it does not go with CALL")
    if args.reject is not None and not args.reject.strip():
        raise ConfigError("--reject needs a REASON: the model reads it to decide what next")
    sha = None if args.sha is None else args.sha.strip().lower()
    if sha is not None and (len(sha) < 8 or any(c not in "0123456789abcdef" for c in sha)):
        raise ConfigError("--sha needs 8 or more hex characters of the SHA the listing shows")
    return SteeringRequest("approve", workflow_id, call_id=call_id, reject=args.reject, sha=sha)


# -- formatting -------------------------------------------------------------------------


def approval_lines(workflow_id: str, calls: Sequence[PendingApproval]) -> list[str]:
    """What `steadyloop approve ID` prints: the waiting calls and how to decide them."""
    if not calls:
        return [f"run {workflow_id}: no calls wait for approval"]
    count = "1 call waits" if len(calls) == 1 else f"{len(calls)} calls wait"
    rows = [("CALL", "TOOL", "TURN", "SHA", "ARGUMENTS")] + [
        (c.call_id, c.tool, str(c.turn), c.arguments_sha256[:12], arguments_text(c.arguments))
        for c in calls
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    table = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)), row[4]])
        for row in rows
    ]
    return [
        f"run {workflow_id}: {count} for approval",
        "",
        *table,
        "",
        f"  {command('approve', workflow_id, 'CALL')} [--sha SHA]",
        "      run it (under its receipt: it takes effect at most once); with --sha, only",
        "      if the call waiting under CALL is still the one with these arguments",
        f"  {command('approve', workflow_id, 'CALL', '--reject', 'REASON')}",
        "      do not run it; the model reads REASON",
    ]


def approvals_json(calls: Sequence[PendingApproval]) -> str:
    return json.dumps([c.model_dump(mode="json") for c in calls], ensure_ascii=False, indent=2)


def waiting_call(
    calls: Sequence[PendingApproval], call_id: str, workflow_id: str
) -> PendingApproval:
    """The waiting call named `call_id`; a usage error naming the waiting ones otherwise."""
    for call in calls:
        if call.call_id == call_id:
            return call
    waiting = "; ".join(f"{c.call_id} ({c.tool})" for c in calls) or "none"
    raise ConfigError(
        f"no call {call_id!r} waits for approval in run {workflow_id}; waiting: {waiting}"
    )


# -- the commands -----------------------------------------------------------------------


def steering_command(args: argparse.Namespace) -> int:
    """The handler of every steering command: usage errors go to `run_cli` (exit 2)."""
    request = steering_request(args)
    return live_run.run_with_client(args, lambda client: run_steering(client, request, sys.stdout))


async def run_steering(client: Client, request: SteeringRequest, out: TextIO) -> int:
    """Carry out `request`, printing to `out`. Raises `ConfigError` or `RunCommandFailure`."""
    ended = {
        "approve": "an ended run has no calls waiting for approval",
        "send": "an ended run reads no more messages; `steadyloop resume` starts a new one",
        "pause": "there is nothing left to pause",
        "unpause": "there is nothing left to go on",
        "interrupt": "there is nothing left to interrupt",
    }[request.command]
    handle = await live_run.running_handle(client, request.workflow_id, ended=ended)
    # What waits for approval, read through the client API (only `approve` needs it).
    waiting = (
        (await live_run.waiting_now(client, handle)).pending_approvals
        if request.command == "approve"
        else []
    )
    lines = await _carry_out(handle, live_run.steering_handle(client, handle), request, waiting)
    print("\n".join(lines), file=out, flush=True)
    return EXIT_OK


async def _carry_out(
    handle: RunHandle,
    steering: ClientRunHandle,
    request: SteeringRequest,
    waiting: list[PendingApproval],
) -> list[str]:
    follow = f"follow the run with `{command('show', handle.id)}`"
    show = f"`{command('show', handle.id)}`"
    if request.command == "approve":
        return await _approve(handle, steering, waiting, request, follow)
    if request.command == "send":
        answer = await live_run.steer(
            steering.send(request.message or ""),
            handle.id,
            what="the message",
            refused=f"run {handle.id} refused the message",
            check=show,
        )
        return [f"sent to run {handle.id}: {answer}; {follow}"]
    if request.command in ("pause", "unpause"):
        sent = steering.pause() if request.command == "pause" else steering.unpause()
        answer = await live_run.steer(
            sent,
            handle.id,
            what=f"the {request.command}",
            refused=f"run {handle.id} refused to {request.command}",
            check=show,
        )
        return [f"run {handle.id}: {answer}"]
    return await _interrupt(handle, steering, request)


async def _approve(
    handle: RunHandle,
    steering: ClientRunHandle,
    calls: list[PendingApproval],
    request: SteeringRequest,
    follow: str,
) -> list[str]:
    if request.call_id is None:
        if request.as_json:
            return [approvals_json(calls)]
        return approval_lines(handle.id, calls)
    call = waiting_call(calls, request.call_id, handle.id)
    if request.sha is not None and not call.arguments_sha256.startswith(request.sha):
        raise ConfigError(
            f"{call.call_id} in run {handle.id} is not the call you reviewed (SHA "
            f"{request.sha}...): waiting now is {call.tool} {arguments_text(call.arguments)} "
            f"(turn {call.turn}, SHA {call.arguments_sha256[:12]}); nothing was decided"
        )
    # Bound to the call just listed: if another call took its id in between, the run
    # refuses the decision instead of applying it to what the person never saw.
    decided = (
        steering.approve(call)
        if request.reject is None
        else steering.reject(call, reason=request.reject)
    )
    answer = await live_run.steer(
        decided,
        handle.id,
        what="the decision",
        refused=f"run {handle.id} refused the decision on {call.call_id} ({call.tool})",
        check=f"`{command('approve', handle.id)}`",
    )
    others = len(calls) - 1
    after = follow if not others else f"{others} more waiting: `{command('approve', handle.id)}`"
    return [f"{answer} ({arguments_text(call.arguments)}); {after}"]


async def _interrupt(
    handle: RunHandle, steering: ClientRunHandle, request: SteeringRequest
) -> list[str]:
    try:
        await steering.interrupt(request.reason)
    except (RunEnded, *live_run.QUERY_ERRORS) as exc:
        raise RunCommandFailure(f"cannot interrupt run {handle.id}: {exc}") from None
    if request.wait_s == 0:
        return [f"interrupt sent to run {handle.id}; how it ended: `{command('show', handle.id)}`"]
    try:
        result = await asyncio.wait_for(handle.result(), request.wait_s)
    except WorkflowFailureError as exc:
        return [f"run {handle.id} did not complete: {failure_text(exc)}"]
    except TimeoutError:
        raise RunCommandFailure(
            f"interrupt sent, but run {handle.id} has not ended within {request.wait_s:g}s; is "
            f"a worker running for its task queue? Check with `{command('show', handle.id)}`"
        ) from None
    return [f"run {handle.id} stopped", *result_lines(result)]
