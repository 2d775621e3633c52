"""steadyloop against llama.cpp's own `/v1/responses` (SmolLM2-135M-Instruct): the model
activity per recorded case, and one whole `steadyloop worker` + `steadyloop run` with a
tool call answered, the endpoint configured `api=responses` on the command line.

`STEADYLOOP_CAPTURE_FIXTURES=1` saves each exchange that passed its check as the replay
fixture `test_responses_realserver_replays.py` reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered
from real_servers import worker_and_run
from realserver_cases import CAPTURE_ENV, MODELS, SOURCES, Case, run_case
from realserver_responses_cases import FIXTURE_DIR, RESPONSES_CASES, SERVER
from wire_capture import RecordingTransport

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
    endpoint = (
        f"default={llamacpp_url}/v1,model={MODELS[SERVER]},api=responses,"
        'extra_body.stop=["</tool_call>"]'
    )
    ran = await worker_and_run(
        tmp_path,
        endpoint,
        ["--tool-choice", "required", "--prefill", "<tool_call>\\n", "--temperature", "0",
         "--max-tokens", "96", "--max-turns", "3"],
    )  # fmt: skip
    assert ran.returncode in (0, 3), ran.shown  # an answer, or max_turns
    assert "-> get_weather" in ran.shown and "<- get_weather: Sunny and 21 C in" in ran.shown
    result = ran.result
    transcript = result.transcript
    assert_every_call_answered(transcript)
    calls = [c for m in transcript if m.role == "assistant" for c in m.tool_calls]
    assert calls and {c.name for c in calls} == {"get_weather"}
    answers = {m.tool_call_id: m.content for m in transcript if m.role == "tool"}
    for call in calls:
        assert answers[call.id] == f"Sunny and 21 C in {json.loads(call.arguments)['city']}."
