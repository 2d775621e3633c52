"""MCP servers a worker serves, by name: the config file's `[mcp.NAME]` tables and
`--mcp NAME=...` flags. Pure: no I/O, no MCP import, no environment read here.

    [mcp.sqlite]                      # stdio: a command, its arguments and environment
    command = "mcp-server-sqlite"
    args = ["--db-path", "/srv/agent.db"]
    env = { LOG_LEVEL = "info" }      # literal values, passed to the server
    env_from = { API_TOKEN = "DB_TOKEN" }  # its API_TOKEN: the worker's $DB_TOKEN
    effects = { read_query = "pure" } # override the class the tool's annotations give
    approval = ["write_query"]        # these calls wait for a person
    timeout_s = 30
    optional = false                  # true: start without it if its command is missing

    [mcp.search]                      # streamable HTTP: a URL and headers
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "SEARCH_AUTH" }  # the header's value is $SEARCH_AUTH

    steadyloop worker --mcp time="mcp-server-time --local-timezone UTC" \\
                      --mcp optional:git="mcp-server-git" \\
                      --mcp search=https://mcp.example.com/mcp

What the obvious configuration gets wrong, refused here with the server and key named:

- A secret written into a header or the flag (`Authorization = "Bearer sk-..."`): it would
  sit in a config file, a shell history, and (were it ever passed to a run) workflow
  history. A header's value and an `env_from` value *name an environment variable*, read
  by the worker when it connects (`resolve_headers`), and a value that cannot be a
  variable name is refused.
- A typo (`comand`, `header`): refused, never ignored (an ignored key is a setting that
  silently did not apply).
- `effects` naming `resumable`: an MCP call has no sub-operations to record, so a lost
  attempt could never be reclaimed from a trail; only `pure` and `opaque` are accepted.
- A server both stdio and HTTP, or neither.
- A stdio command that cannot be started (a typo, a server not installed): a worker that
  started anyway would serve a run without the tools it was configured with, and say so
  only in a warning. It is refused when the worker starts (`steadyloop._mcp.startup`),
  unless the server is marked `optional` (`optional = true`, `--mcp optional:NAME=...`):
  then it is logged and tried again, and its tools are served once it starts.

A later source replaces a server of the same name (file, then flags), like endpoints.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from steadyloop._run.bounds import seconds_problem
from steadyloop.errors import SteadyloopError

DEFAULT_MCP_TIMEOUT_S = 30.0
# How often the worker lists a server's tools again. None of the reference servers
# announce `tools.listChanged`, so a changed list is picked up on this clock as well as on
# the notification (from servers that send it).
DEFAULT_LIST_TTL_S = 30.0
SERVER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,32}$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

McpEffect = Literal["pure", "opaque"]
PrefixRule = Literal["auto", "always"]


class McpConfigError(SteadyloopError, ValueError):
    """An MCP server setting that cannot work; the message names the server and the fix."""


class McpServerConfig(BaseModel):
    """One MCP server: how to reach it and how its tools are served.

    `prefix`: `auto` names a tool `NAME__tool` only when its own name is taken (by a
    Python tool or another server's); `always` prefixes every tool of this server.
    `optional`: the worker starts even when the server's command cannot be started (an
    HTTP server that does not answer never stops the worker from starting).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_from: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    effects: dict[str, McpEffect] = Field(default_factory=dict)
    approval: list[str] = Field(default_factory=list)
    timeout_s: float = DEFAULT_MCP_TIMEOUT_S
    list_ttl_s: float = DEFAULT_LIST_TTL_S
    prefix: PrefixRule = "auto"
    optional: bool = False

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SERVER_NAME_PATTERN.fullmatch(value):
            raise ValueError(
                f"server name {value!r} must match {SERVER_NAME_PATTERN.pattern}: it prefixes "
                "tool names, which providers restrict to letters, digits, '_' and '-'"
            )
        return value

    @field_validator("headers", "env_from")
    @classmethod
    def _names_variables(cls, value: dict[str, str]) -> dict[str, str]:
        for key, variable in value.items():
            if not ENV_NAME_PATTERN.fullmatch(variable):
                raise ValueError(
                    f"{key!r} = {_excerpt(variable)}: the value must name an environment "
                    "variable that holds it (e.g. MCP_AUTH), never the secret itself"
                )
        return value

    @field_validator("timeout_s", "list_ttl_s")
    @classmethod
    def _seconds(cls, value: float) -> float:
        problem = seconds_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP), not both")
        if self.command is not None and not self.command.strip():
            raise ValueError("`command` is blank")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"`url` {self.url!r} must start with http:// or https://")
        if self.command is None and (self.args or self.env or self.env_from or self.cwd):
            raise ValueError("`args`, `env`, `env_from` and `cwd` are for stdio servers")
        if self.url is None and self.headers:
            raise ValueError("`headers` are for streamable HTTP servers")
        return self


