"""`steadyloop run`: start a run and follow it until it ends.

What the flags alone decide is refused before a worker is asked; what only the serving
worker knows (its default model, its tools, its endpoints' wires) is asked of it once,
and only when the run needs it, so a mistake is named before the run starts rather
than at its first turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import typing
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError
from temporalio.client import (
    Client,
)

from steadyloop._cli.arguments import (
    ArgumentParser,
    workflow_id_argument,
)
from steadyloop._cli.outcome import EXIT_OK, UI_URL_ENV, follow_and_report, say, temporal_of
from steadyloop._cli.run_flags import run_not_valid
from steadyloop._cli.run_ids import add_reuse_flag, check_reuse, start_run
from steadyloop._cli.wire_bounds import sampling_some_wire_refuses, wire_refusal
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._output.typed import OutputType
from steadyloop._routing.provider_profiles import ProviderProfile
from steadyloop._run.bounds import WireApi
from steadyloop._run.models import (
    ContinuationOptions,
    RunInput,
    RunLimits,
    RunPlugins,
    Sampling,
)
from steadyloop._serving import WorkerDescription, suggestion, unserved
from steadyloop._worker.config import (
    ENDPOINT_ENV,
    MODEL_ENV,
    ConfigError,
    EndpointSettings,
    LoadedConfig,
    TemporalSettings,
    endpoint_settings,
    load_config,
    load_tool_registry,
    run_endpoint,
    run_model,
    run_prices,
    run_route,
)
from steadyloop._worker.dev_server import (
    workflow_url,
)
from steadyloop._worker.serving import ServedTools, describe_serving_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow


def add_run_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `run` on `commands`, with the shared Temporal connection flags."""
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
        "--output-schema",
        metavar="FILE",
        help="a JSON schema file (its root an object): the answer must be JSON it accepts, "
        "asked of the provider as structured output, checked, and printed as the run's "
        "output; an invalid answer is answered with what failed and asked again (twice), "
        "then the run stops invalid_output",
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
    run.set_defaults(handler=run_command)
    return run


def run_command(args: argparse.Namespace) -> int:
    """The `run` handler."""
    return asyncio.run(_run(args))


class ServingWorker:
    """The Temporal client, connected once, and the serving worker's description, asked
    for once and only when the run needs it (`steadyloop._serving`)."""

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
    temporal = temporal_of(args, config)
    settings = endpoint_settings(flags=[], config=config, environ=environ)
    # What the flags alone decide is refused before anything is asked of a worker.
    if args.route and (args.endpoint or args.model):
        raise ConfigError(
            "--route names the endpoints and models; leave out --endpoint and --model"
        )
    check_reuse(args)
    sampling = _sampling(args)
    limits = _limits(args)
    output_type = output_type_of(args.output_schema)
    _refuse_what_no_run_could_carry(args, config, settings, environ)
    serving = ServingWorker(temporal)
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
                endpoint = only_served_endpoint(endpoint, served)
            model = _served_model(endpoint, served)
    else:
        endpoint, model = route.candidates[0].endpoint, route.candidates[0].model
    in_play = [candidate.endpoint for candidate in route.candidates] if route else [endpoint]
    await _check_sampling_wires(sampling, in_play, settings, serving)
    tools, plugins = await run_tools(args, serving)
    if serving.description is not None and route is None:
        # Asked anyway: refuse an endpoint it lacks now, not at the first turn. (A route
        # goes on past an endpoint a worker lacks, by design: not checked.)
        if not endpoint_named:
            endpoint = only_served_endpoint(endpoint, serving.description)
        _check_served_endpoint(endpoint, serving.description)
    _check_tool_choice(args.tool_choice, tools, plugins)
    if args.tools:
        await _check_worker_serves(args.tools, tools, plugins, serving)
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
            output_type=output_type,
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
        raise run_not_valid(exc) from None

    client = await serving.client()
    workflow_id = args.id or f"steadyloop-{uuid.uuid4()}"
    await start_run(
        client, run, workflow_id=workflow_id, task_queue=temporal.task_queue, reuse=args.reuse_id
    )
    if args.detach:
        print(workflow_id, flush=True)
        return EXIT_OK
    say(f"run {workflow_id} started on task queue {temporal.task_queue!r}")
    if route is None:
        asked = f"endpoint {endpoint!r}, model {model!r}"
    else:
        asked = "route " + " then ".join(f"{c.endpoint}={c.model}" for c in route.candidates)
    say(f"{asked}, tools: {', '.join(tools) or 'none'}")
    if plugins:
        say(f"plugins the model may activate: {', '.join(plugins)}")
    url = workflow_url(args.ui_url or environ.get(UI_URL_ENV), temporal.namespace, workflow_id)
    if url:
        say(f"Temporal UI: {url}")
    handle = client.get_workflow_handle_for(ToolLoopWorkflow.run, workflow_id)
    return await follow_and_report(client, handle, temporal.task_queue)


