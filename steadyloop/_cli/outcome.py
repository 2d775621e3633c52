"""How a command that follows a run ends: its exit code, and what it prints.

One table of exit codes (the `steadyloop` module docstring explains each) shared by
`run`, `show` and `resume`, so a script can branch on the same number whichever
command followed the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import sys
from collections.abc import Mapping
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowFailureError,
)

from steadyloop._cli.core_logs import cli_runtime
from steadyloop._cli.failure_text import failure_text
from steadyloop._cli.follow import RunHandle, follow
from steadyloop._cli.invocation import command
from steadyloop._cli.progress import ProgressDisplay, one_line, partial_lines, result_lines
from steadyloop._run.models import (
    StopReason,
)
from steadyloop._worker.config import (
    ConfigError,
    LoadedConfig,
    TemporalSettings,
    temporal_settings,
)
from steadyloop._worker.process import (
    install_stop_signals,
)
from steadyloop.client import TemporalLost
from steadyloop.client._reconnect import DEFAULT_RECONNECT_BOUND

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STOPPED = 3
# Following gave up: Temporal did not answer for the reconnect bound, so the run's fate is
# unknown (it lives on the server; `steadyloop show ID` looks again).
EXIT_UNKNOWN = 4
EXIT_INTERRUPTED = 130
EXIT_CODES: dict[StopReason, int] = {
    "final_answer": EXIT_OK,
    "max_tokens": EXIT_STOPPED,
    "failed": EXIT_FAILED,
    "max_turns": EXIT_STOPPED,
    "token_budget": EXIT_STOPPED,
    "deadline": EXIT_STOPPED,
    "interrupted": EXIT_STOPPED,
    "output_interrupted": EXIT_STOPPED,
    "state_too_large": EXIT_STOPPED,
    "invalid_output": EXIT_STOPPED,
}
UI_URL_ENV = "TEMPORAL_UI_URL"
# Seconds a follower waits for an unreachable Temporal to answer again before it gives
# up with `EXIT_UNKNOWN` (default: the client's `DEFAULT_RECONNECT_BOUND`).
RECONNECT_ENV = "STEADYLOOP_RECONNECT_S"


async def follow_and_report(
    client: Client, handle: RunHandle, task_queue: str, *, ended: bool = False
) -> int:
    """Follow the run's event log until it ends (or Ctrl-C), print the outcome, return
    the exit code. `ended`: the run had ended already (`show` of a finished run)."""
    stop = asyncio.Event()
    remove = install_stop_signals(stop, lambda _signal: None)
    display = ProgressDisplay(sys.stdout)
    bound = reconnect_bound(os.environ)
    following = asyncio.create_task(
        follow(client, handle, display, task_queue=task_queue, ended=ended, reconnect_bound=bound)
    )
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        stopping.cancel()
    if not following.done():
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        say(f"stopped following; the run goes on. Attach again: {command('show', handle.id)}")
        return EXIT_INTERRUPTED
    try:
        result = following.result()
    except WorkflowFailureError as exc:
        say(f"the workflow did not complete: {failure_text(exc)}")
        return EXIT_FAILED
    except TemporalLost as lost:
        say(
            f"gave up following: Temporal did not answer for {lost.waited_s:.0f}s "
            f"({one_line(lost.cause, 60)}). How the run is doing is unknown, not failed: "
            f"it lives on the server. Look again once Temporal is back: "
            f"{command('show', handle.id)}"
        )
        return EXIT_UNKNOWN
    lines = result_lines(result, answer_shown=display.answer_shown)
    for line in [*lines, *partial_lines(result, handle.id)]:
        say(line)
    return EXIT_CODES.get(result.stop_reason, EXIT_FAILED)


def temporal_of(
    args: argparse.Namespace, config: LoadedConfig, *, worded_core_logs: bool = True
) -> TemporalSettings:
    """The Temporal settings the connection flags, the environment and `config` name.

    `worded_core_logs`: the client runs on `cli_runtime()`, which keeps the SDK core's raw
    log lines off the user's terminal (the worker, whose log is an operator's, says False).
    """
    settings = temporal_settings(
        address=args.address,
        namespace=args.namespace,
        task_queue=args.task_queue,
        config=config,
        environ=os.environ,
    )
    if not worded_core_logs:
        return settings
    reconnect_bound(os.environ)  # a follower's bad bound is refused before anything starts
    return dataclasses.replace(settings, runtime=cli_runtime())


def reconnect_bound(environ: Mapping[str, str]) -> timedelta:
    """How long a follower waits for an unreachable Temporal (`RECONNECT_ENV`)."""
    raw = environ.get(RECONNECT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_RECONNECT_BOUND
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or not 0 <= seconds <= 86_400:
        raise ConfigError(
            f"{RECONNECT_ENV}={raw[:40]!r} is not a number of seconds from 0 to 86400 "
            "(how long a follower waits for Temporal to answer again)"
        )
    return timedelta(seconds=seconds)


def say(line: str) -> None:
    print(line, flush=True)


def say_error(message: str) -> None:
    print(f"steadyloop: {message}", file=sys.stderr, flush=True)
