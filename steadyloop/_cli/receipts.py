"""`steadyloop receipts ID`: list a run's open ambiguous tool calls, and resolve one.

A call is ambiguous when an earlier attempt of an opaque tool ended without reporting
an outcome: it may or may not have taken effect, so the run does not guess. It suspends
that call (the `ambiguous_receipts` query lists it) until a person answers through the
`resolve_receipt` update:

- `--happened RESULT`: it did take effect; RESULT is the tool message the model reads
  (`-` reads it from standard input).
- `--did-not-happen`: it did not; run it again (the next attempt).
- `--give-up [NOTE]`: do not run it; the model is told it was abandoned (and the note).

Keys are long (a canonical JSON array of tenant, run, tool and an argument hash), so the
table shows a short key: the first hex digits of the SHA-256 of the full key. `--resolve`
takes a unique prefix of that digest (at least `MIN_PREFIX` characters), or the full key
as `--json` prints it. The prefix is matched against the calls open *now* and the update
carries the full key, so a stale prefix cannot resolve a different call than the one it
names: it matches nothing, or the workflow refuses a key that is no longer open.

Exit codes follow the `steadyloop` table: 0 listed or resolved; 1 the run has ended, no
worker answered, Temporal is unreachable, or the workflow refused the resolution; 2 a
usage error (flags, an unknown run, an unknown or ambiguous key prefix).

Everything that formats or parses is a pure function, tested without a server;
`run_receipts` is the command's whole path from a connected client, so a test can drive
it against a real workflow.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from temporalio.client import Client

from steadyloop._cli import live_run
from steadyloop._cli.arguments import ArgumentParser, read_text_from, workflow_id_argument
from steadyloop._cli.invocation import command
from steadyloop._cli.live_run import RunCommandFailure, RunHandle
from steadyloop._cli.progress import ARGUMENTS_WIDTH, arguments_text, one_line
from steadyloop._receipts.ledger import DidNotHappen, GiveUp, Happened
from steadyloop._run.models import AmbiguousCall
from steadyloop._worker.config import ConfigError
from steadyloop._workflows.late_results import never_returned, overrun_text
from steadyloop.events import AmbiguousReceiptEvent, LateResult

EXIT_OK = 0
EXIT_FAILED = 1

SHORT_KEY_LENGTH = 12
MIN_PREFIX = 4
REASON_WIDTH = 160
# A late result quoted in a suggested command at most this long (else: standard input).
LATE_QUOTE_CHARS = 200

Resolution = Happened | DidNotHappen | GiveUp

RESOLVE_USAGE = "--resolve KEY --happened RESULT | --did-not-happen | --give-up [NOTE]"


# The command could not do what was asked, through no fault of its flags (exit 1).
ReceiptsFailure = RunCommandFailure


class KeyPrefixError(ConfigError):
    """`--resolve KEY` names no open call, or more than one (a usage error, exit 2)."""


@dataclass(frozen=True)
class ReceiptsRequest:
    """What `steadyloop receipts` was asked: list (`resolve` None) or resolve one call."""

    workflow_id: str
    resolve: str | None = None
    resolution: Resolution | None = None
    as_json: bool = False


# -- the parser -----------------------------------------------------------------------


def add_receipts_parser(
    commands: argparse._SubParsersAction[ArgumentParser],
    connection: ArgumentParser,
) -> argparse.ArgumentParser:
    """Register `receipts` on `commands`, with the shared Temporal connection flags."""
    receipts = commands.add_parser(
        "receipts",
        parents=[connection],
        help="list a run's ambiguous tool calls, or resolve one",
        description=(
            "List the tool calls a run has suspended because an earlier attempt may have "
            "taken effect (an opaque tool that stopped without an outcome), or resolve one "
            "so the run goes on."
        ),
        epilog=(
            "KEY is the key column of the list, or any unique prefix of it (at least "
            f"{MIN_PREFIX} characters), or the full key that --json prints. "
            "Exit codes: 0 done, 1 the run has ended / no worker answered / the workflow "
            "refused, 2 usage (flags, unknown run, unknown or ambiguous KEY)."
        ),
    )
    receipts.add_argument(
        "workflow_id", metavar="ID", type=workflow_id_argument, help="the run's workflow id"
    )
    receipts.add_argument("--resolve", metavar="KEY", help="the ambiguous call to resolve")
    how = receipts.add_mutually_exclusive_group()
    how.add_argument(
        "--happened",
        metavar="RESULT",
        help="it took effect; RESULT is what the model reads as the tool's answer (- : stdin)",
    )
    how.add_argument(
        "--did-not-happen", action="store_true", help="it did not take effect; run it again"
    )
    how.add_argument(
        "--give-up",
        nargs="?",
        const="",
        metavar="NOTE",
        help="do not run it; tell the model it was abandoned (with NOTE, if given)",
    )
    receipts.add_argument(
        "--json", action="store_true", help="print the open calls as JSON, with full keys"
    )
    receipts.set_defaults(handler=receipts_command)
    return receipts


def receipts_request(args: argparse.Namespace, stdin: TextIO | None = None) -> ReceiptsRequest:
    """The request the parsed flags describe; `ConfigError` when they do not fit together.

    Every check comes before `--happened -` reads standard input, so a mistaken command
    line is refused at once instead of waiting for input.
    """
    workflow_id = str(args.workflow_id).strip()
    if not workflow_id:
        raise ConfigError("ID is blank: name the run, as `steadyloop run --detach` printed it")
    asked = args.happened is not None or args.did_not_happen or args.give_up is not None
    if args.resolve is None:
        if asked:
            raise ConfigError(f"--happened, --did-not-happen and --give-up need {RESOLVE_USAGE}")
        return ReceiptsRequest(workflow_id, as_json=args.json)
    if not args.resolve.strip():
        raise ConfigError("--resolve KEY is blank: copy KEY from `steadyloop receipts ID`")
    if not asked:
        raise ConfigError(f"--resolve {args.resolve} needs what happened: {RESOLVE_USAGE}")
    if args.json:
        raise ConfigError("--json lists the open calls; it does not go with --resolve")
    resolution = resolution_from_flags(
        happened=args.happened,
        did_not_happen=args.did_not_happen,
        give_up=args.give_up,
        stdin=stdin,
    )
    return ReceiptsRequest(workflow_id, resolve=args.resolve.strip(), resolution=resolution)


def resolution_from_flags(
    *,
    happened: str | None,
    did_not_happen: bool,
    give_up: str | None,
    stdin: TextIO | None = None,
) -> Resolution | None:
    """The resolution the flags ask for, or None when none was given."""
    if happened is not None:
        # From standard input, trailing line breaks go (as in shell `$(...)`).
        result = read_text_from(stdin or sys.stdin, "--happened") if happened == "-" else happened
        if not result.strip():
            raise ConfigError(
                "--happened needs the result the model should read, e.g. "
                "--happened 'sent: message id 42' (or - to read it from standard input)"
            )
        return Happened(result=result)
    if did_not_happen:
        return DidNotHappen()
    if give_up is not None:
        return GiveUp(note=give_up.strip() or None)
    return None


# -- formatting -----------------------------------------------------------------------


def key_digest(key: str) -> str:
    """SHA-256 hex of the full key: what the short key column is a prefix of."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def short_key(key: str) -> str:
    return key_digest(key)[:SHORT_KEY_LENGTH]


