"""The server's settings: who may call it (bearer tokens to tenants), from where (CORS),
and how much (body size, concurrent runs and streams per tenant).

Read from the config file's `[web]` table and the environment, like every other setting
(`steadyloop._worker.config`). Tokens are secrets, so the file never holds one:

- `[web.tenants.NAME] token_sha256 = ["<hex>", ...]`: the sha256 of each token, which is
  all the server keeps (a stolen config file grants nothing);
- `token_env = "VAR"`: an environment variable holding a token, hashed when the
  settings load; the token itself is never kept or printed;
- `STEADYLOOP_WEB_TOKENS`: `tenant=token,tenant=token` from the environment, hashed alike.

A tenant's name is its runs' `tenant_id` (half of every receipt key), so it is checked
like one. Tokens are compared by hash with `hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from steadyloop._run.bounds import identity_problem
from steadyloop._worker.config import ConfigError

__all__ = [
    "DEV_TENANT",
    "TOKENS_ENV",
    "TenantSettings",
    "WebSettings",
    "token_sha256",
    "web_settings",
]

TOKENS_ENV = "STEADYLOOP_WEB_TOKENS"
DEV_TENANT = "default"
MAX_TENANT_CHARS = 200


def token_sha256(token: str) -> str:
    """The hex sha256 of a bearer token: what the configuration stores instead of it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TenantSettings(BaseModel):
    """One tenant: the hashes of its tokens and its limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token_sha256: list[str] = Field(default_factory=list)
    token_env: str | None = None
    # Runs of this tenant active at once, and started per `rate_window_s`: enforced on
    # every root run started through the server by the chain admission entity (the
    # chain rules `tenant_ceiling` and `tenant_rate`), so every server process agrees.
    max_active_runs: int = Field(default=8, ge=1)
    max_started_runs: int = Field(default=120, ge=1)
    rate_window_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    # Event streams open at once on one server process.
    max_streams: int = Field(default=32, ge=1)

    @field_validator("token_sha256")
    @classmethod
    def _hex(cls, hashes: list[str]) -> list[str]:
        for digest in hashes:
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
                raise ValueError(
                    f"{digest[:12]!r}... is not a sha256 hex digest (64 hex digits); "
                    "`python -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1]"
                    ".encode()).hexdigest())' TOKEN` prints one"
                )
        return [d.lower() for d in hashes]


class WebSection(BaseModel):
    """The config file's `[web]` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenants: dict[str, TenantSettings] = Field(default_factory=dict)
    cors_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    ping_s: float = Field(default=15.0, gt=0, allow_inf_nan=False)
    # How long one send to a client may take before its stream is cut (a frozen client;
    # it reconnects with its cursor and loses nothing).
    send_timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    # Per run and process: the events kept for its clients (each reads from its own
    # position; one further behind reads the log by itself until it catches up).
    run_buffer: int = Field(default=1024, ge=16)


class WebSettings(BaseModel):
    """Everything the app reads; `open_access` (only with `serve --dev` and no tenants)
    serves every request as tenant `default`, on the loopback interface."""

    model_config = ConfigDict(frozen=True)

    tenants: dict[str, TenantSettings] = Field(default_factory=dict)
    hashes: dict[str, str] = Field(default_factory=dict, repr=False)  # sha256 -> tenant
    cors_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = 1024 * 1024
    ping_s: float = 15.0
    send_timeout_s: float = 10.0
    run_buffer: int = 1024
    open_access: bool = False

    def tenant_for(self, token: str) -> str | None:
        """The tenant a bearer token belongs to, or None. Constant time per stored hash."""
        digest = token_sha256(token)
        found = None
        for stored, tenant in self.hashes.items():
            if hmac.compare_digest(stored, digest):
                found = tenant
        return found

    def limits(self, tenant: str) -> TenantSettings:
        return self.tenants.get(tenant) or TenantSettings()


def web_settings(
    section: Mapping[str, Any], environ: Mapping[str, str], *, dev: bool = False
) -> WebSettings:
    """The settings from the `[web]` table and the environment; `ConfigError` naming the
    key when one is wrong, or when no tenant is configured outside `--dev`."""
    try:
        web = WebSection.model_validate(dict(section))
    except ValidationError as exc:
        problems = "; ".join(
            f"web.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ConfigError(problems) from None
    tenants = dict(web.tenants)
    hashes: dict[str, str] = {}

    def add(tenant: str, digest: str, source: str) -> None:
        problem = identity_problem(tenant, max_chars=MAX_TENANT_CHARS)
        if problem is not None:
            raise ConfigError(f"{source}: the tenant name {problem}")
        owner = hashes.setdefault(digest, tenant)
        if owner != tenant:
            raise ConfigError(f"{source}: one token is given to tenants {owner!r} and {tenant!r}")
        tenants.setdefault(tenant, TenantSettings())

    for name, tenant in web.tenants.items():
        for digest in tenant.token_sha256:
            add(name, digest, f"web.tenants.{name}.token_sha256")
        if tenant.token_env is not None:
            token = environ.get(tenant.token_env, "")
            if not token.strip():
                raise ConfigError(
                    f"web.tenants.{name}.token_env: the environment variable "
                    f"{tenant.token_env!r} is not set (it holds the tenant's bearer token)"
                )
            add(name, token_sha256(token.strip()), f"web.tenants.{name}.token_env")
    for pair in filter(None, (p.strip() for p in environ.get(TOKENS_ENV, "").split(","))):
        owner, sep, secret = pair.partition("=")
        if not sep or not owner.strip() or not secret.strip():
            raise ConfigError(f"{TOKENS_ENV}: each entry is tenant=token (got {owner!r}=...)")
        add(owner.strip(), token_sha256(secret.strip()), TOKENS_ENV)
    if not hashes and not dev:
        raise ConfigError(
            "no bearer tokens are configured, so nobody could call the server: set "
            f"{TOKENS_ENV}=tenant=token, or [web.tenants.NAME] token_sha256/token_env in the "
            "config file (`steadyloop serve --dev` serves without tokens, on this machine)"
        )
    for origin in web.cors_origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise ConfigError(f"web.cors_origins: {origin!r} is not an origin (https://host)")
    return WebSettings(
        tenants=tenants,
        hashes=hashes,
        cors_origins=list(web.cors_origins),
        max_body_bytes=web.max_body_bytes,
        ping_s=web.ping_s,
        send_timeout_s=web.send_timeout_s,
        run_buffer=web.run_buffer,
        open_access=dev and not hashes,
    )
