"""Turn telemetry on for this process: tracer and meter providers, OTLP/HTTP exporters,
the instruments, and the Temporal plugins every worker adds (`worker_plugins`).

Spans from workflow code must be replay-safe, so the process's global tracer provider is
temporalio's `ReplaySafeTracerProvider` (`create_tracer_provider`): span and trace ids
drawn inside a workflow come from the workflow's deterministic random (so a span started
again while a new worker replays the history has the id its children already point to),
and a span whose end is reached while history is being replayed is not exported again.
A process has one global tracer provider (OpenTelemetry refuses a second), so a second
`install` (tests) keeps the provider, and its resource (the service name), and swaps
where its spans go.

Imported only when telemetry is asked for: it needs the `otel` extra
(`pip install 'steadyloop[otel]'`); without it `install` raises `TelemetryUnavailable`
saying so, and the rest of steadyloop never imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from steadyloop.errors import SteadyloopError
from steadyloop.telemetry._settings import TelemetrySettings


class TelemetryUnavailable(SteadyloopError, RuntimeError):
    """Telemetry was asked for but OpenTelemetry's SDK is not installed."""


try:
    import opentelemetry.trace
    from opentelemetry.context import Context
    from opentelemetry.metrics import Meter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
    )
    from opentelemetry.trace import Tracer
    from temporalio.contrib.opentelemetry import (
        OpenTelemetryPlugin,
        ReplaySafeTracerProvider,
        create_tracer_provider,
    )
    from temporalio.plugin import SimplePlugin

    from steadyloop.telemetry._instruments import Instruments
except ImportError as missing:  # pragma: no cover - exercised by a clean install only
    raise TelemetryUnavailable(
        f"telemetry needs OpenTelemetry's SDK ({missing.name} is missing): "
        "pip install 'steadyloop[otel]'"
    ) from None


class _SwitchableProcessor(SpanProcessor):
    """The one processor the process's provider holds; `install` points it elsewhere."""

    def __init__(self, target: SpanProcessor) -> None:
        self.target = target

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.target.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.target.on_end(span)

    def shutdown(self) -> None:
        self.target.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.target.force_flush(timeout_millis)


_switch: _SwitchableProcessor | None = None
_provider: ReplaySafeTracerProvider | None = None


@dataclass
class Installed:
    """The process's telemetry: what the emitting sites use."""

    settings: TelemetrySettings
    tracer: Tracer
    meter: Meter
    instruments: Instruments
    meter_provider: MeterProvider
    processor: SpanProcessor
    _closed: bool = field(default=False, repr=False)

    def worker_plugins(self) -> list[Any]:
        """Temporal plugins for one worker (fresh objects: a plugin belongs to one worker).

        temporalio's `OpenTelemetryPlugin` propagates the trace context through every
        activity, child workflow and continue-as-new header and lets workflow code use
        the replay-safe provider (the sandbox passes `opentelemetry` through); ours adds
        the run span and hands workflow code its tracing (`steadyloop.telemetry._workflow`).
        """
        from steadyloop.telemetry._tracing import WorkflowTelemetryInterceptor

        return [
            OpenTelemetryPlugin(),
            SimplePlugin("steadyloop.telemetry", interceptors=[WorkflowTelemetryInterceptor(self)]),
        ]

    def flush(self) -> None:
        self.processor.force_flush()
        self.meter_provider.force_flush()

    def shutdown(self) -> None:
        """Export what is pending and stop (the worker calls this when it stops)."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        self.processor.shutdown()
        self.meter_provider.shutdown()
        from steadyloop.telemetry import _state as state  # here: `state` names this module's type

        if state.current() is self:
            state.set_current(None)


def install(
    settings: TelemetrySettings,
    *,
    span_exporter: SpanExporter | None = None,
    metric_readers: Sequence[MetricReader] | None = None,
) -> Installed:
    """Install telemetry for this process and return it (also `state.current()`).

    Without `span_exporter`/`metric_readers`, spans and metrics go over OTLP/HTTP to
    `settings.endpoint` or where the OTEL_EXPORTER_OTLP_* variables say. A given span
    exporter is fed synchronously (tests read it right after a run).
    """
    from steadyloop.telemetry import _state as state  # here: `state` names this module's type

    global _switch, _provider
    if span_exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = None if settings.endpoint is None else _signal_url(settings, "traces")
        processor: SpanProcessor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))
    else:
        processor = SimpleSpanProcessor(span_exporter)
    if metric_readers is None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        endpoint = None if settings.endpoint is None else _signal_url(settings, "metrics")
        metric_readers = [PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint))]
    resource = Resource.create({"service.name": settings.service_name})
    if _provider is None:
        _provider = create_tracer_provider(resource=resource)
        _switch = _SwitchableProcessor(processor)
        _provider.add_span_processor(_switch)
        opentelemetry.trace.set_tracer_provider(_provider)
        if opentelemetry.trace.get_tracer_provider() is not _provider:
            raise TelemetryUnavailable(
                "another OpenTelemetry tracer provider was set in this process first; "
                "steadyloop needs temporalio's replay-safe one "
                "(temporalio.contrib.opentelemetry.create_tracer_provider)"
            )
    else:
        assert _switch is not None
        _switch.target = processor
    previous = state.current()
    if previous is not None:
        previous.shutdown()
    meter_provider = MeterProvider(metric_readers=list(metric_readers), resource=resource)
    meter = meter_provider.get_meter("steadyloop")
    installed = Installed(
        settings=settings,
        tracer=_provider.get_tracer("steadyloop"),
        meter=meter,
        instruments=Instruments.create(meter),
        meter_provider=meter_provider,
        processor=processor,
    )
    state.set_current(installed)
    return installed


def _signal_url(settings: TelemetrySettings, signal: str) -> str:
    assert settings.endpoint is not None
    return f"{settings.endpoint.rstrip('/')}/v1/{signal}"
