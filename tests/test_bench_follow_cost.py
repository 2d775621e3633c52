"""`benchmarks/bench_follow_cost.py`: its quick run passes its own checks (each follower
saw the whole answer once; the event log follower every delta in order, then the stop),
and those checks catch a follower that lost, repeated or reordered what it showed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from steadyloop._run.models import RunResult, RunStats
from steadyloop.events import RunEventItem, StopEvent, TextDeltaEvent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_fanout
import bench_follow_cost


@pytest.mark.slow
async def test_the_quick_run_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    status = await bench_follow_cost.main(["--quick"])
    out = capsys.readouterr().out
    assert "FAILED CHECK" not in out and status == 0, out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    assert {"queries", "event"} <= set(rows), out


def events(words: list[str], *, stop: bool = True) -> list[RunEventItem]:
    found: list[RunEventItem] = [
        TextDeltaEvent(turn=1, attempt=1, text=w, cursor=f"000000-{n:012d}")
        for n, w in enumerate(words)
    ]
    if stop:
        found.append(StopEvent(turn=1, reason="final_answer", cursor=f"000000-{len(words):012d}"))
    return found


def test_the_event_checks_accept_exactly_the_answer_and_refuse_anything_else() -> None:
    words = bench_fanout.answer_words(3)
    answer = "".join(words)
    assert bench_follow_cost.check_events(events(words), answer) == []
    assert bench_follow_cost.check_events(events(words[:2]), answer)  # a delta lost
    assert bench_follow_cost.check_events(events([*words, words[-1]]), answer)  # repeated
    assert bench_follow_cost.check_events(events(words, stop=False), answer)  # no stop
    shuffled = events(words)
    shuffled[0], shuffled[1] = shuffled[1], shuffled[0]
    assert bench_follow_cost.check_events(shuffled, answer)  # out of order


def test_the_printed_check_wants_the_answer_exactly_once() -> None:
    answer = "".join(bench_fanout.answer_words(3))
    result = RunResult(
        final_answer=answer, stop_reason="final_answer", transcript=[], stats=RunStats()
    )
    assert bench_follow_cost.check_printed(f"turn 1  model: {answer}\n", result, answer) == []
    assert bench_follow_cost.check_printed(f"{answer}\n{answer}\n", result, answer)  # twice
    assert bench_follow_cost.check_printed("turn 1  model: w0 w1\n", result, answer)  # cut