def table_lines(calls: Sequence[AmbiguousCall], width: int | None = None) -> list[str]:
    """KEY, TOOL, ARGUMENTS, ATTEMPT, REASON: one row per open call, columns aligned.

    The reason, last, is cut to `REASON_WIDTH`, or to what is left of `width` (a
    terminal's; at least 20 characters of it are kept).
    """
    header = ("KEY", "TOOL", "ARGUMENTS", "ATTEMPT")
    rows = [
        (short_key(call.key), call.tool, arguments_text(call.arguments), str(call.attempt))
        for call in calls
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(4)]
    left = sum(widths) + 2 * len(widths)
    reason_width = REASON_WIDTH if width is None else max(width - 1 - left, 20)
    reasons = ["REASON", *(one_line(call.reason, reason_width) for call in calls)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=True)), reason])
        for row, reason in zip([header, *rows], reasons, strict=True)
    ]


def list_lines(
    workflow_id: str, calls: Sequence[AmbiguousCall], width: int | None = None
) -> list[str]:
    """What `steadyloop receipts ID` prints: the table and how to resolve, or that none is open."""
    if not calls:
        return [f"run {workflow_id}: no open ambiguous calls"]
    count = "1 open ambiguous call" if len(calls) == 1 else f"{len(calls)} open ambiguous calls"
    late = [line for call in calls for line in late_lines(workflow_id, call)]
    return [
        f"run {workflow_id}: {count}, suspended because an earlier attempt may have taken effect",
        "",
        *table_lines(calls, width),
        "",
        *([*late, ""] if late else []),
        f"resolve one (KEY: a unique prefix of {MIN_PREFIX}+ characters):",
        f"  {command('receipts', workflow_id, '--resolve', 'KEY', '--happened', 'RESULT')}",
        "      it took effect; RESULT is what the model reads as the tool's answer",
        f"  {command('receipts', workflow_id, '--resolve', 'KEY', '--did-not-happen')}",
        "      it did not take effect; run it again",
        f"  {command('receipts', workflow_id, '--resolve', 'KEY', '--give-up')} [NOTE]",
        "      do not run it; tell the model it was abandoned",
    ]


