"""`steadyloop replay`: check that this installed version can finish the runs in flight.

Before an upgrade reaches the workers, the runs they will pick up must replay on the new
code: a workflow change that reorders commands fails a run's next workflow task, and
Temporal retries that task forever. The command replays histories with this version's
workflows and the same data converter and blob store a worker uses, and says which do
not replay. It reads the histories of open runs from Temporal (`--running`, the default
with no files), those closed recently too (`--closed`), or files written by
`temporal workflow show --output json` (or exported from the UI), so a release can be
checked offline against histories kept from production. Nothing runs: no activity, no
model, no tool; a replay only re-executes workflow code against recorded events.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import re
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import json_format
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.worker import Replayer

from steadyloop._cli import live_run
from steadyloop._cli.arguments import ArgumentParser
from steadyloop._worker.config import ConfigError
from steadyloop._worker.process import RUN_WORKFLOWS

EXIT_OK = 0
EXIT_DIVERGED = 1
DEFAULT_LIMIT = 200
_ACTIVATION_LOGGER = "temporalio.worker._workflow"
_CORE_LOGGER = "steadyloop.replay.core"
_REASON_CHARS = 200
_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
# The workflow types a steadyloop worker serves, by their Temporal names.
_TYPES = tuple(getattr(cls, "__temporal_workflow_definition").name for cls in RUN_WORKFLOWS)


@dataclass(frozen=True)
class ReplayVerdict:
    """One history replayed: which run, and the first line of why it diverged (or None)."""

    run: str
    failure: str | None

    def line(self) -> str:
        """How the command prints it: `ok` or `DIVERGES`, the run, and the reason."""
        if self.failure is None:
            return f"ok        {self.run}"
        return f"DIVERGES  {self.run}: {self.failure}"


async def replay_histories(
    histories: AsyncIterator[WorkflowHistory] | Sequence[WorkflowHistory],
    data_converter: DataConverter,
) -> list[ReplayVerdict]:
    """Replay each history on the installed workflows; one verdict per history, in order.

    A history whose workflow type this version does not serve is a divergence too: a
    worker of this version could not run it either."""
    replayer = Replayer(
        workflows=list(RUN_WORKFLOWS), data_converter=data_converter, runtime=_quiet_runtime()
    )
    verdicts: list[ReplayVerdict] = []

    async def one(history: WorkflowHistory) -> None:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        failure = result.replay_failure
        if failure is None:
            verdicts.append(ReplayVerdict(history.workflow_id, None))
            return
        verdicts.append(ReplayVerdict(history.workflow_id, _reason(failure)))

    # A divergence is the verdict, said once per run: the SDK's own report of it (an
    # error with a traceback per failed activation) would bury that line.
    activations = logging.getLogger(_ACTIVATION_LOGGER)
    level, activations.level = activations.level, logging.CRITICAL
    try:
        if isinstance(histories, Sequence):
            for history in histories:
                await one(history)
        else:
            async for history in histories:
                await one(history)
    finally:
        activations.setLevel(level)
    return verdicts


def _reason(failure: Exception) -> str:
    """The core's own message inside an activation failure (the nondeterminism it found),
    else the failure's first line."""
    text = str(failure)
    inner = _CORE_MESSAGE.search(text)
    if inner is not None:
        return inner.group(1).replace('\\"', '"')
    lines = text.strip().splitlines()
    return lines[0] if lines else type(failure).__name__


@functools.cache
def _quiet_runtime() -> Runtime:
    """A runtime whose core log lines (a warning per failed workflow task, which every
    divergence is) go to a logger nobody prints: the verdicts say the same, once."""
    core = logging.getLogger(_CORE_LOGGER)
    core.propagate = False
    core.addHandler(logging.NullHandler())
    forwarding = LogForwardingConfig(logger=core)
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"),
                forwarding=forwarding,
            )
        )
    )


def history_query(*, closed: bool) -> str:
    """The visibility query for steadyloop's runs: open ones, or every one kept."""
    types = " OR ".join(f'WorkflowType = "{name}"' for name in _TYPES)
    return f"({types})" if closed else f'({types}) AND ExecutionStatus = "Running"'


