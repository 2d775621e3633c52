"""`benchmarks/bench_peers.py`: it imports without the peers (the `bench` extra), its
provider answers every wire shape the peers speak with the turn the request is at, its
ratios are paired by repetition, its quick run of steadyloop's systems alone (a run
started directly, and one through the plugin and `Agent.run`) needs none of the peers,
and (only with the extra installed) its quick run ends every run of every system with
the final answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from steadyloop.testing import RecordedRequest, ScriptedResponse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_peers
from bench_loop import Script, final_answer_text


def _request(path: str, body: Any) -> RecordedRequest:
    return RecordedRequest(method="POST", path=path, headers=(), body=orjson.dumps(body))


def _provider() -> bench_peers.PeerProvider:
    provider = bench_peers.PeerProvider(fragment_chars=64)
    provider.prepare(Script(2, 50))
    return provider


def _body(response: ScriptedResponse) -> Any:
    return orjson.loads(b"".join(p for p in response.parts if isinstance(p, bytes)))


def test_a_whole_chat_completion_calls_the_tool_until_the_last_turn() -> None:
    provider, model = _provider(), Script(2, 50).model
    tool = {"role": "tool", "tool_call_id": "x", "content": "ok"}
    first = _body(provider(_request("/v1/chat/completions", {"model": model, "messages": []})))
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["id"] == "call_bench_1"
    body = {"model": model, "messages": [tool, tool]}
    last = _body(provider(_request("/v1/chat/completions", body)))
    assert last["choices"][0]["message"]["content"] == final_answer_text(2)


def test_a_responses_request_is_answered_by_the_outputs_it_carries() -> None:
    provider, model = _provider(), Script(2, 50).model
    done = {"type": "function_call_output", "call_id": "x", "output": "ok"}
    asked = {"role": "user", "content": "go"}
    second = _body(provider(_request("/v1/responses", {"model": model, "input": [asked, done]})))
    call = second["output"][0]
    assert call["type"] == "function_call" and call["call_id"] == "call_bench_2"
    assert orjson.loads(call["arguments"])["text"]
    last = _body(provider(_request("/v1/responses", {"model": model, "input": [done, done]})))
    text = last["output"][0]["content"][0]["text"]
    assert text == final_answer_text(2)


def test_ratios_are_paired_by_repetition_not_taken_of_medians() -> None:
    def reps(*values: float) -> list[dict[str, float]]:
        return [dict.fromkeys(bench_peers.FIGURES, value) for value in values]

    figures = {"steadyloop": reps(100.0, 200.0), "peer": reps(150.0, 200.0)}
    row = next(line for line in bench_peers.table("t", figures) if line.startswith("| peer "))
    assert "1.25x (1.00-1.50)" in row  # medians alone would say 175 / 150 = 1.17x


@pytest.mark.slow
@pytest.mark.skipif(not bench_peers.peers_installed(), reason="the `bench` extra is not installed")
async def test_the_quick_run_ends_every_run_with_the_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = await bench_peers.main(["--quick"])
    out = capsys.readouterr().out
    assert status == 0 and "PROBLEM" not in out, out
    rows = {line.split(" | ")[0].strip("| ") for line in out.splitlines() if line.startswith("| ")}
    assert set(bench_peers.SYSTEMS) <= rows, out


@pytest.mark.slow
async def test_steadyloops_systems_run_without_the_peers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    systems = ["steadyloop", "steadyloop-plugin"]
    status = await bench_peers.main(["--quick", "--systems", ",".join(systems)])
    out = capsys.readouterr().out
    assert status == 0 and "PROBLEM" not in out, out
    rows = [line.split(" | ")[0].strip("| ") for line in out.splitlines() if line.startswith("| ")]
    assert rows.count("steadyloop-plugin") == 2, out  # per round and a run of one turn
    assert "temporalio-openai-agents" not in out, out
