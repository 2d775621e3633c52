"""`steadyloop worker --otel URL` as a user runs it: a worker process on a dev server, a
run started by `steadyloop run`, spans arriving at an OTLP/HTTP receiver on loopback.
And the switches: off unless asked for, and steadyloop without OpenTelemetry installed."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_cli_worker import cli_environment, start_worker, steadyloop
from test_telemetry_otlp import Receiver, values

from steadyloop._worker.dev_server import DevServer, dev_server
from steadyloop.telemetry import _attributes as a
from steadyloop.telemetry._settings import TelemetrySettings, settings_from
from steadyloop.testing import (
    ScriptedServer,
    text_response,
)


@pytest.fixture
def otlp() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
async def temporal_server() -> AsyncIterator[DevServer]:
    async with dev_server(ui=False) as server:
        yield server


@pytest.mark.slow
async def test_worker_otel_flag_exports_the_run_it_served(
    temporal_server: DevServer, otlp: Receiver, tmp_path: Path
) -> None:
    tools_dirs = {
        "STEADYLOOP_SANDBOX_DIR": str(tmp_path / "sandbox"),
        "STEADYLOOP_OUTBOX_DIR": str(tmp_path / "outbox"),
    }
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal_server.address, "--task-queue", queue]
    answer = text_response("Paris.")
    async with ScriptedServer([answer]) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url},model=scripted-model",
            "--otel",
            otlp.url,
            environ=cli_environment(**tools_dirs),
        )
        try:
            assert f"OpenTelemetry: traces and metrics to {otlp.url}, without content" in (
                worker.output
            )
            code, out = await steadyloop(
                "run",
                "capital of France?",
                *connection,
                "--endpoint",
                "scripted",
                "--model",
                "scripted-model",
                environ=cli_environment(),
            )
            assert code == 0, out
        finally:
            assert await worker.stop() == 0, worker.output  # stopping exports what is left
    names: list[str] = []
    for body in otlp.bodies.get("/v1/traces", []):
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            service = values(list(resource_spans.resource.attributes))["service.name"]
            assert service == "steadyloop-worker"
            for scope in resource_spans.scope_spans:
                names.extend(s.name for s in scope.spans)
    assert sorted(names) == sorted(
        [a.RUN_SPAN, a.TURN_SPAN, "chat scripted-model", "stream scripted-model"]
    )


def test_off_unless_asked_for() -> None:
    assert settings_from({}) == TelemetrySettings()
    assert settings_from({"OTEL_SERVICE_NAME": "x"}).enabled is False
    on = settings_from({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert on.enabled and on.endpoint is None and not on.capture_content  # exporters read it
    assert settings_from({}, flag="").enabled  # a bare --otel
    assert settings_from({}, flag="http://c:4318").endpoint == "http://c:4318"
    assert not settings_from({"OTEL_SDK_DISABLED": "true"}, flag="").enabled
    assert settings_from({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, flag="")
    content = settings_from({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, flag="")
    assert content.capture_content
    assert settings_from({}, flag="", content=True).capture_content


BLOCK_OTEL = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
import steadyloop._worker.process, steadyloop._cli.main, steadyloop._workflows.tool_loop
import steadyloop._activities.model_stream
from steadyloop.telemetry import install_from, settings_from, worker_plugins
assert worker_plugins() == []
assert install_from(settings_from({})) is None
assert not any(m.startswith("opentelemetry") for m in sys.modules), "imported when off"
try:
    install_from(settings_from({}, flag=""))
except RuntimeError as exc:
    print(exc)
"""


def test_steadyloop_runs_without_opentelemetry_and_says_what_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_OTEL],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'steadyloop[otel]'" in done.stdout
