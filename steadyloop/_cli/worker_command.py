"""`steadyloop worker`: serve runs, against a Temporal cluster or an embedded dev server.

The worker's settings are read here (flags, environment, config file), its tools and
MCP servers are checked before a dev server starts, and its ready line is printed (and
written to `--ready-file`) once it polls, for scripts that wait on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

from steadyloop._cli.arguments import (
    ArgumentParser,
)
from steadyloop._cli.invocation import current
from steadyloop._cli.outcome import EXIT_FAILED, EXIT_OK, say, say_error, temporal_of
from steadyloop._mcp.config import McpConfigError, describe_server, mcp_servers
from steadyloop._mcp.startup import refuse_unstartable
from steadyloop._run.bounds import seconds_problem
from steadyloop._worker.config import (
    ConfigError,
    EndpointSettings,
    describe_endpoint,
    endpoint_settings,
    load_config,
    load_tool_registry,
    tools_spec,
)
from steadyloop._worker.dev_server import (
    DEFAULT_DEV_IP,
    DEFAULT_DEV_PORT,
    dev_server,
    shown_host,
)
from steadyloop._worker.process import (
    DEFAULT_GRACEFUL_SHUTDOWN,
    WorkerOptions,
    install_stop_signals,
    serve,
)
from steadyloop.telemetry import install_from, settings_from
from steadyloop.tools._registry import ToolRegistry


def add_worker_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `worker` on `commands`, with the shared Temporal connection flags."""
    worker = commands.add_parser(
        "worker",
        parents=[connection],
        help="run a worker (with --dev: and an embedded Temporal dev server with its UI)",
        description="Serve ToolLoopWorkflow, the model activity and the tool activities.",
    )
    worker.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="NAME=BASE_URL[,model=M][,api_key_env=VAR][,header.H=V][,extra_body.K=V]",
        help="a model endpoint; model= is the model runs ask for when they name none, "
        "header.H=V adds a header (${VAR} in V is read from the environment at call time), "
        "extra_body.K=V a request field (V as JSON, else text). Repeatable; also "
        "STEADYLOOP_ENDPOINTS, OPENAI_BASE_URL/OPENAI_API_KEY as endpoint 'default', or "
        "the config file",
    )
    worker.add_argument(
        "--tools", metavar="MODULE:ATTRIBUTE", help="your tool registry (env STEADYLOOP_TOOLS)"
    )
    worker.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=COMMAND [ARGS] | NAME=URL",
        help="serve an MCP server's tools: a stdio command line, or a streamable HTTP URL "
        "(repeatable; also [mcp.NAME] in the config file). A command that cannot be started "
        "stops the worker from starting, unless the name is marked optional:NAME",
    )
    worker.add_argument("--dev", action="store_true", help="start an embedded dev server + UI")
    worker.add_argument(
        "--dev-port", type=int, default=DEFAULT_DEV_PORT, help="dev server port (default 7233)"
    )
    worker.add_argument("--dev-ui-port", type=int, help="dev UI port (default: port + 1000)")
    worker.add_argument(
        "--dev-db",
        type=Path,
        help="keep the dev server's state in this SQLite file (default: in memory, gone "
        "when the worker stops)",
    )
    worker.add_argument(
        "--ip",
        "--dev-ip",
        dest="dev_ip",
        default=DEFAULT_DEV_IP,
        metavar="ADDRESS",
        help="address the dev server and its UI listen on (default 127.0.0.1; 0.0.0.0 for "
        "every interface, to reach them from another machine)",
    )
    worker.add_argument(
        "--ui-host",
        metavar="HOST",
        help="host name to print in the dev server's addresses and UI links (default: --ip, "
        "or this machine's name when --ip is 0.0.0.0)",
    )
    worker.add_argument(
        "--ready-file",
        type=Path,
        metavar="PATH",
        help="once the worker polls, write its ready line's JSON here (removed when it "
        "stops); the line itself is printed as `ready {...}`",
    )
    worker.add_argument(
        "--graceful-shutdown",
        type=float,
        default=DEFAULT_GRACEFUL_SHUTDOWN.total_seconds(),
        metavar="SECONDS",
        help="how long running activities may finish after SIGINT/SIGTERM (default 30)",
    )
    worker.add_argument("--max-concurrent-activities", type=int, metavar="N")
    worker.add_argument("--log-level", default="INFO", help="Python log level (default INFO)")
    worker.add_argument(
        "--otel",
        nargs="?",
        const="",
        metavar="URL",
        help="export OpenTelemetry traces and metrics over OTLP/HTTP (to URL, else "
        "OTEL_EXPORTER_OTLP_ENDPOINT or localhost:4318); also on when that variable is set",
    )
    worker.add_argument(
        "--otel-content",
        action="store_true",
        help="put prompts, answers, tool arguments and results in spans (default: never)",
    )
    worker.set_defaults(handler=worker_command)
    return worker


