"""The `steadyloop` command: `worker`, `run`, `show`, `resume`, `receipts`, `blobs gc`, `demo`,
and the commands that steer a running run: `approve`, `send`, `pause`, `unpause`, `interrupt`.

Settings come from flags, then the environment, then a config file (see
`steadyloop.worker.config`); argparse itself holds no defaults, so that order is the
only one. What none of them names, `run` takes from the worker that will serve it: its
endpoint's `model=` and its tool registry (`steadyloop.worker.serving`). Exit codes, in
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
- 130: Ctrl-C while following a run. The run goes on; `steadyloop show ID` attaches again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import logging
import os
import sys
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.service import RPCError, RPCStatusCode

from steadyloop.cli.arguments import (
    ArgumentParser,
    parse_arguments,
    workflow_id_argument,
)
from steadyloop.cli.blobs import add_blobs_parser
from steadyloop.cli.failure_text import failure_text
from steadyloop.cli.follow import RunHandle, follow
from steadyloop.cli.invocation import command, current, from_arguments, invoked
from steadyloop.cli.progress import ProgressDisplay, partial_lines, result_lines
from steadyloop.cli.receipts import add_receipts_parser
from steadyloop.cli.replay import add_replay_parser
from steadyloop.cli.run_ids import add_reuse_flag, check_reuse, start_run
from steadyloop.cli.steering import add_steering_parsers
from steadyloop.cli.wire_bounds import sampling_some_wire_refuses, wire_refusal
from steadyloop.mcp.config import McpConfigError, describe_server, mcp_servers
from steadyloop.mcp.startup import refuse_unstartable
from steadyloop.output.forwarding import ForwardingOptions
from steadyloop.routing.provider_profiles import ProviderProfile
from steadyloop.run.bounds import WireApi, seconds_problem
from steadyloop.run.models import (
    ContinuationOptions,
    RunInput,
    RunLimits,
    RunPlugins,
    Sampling,
    StopReason,
)
from steadyloop.run.resume import TRUTHFUL, NothingToResume, resume_input
from steadyloop.serving import WorkerDescription
from steadyloop.stops.stop_text import status_header
from steadyloop.telemetry import install_from, settings_from
from steadyloop.tools.registry import ToolRegistry
from steadyloop.web.cli import add_serve_parser
from steadyloop.worker.config import (
    CONFIG_ENV,
    DEFAULT_TASK_QUEUE,
    ENDPOINT_ENV,
    MODEL_ENV,
    ConfigError,
    EndpointSettings,
    LoadedConfig,
    TemporalSettings,
    TemporalUnreachable,
    describe_endpoint,
    endpoint_settings,
    load_config,
    load_tool_registry,
    run_endpoint,
    run_model,
    run_prices,
    run_route,
    temporal_settings,
    tools_spec,
)
from steadyloop.worker.dev_server import (
    DEFAULT_DEV_IP,
    DEFAULT_DEV_PORT,
    DevServerError,
    dev_server,
    shown_host,
    workflow_url,
)
from steadyloop.worker.process import (
    DEFAULT_GRACEFUL_SHUTDOWN,
    WorkerOptions,
    install_stop_signals,
    serve,
)
from steadyloop.worker.serving import describe_serving_worker
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

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
}
UI_URL_ENV = "TEMPORAL_UI_URL"
# Which flag or argument sets each field of a run, to name it when the run is refused.
RUN_FIELD_FLAGS: dict[str, str] = {
    "prompt": "PROMPT (resume: --prompt)",
    "system_prompt": "--system",
    "endpoint": "--endpoint (or STEADYLOOP_ENDPOINT)",
    "model": "--model (or STEADYLOOP_MODEL)",
    "route": "--route",
    "tools": "--tool",
    "on_demand": "--plugin",
    "plugins": "--plugin",
    "tenant_id": "--tenant",
    "max_turns": "--max-turns",
    "token_budget": "--token-budget",
    "deadline_s": "--deadline",
    "after_max_tokens": "--continue-cut",
    "after_stream_failure": "--continue-stalled",
    "provider_profile": "--profile",
    "tool_choice": "--tool-choice",
    "prefill": "--prefill",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "stop": "--stop",
}


def _run_not_valid(exc: ValidationError) -> ConfigError:
    """The run's refusal on one line, each problem named by the flag that set it and the
    rule it broke (`--max-turns: must be at least 1 (got 0)`), not pydantic's error list."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = [part for part in error["loc"] if isinstance(part, str)]
        named = next((RUN_FIELD_FLAGS[p] for p in reversed(loc) if p in RUN_FIELD_FLAGS), None)
        message = _rule_text(error)
        if named is None and "prompt" in message:  # the run's own rule: no prompt at all
            named, message = "PROMPT", "must not be empty (a run needs a prompt or messages)"
        where = named or ".".join(str(part) for part in error["loc"]) or "the run"
        problems.append(f"{where}: {message}")
    return ConfigError("; ".join(problems))