async def run_tools(
    args: argparse.Namespace, serving: ServingWorker
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
    # The rule every starter holds a run to (`steadyloop._serving.unserved`), worded by flag.
    missing = unserved(
        WorkerDescription(tools=list(available), plugins=list(plugins)), named_tools, named_plugins
    )
    for flag, unknown, known in (
        ("--tool", missing.tools if missing else [], available),
        ("--plugin", missing.plugins if missing else [], plugins),
    ):
        if unknown:
            what = "tools" if flag == "--tool" else "plugins"
            raise ConfigError(
                f"{flag} {', '.join(unknown)}: not among the {what} of {where}; it has: "
                f"{', '.join(known) or 'none'}" + _suggestion(unknown[0], known)
            )
    if named_tools or named_plugins:
        return named_tools, named_plugins
    return list(unplugged), list(plugins)


async def _check_worker_serves(
    registry: str, tools: list[str], plugins: list[str], serving: ServingWorker
) -> None:
    """A registry loaded here (`--tools`) names the run's tools, but the worker runs them:
    held to what it serves by the check every starter shares (`ServedTools`), so a
    worker without them is named now, not by the run's first task. No worker to ask (none
    polls the queue, or it cannot say): not checked here; the run's first task is."""
    checked = ServedTools(await serving.client(), serving.temporal.task_queue)
    checked.description = serving.description
    found = await checked.unserved(tools, plugins)
    if found is None:
        return
    missing, served = found
    where = f"the worker on task queue {serving.temporal.task_queue!r}"
    raise ConfigError(
        f"--tools {registry}: {missing.text(served, where)}; start the worker with the same "
        f"registry (`steadyloop worker --tools {registry}`), or leave --tools out to offer "
        "the worker's own"
    )


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
    return suggestion(name, known)


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
    serving: ServingWorker,
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


def only_served_endpoint(endpoint: str, served: WorkerDescription) -> str:
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
        raise run_not_valid(exc) from None


def output_type_of(path: str | None) -> OutputType | None:
    """`--output-schema FILE` read and checked as a run would, refused naming the file."""
    if path is None:
        return None
    where = f"--output-schema {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot be read ({exc})") from None
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    if not isinstance(schema, dict):
        raise ConfigError(f"{where}: a JSON schema is an object, got {type(schema).__name__}")
    try:
        return OutputType.model_validate(schema)
    except ValidationError as exc:
        problems = "; ".join(
            ".".join(str(p) for p in error["loc"]) + ": " + error["msg"]
            if error["loc"]
            else error["msg"]
            for error in exc.errors(include_url=False)
        )
        raise ConfigError(f"{where}: {problems}") from None


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
        raise run_not_valid(exc) from None


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
        raise run_not_valid(exc) from None


def _unescaped(text: str | None) -> str | None:
    """`\\n` and `\\t` typed on a command line as the line break and tab they mean."""
    if text is None:
        return None
    return text.replace("\\n", "\n").replace("\\t", "\t")
