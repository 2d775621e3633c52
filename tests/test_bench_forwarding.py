"""`benchmarks/bench_forwarding.py`: its quick run passes its own checks, and those checks
catch a subscriber that lost, repeated or reordered a token.

The benchmark's figures are only worth reading for runs in which the subscriber received
exactly the answer, the loop received nothing per token, and the host really continued-as-new
and truncated; the quick run proves that path works end to end on the local dev server.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from steadyloop._output.forwarding import OutputDelta

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_forwarding
from bench_forwarding import Execution, Measured, Received, Stream, TokenScript


@pytest.mark.slow
async def test_the_quick_run_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    status = await bench_forwarding.main(["--quick"])
    out = capsys.readouterr().out
    assert "FAILED CHECK" not in out
    assert status == 0
    for section in ("1. Streams", "2. The loop's history", "3. The output host's history"):
        assert section in out
    assert "4. The subscriber" in out and "per token" in out


def measured(pieces: list[str], tokens: int = 5) -> Measured:
    stream = Stream("check", tokens=tokens, rate=100)
    deltas = [OutputDelta(turn=1, attempt=1, kind="text", text=piece) for piece in pieces]
    return Measured(
        workflow_id="run",
        stream=stream,
        script=TokenScript.build(stream),
        result=None,
        received=Received(deltas=deltas, at=[0.0] * len(deltas)),
        loop=Execution("run", []),
        host=None,
        wall_s=0.0,
        problems=[],
    )


def test_the_checks_accept_exactly_the_answer_in_any_pieces() -> None:
    assert bench_forwarding.check(measured(["t0 t1 ", "t2 ", "t3 t4 "])) == []


@pytest.mark.parametrize(
    ("pieces", "says"),
    [
        (["t0 t1 ", "t3 t4 "], "1 tokens missing ['t2']"),
        (["t0 t1 t2 ", "t2 t3 t4 "], "1 repeated ['t2']"),
        (["t0 t2 t1 t3 t4 "], "OUT OF ORDER"),
    ],
    ids=["lost", "repeated", "reordered"],
)
def test_the_checks_name_a_lost_repeated_or_reordered_token(pieces: list[str], says: str) -> None:
    problems = bench_forwarding.check(measured(pieces))
    assert len(problems) == 1 and says in problems[0], problems


def test_a_roll_over_stream_whose_host_never_continued_as_new_fails_its_check() -> None:
    run = measured(["t0 t1 t2 t3 t4 "])
    run.stream = Stream("check", tokens=5, rate=100, must_roll_over=True, must_truncate=True)
    problems = bench_forwarding.check(run)
    assert any("never continued-as-new" in p for p in problems)
    assert any("never truncated" in p for p in problems)
