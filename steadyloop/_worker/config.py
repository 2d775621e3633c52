"""Settings for the worker and the command line: flags, then environment, then a config file.

Precedence, highest first: command-line flags, environment variables, the config file
(`--config` or `STEADYLOOP_CONFIG`, JSON or TOML), built-in defaults. One rule for every
setting, so "where did this value come from" has one answer.

- Temporal: `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE` and everything else Temporal's own
  environment configuration reads (`TEMPORAL_API_KEY`, `TEMPORAL_TLS*`,
  `TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`), through `temporalio.envconfig`, so a
  worker pointed at Temporal Cloud needs no steadyloop-specific variable. The task
  queue is `STEADYLOOP_TASK_QUEUE` (default `steadyloop`).
- Large payloads (a long transcript, a run's result) leave history for a blob store,
  `STEADYLOOP_BLOB_DIR` or the file's `[temporal] blob_dir`: a directory (default
  `$STEADYLOOP_HOME/blobs`, else `~/.steadyloop/blobs`), `s3://bucket/prefix` (endpoint
  and credentials from the standard AWS environment only), or `off` (kept inline); from
  `STEADYLOOP_BLOB_THRESHOLD` bytes (32 KiB). Workers, clients and replayers of one
  deployment must share it (`steadyloop._history.payload_storage`).
- Model endpoints, by name: the config file's `endpoints`, then `STEADYLOOP_ENDPOINTS`
  (JSON), then `--endpoint` flags; a later source replaces an endpoint of the same name.
  The OpenAI convention (`OPENAI_BASE_URL`, `OPENAI_API_KEY`) fills the endpoint
  `default` only when no source defines it: setting `OPENAI_API_KEY` for a file's own
  `default` endpoint must not silently re-point it at api.openai.com.
- Keys are never settings: an endpoint names the *environment variable* that holds its
  key (`api_key_env`), the model activity reads it at call time, and nothing here
  prints it. An endpoint may carry a `model`, its default model: what `steadyloop
  run` asks for when `--model` is not given, learnt from the serving worker
  (`steadyloop._worker.serving`) when the command line's own settings name none.
- Tools: `module:attribute` naming a `ToolRegistry`, a function returning one, or an
  iterable of `@tool` definitions (`--tools`, `STEADYLOOP_TOOLS`, the file's `tools`);
  default `steadyloop.tools.examples:example_registry`. The current directory is put
  on `sys.path` first, as `python -m` would, because a console script does not.

A typo in a config file (`base_ulr`, `[temporall]`) is refused with the file and key
named, never ignored: an ignored key is a setting that silently did not apply.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
import os
import sys
import tomllib
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from steadyloop._history.payload_storage import (
    BlobSettings,
    blob_settings,
    steadyloop_data_converter,
)
from steadyloop._routing.endpoints import (
    DEFAULT_ENDPOINT_NAME,
    ENDPOINTS_ENV,
    OPENAI_API_KEY_ENV,
    OPENAI_BASE_URL_ENV,
    EndpointConfig,
    EndpointConfigError,
    EndpointRegistry,
)
from steadyloop._routing.pricing import Price
from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._run.bounds import text_problem
from steadyloop.errors import SteadyloopError
from steadyloop.tools._definition import ToolDefinition
from steadyloop.tools._registry import ToolRegistry

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "steadyloop"
EXAMPLE_TOOLS = "steadyloop.tools.examples:example_registry"

CONFIG_ENV = "STEADYLOOP_CONFIG"
TASK_QUEUE_ENV = "STEADYLOOP_TASK_QUEUE"
TOOLS_ENV = "STEADYLOOP_TOOLS"
ENDPOINT_ENV = "STEADYLOOP_ENDPOINT"
MODEL_ENV = "STEADYLOOP_MODEL"


class ConfigError(SteadyloopError):
    """A setting is unusable; the message names the source, the cause and the fix."""


class TemporalUnreachable(SteadyloopError):
    """Temporal did not answer at the configured address; the message says where."""


# -- the config file --------------------------------------------------------------------


class TemporalSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = None
    namespace: str | None = None
    task_queue: str | None = None
    # Where large payloads go: a directory or s3://bucket/prefix (env STEADYLOOP_BLOB_DIR).
    blob_dir: str | None = None


class ConfigFile(BaseModel):
    """The config file's shape (JSON or TOML); every key is optional, unknown keys refused.

    ```toml
    default_endpoint = "local"
    tools = "my_agent.tools:registry"

    [temporal]
    address = "temporal.internal:7233"
    task_queue = "agents"

    [endpoints.local]
    base_url = "http://127.0.0.1:11434/v1"
    model = "qwen3:8b"

    [endpoints.openai]
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    model = "gpt-4.1-mini"

    # USD per million tokens, by endpoint (or "endpoint/model"); see steadyloop._routing.pricing.
    [prices.openai]
    input = 0.4
    cached_input = 0.1
    output = 1.6
    ```
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    temporal: TemporalSection = Field(default_factory=TemporalSection)
    endpoints: dict[str, dict[str, Any]] | list[dict[str, Any]] = Field(default_factory=dict)
    default_endpoint: str | None = None
    tools: str | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    # MCP servers by name; each table is checked by `steadyloop._mcp.config`.
    mcp: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # `steadyloop serve`'s table; checked by `steadyloop._web.settings`.
    web: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class LoadedConfig:
    """A config file and where it came from (`source` None: no file was given)."""

    file: ConfigFile = field(default_factory=ConfigFile)
    source: str | None = None


