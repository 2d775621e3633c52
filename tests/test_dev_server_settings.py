"""Every embedded dev server steadyloop starts runs with its dynamic config.

Without `history.transferProcessorMaxPollRPS` raised, the dev server's one shard hands
out at most 20 new tasks a second after a short burst, and each workflow task of a fast
loop waits about 40 ms: the figure the benchmark reports would be Temporal's rate limit,
not the loop. These tests read the command line of the server process that was really
started (not a timing): `steadyloop worker --dev` and the demo go through `dev_server()`,
the loop benchmarks through `bench_loop.start_dev_server()`.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

from steadyloop._temporal_binaries import DEV_SERVER_DYNAMIC_CONFIG, dev_server_args
from steadyloop._worker.dev_server import dev_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_loop import start_dev_server


def _children_command_lines() -> list[list[str]]:
    """The argv of every process whose parent is this one (Linux /proc)."""
    found: list[list[str]] = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # The field after the parenthesised name is the state, then the parent's pid.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me:
            found.append([a.decode() for a in argv if a])
    return found


def _dev_server_argv() -> list[str]:
    servers = [
        argv for argv in _children_command_lines() if "server" in argv and "start-dev" in argv
    ]
    assert len(servers) == 1, f"expected one `temporal server start-dev` child, got {servers}"
    return servers[0]


def _dynamic_config(argv: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "--dynamic-config-value":
            key, _, setting = value.partition("=")
            values[key] = setting
    return values


def test_the_settings_are_the_flags_the_cli_takes() -> None:
    assert DEV_SERVER_DYNAMIC_CONFIG["history.transferProcessorMaxPollRPS"] == "10000"
    assert dev_server_args() == [
        "--dynamic-config-value",
        "history.transferProcessorMaxPollRPS=10000",
    ]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
async def test_worker_dev_and_demo_server_is_started_with_the_settings() -> None:
    async with dev_server(ui=False):
        argv = _dev_server_argv()
        given = _dynamic_config(argv)  # the SDK adds settings of its own
        assert {k: given.get(k) for k in DEV_SERVER_DYNAMIC_CONFIG} == DEV_SERVER_DYNAMIC_CONFIG


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
async def test_the_benchmarks_server_is_started_with_the_same_settings() -> None:
    env = await start_dev_server(quiet=True)
    async with env:
        argv = _dev_server_argv()
        given = _dynamic_config(argv)  # the SDK adds settings of its own
        assert {k: given.get(k) for k in DEV_SERVER_DYNAMIC_CONFIG} == DEV_SERVER_DYNAMIC_CONFIG
