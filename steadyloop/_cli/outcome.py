"""How a command that follows a run ends: its exit code, and what it prints.

One table of exit codes (the `steadyloop` module docstring explains each) shared by
`run`, `show` and `resume`, so a script can branch on the same number whichever
command followed the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys

from temporalio.client import (
    Client,
    WorkflowFailureError,
)

from steadyloop._cli.failure_text import failure_text
from steadyloop._cli.follow import RunHandle, follow
from steadyloop._cli.invocation import command
from steadyloop._cli.progress import ProgressDisplay, partial_lines, result_lines
from steadyloop._run.models import (
    StopReason,
)
from steadyloop._worker.config import (
    LoadedConfig,
    TemporalSettings,
    temporal_settings,
)
from steadyloop._worker.process import (
    install_stop_signals,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STOPPED = 3
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


async def follow_and_report(
    client: Client, handle: RunHandle, task_queue: str, *, ended: bool = False
) -> int:
    """Follow the run's event log until it ends (or Ctrl-C), print the outcome, return
    the exit code. `ended`: the run had ended already (`show` of a finished run)."""
    stop = asyncio.Event()
    remove = install_stop_signals(stop, lambda _signal: None)
    display = ProgressDisplay(sys.stdout)
    following = asyncio.create_task(
        follow(client, handle, display, task_queue=task_queue, ended=ended)
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
    lines = result_lines(result, answer_shown=display.answer_shown)
    for line in [*lines, *partial_lines(result, handle.id)]:
        say(line)
    return EXIT_CODES.get(result.stop_reason, EXIT_FAILED)


def temporal_of(args: argparse.Namespace, config: LoadedConfig) -> TemporalSettings:
    """The Temporal settings the connection flags, the environment and `config` name."""
    return temporal_settings(
        address=args.address,
        namespace=args.namespace,
        task_queue=args.task_queue,
        config=config,
        environ=os.environ,
    )


def say(line: str) -> None:
    print(line, flush=True)


def say_error(message: str) -> None:
    print(f"steadyloop: {message}", file=sys.stderr, flush=True)