def load_config(path: str | Path | None, environ: Mapping[str, str]) -> LoadedConfig:
    """The config file from `path`, else `STEADYLOOP_CONFIG`, else an empty configuration."""
    chosen = str(path) if path else environ.get(CONFIG_ENV, "").strip()
    if not chosen:
        return LoadedConfig()
    file = Path(chosen).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the config file {file} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    data = _parse_config_text(text, file)
    try:
        return LoadedConfig(ConfigFile.model_validate(data), str(file))
    except ValidationError as exc:
        raise ConfigError(f"{file}: {_problems(exc)}") from None


def _parse_config_text(text: str, file: Path) -> Any:
    suffix = file.suffix.lower()
    if suffix == ".toml":
        return _toml(text, file)
    if suffix == ".json":
        return _json(text, file)
    try:  # no telling suffix: JSON, then TOML
        return json.loads(text)
    except ValueError:
        return _toml(text, file)


def _toml(text: str, file: Path) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from None


def _json(text: str, file: Path) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{file} is not valid JSON: {exc}") from None


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )


# -- Temporal -----------------------------------------------------------------------


@dataclass(frozen=True)
class TemporalSettings:
    """Where the worker and the command line reach Temporal.

    `extra` holds the remaining `Client.connect` arguments Temporal's environment
    configuration produced (API key, TLS, gRPC metadata); it is never printed. `blobs`
    says where payloads too large for history go (`steadyloop._history.payload_storage`).
    """

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    blobs: BlobSettings = field(default_factory=lambda: blob_settings({}))
    # The SDK runtime the client runs on (None: the SDK's default, which prints its core's
    # log lines raw); the command line gives its clients one that words them.
    runtime: Runtime | None = field(default=None, repr=False, compare=False)

    @property
    def data_converter(self) -> DataConverter:
        """steadyloop's data converter: pydantic, large payloads in the blob directory."""
        return steadyloop_data_converter(
            self.blobs.location, threshold_bytes=self.blobs.threshold_bytes
        )

    async def connect(self) -> Client:
        """A client with steadyloop's data converter; `TemporalUnreachable` when it is not."""
        try:
            return await Client.connect(
                self.address,
                namespace=self.namespace,
                data_converter=self.data_converter,
                runtime=self.runtime,
                **self.extra,
            )
        except RuntimeError as exc:  # the SDK reports connection failures as RuntimeError
            raise TemporalUnreachable(
                f"cannot reach Temporal at {self.address} (namespace {self.namespace!r}): "
                f"{exc}. Start a local server with `steadyloop worker --dev`, or set "
                "TEMPORAL_ADDRESS / --address to your cluster."
            ) from None


