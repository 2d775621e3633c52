"""The metric instruments, created once per process (`install`), recorded by endpoint and
model. Tokens, duration and time to first token come from the model activity (one
recording per attempt, wherever it ran); cost, retries, receipt decisions, replays and
breaker openings come from workflow code, recorded only when not replaying history
(`steadyloop.telemetry._tracing`)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.metrics import Counter, Histogram, Meter

from steadyloop.telemetry import _attributes as a


@dataclass(frozen=True)
class Instruments:
    tokens: Histogram
    duration: Histogram
    time_to_first_token: Histogram
    stalls: Counter
    retries: Counter
    cost: Counter
    receipt_decisions: Counter
    replays: Counter
    breaker_openings: Counter

    @classmethod
    def create(cls, meter: Meter) -> Instruments:
        return cls(
            tokens=meter.create_histogram(
                a.METRIC_TOKENS, unit="{token}", description="Tokens per model call"
            ),
            duration=meter.create_histogram(
                a.METRIC_DURATION, unit="s", description="Duration of a model call"
            ),
            time_to_first_token=meter.create_histogram(
                a.METRIC_TTFT, unit="s", description="Request to first token of a model call"
            ),
            stalls=meter.create_counter(
                a.METRIC_STALLS, description="Streams the stall watchdog ended, by phase"
            ),
            retries=meter.create_counter(
                a.METRIC_RETRIES, description="Failed model attempts followed by another"
            ),
            cost=meter.create_counter(
                a.METRIC_COST, unit="USD", description="Priced cost of model calls"
            ),
            receipt_decisions=meter.create_counter(
                a.METRIC_RECEIPTS, description="Receipt decisions on tool calls"
            ),
            replays=meter.create_counter(
                a.METRIC_REPLAYS, description="Tool calls answered from a receipt, not run"
            ),
            breaker_openings=meter.create_counter(
                a.METRIC_BREAKER_OPENINGS, description="Endpoint circuit breakers opened"
            ),
        )
