"""steadyloop against llama.cpp's own `/v1/responses` (SmolLM2-135M-Instruct): the model
activity per recorded case, and one whole `steadyloop worker` + `steadyloop run` with a
tool call answered, the endpoint configured `api=responses` on the command line.

`STEADYLOOP_CAPTURE_FIXTURES=1` saves each exchange that passed its check as the replay
fixture `test_responses_realserver_replays.py` reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered
from realserver_cases import CAPTURE_ENV, MODELS, SOURCES, Case, run_case
from realserver_responses_cases import FIXTURE_DIR, RESPONSES_CASES, SERVER
from test_realserver_llamacpp import WEATHER_TOOLS
from wire_capture import RecordingTransport

from steadyloop.worker.dev_server import dev_server
from steadyloop.workflows.tool_loop import ToolLoopWorkflow

pytestmark = [pytest.mark.realserver, pytest.mark.slow]


@pytest.mark.parametrize("case", RESPONSES_CASES, ids=[case.name for case in RESPONSES_CASES])
async def test_the_model_activity_reads_llamacpp_responses(case: Case, llamacpp_url: str) -> None:
    transport = RecordingTransport(SOURCES[SERVER] + ", /v1/responses")
    outcome = await run_case(case, transport, llamacpp_url + "/v1")
    case.check(outcome, transport.last)
    assert "input" in transport.last.request  # the Responses body, posted to /v1/responses
    if os.environ.get(CAPTURE_ENV):
        transport.last.save(FIXTURE_DIR, case.name)


async def test_worker_and_run_over_the_responses_wire(llamacpp_url: str, tmp_path: Path) -> None:
    """`steadyloop worker --endpoint default=URL,api=responses,...` and `steadyloop run`:
    llama.cpp's Responses server makes the call, the worker runs it, it is answered."""
    (tmp_path / "weather_tools.py").write_text(WEATHER_TOOLS, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    environ["STEADYLOOP_BLOB_DIR"] = str(tmp_path / "blobs")
    endpoint = (
        f"default={llamacpp_url}/v1,model={MODELS[SERVER]},api=responses,"
        'extra_body.stop=["</tool_call>"]'
    )
    async with dev_server(ui=False) as temporal:
        connection = ["--address", temporal.address, "--task-queue", f"q-{uuid.uuid4().hex[:8]}"]
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steadyloop", "worker", *connection,
            "--tools", "weather_tools:registry", "--endpoint", endpoint,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=environ, cwd=tmp_path,
        )  # fmt: skip
        try:
            assert worker.stdout is not None
            seen: list[str] = []
            async with asyncio.timeout(120):
                while not seen or not seen[-1].startswith("ready "):
                    line = (await worker.stdout.readline()).decode()
                    assert line, "\n".join(seen)
                    seen.append(line.rstrip("\n"))
            run_id = f"llamacpp-responses-{uuid.uuid4().hex[:8]}"
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "steadyloop", "run", "What is the weather in Paris?",
                *connection, "--id", run_id,
                "--tool-choice", "required", "--prefill", "<tool_call>\\n",
                "--temperature", "0", "--max-tokens", "96", "--max-turns", "3",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                env=environ, cwd=tmp_path / "..",
            )  # fmt: skip
            out, _ = await asyncio.wait_for(run.communicate(), 300)
            shown = out.decode(errors="replace")
            assert run.returncode in (0, 3), shown  # an answer, or max_turns
            assert "-> get_weather" in shown and "<- get_weather: Sunny and 21 C in" in shown
            handle = temporal.client.get_workflow_handle_for(ToolLoopWorkflow.run, run_id)
            result = await handle.result()
        finally:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
            await asyncio.wait_for(worker.wait(), 60)
    transcript = result.transcript
    assert_every_call_answered(transcript)
    calls = [c for m in transcript if m.role == "assistant" for c in m.tool_calls]
    assert calls and {c.name for c in calls} == {"get_weather"}
    answers = {m.tool_call_id: m.content for m in transcript if m.role == "tool"}
    for call in calls:
        assert answers[call.id] == f"Sunny and 21 C in {json.loads(call.arguments)['city']}."
