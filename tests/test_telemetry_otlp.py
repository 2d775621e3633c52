"""Spans and metrics leave the worker over OTLP/HTTP, as a collector receives them: a run
on the time-skipping server exports to a receiver on loopback (a small HTTP server in
this test) that decodes the protobuf bodies with opentelemetry-proto."""

from __future__ import annotations

import functools
import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import loop_harness
import pytest
from loop_harness import run_input, running_loop
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from temporalio.worker import Worker

from steadyloop.telemetry import _attributes as a
from steadyloop.telemetry import worker_plugins
from steadyloop.telemetry._install import install
from steadyloop.telemetry._settings import TelemetrySettings
from steadyloop.testing import (
    ScriptedCall,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: dict[str, list[bytes]] = {}
        self.content_types: set[str] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.content_types.add(self.headers.get("Content-Type", ""))
        self.server.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def values(attributes: list[KeyValue]) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind) if kind is not None else None
    return out


async def test_a_run_reaches_an_otlp_http_receiver(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default exporters (batched spans, periodic metrics), as `--otel URL` builds them.
    installed = install(
        TelemetrySettings(enabled=True, endpoint=receiver.url, service_name="otlp-test")
    )
    try:
        monkeypatch.setattr(
            loop_harness, "Worker", functools.partial(Worker, plugins=worker_plugins())
        )
        script = [
            tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c1"), usage=(21, 4)),
            text_response("5", usage=(30, 1)),
        ]
        async with running_loop(script) as loop:
            result = await loop.run(run_input("what is 2 + 3?"))
        assert result.final_answer == "5"
        installed.flush()
    finally:
        installed.shutdown()

    assert receiver.content_types == {"application/x-protobuf"}
    spans: list[Span] = []
    for body in receiver.bodies["/v1/traces"]:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            # (The tracer provider is the process's first: a test run before this one may
            # have named the service; the metrics' resource below is this install's.)
            assert "service.name" in values(list(resource_spans.resource.attributes))
            for scope in resource_spans.scope_spans:
                spans.extend(scope.spans)
    names = sorted(s.name for s in spans)
    assert names.count(a.TURN_SPAN) == 2
    assert names.count("chat scripted-model") == 2
    assert names.count("stream scripted-model") == 2
    assert "execute_tool add" in names and a.RUN_SPAN in names
    assert len({s.trace_id for s in spans}) == 1
    by_id = {s.span_id: s for s in spans}
    (tool,) = [s for s in spans if s.name == "execute_tool add"]
    assert values(list(tool.attributes))[a.RECEIPT_DECISION] == "executed"
    assert by_id[tool.parent_span_id].name == a.RUN_SPAN
    streams = [values(list(s.attributes)) for s in spans if s.name == "stream scripted-model"]
    assert sorted(int(str(v[a.INPUT_TOKENS])) for v in streams) == [21, 30]
    assert {v[a.REQUEST_MODEL] for v in streams} == {"scripted-model"}

    metric_names: set[str] = set()
    for body in receiver.bodies["/v1/metrics"]:
        request_m = ExportMetricsServiceRequest.FromString(body)
        for rm in request_m.resource_metrics:
            assert values(list(rm.resource.attributes))["service.name"] == "otlp-test"
            for sm in rm.scope_metrics:
                metric_names.update(m.name for m in sm.metrics)
    assert {a.METRIC_TOKENS, a.METRIC_DURATION, a.METRIC_TTFT, a.METRIC_RECEIPTS} <= metric_names