def waiting_lines(workflow_id: str, call: AmbiguousCall) -> list[str]:
    """What following a run prints when a call turns ambiguous: which call, why, and the
    exact commands that list and resolve it (the run waits for a person until then)."""
    shown = arguments_text(call.arguments)
    return _waiting(workflow_id, call.key, call.tool, shown, call.attempt, call.lost)


def receipt_event_lines(workflow_id: str, event: AmbiguousReceiptEvent) -> list[str]:
    """`waiting_lines` from the run's event log (the event carries what the query did)."""
    try:
        read = json.loads(event.arguments)
    except ValueError:  # cut, or not JSON: shown as written
        read = None
    if isinstance(read, dict):
        shown = arguments_text(read)
    else:
        shown = one_line(event.arguments, ARGUMENTS_WIDTH)
    return _waiting(workflow_id, event.key, event.tool, shown, event.attempt, event.lost)


def _waiting(
    workflow_id: str, key: str, tool: str, shown: str, attempt: int, lost: str | None
) -> list[str]:
    resolve = command("receipts", workflow_id, "--resolve", short_key(key))
    how = lost or "ended with no outcome"
    return [
        f"  ! {tool} {shown} may already have taken effect "
        f"(attempt {attempt} {how}); the run waits for a person. "
        f"Why, and every open call: {command('receipts', workflow_id)}",
        f"    resolve: {resolve} --happened RESULT | --did-not-happen | --give-up [NOTE]",
    ]


def late_lines(workflow_id: str, call: AmbiguousCall) -> list[str]:
    """What a timed-out call's tool returned after its timeout (the worker sent it), and
    the command that accepts it as the call's result; none without one."""
    late = call.late_result
    if late is None:
        return []
    return _late(
        workflow_id,
        call.key,
        call.tool,
        LateResult(
            status=late.outcome.status,
            text=late.outcome.content,
            returned=not never_returned(late),
            overrun_s=late.overrun_s,
        ),
    )


def late_event_lines(workflow_id: str, event: AmbiguousReceiptEvent) -> list[str]:
    """`late_lines` from the run's event log; none before the late result arrived."""
    if event.late is None:
        return []
    return _late(workflow_id, event.key, event.tool, event.late)


def _late(workflow_id: str, key: str, tool: str, late: LateResult) -> list[str]:
    if not late.returned:
        return [
            f"  {short_key(key)}: {tool} was cancelled "
            f"{overrun_text(late.overrun_s)} after its timeout, before it returned; "
            "it may have taken part of its effect"
        ]
    result = late.text
    accept = command("receipts", workflow_id, "--resolve", short_key(key), "--happened") + " "
    # A cut result is longer than any quoted one: it is read from standard input.
    if late.truncated or len(result) > LATE_QUOTE_CHARS or not result.isprintable():
        accept += "- (the result on standard input)"
    else:
        accept += shlex.quote(result)
    status = "" if late.status == "ok" else f" ({late.status})"
    return [
        f"  {short_key(key)}: {tool} finished {overrun_text(late.overrun_s)} after its "
        f"timeout, with this result{status}: {one_line(result, REASON_WIDTH)}",
        f"    it took effect; to give the model that result: {accept}",
    ]


def calls_json(calls: Sequence[AmbiguousCall]) -> str:
    """The open calls for scripts: every field, plus the short key."""
    return json.dumps(
        [{"short_key": short_key(c.key), **c.model_dump(mode="json")} for c in calls],
        ensure_ascii=False,
        indent=2,
    )


def describe_resolution(resolution: Resolution) -> str:
    if isinstance(resolution, Happened):
        return f"it happened, with result {one_line(resolution.result, 60)!r}"
    if isinstance(resolution, DidNotHappen):
        return "it did not happen: run it again"
    note = f" (note: {one_line(resolution.note, 60)!r})" if resolution.note else ""
    return f"give up: tell the model it was abandoned{note}"


