"""Telemetry installed for one test module, into memory, and taken down after it (so no
other test's worker or activity records anything)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from steadyloop.telemetry._install import Installed, install
from steadyloop.telemetry._settings import TelemetrySettings


@dataclass
class Recorded:
    installed: Installed
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], float]]:
        """(attributes, value) of every data point of the instrument `name`."""
        data = self.metrics.get_metrics_data()
        points: list[tuple[dict[str, Any], float]] = []
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        raw: Any = getattr(point, "value", None) or getattr(point, "sum", 0)
                        value = float(raw)
                        points.append((dict(point.attributes or {}), value))
        return points


def recorded(*, capture_content: bool = False) -> Iterator[Recorded]:
    spans = InMemorySpanExporter()
    metrics = InMemoryMetricReader()
    installed = install(
        TelemetrySettings(enabled=True, capture_content=capture_content),
        span_exporter=spans,
        metric_readers=[metrics],
    )
    try:
        yield Recorded(installed, spans, metrics)
    finally:
        installed.shutdown()