def temporal_settings(
    *,
    address: str | None,
    namespace: str | None,
    task_queue: str | None,
    config: LoadedConfig,
    environ: Mapping[str, str],
) -> TemporalSettings:
    """Flags, then the environment (via `temporalio.envconfig`), then the file, then defaults."""
    unreadable = sorted(
        name for name, value in environ.items() if text_problem(name) or text_problem(value)
    )
    for name in unreadable:
        if name.startswith("TEMPORAL_"):  # one Temporal would read: say which
            raise ConfigError(
                f"the environment variable {name!r} is not valid UTF-8 text; set it again"
            )
    # Any other variable that is not text (bytes the locale cannot decode) would make the
    # SDK refuse the whole environment; it reads only TEMPORAL_* variables, so pass the rest.
    readable = {name: value for name, value in environ.items() if name not in unreadable}
    try:
        loaded = ClientConfig.load_client_connect_config(override_env_vars=readable)
    except Exception as exc:  # a broken Temporal profile file: name it rather than crash
        raise ConfigError(f"Temporal's client configuration could not be read: {exc}") from None
    from_env_address = loaded.get("target_host")
    from_env_namespace = loaded.get("namespace")
    connect = {k: v for k, v in loaded.items() if k not in ("target_host", "namespace")}
    section = config.file.temporal
    try:
        blobs = blob_settings(environ, configured=section.blob_dir)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return TemporalSettings(
        address=_first(address, from_env_address, section.address, DEFAULT_ADDRESS),
        namespace=_first(namespace, from_env_namespace, section.namespace, DEFAULT_NAMESPACE),
        task_queue=_first(
            task_queue, environ.get(TASK_QUEUE_ENV), section.task_queue, DEFAULT_TASK_QUEUE
        ),
        extra=connect,
        blobs=blobs,
    )


def _first(*values: str | None) -> str:
    for value in values:
        if value is not None and value.strip():
            return value.strip()
    raise AssertionError("the last value is a non-blank default")


# -- model endpoints ----------------------------------------------------------------


@dataclass(frozen=True)
class EndpointSettings:
    """The endpoints, the default model of each, and where each was defined."""

    registry: EndpointRegistry
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def models(self) -> dict[str, str]:
        """Each endpoint's default model (`EndpointConfig.model`), by name."""
        return {e.name: e.model for e in self.registry if e.model is not None}


def endpoint_settings(
    *, flags: Sequence[str], config: LoadedConfig, environ: Mapping[str, str]
) -> EndpointSettings:
    """Endpoints from the file, `STEADYLOOP_ENDPOINTS`, then `--endpoint` flags; see above."""
    endpoints: dict[str, EndpointConfig] = {}
    sources: dict[str, str] = {}

    def merge(data: Any, source: str, table: str | None = None) -> None:
        try:
            registry = EndpointRegistry.from_data(data, source=source, table=table)
        except EndpointConfigError as exc:
            message = str(exc)
            if source.startswith("--endpoint "):  # a flag is one entry: no `[0]` to point at
                message = message.replace(f"{source}[0]:", f"{source}:", 1)
            raise ConfigError(message) from None
        for endpoint in registry:
            endpoints[endpoint.name] = endpoint
            sources[endpoint.name] = source

    if config.source is not None and config.file.endpoints:
        merge(config.file.endpoints, config.source, table="endpoints")
    raw = environ.get(ENDPOINTS_ENV, "").strip()
    if raw:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"{ENDPOINTS_ENV} is not valid JSON: {exc}") from None
        merge(data, ENDPOINTS_ENV)
    for spec in flags:
        merge([parse_endpoint_flag(spec)], f"--endpoint {spec.split('=', 1)[0]}")

    if DEFAULT_ENDPOINT_NAME not in endpoints:
        openai_only = {
            name: environ[name]
            for name in (OPENAI_BASE_URL_ENV, OPENAI_API_KEY_ENV)
            if name in environ
        }
        try:
            convention = EndpointRegistry.from_env(openai_only)
        except EndpointConfigError as exc:
            raise ConfigError(str(exc)) from None
        for endpoint in convention:
            endpoints[endpoint.name] = endpoint
            sources[endpoint.name] = f"{OPENAI_BASE_URL_ENV}/{OPENAI_API_KEY_ENV}"
    return EndpointSettings(EndpointRegistry(endpoints.values()), sources)


ENDPOINT_FLAG_FORM = "NAME=BASE_URL[,model=M][,api_key_env=VAR][,header.NAME=V][,extra_body.KEY=V]"