def worker_command(args: argparse.Namespace) -> int:
    """The `worker` handler: logging as `--log-level` says, then serve until stopped."""
    logging.basicConfig(
        level=str(args.log_level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_worker(args))


async def _worker(args: argparse.Namespace) -> int:
    environ = os.environ
    config = load_config(args.config, environ)
    temporal = temporal_of(args, config, worded_core_logs=False)
    endpoints = endpoint_settings(flags=args.endpoint, config=config, environ=environ)
    spec = tools_spec(args.tools, config, environ)
    tools = load_tool_registry(spec)
    problem = seconds_problem(args.graceful_shutdown, zero_allowed=True)
    if problem is not None:  # NaN passed `< 0`; inf overflowed `timedelta`
        raise ConfigError(f"--graceful-shutdown {problem}")
    try:
        servers = mcp_servers(config.file.mcp, args.mcp, source=config.source or "config file")
        refuse_unstartable(servers)  # before a dev server starts
    except McpConfigError as exc:
        raise ConfigError(str(exc)) from None
    options = WorkerOptions(
        task_queue=temporal.task_queue,
        endpoints=endpoints.registry,
        tools=tools,
        graceful_shutdown=timedelta(seconds=args.graceful_shutdown),
        max_concurrent_activities=args.max_concurrent_activities,
        mcp=tuple(servers),
    )
    try:
        telemetry = install_from(settings_from(environ, flag=args.otel, content=args.otel_content))
    except RuntimeError as exc:  # TelemetryUnavailable: the otel extra is missing
        raise ConfigError(str(exc)) from None

    def summary(address: str, namespace: str) -> None:
        say(
            f"steadyloop worker: task queue {options.task_queue!r}, namespace {namespace!r}, "
            f"Temporal at {address}"
        )
        if len(endpoints.registry) == 0:
            say(
                "  model endpoints: none configured; runs will fail with unknown_endpoint "
                "(set OPENAI_BASE_URL/OPENAI_API_KEY, STEADYLOOP_ENDPOINTS or --endpoint)"
            )
        for endpoint in endpoints.registry:
            say(f"  model endpoint {describe_endpoint(endpoint, environ)}")
        listed = [f"{t.name} (needs approval)" if t.approval else t.name for t in tools]
        say(f"  tools ({spec}): {', '.join(listed) or 'none'}")
        if telemetry is not None:
            where = telemetry.settings.endpoint or "the OTEL_EXPORTER_OTLP_* endpoint"
            content = "with" if telemetry.settings.capture_content else "without"
            say(f"  OpenTelemetry: traces and metrics to {where}, {content} content")
        for server in servers:
            say(f"  MCP server {describe_server(server)}")

    stop = asyncio.Event()
    remove = install_stop_signals(
        stop,
        lambda name: say(
            f"steadyloop worker: {name}: finishing running activities (up to "
            f"{args.graceful_shutdown:g}s); signal again to stop now"
        ),
    )
    ready_file: Path | None = args.ready_file
    served = [tools]  # the registry served, MCP servers' tools included, once known

    def serving(registry: ToolRegistry) -> None:
        served[0] = registry

    def ready(address: str, namespace: str, ui_url: str | None) -> Callable[[], None]:
        def announce() -> None:
            line = ready_line(
                address=address,
                namespace=namespace,
                task_queue=options.task_queue,
                ui_url=ui_url,
                endpoints=endpoints.models,
                tools=served[0].names(),
                approval=[tool.name for tool in served[0] if tool.approval],
            )
            if ready_file is not None:
                _write_ready_file(ready_file, line)
            say(f"ready {line}")

        return announce

    try:
        if args.dev:
            host = args.ui_host or shown_host(args.dev_ip)
            async with dev_server(
                ip=args.dev_ip,
                port=args.dev_port,
                ui_port=args.dev_ui_port,
                namespace=temporal.namespace,
                database=args.dev_db,
                data_converter=temporal.data_converter,
                public_host=host,
            ) as server:
                address = f"{host}:{server.address.rpartition(':')[2]}"
                summary(address, server.namespace)
                say(f"  Temporal UI: {server.ui_url}")
                kept = f"kept in {args.dev_db}" if args.dev_db else None
                say(f"  state: {kept or 'in memory, gone when it stops (--dev-db FILE keeps it)'}")
                say(f"  start a run from another terminal: {_run_hint(address, endpoints)}")
                say("Ctrl-C to stop.")
                await serve(
                    server.client,
                    options,
                    stop,
                    ready(address, server.namespace, server.ui_url),
                    on_tools=serving,
                )
        else:
            client = await temporal.connect()
            summary(temporal.address, temporal.namespace)
            say("Ctrl-C to stop.")
            await serve(
                client,
                options,
                stop,
                ready(temporal.address, temporal.namespace, None),
                on_tools=serving,
            )
    except RuntimeError as exc:  # the SDK's worker errors: namespace missing, server gone
        say_error(f"the worker stopped: {exc}")
        return EXIT_FAILED
    finally:
        remove()
        if telemetry is not None:
            telemetry.shutdown()  # export what is pending
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
    say("steadyloop worker: stopped")
    return EXIT_OK


def ready_line(
    *,
    address: str,
    namespace: str,
    task_queue: str,
    ui_url: str | None,
    endpoints: Mapping[str, str],
    tools: Sequence[str],
    approval: Sequence[str] = (),
) -> str:
    """The worker's ready line after `ready `: one line of JSON a script can parse.

    `endpoints` maps each endpoint with a default model to it (no URL, no key);
    `tools` every tool served, its MCP servers' included; `approval` those of them
    whose calls wait for a person.
    """
    return json.dumps(
        {
            "address": address,
            "namespace": namespace,
            "task_queue": task_queue,
            "ui_url": ui_url,
            "pid": os.getpid(),
            "endpoints": dict(endpoints),
            "tools": list(tools),
            "approval": list(approval),
        },
        separators=(", ", ": "),
    )


def _write_ready_file(path: Path, line: str) -> None:
    """Written whole or not at all (a reader never sees half), then renamed into place."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_text(line + "\n", encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        raise ConfigError(f"--ready-file {path}: {exc.strerror or exc}") from None


def _run_hint(address: str, endpoints: EndpointSettings) -> str:
    """The `steadyloop run` command that reaches this worker."""
    default = endpoints.registry.names[0] if len(endpoints.registry) == 1 else "default"
    needs_endpoint = default != "default"
    flags = ["--endpoint", default] if needs_endpoint else []
    if default not in endpoints.models:
        flags += ["--model", "MODEL"]
    at_worker = current().with_flag("--address", address)
    return at_worker.command("run", *flags, last=["What is 17 * 23?"])
