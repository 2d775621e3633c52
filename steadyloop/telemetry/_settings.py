"""Whether telemetry is on, where it goes and whether content may enter it.

Read the standard way: OpenTelemetry's own environment variables
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._HEADERS`,
`OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED`; the exporters read the rest themselves) or the
worker's `--otel [URL]` flag. Off unless one of them asks for it: an unset environment
costs nothing. Content (prompts, tool arguments and results) stays out of spans unless
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the GenAI instrumentations'
switch) or `--otel-content` says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
DEFAULT_SERVICE_NAME = "steadyloop-worker"


@dataclass(frozen=True)
class TelemetrySettings:
    """`endpoint`: the OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are appended);
    None lets the exporters read the environment (default `http://localhost:4318`)."""

    enabled: bool = False
    endpoint: str | None = None
    capture_content: bool = False
    service_name: str = DEFAULT_SERVICE_NAME


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def settings_from(
    environ: Mapping[str, str],
    *,
    flag: str | None = None,
    content: bool = False,
) -> TelemetrySettings:
    """The settings a worker runs with. `flag`: the `--otel` value (`""` for a bare
    `--otel`, None when absent); `content`: `--otel-content`."""
    if _truthy(environ.get("OTEL_SDK_DISABLED")):
        return TelemetrySettings()
    configured = any((environ.get(name) or "").strip() for name in ENDPOINT_ENVS)
    if flag is None and not configured:
        return TelemetrySettings()
    return TelemetrySettings(
        enabled=True,
        endpoint=flag.strip() or None if flag is not None else None,
        capture_content=content or _truthy(environ.get(CONTENT_ENV)),
        service_name=(environ.get("OTEL_SERVICE_NAME") or "").strip() or DEFAULT_SERVICE_NAME,
    )
