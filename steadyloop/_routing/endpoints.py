"""Model endpoints, by name: where the model activity sends a completion, and with what key.

A workflow names an endpoint (`CompletionRequest.endpoint`); it never carries a base
URL or a key. The worker holds an `EndpointRegistry` built from its own configuration,
and the model activity reads the key from the worker's environment at call time, so
no secret enters workflow input, activity input or history, and rotating a key means
restarting workers, not rewriting running workflows.

Configuration, in order of precedence (`EndpointRegistry.from_env`):

- `STEADYLOOP_ENDPOINTS`: JSON, either a list of endpoint objects or an object mapping
  a name to an endpoint object, e.g.
  `{"local": {"base_url": "http://127.0.0.1:11434/v1"},
  "openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}}`.
- The OpenAI convention: when `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set and no
  endpoint is named `default`, an endpoint `default` is added with `OPENAI_BASE_URL`
  (else `https://api.openai.com/v1`) and `api_key_env="OPENAI_API_KEY"` when that key is set.

What goes wrong without the checks here:

- A base URL pasted with `/chat/completions` on the end, with no scheme, with a query
  string or with credentials in it fails late and obscurely (a 404 in the middle of a
  run, a key in a log line). Each is refused when the configuration is built, with the
  fix in the message. The base URL is the API root (`.../v1`); the activity appends
  the path of the endpoint's wire (`api`: `/chat/completions`, `/responses` or
  `/messages`), and a base URL that already ends with it is refused the same way.
- An `api` that is not one of the three wires is refused naming the endpoint and the
  choices: guessed, a misspelt `respones` would post Chat Completions to a server
  that then answers 404 mid-run.
- A key written into the configuration would travel wherever the configuration does.
  Only the *name* of the environment variable is configured; an `Authorization` header
  in `headers` next to `api_key_env` is refused as ambiguous.
- An unknown endpoint name is `UnknownEndpointError`, listing the names that exist; a
  configured key variable that is unset or blank at call time is `MissingApiKeyError`
  naming the variable (never a request sent without the key, answered by a 401).
- Timeouts are required to be finite and positive: a stream with no read timeout can
  hang an activity slot forever.
- A header whose value is a secret (a gateway's own key header) is written
  `${VARIABLE}` and read from the worker's environment at call time, like
  `api_key_env`; an unset variable is `MissingApiKeyError` naming it. `extra_body`
  fields (`cache_prompt`, `guided_json`, `provider`) are merged under the fields the
  run sets, and may not replace what steadyloop must send (`model`, `messages`,
  `stream`, `tools`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from steadyloop._run.bounds import identity_problem, seconds_problem
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._stream.watchdog import (
    DEFAULT_FIRST_TOKEN_S,
    DEFAULT_INTER_CHUNK_S,
    DEFAULT_REASONING_GAP_S,
    DEFAULT_TOTAL_S,
    validate_budget,
)
from steadyloop.errors import MISSING_API_KEY, UNKNOWN_ENDPOINT, SteadyloopError

ENDPOINTS_ENV = "STEADYLOOP_ENDPOINTS"
DEFAULT_ENDPOINT_NAME = "default"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
CHAT_COMPLETIONS_PATH = "/chat/completions"
RESPONSES_PATH = "/responses"
MESSAGES_PATH = "/messages"
# The wires an endpoint can speak (`EndpointConfig.api`) and the path each posts to,
# appended to the base URL (`steadyloop._stream.wire`).
Api = Literal["chat", "responses", "anthropic"]
API_CHOICES: tuple[Api, ...] = ("chat", "responses", "anthropic")
API_PATHS: dict[str, str] = {
    "chat": CHAT_COMPLETIONS_PATH,
    "responses": RESPONSES_PATH,
    "anthropic": MESSAGES_PATH,
}
DEFAULT_ANTHROPIC_VERSION = "2023-06-01"


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# RFC 9110 token characters for header names.
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Header values httpx can send as-is: printable ASCII and tabs.
_HEADER_SAFE = re.compile(r"^[\t\x20-\x7e]*$")
# Headers the activity sets itself; configuring them would break the request.
_RESERVED_HEADERS = frozenset({"content-length", "content-type", "host", "transfer-encoding"})
# `${NAME}` in a header value: the environment variable NAME, read at call time.
_HEADER_VARIABLE = re.compile(r"\$\{([^}]*)\}")
# Body fields steadyloop writes from the run; `extra_body` may not replace them.
RESERVED_BODY_FIELDS = frozenset({"model", "messages", "stream", "tools"})
# And those each other wire writes from the run (the Responses API's transcript is `input`).
RESERVED_WIRE_BODY_FIELDS: dict[str, frozenset[str]] = {
    "chat": RESERVED_BODY_FIELDS,
    "responses": frozenset({"model", "input", "stream", "tools"}),
    "anthropic": RESERVED_BODY_FIELDS,
}


class EndpointConfigError(SteadyloopError, ValueError):
    """The endpoint configuration is unusable; the message names the cause and the fix."""


class UnknownEndpointError(SteadyloopError, LookupError):
    """A request named an endpoint this worker has no configuration for."""

    error_type = UNKNOWN_ENDPOINT

    def __init__(self, name: str, known: Iterable[str]) -> None:
        names = sorted(known)
        listed = ", ".join(repr(n) for n in names) if names else "none are configured"
        super().__init__(
            f"unknown model endpoint {name!r}; the worker serving this run knows: {listed}. "
            f"Add it where the worker starts: `steadyloop worker --endpoint "
            f"{name}=BASE_URL[,model=MODEL][,api_key_env=VAR]` (or {ENDPOINTS_ENV}, or the "
            "config file), or run with `--endpoint` naming one it knows."
        )
        self.name = name
        self.known = names


class MissingApiKeyError(SteadyloopError, LookupError):
    """The endpoint's key variable is unset, blank or unusable in the worker's environment."""

    error_type = MISSING_API_KEY

    def __init__(
        self,
        endpoint: str,
        variable: str,
        problem: str = "is unset or blank",
        *,
        what: str = "its API key",
    ) -> None:
        fix = (
            "(or set api_key_env to null for an endpoint without a key)"
            if what == "its API key"
            else "(or remove the header from the endpoint's configuration)"
        )
        super().__init__(
            f"model endpoint {endpoint!r} reads {what} from the environment variable "
            f"{variable!r}, which {problem} in this worker's environment; set it where the "
            f"worker runs {fix}."
        )
        self.endpoint = endpoint
        self.variable = variable


def _positive_finite(value: float, field: str) -> float:
    """A timeout the activity can arm: finite, above 0, at most ten years (a longer one
    overflows the event loop's and httpx's clock arithmetic inside the attempt)."""
    problem = seconds_problem(value)
    if problem is not None:
        raise ValueError(f"{field} {problem}")
    return value


class EndpointConfig(BaseModel):
    """One OpenAI-compatible endpoint, as the worker knows it.

    `base_url` is the API root (`https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`);
    `api_key_env` is the *name* of the environment variable holding the key (None: send
    no `Authorization` header). `include_usage` sends `stream_options.include_usage`,
    which some servers reject. `max_tokens_field` picks the wire name of
    `CompletionRequest.max_tokens` (OpenAI's reasoning models want
    `max_completion_tokens`; most compatible servers only know `max_tokens`).

    The stall watchdog's budgets, in seconds, each finite and above 0 or None (off):
    `first_token_s` (120: request to first token, reasoning included),
    `reasoning_gap_s` (120: between events while the model reasons, before its first
    answer token), `inter_chunk_s` (30: between events once the answer started) and
    `total_s` (600: the whole call); see `steadyloop._stream.watchdog`. `false` also
    turns a budget off (a TOML configuration file has no null).
    `argument_limits` are the runaway-argument guard's limits (default: 24576 UTF-8
    bytes per call, fragments and turn total off; see `steadyloop._stream.runaway_guard`).

    `api` is the wire the endpoint speaks: `chat` (OpenAI Chat Completions, posted to
    `<base_url>/chat/completions`), `responses` (OpenAI Responses, `<base_url>/responses`)
    or `anthropic` (Anthropic Messages, `<base_url>/messages`, with `anthropic_version`
    as its `anthropic-version` header). See `steadyloop._stream.wire`.

    `model` is the endpoint's default model: what a run that names none asks for
    (`steadyloop run` without `--model` learns it from the serving worker). `headers`
    are sent with every request; a `${VARIABLE}` in a value is read from the worker's
    environment at call time (`resolved_headers`), so a header secret stays out of the
    configuration. `extra_body` is merged into every request body, under the fields
    the run sets (a run's `temperature` wins over the endpoint's).
    """

    # hide_input_in_errors: a key pasted into the wrong field must not reach a log line.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    name: str
    base_url: str
    api: Api = "chat"
    anthropic_version: str = DEFAULT_ANTHROPIC_VERSION
    api_key_env: str | None = None
    model: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)
    include_usage: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    write_timeout_s: float = 30.0
    first_token_s: float | None = DEFAULT_FIRST_TOKEN_S
    reasoning_gap_s: float | None = DEFAULT_REASONING_GAP_S
    inter_chunk_s: float | None = DEFAULT_INTER_CHUNK_S
    total_s: float | None = DEFAULT_TOTAL_S
    argument_limits: ArgumentLimits = Field(default_factory=ArgumentLimits)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("endpoint name must not be blank")
        problem = identity_problem(value)
        if problem is not None:  # a run names it: the same rule as `RunInput.endpoint`
            raise ValueError(f"endpoint name {problem}")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        return validate_base_url(value)

    @field_validator("api", mode="before")
    @classmethod
    def _api(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in API_CHOICES:
            return value.strip().lower()
        choices = ", ".join(f'"{choice}"' for choice in API_CHOICES)
        raise ValueError(f"api must be one of {choices}, got {_shown_api(value)}")

    @field_validator("anthropic_version")
    @classmethod
    def _anthropic_version(cls, value: str) -> str:
        value = value.strip()
        if not value or not _HEADER_SAFE.match(value):
            raise ValueError(
                "anthropic_version must be a non-blank header value of printable ASCII "
                '(e.g. "2023-06-01")'
            )
        return value

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError(
                "api_key_env must not be blank (use null for an endpoint without a key)"
            )
        if not _ENV_NAME.match(value):
            # Never echo the value: it may be the key itself, pasted in the wrong place.
            raise ValueError(
                "api_key_env must be the *name* of an environment variable (letters, digits, "
                "underscores), not the key itself"
            )
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header_value in value.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP header name")
            if name.lower() in _RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is set by steadyloop and cannot be configured")
            if not _HEADER_SAFE.match(header_value):
                raise ValueError(
                    f"header {name!r} must have a value of printable ASCII characters "
                    "(no line breaks, control or non-ASCII characters)"
                )
            for variable in _HEADER_VARIABLE.findall(header_value):
                if not _ENV_NAME.match(variable):
                    raise ValueError(
                        f"header {name!r} names ${{{variable}}}, which is not an environment "
                        "variable name (letters, digits, underscores)"
                    )
        return value

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        problem = identity_problem(value) if value else "must not be blank"
        if problem is not None:  # a run carries it: the same rule as `RunInput.model`
            raise ValueError(f"model {problem}")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        reserved = sorted(RESERVED_BODY_FIELDS & set(value))
        if reserved:
            raise ValueError(
                f"extra_body may not set {', '.join(reserved)}: steadyloop writes "
                f"{'it' if len(reserved) == 1 else 'them'} from the run"
            )
        return value

    @field_validator("connect_timeout_s", "read_timeout_s", "write_timeout_s")
    @classmethod
    def _timeouts(cls, value: float, info: ValidationInfo) -> float:
        return _positive_finite(value, str(info.field_name))

    @field_validator("first_token_s", "reasoning_gap_s", "inter_chunk_s", "total_s", mode="before")
    @classmethod
    def _budget_off(cls, value: Any) -> Any:
        if value is True:
            raise ValueError("true is not a number; use a number, or false/null to turn it off")
        return None if value is False else value  # TOML has no null: `false` turns it off

    @field_validator("first_token_s", "reasoning_gap_s", "inter_chunk_s", "total_s")
    @classmethod
    def _watchdog_budgets(cls, value: float | None, info: ValidationInfo) -> float | None:
        budget = validate_budget(value, str(info.field_name))
        return None if budget is None else _positive_finite(budget, str(info.field_name))

    @model_validator(mode="after")
    def _fits_its_wire(self) -> EndpointConfig:
        path = API_PATHS[self.api]
        if self.base_url.endswith(path):
            raise ValueError(
                f"base_url {self.base_url!r} already ends with {path}; give the API root "
                f"(e.g. {self.base_url[: -len(path)]!r}), steadyloop appends the path"
            )
        reserved = sorted(
            (RESERVED_WIRE_BODY_FIELDS[self.api] - RESERVED_BODY_FIELDS) & set(self.extra_body)
        )
        if reserved:
            raise ValueError(
                f"extra_body may not set {', '.join(reserved)}: the {self.api} wire writes "
                f"{'it' if len(reserved) == 1 else 'them'} from the run"
            )
        return self

    @model_validator(mode="after")
    def _no_two_sources_of_auth(self) -> EndpointConfig:
        if self.api_key_env is not None and any(n.lower() == "authorization" for n in self.headers):
            raise ValueError(
                "both api_key_env and an Authorization header are configured; keep one "
                "(api_key_env keeps the key out of the configuration)"
            )
        return self

    @property
    def chat_completions_url(self) -> str:
        return self.base_url + CHAT_COMPLETIONS_PATH

    @property
    def url(self) -> str:
        """Where this endpoint's wire posts a completion (`api`'s path on the base URL)."""
        return self.base_url + API_PATHS[self.api]

    @property
    def header_variables(self) -> list[str]:
        """The environment variables the headers name (`${NAME}`), in order."""
        names = (n for v in self.headers.values() for n in _HEADER_VARIABLE.findall(v))
        return list(dict.fromkeys(names))

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The headers with every `${VARIABLE}` read from the environment now.

        Raises `MissingApiKeyError` naming the variable when it is unset, blank, or
        holds what a header cannot carry (the value is never echoed).
        """
        if not any("${" in value for value in self.headers.values()):
            return dict(self.headers)
        env = os.environ if environ is None else environ

        def read(match: re.Match[str]) -> str:
            variable = match.group(1)
            found = (env.get(variable) or "").strip()
            if not found:
                raise MissingApiKeyError(
                    self.name, variable, "is unset or blank", what="a header value"
                )
            if not _HEADER_SAFE.match(found):
                raise MissingApiKeyError(
                    self.name,
                    variable,
                    "holds characters that cannot be sent in an HTTP header (only printable ASCII)",
                    what="a header value",
                )
            return found

        return {name: _HEADER_VARIABLE.sub(read, value) for name, value in self.headers.items()}

    def header_secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """The values of the variables the headers name, to redact like the key."""
        env = os.environ if environ is None else environ
        return [(env.get(name) or "").strip() for name in self.header_variables]

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key from the environment, read now; None when the endpoint uses no key.

        Raises `MissingApiKeyError` when `api_key_env` is set but the variable is unset,
        blank or holds characters a header cannot carry, so a missing key is named
        instead of surfacing as the provider's 401.
        """
        if self.api_key_env is None:
            return None
        env = os.environ if environ is None else environ
        key = (env.get(self.api_key_env) or "").strip()
        if not key:
            raise MissingApiKeyError(self.name, self.api_key_env)
        if not _HEADER_SAFE.match(key):
            # httpx would raise while encoding the header: an error the activity cannot
            # classify, retried forever. The value is never echoed.
            raise MissingApiKeyError(
                self.name,
                self.api_key_env,
                "holds characters that cannot be sent in an HTTP header (only printable ASCII)",
            )
        return key


def validate_base_url(value: str) -> str:
    """The base URL normalized (no trailing slash), or `ValueError` naming what is wrong.

    Messages show the URL with any credentials replaced by `***`.
    """
    url = value.strip()
    if not url:
        raise ValueError("base_url must not be blank")
    parts = urlsplit(url)
    shown = url
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        shown = url.replace(userinfo + "@", "***@", 1)
        raise ValueError(
            f"base_url {shown!r} must not carry credentials; put the key in an environment "
            "variable and name it in api_key_env"
        )
    try:
        _ = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"base_url {shown!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(
            f"base_url {shown!r} must start with http:// or https:// "
            "(e.g. https://api.openai.com/v1)"
        )
    if not parts.hostname:
        raise ValueError(f"base_url {shown!r} has no host")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        # The query is not echoed: providers that take keys in URLs put them there.
        raise ValueError(
            f"base_url {parts.scheme}://{parts.netloc}{parts.path}?... must not have a query "
            "string or fragment; configure extra headers in `headers` and keys in api_key_env"
        )
    path = parts.path.rstrip("/")
    if path.endswith(CHAT_COMPLETIONS_PATH):
        raise ValueError(
            f"base_url {shown!r} already ends with {CHAT_COMPLETIONS_PATH}; give the API root "
            f"(e.g. {url[: url.rfind(CHAT_COMPLETIONS_PATH)]!r}), steadyloop appends the path"
        )
    return f"{parts.scheme}://{parts.netloc}{path}"


class EndpointRegistry:
    """The endpoints a worker can reach, by name. Built once per worker, read per call."""

    def __init__(self, endpoints: Iterable[EndpointConfig] = ()) -> None:
        self._endpoints: dict[str, EndpointConfig] = {}
        for endpoint in endpoints:
            self.add(endpoint)

    def add(self, endpoint: EndpointConfig) -> None:
        if endpoint.name in self._endpoints:
            raise EndpointConfigError(f"model endpoint {endpoint.name!r} is configured twice")
        self._endpoints[endpoint.name] = endpoint

    def get(self, name: str) -> EndpointConfig:
        try:
            return self._endpoints[name]
        except KeyError:
            raise UnknownEndpointError(name, self._endpoints) from None

    @property
    def names(self) -> list[str]:
        return list(self._endpoints)

    def __contains__(self, name: object) -> bool:
        return name in self._endpoints

    def __iter__(self) -> Iterator[EndpointConfig]:
        return iter(self._endpoints.values())

    def __len__(self) -> int:
        return len(self._endpoints)

    def __repr__(self) -> str:
        return f"EndpointRegistry({self.names!r})"

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = ENDPOINTS_ENV) -> EndpointRegistry:
        """Endpoints from JSON: a list of endpoint objects, or an object of name -> endpoint."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise EndpointConfigError(f"{source} is not valid JSON: {exc}") from None
        return cls.from_data(data, source=source)

    @classmethod
    def from_data(
        cls, data: Any, *, source: str = "endpoint configuration", table: str | None = None
    ) -> EndpointRegistry:
        """Endpoints from parsed data: a list of endpoint objects, or name -> endpoint.

        `table`: the key the mapping sits under in a config file (`endpoints`), so a
        problem is named as the user wrote it (`c.toml: endpoints.default: ...`), and a
        misspelt key gets the one it most looks like."""
        items: list[tuple[str, Any]]
        if isinstance(data, list):
            items = [(f"{source}[{i}]", entry) for i, entry in enumerate(data)]
        elif isinstance(data, dict):
            items = []
            for name, entry in data.items():
                if isinstance(entry, dict):
                    if "name" in entry and entry["name"] != name:
                        raise EndpointConfigError(
                            f"{source}[{name!r}] has a different name inside: {entry['name']!r}"
                        )
                    entry = {**entry, "name": name}
                where = f"{source}: {table}.{name}" if table else f"{source}[{name!r}]"
                items.append((where, entry))
        else:
            raise EndpointConfigError(
                f"{source} must be a JSON list of endpoints or an object of name -> endpoint, "
                f"got {type(data).__name__}"
            )
        registry = cls()
        for where, entry in items:
            if not isinstance(entry, dict):
                raise EndpointConfigError(f"{where} must be an object, got {type(entry).__name__}")
            try:
                endpoint = EndpointConfig.model_validate(entry)
            except ValidationError as exc:
                problems = "; ".join(map(_endpoint_problem, exc.errors()))
                raise EndpointConfigError(f"{where}: {problems}") from None
            registry.add(endpoint)
        return registry

    @classmethod
    def from_file(cls, path: str | Path) -> EndpointRegistry:
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise EndpointConfigError(f"cannot read endpoint configuration {file}: {exc}") from None
        return cls.from_json(text, source=str(file))

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, openai_convention: bool = True
    ) -> EndpointRegistry:
        """Endpoints from `STEADYLOOP_ENDPOINTS`, plus `default` from the OpenAI variables.

        See the module docstring for the format. Keys are not read here; only the variable
        names are recorded, and the activity reads them at call time.
        """
        env = os.environ if environ is None else environ
        raw = env.get(ENDPOINTS_ENV, "").strip()
        registry = cls.from_json(raw) if raw else cls()
        if openai_convention and DEFAULT_ENDPOINT_NAME not in registry:
            base_url = env.get(OPENAI_BASE_URL_ENV, "").strip()
            has_key = bool(env.get(OPENAI_API_KEY_ENV, "").strip())
            if base_url or has_key:
                try:
                    registry.add(
                        EndpointConfig(
                            name=DEFAULT_ENDPOINT_NAME,
                            base_url=base_url or OPENAI_DEFAULT_BASE_URL,
                            api_key_env=OPENAI_API_KEY_ENV if has_key else None,
                        )
                    )
                except ValidationError as exc:
                    problems = "; ".join(err["msg"] for err in exc.errors())
                    raise EndpointConfigError(f"{OPENAI_BASE_URL_ENV}: {problems}") from None
        return registry


def _shown_api(value: Any) -> str:
    """An `api` value as a refusal names it: its repr cut to 40 characters, with its type
    when it is not text (`3 (int)`, `None (NoneType)`). A repr that raises (an int past
    Python's digit limit) is named by its type alone."""
    try:
        text = f"{value!r:.40}"
    except (ValueError, RecursionError):
        return type(value).__name__
    return text if isinstance(value, str) else f"{text} ({type(value).__name__})"


def _endpoint_problem(error: Any) -> str:
    """One validation error of an endpoint, with the key it names; an unknown key also
    names the endpoint key it most looks like (`modle` -> `model`)."""
    where = ".".join(str(part) for part in error["loc"]) or "endpoint"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error.get("type") == "extra_forbidden" and error["loc"]:
        close = difflib.get_close_matches(str(error["loc"][-1]), _ENDPOINT_KEYS, n=1)
        message = "not an endpoint setting" + (f" (did you mean {close[0]!r}?)" if close else "")
    return f"{where}: {message}"


_ENDPOINT_KEYS = sorted(
    {alias for field in EndpointConfig.model_fields.values() if (alias := field.alias)}
    | set(EndpointConfig.model_fields)
)
