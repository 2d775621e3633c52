"""OpenTelemetry traces and metrics for steadyloop runs; off unless asked for.

A run is one trace, across workers, continue-as-new and child runs:

    invoke_agent steadyloop          the run (one per execution; the next execution's
    │                                span is a child of the last, through the
    │                                continue-as-new headers)
    ├── steadyloop.turn              one model turn
    │   └── chat {model}             one attempt: failure kind, the route's decision
    │       └── stream {model}       the model activity: provider, tokens, TTFT, stall
    └── execute_tool {name}          one call: the receipt decision(s)
        └── invoke_agent steadyloop  a child run started by `delegate`

Turn it on with `install(settings_from(os.environ, flag=...))` before building workers
(`steadyloop worker --otel` does), then give each worker `worker_plugins()`. Everything
here imports without OpenTelemetry; only `install` needs the `otel` extra.
"""

from __future__ import annotations

from typing import Any

from steadyloop.telemetry._settings import TelemetrySettings, settings_from
from steadyloop.telemetry._state import current

__all__ = ["TelemetrySettings", "current", "install_from", "settings_from", "worker_plugins"]


def worker_plugins() -> list[Any]:
    """The Temporal plugins a worker adds: none while telemetry is off."""
    installed = current()
    return [] if installed is None else installed.worker_plugins()


def install_from(settings: TelemetrySettings) -> Any:
    """`install(settings)` when they ask for telemetry, else None (nothing imported)."""
    if not settings.enabled:
        return None
    from steadyloop.telemetry._install import install

    return install(settings)
