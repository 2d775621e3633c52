"""`steadyloop serve`: the HTTP server, connected to Temporal as the command line is.

`serve` reads the settings every command reads (flags, environment, config file:
`steadyloop._worker.config`) plus the config file's `[web]` table
(`steadyloop._web.settings`), connects like `steadyloop run`, and serves the app with
uvicorn. `serve --dev` also starts what `steadyloop worker --dev` starts, an embedded
dev server and a worker on it, so one command serves a working API.

A first run that names no model or tools takes the serving worker's, as `steadyloop
run` does (`steadyloop._worker.serving`); `--endpoint`, `--model` and `--tool` set them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio.client import Client

from steadyloop._serving import WorkerDescription
from steadyloop._worker.config import (
    ConfigError,
    LoadedConfig,
    TemporalSettings,
    endpoint_settings,
    load_config,
    load_tool_registry,
    run_model,
    temporal_settings,
    tools_spec,
)

__all__ = ["DEFAULT_PORT", "add_serve_parser", "serve_command"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
logger = logging.getLogger(__name__)


def add_serve_parser(commands: Any, connection: argparse.ArgumentParser) -> None:
    """Add `serve` to the `steadyloop` command's subcommands."""
    serve = commands.add_parser(
        "serve",
        parents=[connection],
        help="serve runs over HTTP: threads, SSE event streams, approvals, AG-UI",
        description='Serve the HTTP API (docs/web.md, "Serve it on the web"; the routes are '
        "listed at /docs once it runs). Needs the web extra: pip install 'steadyloop[web]'.",
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT}; 0 picks a free one)"
    )
    serve.add_argument(
        "--dev",
        action="store_true",
        help="also start an embedded Temporal dev server and a worker (as `worker --dev`); "
        "without configured tokens it serves this machine only, with no token",
    )
    serve.add_argument("--dev-port", type=int, help="the dev server's port (default: a free one)")
    serve.add_argument("--dev-db", type=Path, help="keep the dev server's state in this file")
    serve.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="NAME=BASE_URL[,model=M]",
        help="--dev: a model endpoint for the worker (as `worker --endpoint`)",
    )
    serve.add_argument("--tools", metavar="MODULE:ATTRIBUTE", help="--dev: the worker's tools")
    serve.add_argument("--model", help="the model a run asks for when its request names none")
    serve.add_argument(
        "--tool", action="append", default=None, help="a tool runs are offered (repeatable)"
    )
    serve.add_argument("--ready-file", type=Path, help="write the server's URL here once serving")
    serve.add_argument("--log-level", default="WARNING", help="Python log level (WARNING)")
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(args.log_level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"`steadyloop serve` needs the web extra ({exc.name} is missing): "
            "pip install 'steadyloop[web]'"
        ) from None
    return asyncio.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    from steadyloop._web.settings import web_settings
    from steadyloop._worker.dev_server import dev_server
    from steadyloop._worker.process import WorkerOptions, install_stop_signals, serve

    environ = os.environ
    config = load_config(args.config, environ)
    temporal = temporal_settings(
        address=args.address,
        namespace=args.namespace,
        task_queue=args.task_queue,
        config=config,
        environ=environ,
    )
    web = web_settings(config.file.web, environ, dev=args.dev)
    if web.open_access and not _loopback(args.host):
        raise ConfigError(
            f"--host {args.host}: without bearer tokens `serve --dev` serves this machine "
            "only; configure tokens (STEADYLOOP_WEB_TOKENS) to listen elsewhere"
        )
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port (0 to 65535)")
    listener = _listen(args.host, args.port)
    stop = asyncio.Event()
    remove = install_stop_signals(stop, lambda name: _say(f"steadyloop serve: {name}: stopping"))
    try:
        if args.dev:
            endpoints = endpoint_settings(flags=args.endpoint, config=config, environ=environ)
            spec = tools_spec(args.tools, config, environ)
            options = WorkerOptions(
                task_queue=temporal.task_queue,
                endpoints=endpoints.registry,
                tools=load_tool_registry(spec),
            )
            async with dev_server(
                ip=DEFAULT_HOST,
                port=args.dev_port,
                namespace=temporal.namespace,
                database=args.dev_db,
                data_converter=temporal.data_converter,
            ) as server:
                _say(f"  Temporal dev server at {server.address}, UI {server.ui_url}")
                worker = asyncio.create_task(serve(server.client, options, stop))
                try:
                    here = dataclasses.replace(temporal, address=server.address)
                    await _serve_http(args, server.client, here, config, web, listener, stop)
                finally:
                    stop.set()
                    await worker
        else:
            from steadyloop._cli.core_logs import cli_runtime

            client = await dataclasses.replace(temporal, runtime=cli_runtime()).connect()
            await _serve_http(args, client, temporal, config, web, listener, stop)
    finally:
        remove()
        listener.close()
        if args.ready_file is not None:
            args.ready_file.unlink(missing_ok=True)
    _say("steadyloop serve: stopped")
    return 0


async def _serve_http(
    args: argparse.Namespace,
    client: Client,
    temporal: TemporalSettings,
    config: LoadedConfig,
    web: Any,
    listener: socket.socket,
    stop: asyncio.Event,
) -> None:
    import uvicorn

    from steadyloop._web.admission import RootAdmission
    from steadyloop._web.app import create_app
    from steadyloop._web.client_backend import ClientBackend, RunDefaults
    from steadyloop._worker.serving import describe_serving_worker
    from steadyloop.client import SteadyloopClient

    environ = os.environ
    endpoints = endpoint_settings(flags=args.endpoint, config=config, environ=environ)
    endpoint = environ.get("STEADYLOOP_ENDPOINT") or config.file.default_endpoint or None
    model = run_model(args.model, endpoint or "default", endpoints, environ, required=False)

    async def describe() -> WorkerDescription:
        return await describe_serving_worker(
            client,
            temporal.task_queue,
            why="a run names no model or tools (serve --model/--tool, or the request)",
            instead="pass `serve --model M --tool T`",
        )

    backend = ClientBackend(
        SteadyloopClient(client, task_queue=temporal.task_queue, fanout_buffer=web.run_buffer),
        defaults=RunDefaults(endpoint=endpoint, model=model, tools=args.tool),
        admission=RootAdmission(client, task_queue=temporal.task_queue, settings=web),
        describe=describe,
    )
    app = create_app(backend, web)
    server = _server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    host, port = listener.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if task.done():
        await task
        return
    tenants = ", ".join(sorted(web.tenants)) or "none"
    access = "open (no token, this machine only)" if web.open_access else f"tenants: {tenants}"
    _say(f"steadyloop serve: {url} (API at {url}/docs), Temporal at {temporal.address}")
    _say(f"  task queue {temporal.task_queue!r}; {access}")
    _say("Ctrl-C to stop.")
    if args.ready_file is not None:
        args.ready_file.write_text(url + "\n", encoding="utf-8")
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    stopping.cancel()
    await task


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def _server(config: Any) -> Any:
    """uvicorn's server without its signal handlers: `serve` owns SIGINT/SIGTERM (the
    worker of `--dev` shuts down gracefully on the same signal)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)