async def server_histories(
    client: Client, *, closed: bool, limit: int
) -> AsyncIterator[WorkflowHistory]:
    """The histories of the runs `history_query` lists, newest first, at most `limit`."""
    async for execution in client.list_workflows(history_query(closed=closed), limit=limit):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        yield await handle.fetch_history()


def file_histories(paths: Sequence[Path]) -> list[WorkflowHistory]:
    """Histories from JSON files; a file that is not one is refused, naming it.

    A history's workflow id is the one its start event records, or else the file's
    name without `.json` (name the file after the run: ids steadyloop derives from it,
    such as a child run's, must come out the same on replay)."""
    histories = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
            history = WorkflowHistory.from_json(path.stem, text)
            if not history.events:
                raise ValueError("it holds no events")
        except (OSError, ValueError, KeyError, TypeError, json_format.Error) as exc:
            # A protobuf parse error quotes the offending value whole (1e300 as 300 digits).
            reason = str(exc) if len(str(exc)) <= _REASON_CHARS else str(exc)[:_REASON_CHARS]
            raise ConfigError(
                f"{path}: not a workflow history in JSON (write one with "
                f"`temporal workflow show --workflow-id ID --output json`): {reason}"
            ) from None
        # Ids derived from the workflow id (children's, for one) must match on replay:
        # the start event names it where the server recorded it, else the file does.
        started = history.events[0].workflow_execution_started_event_attributes
        histories.append(WorkflowHistory(started.workflow_id or path.stem, list(history.events)))
    return histories


def add_replay_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `replay` on `commands`, with the shared Temporal connection flags."""
    replay = commands.add_parser(
        "replay",
        parents=[connection],
        help="check that this version replays the runs in flight (run it before upgrading "
        "the workers)",
        description=(
            "Replay workflow histories on this installed version of steadyloop: the open "
            "runs on the server (default), recently closed ones too (--closed), or "
            "history files. Nothing runs but workflow code; exit 1 names every run that "
            "would fail its next workflow task on this version."
        ),
        epilog="Exit codes: 0 every history replays, 1 one or more diverge, 2 usage.",
    )
    replay.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="history JSON files (`temporal workflow show --output json`); none: ask Temporal",
    )
    replay.add_argument(
        "--closed", action="store_true", help="closed runs the server still keeps, too"
    )
    replay.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"replay at most this many runs from the server (default {DEFAULT_LIMIT})",
    )
    replay.set_defaults(handler=replay_command)
    return replay


def report(verdicts: list[ReplayVerdict], *, nothing: str) -> int:
    """Print one line per history and a summary; the exit code. `nothing` is what an
    empty list means (no open runs, no files), said rather than "0 of 0"."""
    for verdict in verdicts:
        print(verdict.line(), file=sys.stdout)
    diverged = sum(verdict.failure is not None for verdict in verdicts)
    if not verdicts:
        print(f"{nothing}: nothing to check", file=sys.stdout)
    else:
        print(
            f"{len(verdicts) - diverged} of {len(verdicts)} replay on this version"
            + (f"; {diverged} would fail on it: keep them on the old workers" if diverged else ""),
            file=sys.stdout,
        )
    sys.stdout.flush()
    return EXIT_DIVERGED if diverged else EXIT_OK


def replay_command(args: argparse.Namespace) -> int:
    """The `replay` handler: files offline, or the server's runs over the connection."""
    if args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, not {args.limit}")
    if args.files:
        if args.closed:
            raise ConfigError("--closed reads the server; it cannot be given with files")
        histories = file_histories(args.files)
        converter = live_run.connection_settings(args).data_converter
        return report(asyncio.run(replay_histories(histories, converter)), nothing="no files")

    async def replay(client: Client) -> int:
        found = server_histories(client, closed=args.closed, limit=args.limit)
        verdicts = await replay_histories(found, client.data_converter)
        kept = "open or closed" if args.closed else "open"
        return report(verdicts, nothing=f"no steadyloop run is {kept} on this server")

    return live_run.run_with_client(args, replay)


__all__ = [
    "ReplayVerdict",
    "add_replay_parser",
    "file_histories",
    "history_query",
    "replay_command",
    "replay_histories",
    "report",
]