def _excerpt(value: str) -> str:
    """Enough of a refused value to find it, not enough to leak a secret."""
    return repr(value[:4] + "...") if len(value) > 8 else repr(value)


OPTIONAL_PREFIX = "optional:"


def parse_mcp_flag(spec: str) -> McpServerConfig:
    """`NAME=URL` (streamable HTTP) or `NAME=COMMAND [ARGS...]` (stdio, shell-quoted);
    `optional:NAME=...` marks the server optional (a `:` is never part of a name, and no
    shell expands it)."""
    name, equals, rest = spec.partition("=")
    name, rest = name.strip(), rest.strip()
    optional = name.startswith(OPTIONAL_PREFIX)
    if optional:
        name = name.removeprefix(OPTIONAL_PREFIX).strip()
    if not equals or not name or not rest:
        raise McpConfigError(
            f"--mcp {spec!r}: expected [optional:]NAME=COMMAND [ARGS...] or "
            '[optional:]NAME=URL, e.g. --mcp time="mcp-server-time --local-timezone UTC"'
        )
    entry: dict[str, Any] = {"name": name}
    if optional:
        entry["optional"] = True
    if rest.startswith(("http://", "https://")):
        entry["url"] = rest
    else:
        try:
            words = shlex.split(rest)
        except ValueError as error:
            raise McpConfigError(f"--mcp {name}: cannot split {rest!r}: {error}") from None
        entry["command"], entry["args"] = words[0], words[1:]
    return _validated(entry, f"--mcp {name}")


def mcp_servers(
    file_section: Mapping[str, Any] | None, flags: Sequence[str], *, source: str = "config file"
) -> list[McpServerConfig]:
    """The servers of the config file's `mcp` table, then of the flags (a later one of the
    same name replaces an earlier one), in the order first named."""
    servers: dict[str, McpServerConfig] = {}
    for name, entry in (file_section or {}).items():
        if not isinstance(entry, Mapping):
            raise McpConfigError(f"{source}: mcp.{name} must be a table of settings")
        server = _validated({**entry, "name": name}, f"{source}: mcp.{name}")
        servers[server.name] = server
    for spec in flags:
        server = parse_mcp_flag(spec)
        servers[server.name] = server
    return list(servers.values())


def _validated(entry: Mapping[str, Any], where: str) -> McpServerConfig:
    try:
        return McpServerConfig.model_validate(dict(entry))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'server'}: "
            f"{str(e['msg']).removeprefix('Value error, ')}"
            for e in error.errors(include_url=False, include_input=False)
        )
        raise McpConfigError(f"{where}: {problems}") from None


def resolve_headers(server: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The HTTP headers with each value read from the variable it names.

    A variable that is unset is refused by name (a request without its credentials would
    fail later with a 401 that names nothing)."""
    return _resolve(server, server.headers, environ, "header")


def resolve_env(server: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The stdio server's environment additions: `env` as written, `env_from` read."""
    return {**server.env, **_resolve(server, server.env_from, environ, "env_from")}


def _resolve(
    server: McpServerConfig, names: Mapping[str, str], environ: Mapping[str, str], what: str
) -> dict[str, str]:
    resolved: dict[str, str] = {}
    for key, variable in names.items():
        value = environ.get(variable)
        if value is None or not value.strip():
            raise McpConfigError(
                f"mcp server {server.name!r}: {what} {key!r} names ${variable}, which is not set "
                "in the worker's environment"
            )
        resolved[key] = value
    return resolved


def describe_server(server: McpServerConfig) -> str:
    """One line for the worker's start-up summary; names variables, never their values."""
    if server.command is not None:
        where = shlex.join([server.command, *server.args])
    else:
        where = str(server.url)
        if server.headers:
            where += " (headers from " + ", ".join(f"${v}" for v in server.headers.values()) + ")"
    optional = ", optional" if server.optional else ""
    return f"{server.name} ({server.transport}{optional}): {where}"