# -- matching a key -------------------------------------------------------------------


def match_key(calls: Sequence[AmbiguousCall], given: str, workflow_id: str) -> AmbiguousCall:
    """The one open call `given` names: its full key, or a unique prefix of its digest."""
    for call in calls:
        if call.key == given:
            return call
    if not calls:
        raise KeyPrefixError(f"run {workflow_id} has no open ambiguous calls; nothing to resolve")
    prefix = given.strip().lower()
    listing = "; ".join(f"{short_key(c.key)} ({c.tool})" for c in calls)
    if len(prefix) < MIN_PREFIX:
        raise KeyPrefixError(
            f"--resolve {given!r} is too short: give at least {MIN_PREFIX} characters of "
            f"KEY, so a typo cannot resolve the wrong call. Open: {listing}"
        )
    matches = [call for call in calls if key_digest(call.key).startswith(prefix)]
    if not matches:
        raise KeyPrefixError(
            f"no open ambiguous call in run {workflow_id} has KEY {given!r}. Open: {listing}"
        )
    if len(matches) > 1:
        which = "; ".join(f"{short_key(c.key)} ({c.tool})" for c in matches)
        raise KeyPrefixError(
            f"--resolve {given!r} matches {len(matches)} calls: {which}; give more characters"
        )
    return matches[0]


# -- the command ----------------------------------------------------------------------


def receipts_command(args: argparse.Namespace) -> int:
    """The `receipts` handler: `ConfigError` goes to `run_cli` (exit 2); failures exit 1."""
    request = receipts_request(args)
    return live_run.run_with_client(args, lambda client: run_receipts(client, request, sys.stdout))


async def run_receipts(client: Client, request: ReceiptsRequest, out: TextIO) -> int:
    """List or resolve, printing to `out`. Raises `ConfigError` (usage) or `ReceiptsFailure`."""
    handle = await running_handle(client, request.workflow_id)
    calls = await open_calls(client, handle)
    if request.resolve is None:
        if request.as_json:
            text = calls_json(calls)
        else:
            width = shutil.get_terminal_size().columns if out.isatty() else None
            text = "\n".join(list_lines(handle.id, calls, width))
        print(text, file=out, flush=True)
        return EXIT_OK
    assert request.resolution is not None
    call = match_key(calls, request.resolve, handle.id)
    applied = await resolve(client, handle, call, request.resolution)
    print(
        f"resolved {short_key(call.key)} ({call.tool} {arguments_text(call.arguments)}, "
        f"attempt {call.attempt}): {describe_resolution(request.resolution)}",
        file=out,
    )
    print(f"the workflow answered: {applied}", file=out)
    for line in await _after_resolving(client, handle, call):
        print(line, file=out)
    out.flush()
    return EXIT_OK


async def _after_resolving(client: Client, handle: RunHandle, resolved: AmbiguousCall) -> list[str]:
    """What to do next: the run goes on, unless other calls still wait for a person."""
    follow = f"the run goes on; follow it with `{command('show', handle.id)}`"
    try:
        remaining = [c for c in await open_calls(client, handle) if c.key != resolved.key]
    except ReceiptsFailure:  # the resolution was applied; a failed look-up changes nothing
        return [follow]
    if not remaining:
        return [follow]
    count = "1 more call waits" if len(remaining) == 1 else f"{len(remaining)} more calls wait"
    return [f"{count} for a person: `{command('receipts', handle.id)}`"]


async def running_handle(client: Client, workflow_id: str) -> RunHandle:
    """A handle on the run if it is a running steadyloop run; otherwise say why not."""
    return await live_run.running_handle(
        client, workflow_id, ended="an ended run has no calls left to resolve"
    )


async def open_calls(client: Client, handle: RunHandle) -> list[AmbiguousCall]:
    """The run's open ambiguous calls, as the client API's snapshot of it holds them."""
    return (await live_run.waiting_now(client, handle)).ambiguous_receipts


async def resolve(
    client: Client, handle: RunHandle, call: AmbiguousCall, resolution: Resolution
) -> str:
    """Send `resolve_receipt` for `call`; what the workflow says it applied."""
    return await live_run.steer(
        live_run.steering_handle(client, handle).resolve_receipt(call, resolution),
        handle.id,
        what="the resolution",
        refused=f"the run refused to resolve {short_key(call.key)} ({call.tool})",
        check=f"`{command('receipts', handle.id)}`",
    )