def parse_endpoint_flag(spec: str) -> dict[str, Any]:
    """`NAME=BASE_URL[,key=value...]` as an endpoint entry.

    Keys are `EndpointConfig` fields (`model`, `api_key_env`, `include_usage`,
    `max_tokens_field`, `*_timeout_s`, the watchdog budgets), converted by the model;
    `header.NAME=VALUE` adds a header (`${VAR}` in VALUE is read from the worker's
    environment at call time) and `extra_body.KEY=VALUE` a body field, VALUE read as
    JSON when it is JSON (`true`, `8`, `"x"`) and as text otherwise. A value with a
    comma, or an object, belongs in the config file.
    """
    name, equals, rest = spec.partition("=")
    if not equals or not name.strip() or not rest.strip():
        raise ConfigError(
            f"--endpoint {spec!r}: expected {ENDPOINT_FLAG_FORM}, "
            "e.g. --endpoint local=http://127.0.0.1:11434/v1,model=qwen3:8b"
        )
    name = name.strip()
    base_url, *options = rest.split(",")
    entry: dict[str, Any] = {"name": name, "base_url": base_url.strip()}
    headers: dict[str, str] = {}
    extra_body: dict[str, Any] = {}
    for option in options:
        key, equals, value = option.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ConfigError(
                f"--endpoint {name}: {option!r} is not key=value (expected {ENDPOINT_FLAG_FORM};"
                " a value with a comma belongs in the config file)"
            )
        group, dot, field_name = key.partition(".")
        if dot and group in ("header", "extra_body"):
            if not field_name.strip():
                raise ConfigError(f"--endpoint {name}: {key!r} names no {group} field")
            if group == "header":
                headers[field_name.strip()] = value.strip()
            else:
                extra_body[field_name.strip()] = _flag_value(value.strip())
            continue
        if key in ("name", "base_url", "headers", "extra_body"):
            raise ConfigError(
                f"--endpoint {name}: {key} cannot be given as an option here; write "
                "header.NAME=VALUE or extra_body.KEY=VALUE, or use a config file"
            )
        if key not in EndpointConfig.model_fields:
            known = [
                k
                for k in EndpointConfig.model_fields
                if k not in ("name", "base_url", "headers", "extra_body", "argument_limits")
            ]
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"--endpoint {name}: unknown option {key!r}{hint}; options: "
                f"{', '.join(known)}, header.NAME, extra_body.KEY"
            )
        entry[key] = value.strip()
    if headers:
        entry["headers"] = headers
    if extra_body:
        entry["extra_body"] = extra_body
    return entry


def _flag_value(text: str) -> Any:
    """`true`, `8`, `"x"`, `null` as JSON; anything else as the text it is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def describe_endpoint(endpoint: EndpointConfig, environ: Mapping[str, str]) -> str:
    """One line for the worker's start-up summary; says whether the key is set, never what."""
    if endpoint.api_key_env is None:
        key = "no key"
    elif (environ.get(endpoint.api_key_env) or "").strip():
        key = f"key from ${endpoint.api_key_env}"
    else:
        key = f"key from ${endpoint.api_key_env}, which is NOT set"
    model = f", model {endpoint.model}" if endpoint.model else ""
    return f"{endpoint.name} -> {endpoint.base_url} ({key}{model})"


# -- tools ----------------------------------------------------------------------------


def tools_spec(flag: str | None, config: LoadedConfig, environ: Mapping[str, str]) -> str:
    return _first(flag, environ.get(TOOLS_ENV), config.file.tools, EXAMPLE_TOOLS)


