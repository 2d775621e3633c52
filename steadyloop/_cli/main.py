"""The `steadyloop` command: `worker`, `run`, `show`, `resume`, `receipts`, `blobs gc`, `demo`,
and the commands that steer a running run: `approve`, `send`, `pause`, `unpause`, `interrupt`.

Settings come from flags, then the environment, then a config file (see
`steadyloop._worker.config`); argparse itself holds no defaults, so that order is the
only one. What none of them names, `run` takes from the worker that will serve it: its
endpoint's `model=` and its tool registry (`steadyloop._worker.serving`). Exit codes, in
one table so scripts can branch on them:

- 0: the run ended with a final answer (`worker`: it stopped when asked; `receipts`:
  listed, or resolved; a steering command: done).
- 1: the run stopped with `failed`, or the workflow itself failed, was terminated,
  cancelled or timed out; or Temporal was unreachable, or the worker or the dev
  server could not run (`receipts` and steering commands: the run has ended, no worker
  answered, or the workflow refused).
- 2: a usage or configuration error (the message says which setting and how to fix it;
  `run`: a model, tool, plugin or endpoint the serving worker does not have, or no
  worker polling the task queue to ask; `show`, `receipts`: an unknown run; `receipts`:
  an unknown or ambiguous key; `approve`: a call that does not wait for approval).
- 3: the run stopped at a limit or was interrupted (`max_turns`, `token_budget`,
  `deadline`, `interrupted`): it ended cleanly, but without an answer.
- 4: following gave up: Temporal stopped answering while `run`, `show` or `resume`
  followed the run, and did not answer again within `STEADYLOOP_RECONNECT_S` (default
  300 s). The run's fate is unknown, not failed (it lives on the server); `steadyloop
  show ID` looks again once Temporal is back. A shorter outage is said in one line and
  ridden out.
- 130: Ctrl-C while following a run. The run goes on; `steadyloop show ID` attaches again.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from steadyloop._cli.arguments import (
    ArgumentParser,
    parse_arguments,
)
from steadyloop._cli.blobs import add_blobs_parser
from steadyloop._cli.demo_command import add_demo_parser
from steadyloop._cli.existing_runs import add_resume_parser, add_show_parser
from steadyloop._cli.invocation import from_arguments, invoked
from steadyloop._cli.outcome import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, say_error
from steadyloop._cli.receipts import add_receipts_parser
from steadyloop._cli.replay import add_replay_parser
from steadyloop._cli.run_command import add_run_parser
from steadyloop._cli.steering import add_steering_parsers
from steadyloop._cli.worker_command import add_worker_parser
from steadyloop._web.cli import add_serve_parser
from steadyloop._worker.config import (
    CONFIG_ENV,
    DEFAULT_TASK_QUEUE,
    ConfigError,
    TemporalUnreachable,
)
from steadyloop._worker.dev_server import (
    DevServerError,
)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The `steadyloop` console script and `python -m steadyloop`: run, then end the process.

    The process ends with `os._exit` once output is flushed, skipping interpreter
    finalization: a short-lived process that used a Temporal client can abort there
    (Rust threads releasing the GIL during finalization, temporalio/sdk-python#300),
    which turns exit code 0 into a SIGABRT. Everything that needs closing (dev server,
    worker, temporary directories) is closed by the command itself before this point.
    """
    code = run_cli(argv)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the command; the exit code (see the module docstring)."""
    args = parse_arguments(build_parser(), argv)
    try:
        with invoked(from_arguments(args)):  # the next steps it prints, as typed here
            code: int = args.handler(args)
        return code
    except ConfigError as exc:
        say_error(str(exc))
        return EXIT_USAGE
    except (DevServerError, TemporalUnreachable) as exc:
        say_error(str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    """Every command and its flags; each command module registers its own."""
    parser = ArgumentParser(
        prog="steadyloop",
        description="An LLM agent's tool loop as a durable Temporal workflow.",
        epilog=(
            "Exit codes: 0 answer, 1 failed, 2 usage, 3 stopped at a limit, 4 Temporal "
            "unreachable while following (the run's fate unknown), 130 Ctrl-C."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    connection = ArgumentParser(add_help=False)
    group = connection.add_argument_group("Temporal connection")
    group.add_argument("--address", help="host:port of Temporal (env TEMPORAL_ADDRESS)")
    group.add_argument("--namespace", help="Temporal namespace (env TEMPORAL_NAMESPACE)")
    group.add_argument(
        "--task-queue",
        help=f"task queue (env STEADYLOOP_TASK_QUEUE; default {DEFAULT_TASK_QUEUE!r})",
    )
    group.add_argument("--config", type=Path, help=f"config file, JSON or TOML (env {CONFIG_ENV})")

    add_worker_parser(commands, connection)
    add_run_parser(commands, connection)
    add_show_parser(commands, connection)
    add_resume_parser(commands, connection)
    add_receipts_parser(commands, connection)
    add_blobs_parser(commands, connection)
    add_steering_parsers(commands, connection)
    add_replay_parser(commands, connection)
    add_demo_parser(commands, connection)
    add_serve_parser(commands, connection)
    return parser