def _rule_text(error: Any) -> str:
    """pydantic's error as the rule a flag broke, with the value given."""
    context = error.get("ctx") or {}
    given = error.get("input")
    got = f" (got {given!r})" if isinstance(given, int | float | str) else ""
    rules = {
        "greater_than_equal": "must be at least {ge}",
        "greater_than": "must be more than {gt}",
        "less_than_equal": "must be at most {le}",
        "less_than": "must be less than {lt}",
        "string_too_short": "must not be empty",
        "too_short": "must not be empty",
        "literal_error": "must be one of {expected}",
    }
    rule = rules.get(str(error.get("type")))
    if rule is not None:
        try:
            return rule.format(**context) + got
        except (KeyError, IndexError):
            pass
    message = str(error["msg"]).removeprefix("Value error, ")
    return message + ("" if "got" in message else got)


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
        _error(str(exc))
        return EXIT_USAGE
    except (DevServerError, TemporalUnreachable) as exc:
        _error(str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="steadyloop",
        description="An LLM agent's tool loop as a durable Temporal workflow.",
        epilog="Exit codes: 0 answer, 1 failed, 2 usage, 3 stopped at a limit, 130 Ctrl-C.",
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
    worker.set_defaults(handler=_worker_command)

    run = commands.add_parser(
        "run",
        parents=[connection],
        help="start a run and follow it live",
        description="Start a ToolLoopWorkflow and show its progress until it ends.",
    )
    run.add_argument("prompt", help="what to ask the agent")
    run.add_argument(
        "--endpoint", help="endpoint name (env STEADYLOOP_ENDPOINT; default 'default')"
    )
    run.add_argument(
        "--model",
        help="model name (env STEADYLOOP_MODEL; default: the endpoint's model=, from the "
        "config file or else the serving worker)",
    )
    run.add_argument(
        "--route",
        action="append",
        metavar="NAME[=MODEL]",
        help="try these endpoints in order, each with its model (default: the endpoint's); "
        "repeatable, instead of --endpoint and --model",
    )
    run.add_argument("--system", help="system prompt")
    run.add_argument(
        "--tool",
        action="append",
        metavar="NAME",
        help="offer this tool (repeatable; default: every tool of the serving worker's "
        "registry that is in no plugin); a name the worker lacks is refused before the run "
        "starts",
    )
    run.add_argument(
        "--plugin",
        action="append",
        metavar="NAME",
        help="let the model activate this plugin's tools (repeatable; default: every plugin "
        "of the registry, unless --tool is given)",
    )
    run.add_argument("--no-tools", action="store_true", help="offer no tools or plugins")
    run.add_argument(
        "--tools",
        metavar="MODULE:ATTRIBUTE",
        help="registry whose tools to offer, loaded here (default: the serving worker's "
        "registry, asked before the run starts)",
    )
    knobs = run.add_argument_group("what the model is asked with")
    knobs.add_argument(
        "--tool-choice",
        metavar="auto|required|none|TOOL",
        help="how the model may use its tools: auto (it decides; the provider's default), "
        "required (it must call one), none, or the name of the tool it must call; a forcing "
        "choice applies to turns that answer you, not after tool results",
    )
    knobs.add_argument(
        "--temperature",
        type=float,
        help="sampling temperature (0 to 2; 0 to 1 on Anthropic endpoints)",
    )
    knobs.add_argument("--top-p", type=float, help="nucleus sampling, 0 to 1")
    knobs.add_argument("--max-tokens", type=int, help="tokens the model may write per turn")
    knobs.add_argument("--seed", type=int, help="sampling seed, for providers that take one")
    knobs.add_argument(
        "--stop",
        action="append",
        metavar="TEXT",
        help="end the model's reply where TEXT appears (repeatable)",
    )
    knobs.add_argument(
        "--prefill",
        metavar="TEXT",
        help="the opening of the model's reply on turns that answer you, which it continues "
        "(for small models: SmolLM2 on llama.cpp calls tools after '<tool_call>\\n'); "
        "\\n is a line break",
    )
    run.add_argument("--max-turns", type=int, help="model turns at most (default 20)")
    run.add_argument("--token-budget", type=int, help="stop after this many tokens")
    # A float, refused by the run's own rule (`RunLimits.deadline_s`) with the flag named:
    # `inf` is not "no deadline", and 1e12 s does not fit the workflow's clock.
    run.add_argument("--deadline", type=float, metavar="SECONDS", help="stop after this long")
    run.add_argument(
        "--profile",
        choices=typing.get_args(ProviderProfile),
        default="portable",
        help="what the provider accepts: transcripts are healed and tool schemas sanitized "
        "for it (default 'portable')",
    )
    run.add_argument(
        "--no-stream",
        action="store_true",
        help="do not forward the model's text as it streams (then a failed attempt may be "
        "retried freely; with streaming, an attempt whose text was shown is never repeated)",
    )
    run.add_argument(
        "--continue-cut",
        type=int,
        default=0,
        metavar="N",
        help="continue an answer cut by the output token limit up to N times (default 0: "
        "stop max_tokens with the cut text)",
    )
    run.add_argument(
        "--continue-stalled",
        type=int,
        default=0,
        metavar="N",
        help="continue from the shown text when a stream fails after showing output, up to "
        "N times (default 0: stop output_interrupted; resume by hand)",
    )
    run.add_argument(
        "--continue-as-prefill",
        dest="continue_as_prefill",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send a continuation as an assistant prefill (default: as the --profile says; "
        "anthropic takes one, llama.cpp and vLLM can be set to) rather than the text and a "
        "request to continue",
    )
    run.add_argument(
        "--reasoning-is-output",
        action="store_true",
        help="count forwarded reasoning as shown output (default: only answer text counts)",
    )
    run.add_argument("--tenant", default="default", help="tenant id (default 'default')")
    run.add_argument(
        "--id", type=workflow_id_argument, help="workflow id (default: steadyloop-<uuid>)"
    )
    add_reuse_flag(run)
    run.add_argument("--detach", action="store_true", help="print the workflow id and exit")
    run.add_argument("--ui-url", help=f"Temporal UI address, to print links (env {UI_URL_ENV})")
    run.set_defaults(handler=_run_command)

    show = commands.add_parser(
        "show",
        parents=[connection],
        help="attach to a run: follow it live, or show how it ended",
    )
    show.add_argument("workflow_id", metavar="ID", type=workflow_id_argument)
    show.add_argument("--ui-url", help=f"Temporal UI address, to print links (env {UI_URL_ENV})")
    show.set_defaults(handler=_show_command)

    resume = commands.add_parser(
        "resume",
        parents=[connection],
        help="carry on from a run that stopped, as a new run (an answer cut off, an interrupt, "
        "a deadline, a spent budget; a finished run takes a follow-up --prompt)",
        description="Start a new run with a stopped run's configuration and conversation, "
        "the partial answer that was shown included, and follow it.",
    )
    resume.add_argument(
        "workflow_id", metavar="ID", type=workflow_id_argument, help="the stopped run"
    )
    resume.add_argument(
        "--prompt",
        help="the user message that asks to go on (default: one that says how the run "
        "stopped; required to ask a follow-up of a run that ended with a final answer)",
    )
    resume.add_argument(
        "--id",
        type=workflow_id_argument,
        help="the new run's workflow id (default: ID-resumed-<n>)",
    )
    add_reuse_flag(resume)
    resume.add_argument("--detach", action="store_true", help="print the new id and exit")
    resume.set_defaults(handler=_resume_command)

    add_receipts_parser(commands, connection)
    add_blobs_parser(commands, connection)
    add_steering_parsers(commands, connection)
    add_replay_parser(commands, connection)

    demo = commands.add_parser(
        "demo",
        help="everything embedded: dev server, worker, scripted provider; no key, no Docker",
    )
    demo.add_argument(
        "--scenario",
        choices=["conversation", "tour"],
        default="conversation",
        help="conversation: one run that needs nobody (default); tour: stops for you to "
        "approve, send, interrupt, resume and resolve from another terminal",
    )
    demo.add_argument(
        "--keep-running", action="store_true", help="keep the dev server and UI up until Ctrl-C"
    )
    demo.add_argument("--workdir", type=Path, help="sandbox and outbox here (default: a temp dir)")
    demo.add_argument(
        "--pace",
        type=float,
        default=0.04,
        metavar="SECONDS",
        help="pause between chunks",
    )
    demo.add_argument(
        "--web",
        action="store_true",
        help="serve the demo on a web page (the web extra) and print its address",
    )
    demo.add_argument("--port", type=int, default=0, help="--web: the page's port (default: free)")
    demo.set_defaults(handler=_demo_command)
    add_serve_parser(commands, connection)
    return parser


# -- worker ---------------------------------------------------------------------------


def _worker_command(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(args.log_level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_worker(args))


async def _worker(args: argparse.Namespace) -> int:
    environ = os.environ
    config = load_config(args.config, environ)
    temporal = _temporal(args, config)
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
        _say(
            f"steadyloop worker: task queue {options.task_queue!r}, namespace {namespace!r}, "
            f"Temporal at {address}"
        )
        if len(endpoints.registry) == 0:
            _say(
                "  model endpoints: none configured; runs will fail with unknown_endpoint "
                "(set OPENAI_BASE_URL/OPENAI_API_KEY, STEADYLOOP_ENDPOINTS or --endpoint)"
            )
        for endpoint in endpoints.registry:
            _say(f"  model endpoint {describe_endpoint(endpoint, environ)}")
        listed = [f"{t.name} (needs approval)" if t.approval else t.name for t in tools]
        _say(f"  tools ({spec}): {', '.join(listed) or 'none'}")
        if telemetry is not None:
            where = telemetry.settings.endpoint or "the OTEL_EXPORTER_OTLP_* endpoint"
            content = "with" if telemetry.settings.capture_content else "without"
            _say(f"  OpenTelemetry: traces and metrics to {where}, {content} content")
        for server in servers:
            _say(f"  MCP server {describe_server(server)}")

    stop = asyncio.Event()
    remove = install_stop_signals(
        stop,
        lambda name: _say(
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
            _say(f"ready {line}")

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
                _say(f"  Temporal UI: {server.ui_url}")
                kept = f"kept in {args.dev_db}" if args.dev_db else None
                _say(f"  state: {kept or 'in memory, gone when it stops (--dev-db FILE keeps it)'}")
                _say(f"  start a run from another terminal: {_run_hint(address, endpoints)}")
                _say("Ctrl-C to stop.")
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
            _say("Ctrl-C to stop.")
            await serve(
                client,
                options,
                stop,
                ready(temporal.address, temporal.namespace, None),
                on_tools=serving,
            )
    except RuntimeError as exc:  # the SDK's worker errors: namespace missing, server gone
        _error(f"the worker stopped: {exc}")
        return EXIT_FAILED
    finally:
        remove()
        if telemetry is not None:
            telemetry.shutdown()  # export what is pending
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
    _say("steadyloop worker: stopped")
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


# -- run and show ---------------------------------------------------------------------


def _run_command(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


class _ServingWorker:
    """The Temporal client, connected once, and the serving worker's description, asked
    for once and only when the run needs it (`steadyloop.serving`)."""

    def __init__(self, temporal: TemporalSettings) -> None:
        self.temporal = temporal
        self._client: Client | None = None
        self.description: WorkerDescription | None = None

    async def client(self) -> Client:
        if self._client is None:
            self._client = await self.temporal.connect()
        return self._client

    async def describe(self, why: str, instead: str) -> WorkerDescription:
        if self.description is None:
            self.description = await describe_serving_worker(
                await self.client(), self.temporal.task_queue, why=why, instead=instead
            )
        return self.description


async def _run(args: argparse.Namespace) -> int:
    environ = os.environ
    config = load_config(args.config, environ)
    temporal = _temporal(args, config)
    settings = endpoint_settings(flags=[], config=config, environ=environ)
    # What the flags alone decide is refused before anything is asked of a worker.
    if args.route and (args.endpoint or args.model):
        raise ConfigError(
            "--route names the endpoints and models; leave out --endpoint and --model"
        )
    check_reuse(args)
    sampling = _sampling(args)
    limits = _limits(args)
    _refuse_what_no_run_could_carry(args, config, settings, environ)
    serving = _ServingWorker(temporal)
    models = dict(settings.models)
    unmodelled = [spec.partition("=")[0].strip() for spec in args.route or [] if "=" not in spec]
    if any(name not in models for name in unmodelled):
        served = await serving.describe(
            "a --route endpoint without =MODEL takes the endpoint's model",
            "write --route NAME=MODEL",
        )
        models = {e.name: e.model for e in served.endpoints if e.model} | models
    route = run_route(args.route or [], EndpointSettings(settings.registry), models=models)
    # Named by --endpoint, STEADYLOOP_ENDPOINT or the config file; else the worker's own
    # endpoint when it serves exactly one (or `default`).
    endpoint_named = bool(
        args.endpoint or environ.get(ENDPOINT_ENV) or config.file.default_endpoint
    )
    if route is None:
        endpoint = run_endpoint(args.endpoint, config, environ)
        model = run_model(args.model, endpoint, settings, environ, required=False)
        if model is None:
            served = await serving.describe(
                "the run names no model (--model, STEADYLOOP_MODEL or the config file)",
                "pass --model",
            )
            if not endpoint_named:
                endpoint = _only_served_endpoint(endpoint, served)
            model = _served_model(endpoint, served)
    else:
        endpoint, model = route.candidates[0].endpoint, route.candidates[0].model
    in_play = [candidate.endpoint for candidate in route.candidates] if route else [endpoint]
    await _check_sampling_wires(sampling, in_play, settings, serving)
    tools, plugins = await _run_tools(args, serving)
    if serving.description is not None and route is None:
        # Asked anyway: refuse an endpoint it lacks now, not at the first turn. (A route
        # goes on past an endpoint a worker lacks, by design: not checked.)
        if not endpoint_named:
            endpoint = _only_served_endpoint(endpoint, serving.description)
        _check_served_endpoint(endpoint, serving.description)
    _check_tool_choice(args.tool_choice, tools, plugins)
    try:
        run = RunInput(
            endpoint=endpoint,
            model=model,
            prompt=args.prompt,
            system_prompt=args.system,
            tools=tools,
            plugins=RunPlugins(on_demand=plugins),
            limits=limits,
            sampling=sampling,
            tool_choice=args.tool_choice,
            prefill=_unescaped(args.prefill),
            tenant_id=args.tenant,
            provider_profile=args.profile,
            prices=run_prices(route.endpoints if route else endpoint, config),
            route=route,
            forwarding=ForwardingOptions(
                enabled=not args.no_stream, reasoning_is_output=args.reasoning_is_output
            ),
            continuation=ContinuationOptions(
                after_max_tokens=args.continue_cut,
                after_stream_failure=args.continue_stalled,
                prefill=args.continue_as_prefill,
            ),
        )
    except ValidationError as exc:
        raise _run_not_valid(exc) from None

    client = await serving.client()
    workflow_id = args.id or f"steadyloop-{uuid.uuid4()}"
    await start_run(
        client, run, workflow_id=workflow_id, task_queue=temporal.task_queue, reuse=args.reuse_id
    )
    if args.detach:
        print(workflow_id, flush=True)
        return EXIT_OK
    _say(f"run {workflow_id} started on task queue {temporal.task_queue!r}")
    if route is None:
        asked = f"endpoint {endpoint!r}, model {model!r}"
    else:
        asked = "route " + " then ".join(f"{c.endpoint}={c.model}" for c in route.candidates)
    _say(f"{asked}, tools: {', '.join(tools) or 'none'}")
    if plugins:
        _say(f"plugins the model may activate: {', '.join(plugins)}")
    url = workflow_url(args.ui_url or environ.get(UI_URL_ENV), temporal.namespace, workflow_id)
    if url:
        _say(f"Temporal UI: {url}")
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
    return await _follow_and_report(client, handle, temporal.task_queue)


async def _run_tools(
    args: argparse.Namespace, serving: _ServingWorker
) -> tuple[list[str], list[str]]:
    """The run's core tools and on-demand plugins: as named (each checked against the
    registry), or (neither named) every tool in no plugin and every plugin of the
    registry. The registry is `--tools`, loaded here, or else the serving worker's."""
    if args.no_tools:
        return [], []
    named_tools = list(dict.fromkeys(args.tool or []))
    named_plugins = list(dict.fromkeys(args.plugin or []))
    if args.tools:
        registry = load_tool_registry(args.tools)
        available, unplugged = registry.names(), registry.unplugged()
        plugins, where = registry.plugin_names(), f"the registry {args.tools}"
    else:
        served = await serving.describe(
            "the run's tools are the serving worker's"
            if not (named_tools or named_plugins)
            else "--tool and --plugin names are checked against the serving worker's",
            "pass --no-tools, or --tools MODULE:ATTRIBUTE to load the registry here",
        )
        available, unplugged, plugins = served.tools, served.unplugged_tools, served.plugins
        where = f"the worker on task queue {serving.temporal.task_queue!r}"
    for flag, names, known in (
        ("--tool", named_tools, available),
        ("--plugin", named_plugins, plugins),
    ):
        unknown = [name for name in names if name not in known]
        if unknown:
            what = "tools" if flag == "--tool" else "plugins"
            raise ConfigError(
                f"{flag} {', '.join(unknown)}: not among the {what} of {where}; it has: "
                f"{', '.join(known) or 'none'}" + _suggestion(unknown[0], known)
            )
    if named_tools or named_plugins:
        return named_tools, named_plugins
    return list(unplugged), list(plugins)


def _check_tool_choice(choice: str | None, tools: Sequence[str], plugins: Sequence[str]) -> None:
    """`--tool-choice` refused by name: forcing a call with no tools, or naming a tool the
    run does not offer (the provider would refuse either on every attempt)."""
    if choice is None or choice in ("auto", "none"):
        return
    if not tools and not plugins:
        raise ConfigError(
            f"--tool-choice {choice}: the run offers no tools; name them with --tool, or "
            "leave --tool-choice out"
        )
    if choice != "required" and choice not in tools:
        raise ConfigError(
            f"--tool-choice {choice}: not one of the run's tools ({', '.join(tools) or 'none'})"
            f"{_suggestion(choice, tools)}; name one of them, or auto, required, none"
        )


def _suggestion(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _served_model(endpoint: str, served: WorkerDescription) -> str:
    """The serving worker's default model for `endpoint`, or why there is none."""
    _check_served_endpoint(endpoint, served)
    described = served.endpoint(endpoint)
    if described is None or described.model is None:
        raise ConfigError(
            f"no model to ask endpoint {endpoint!r} for: the serving worker's endpoint has "
            f"no model=; pass --model, set {MODEL_ENV}, or give the worker's endpoint one "
            f"(--endpoint {endpoint}=URL,model=MODEL)"
        )
    return described.model


async def _check_sampling_wires(
    sampling: Sampling,
    endpoints: Sequence[str],
    settings: EndpointSettings,
    serving: _ServingWorker,
) -> None:
    """A knob an endpoint's wire refuses, refused before the run starts (`wire_bounds`).
    The worker is asked only for a knob some wire refuses, when this machine's
    configuration does not know every endpoint's wire; no worker to ask leaves it to
    the model activity, which refuses the request on that endpoint."""
    if not sampling_some_wire_refuses(sampling):
        return
    wires: dict[str, WireApi] = {e.name: e.api for e in settings.registry}
    if serving.description is None and any(name not in wires for name in endpoints):
        with contextlib.suppress(ConfigError):
            await serving.describe("the wires of the run's endpoints", "lower the knob")
    if serving.description is not None:
        wires |= {e.name: e.api for e in serving.description.endpoints}
    refused = wire_refusal(sampling, endpoints, wires)
    if refused is not None:
        raise ConfigError(refused)


def _only_served_endpoint(endpoint: str, served: WorkerDescription) -> str:
    """`endpoint` (the unnamed default), unless the worker lacks it and serves one other:
    a worker started with one endpoint is what a run that names none means."""
    names = [e.name for e in served.endpoints]
    return names[0] if endpoint not in names and len(names) == 1 else endpoint


def _check_served_endpoint(endpoint: str, served: WorkerDescription) -> None:
    names = [e.name for e in served.endpoints]
    if endpoint not in names:
        known = ", ".join(names) or "none; start it with --endpoint NAME=URL,model=M"
        hint = _suggestion(endpoint, names)
        name, defines, _ = endpoint.partition("=")
        if defines:  # a worker's NAME=URL,... given to `run`, which takes a name
            raise ConfigError(
                f"--endpoint {endpoint!r}: a run names an endpoint the worker serves; "
                f"NAME=URL,... defines one, where the worker starts: `steadyloop worker "
                f"--endpoint {endpoint}`, then `steadyloop run --endpoint {name}`. The "
                f"serving worker knows: {known}"
            )
        raise ConfigError(
            f"endpoint {endpoint!r} is not one the serving worker knows{hint}; it knows: "
            f"{known}. Add it where the worker starts: `steadyloop worker --endpoint "
            f"{endpoint}=BASE_URL[,model=MODEL][,api_key_env=VAR]` (or the config file's "
            f"[endpoints.{endpoint}])"
        )


def _refuse_what_no_run_could_carry(
    args: argparse.Namespace,
    config: LoadedConfig,
    settings: EndpointSettings,
    environ: Mapping[str, str],
) -> None:
    """The run's own rules over what the flags and environment already name (a blank
    tenant, a control character in a tool name or model), before a worker is asked:
    the flag is named whether or not a worker is up. What only the worker can say
    (the model, the tools) stands in as a name no rule refuses."""
    if args.route:
        return  # `run_route` checks each candidate's names itself
    endpoint = run_endpoint(args.endpoint, config, environ)
    model = run_model(args.model, endpoint, settings, environ, required=False)
    try:
        RunInput(
            endpoint=endpoint,
            model=model or "model",
            prompt=args.prompt,
            system_prompt=args.system,
            tools=list(dict.fromkeys(args.tool or [])),
            plugins=RunPlugins(on_demand=list(dict.fromkeys(args.plugin or []))),
            prefill=_unescaped(args.prefill),
            tenant_id=args.tenant,
        )
    except ValidationError as exc:
        raise _run_not_valid(exc) from None


def _limits(args: argparse.Namespace) -> RunLimits:
    """`--max-turns`, `--token-budget`, `--deadline`, refused by name."""
    given = {
        key: value
        for key, value in (
            ("max_turns", args.max_turns),
            ("token_budget", args.token_budget),
            ("deadline_s", args.deadline),
        )
        if value is not None
    }
    try:
        return RunLimits.model_validate(given)
    except ValidationError as exc:
        raise _run_not_valid(exc) from None


def _sampling(args: argparse.Namespace) -> Sampling:
    """`--temperature`, `--top-p`, `--max-tokens`, `--seed`, `--stop`, refused by name."""
    given = {
        key: value
        for key, value in (
            ("temperature", args.temperature),
            ("top_p", args.top_p),
            ("max_tokens", args.max_tokens),
            ("seed", args.seed),
            ("stop", [_unescaped(s) for s in args.stop] if args.stop else None),
        )
        if value is not None
    }
    try:
        return Sampling.model_validate(given)
    except ValidationError as exc:
        raise _run_not_valid(exc) from None


def _unescaped(text: str | None) -> str | None:
    """`\\n` and `\\t` typed on a command line as the line break and tab they mean."""
    if text is None:
        return None
    return text.replace("\\n", "\n").replace("\\t", "\t")


def _show_command(args: argparse.Namespace) -> int:
    return asyncio.run(_show(args))


async def _existing_run(
    args: argparse.Namespace,
) -> tuple[Client, TemporalSettings, RunHandle, WorkflowExecutionDescription]:
    """The run named by `args.workflow_id`, described; a clear error when it is not one."""
    config = load_config(args.config, os.environ)
    temporal = _temporal(args, config)
    client = await temporal.connect()
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, args.workflow_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ConfigError(
                f"no workflow {args.workflow_id!r} in namespace {temporal.namespace!r} "
                f"at {temporal.address}"
            ) from None
        raise ConfigError(f"cannot describe {args.workflow_id!r}: {exc}") from None
    if description.workflow_type != "ToolLoopWorkflow":
        raise ConfigError(
            f"{args.workflow_id!r} is a {description.workflow_type}, not a steadyloop run"
        )
    return client, temporal, handle, description


async def _show(args: argparse.Namespace) -> int:
    client, temporal, handle, description = await _existing_run(args)
    status = description.status.name.lower() if description.status is not None else "unknown"
    if description.status == WorkflowExecutionStatus.COMPLETED:
        # Temporal's "completed" says only that the workflow returned: say how the run
        # stopped (an interrupted run is not a completed answer).
        status = status_header(await handle.result(), status)
    _say(f"run {args.workflow_id} ({status}, started {description.start_time:%Y-%m-%d %H:%M:%S})")
    url = workflow_url(
        args.ui_url or os.environ.get(UI_URL_ENV), temporal.namespace, args.workflow_id
    )
    if url:
        _say(f"Temporal UI: {url}")
    # Its event log, from the first event: an ended run's is read from its host's
    # result, with no worker.
    ended = description.status != WorkflowExecutionStatus.RUNNING
    return await _follow_and_report(client, handle, description.task_queue, ended=ended)


def _resume_command(args: argparse.Namespace) -> int:
    return asyncio.run(_resume(args))


async def _resume(args: argparse.Namespace) -> int:
    check_reuse(args)
    client, _, stopped, description = await _existing_run(args)
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise ConfigError(
            f"run {args.workflow_id!r} is still running; it can be resumed once it stops"
        )
    try:
        result = await stopped.result()
    except WorkflowFailureError as exc:
        raise ConfigError(
            f"run {args.workflow_id!r} did not complete: {failure_text(exc)}"
        ) from None
    original = await _run_input_of(client, stopped)
    prompt = TRUTHFUL if args.prompt is None else args.prompt
    try:  # `resume_input` copies without validating: check the new run as `run` does
        run = RunInput.model_validate(
            resume_input(original, result, prompt=prompt).model_dump(mode="python")
        )
    except NothingToResume as exc:
        raise ConfigError(
            f"run {args.workflow_id!r} ended with a final answer, so there is nothing to "
            f"continue; to ask a follow-up: {command('resume', args.workflow_id)} "
            '--prompt "..."'
        ) from exc
    except ValidationError as exc:
        raise _run_not_valid(exc) from None
    workflow_id = args.id or await _free_id(client, f"{args.workflow_id}-resumed")
    await start_run(
        client, run, workflow_id=workflow_id, task_queue=description.task_queue, reuse=args.reuse_id
    )
    if args.detach:
        print(workflow_id, flush=True)
        return EXIT_OK
    _say(f"run {workflow_id} resumes {args.workflow_id} ({result.stop_reason})")
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
    return await _follow_and_report(
        client,
        handle,
        description.task_queue,
    )


async def _run_input_of(client: Client, handle: RunHandle) -> RunInput:
    """The input the run's latest execution started with (its configuration); decoded with
    the client's converter, since a continued run's input sits in the blob directory."""
    async for event in handle.fetch_history_events():
        started = event.workflow_execution_started_event_attributes
        decoded = await client.data_converter.decode(started.input.payloads, [RunInput])
        return RunInput.model_validate(decoded[0])
    raise ConfigError(f"run {handle.id!r} has no history")


async def _free_id(client: Client, stem: str) -> str:
    """`stem-1`, `stem-2`...: the first id no workflow has."""
    number = 1
    while True:
        candidate = f"{stem}-{number}"
        try:
            await client.get_workflow_handle(candidate).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return candidate
            raise
        number += 1


async def _follow_and_report(
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
        _say(f"stopped following; the run goes on. Attach again: {command('show', handle.id)}")
        return EXIT_INTERRUPTED
    try:
        result = following.result()
    except WorkflowFailureError as exc:
        _say(f"the workflow did not complete: {failure_text(exc)}")
        return EXIT_FAILED
    lines = result_lines(result, answer_shown=display.answer_shown)
    for line in [*lines, *partial_lines(result, handle.id)]:
        _say(line)
    return EXIT_CODES.get(result.stop_reason, EXIT_FAILED)


# -- demo -----------------------------------------------------------------------------


def _demo_command(args: argparse.Namespace) -> int:
    from steadyloop.cli.demo import run_demo  # imports the scripted server; only here

    problem = seconds_problem(args.pace, zero_allowed=True)
    if problem is not None:
        raise ConfigError(f"--pace {problem}")
    if args.web:
        return _web_demo(args)
    if args.scenario == "tour":
        from steadyloop.cli.demo_tour import run_tour

        return asyncio.run(
            run_tour(
                sys.stdout, workdir=args.workdir, pace_s=args.pace, keep_running=args.keep_running
            )
        )
    return asyncio.run(
        run_demo(sys.stdout, workdir=args.workdir, keep_running=args.keep_running, pace_s=args.pace)
    )


def _web_demo(args: argparse.Namespace) -> int:
    if args.scenario != "conversation":
        raise ConfigError("--web serves the conversation demo; leave out --scenario tour")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port (0 to 65535)")
    try:
        from steadyloop.cli.demo_web import run_web_demo
    except ImportError as exc:
        raise ConfigError(
            f"--web needs the web extra ({exc.name} is missing): pip install 'steadyloop[web]'"
        ) from None
    return asyncio.run(
        run_web_demo(sys.stdout, workdir=args.workdir, port=args.port, pace_s=args.pace)
    )


# -- helpers --------------------------------------------------------------------------


def _temporal(args: argparse.Namespace, config: LoadedConfig) -> TemporalSettings:
    return temporal_settings(
        address=args.address,
        namespace=args.namespace,
        task_queue=args.task_queue,
        config=config,
        environ=os.environ,
    )


def _say(line: str) -> None:
    print(line, flush=True)


def _error(message: str) -> None:
    print(f"steadyloop: {message}", file=sys.stderr, flush=True)
