"""`steadyloop blobs gc`: delete the blobs of runs closed longer than a retention period.

The store is the one the workers use (`STEADYLOOP_BLOB_DIR` or the config file's
`blob_dir`, a directory or `s3://bucket/prefix`, as every client reads it),
Temporal the one the connection flags name: a collection must ask the server whose runs
wrote the blobs, or it would find no run open and keep (not delete) every owner it does
not know. The work is `steadyloop.client._blob_gc.collect`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client

from steadyloop._cli import live_run
from steadyloop._cli.arguments import ArgumentParser
from steadyloop._history.payload_storage import BLOB_DIR_ENV, open_blob_store
from steadyloop._worker.config import ConfigError
from steadyloop.client._blob_gc import DEFAULT_GRACE, DEFAULT_RETENTION, collect

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
EXIT_OK = 0


def duration_argument(text: str) -> timedelta:
    """`30d`, `12h`, `90m`, `3600s` or `3600` (seconds): a period of 0 or more."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: a number with s, m, h or d (e.g. 30d, 12h, 90m)"
        )
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds > 100 * 365 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is more than a hundred years")
    return timedelta(seconds=seconds)


def _text(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    for unit in "dhm":
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


def add_blobs_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `blobs gc` on `commands`, with the shared Temporal connection flags."""
    blobs = commands.add_parser(
        "blobs",
        help="manage the blob store that holds payloads too large for history",
        description="Manage the blob store the workers use (STEADYLOOP_BLOB_DIR).",
    )
    actions = blobs.add_subparsers(dest="blobs_command", required=True, metavar="ACTION")
    gc = actions.add_parser(
        "gc",
        parents=[connection],
        help="delete the blobs of runs closed longer than the retention period",
        description=(
            "Delete the manifests of runs whose workflow closed longer than RETENTION ago "
            "(Temporal says which are open), then the chunks no remaining manifest names. "
            "Nothing younger than GRACE is deleted, so runs in flight are safe; a run "
            "Temporal does not know is kept unless --forget-unknown."
        ),
        epilog="Exit codes: 0 done, 1 Temporal unreachable, 2 usage or no blob store.",
    )
    gc.add_argument(
        "--retention",
        type=duration_argument,
        default=DEFAULT_RETENTION,
        help="keep a closed run's blobs this long after it closes "
        f"(default {_text(DEFAULT_RETENTION)})",
    )
    gc.add_argument(
        "--grace",
        type=duration_argument,
        default=DEFAULT_GRACE,
        help=f"never delete anything written more recently (default {_text(DEFAULT_GRACE)})",
    )
    gc.add_argument("--dry-run", action="store_true", help="report what it would reclaim")
    gc.add_argument(
        "--forget-unknown",
        action="store_true",
        help="also reclaim runs Temporal no longer knows (removed by its own retention), "
        "once older than RETENTION; only with the right --address and --namespace",
    )
    gc.set_defaults(handler=blobs_gc_command)
    return blobs


def blobs_gc_command(args: argparse.Namespace) -> int:
    """The `blobs gc` handler: `ConfigError` goes to `run_cli` (exit 2)."""
    location = live_run.connection_settings(args).blobs.location
    if location is None:
        raise ConfigError(f"{BLOB_DIR_ENV} is off: there is no blob store to collect")
    if isinstance(location, Path) and not location.is_dir():
        raise ConfigError(
            f"no blob store at {location} ({BLOB_DIR_ENV} or the config file's blob_dir); "
            "name the store the workers use"
        )

    async def gc(client: Client) -> int:
        store = open_blob_store(location)
        try:
            report = await collect(
                store,
                client,
                retention=args.retention,
                grace=args.grace,
                dry_run=args.dry_run,
                forget_unknown=args.forget_unknown,
            )
        finally:
            await store.aclose()
        for line in report.lines():
            print(line, file=sys.stdout)
        sys.stdout.flush()
        return EXIT_OK

    return live_run.run_with_client(args, gc)


__all__ = ["add_blobs_parser", "blobs_gc_command", "duration_argument"]