def load_tool_registry(spec: str) -> ToolRegistry:
    """The registry `module:attribute` names (see the module docstring for what it may be)."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name.strip() or not attribute.strip():
        raise ConfigError(
            f"tools {spec!r}: expected module:attribute, e.g. my_agent.tools:registry"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name.strip())
    except ImportError as exc:
        raise ConfigError(f"tools {spec!r}: cannot import {module_name!r}: {exc}") from None
    for part in attribute.strip().split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(f"tools {spec!r}: {module_name} has no {attribute!r}") from None
    return _as_registry(target, spec)


def _as_registry(target: Any, spec: str, *, call: bool = True) -> ToolRegistry:
    if isinstance(target, ToolRegistry):
        return target
    try:
        if isinstance(target, ToolDefinition):
            return ToolRegistry([target])
        if callable(target) and call:
            if not _takes_no_arguments(target):
                raise ConfigError(
                    f"tools {spec!r} is a function that needs arguments; name a function "
                    "that builds the registry with none"
                )
            return _as_registry(target(), spec, call=False)
        if isinstance(target, Iterable) and not isinstance(target, str | bytes):
            return ToolRegistry(list(target))
    except (TypeError, ValueError) as exc:  # a plain function in a list, a duplicate name
        raise ConfigError(f"tools {spec!r}: {exc}") from None
    raise ConfigError(
        f"tools {spec!r} is a {type(target).__name__}; name a ToolRegistry, a function "
        "returning one, or a list of @tool definitions"
    )


def _takes_no_arguments(function: Any) -> bool:
    try:
        inspect.signature(function).bind()
    except TypeError:
        return False
    except ValueError:  # no signature to read (some builtins): let the call decide
        return True
    return True


# -- what `steadyloop run` asks for -----------------------------------------------------


def run_endpoint(flag: str | None, config: LoadedConfig, environ: Mapping[str, str]) -> str:
    """The endpoint name a run asks for: flag, `STEADYLOOP_ENDPOINT`, file, `default`."""
    return _first(
        flag, environ.get(ENDPOINT_ENV), config.file.default_endpoint, DEFAULT_ENDPOINT_NAME
    )


def run_prices(endpoint: str | Sequence[str], config: LoadedConfig) -> dict[str, Price]:
    """The config file's prices for the run's endpoint(s) (their own and their models')."""
    names = [endpoint] if isinstance(endpoint, str) else list(endpoint)
    return {
        key: price
        for key, price in config.file.prices.items()
        if any(key == name or key.startswith(f"{name}/") for name in names)
    }


def run_route(
    specs: Sequence[str],
    endpoints: EndpointSettings,
    *,
    models: Mapping[str, str] | None = None,
) -> RouteConfig | None:
    """The route `--route NAME[=MODEL]` flags ask for, in their order (None: no flag).

    A candidate without `=MODEL` asks for its endpoint's configured model (`models`,
    default: those of `endpoints`). Each gets a candidate's default patience
    (`RouteCandidate`: 3 attempts, backoff from 1 s).
    """
    if not specs:
        return None
    known = endpoints.models if models is None else models
    candidates: list[RouteCandidate] = []
    for spec in specs:
        name, sep, model = (part.strip() for part in spec.partition("="))
        if not name or (sep and not model):
            raise ConfigError(f"--route {spec!r}: expected NAME or NAME=MODEL")
        model = model or known.get(name, "")
        if not model:
            raise ConfigError(
                f"--route {spec!r}: no model for endpoint {name!r}; write {name}=MODEL or "
                "give the endpoint a model= (the worker's --endpoint, or the config file)"
            )
        try:  # a name or model no run could carry (a control character, too long)
            candidates.append(RouteCandidate(endpoint=name, model=model))
        except ValidationError as exc:
            raise ConfigError(f"--route {spec!r}: {_problems(exc)}") from None
    try:
        return RouteConfig(candidates=candidates)
    except ValidationError as exc:
        problems = "; ".join(err["msg"] for err in exc.errors(include_url=False))
        raise ConfigError(f"--route: {problems}") from None


@typing.overload
def run_model(
    flag: str | None,
    endpoint: str,
    endpoints: EndpointSettings,
    environ: Mapping[str, str],
    *,
    required: typing.Literal[True] = True,
) -> str: ...
@typing.overload
def run_model(
    flag: str | None,
    endpoint: str,
    endpoints: EndpointSettings,
    environ: Mapping[str, str],
    *,
    required: bool,
) -> str | None: ...
def run_model(
    flag: str | None,
    endpoint: str,
    endpoints: EndpointSettings,
    environ: Mapping[str, str],
    *,
    required: bool = True,
) -> str | None:
    """The model a run asks for: flag, `STEADYLOOP_MODEL`, the endpoint's configured model
    (here; `steadyloop run` then asks the serving worker: `required=False` says None)."""
    for value in (flag, environ.get(MODEL_ENV), endpoints.models.get(endpoint)):
        if value is not None and value.strip():
            return value.strip()
    if not required:
        return None
    raise ConfigError(
        f"no model to ask endpoint {endpoint!r} for: pass --model, set {MODEL_ENV}, or give "
        f"the endpoint a model in the config file"
    )
