"""steadyloop against llama.cpp's own `/v1/responses` (SmolLM2-135M-Instruct): the model
activity per recorded case, and one whole `steadyloop worker` + `steadyloop run` with a
tool call answered, the endpoint configured `api=responses` on the command line.

`STEADYLOOP_CAPTURE_FIXTURES=1` saves each exchange that passed its check as the replay
fixture `test_responses_realserver_replays.py` reads.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from real_servers import assert_weather_answered, worker_and_run
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
    assert_weather_answered(ran)
