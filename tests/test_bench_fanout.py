"""`benchmarks/bench_fanout.py`: its quick run passes its own checks (every follower read
the whole answer once, in order, then the stop; one reader served the shared followers),
and those checks catch a follower that lost, repeated or reordered an event."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from steadyloop.events import RunEventItem, StopEvent, TextDeltaEvent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_fanout


@pytest.mark.slow
async def test_the_quick_run_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    status = await bench_fanout.main(["--quick"])
    out = capsys.readouterr().out
    assert "FAILED CHECK" not in out and status == 0
    rows = [line.split() for line in out.splitlines() if line.strip().split()[:1] == ["4"]]
    assert [row[1] for row in rows] == ["shared", "private"]


def events(words: list[str], *, stop: bool = True) -> list[RunEventItem]:
    found: list[RunEventItem] = [
        TextDeltaEvent(turn=1, attempt=1, text=w, cursor=f"000000-{n:012d}")
        for n, w in enumerate(words)
    ]
    if stop:
        found.append(StopEvent(turn=1, reason="final_answer", cursor=f"000000-{len(words):012d}"))
    return found


def test_the_checks_accept_exactly_the_answer_and_refuse_anything_else() -> None:
    answer = bench_fanout.answer_words(3)
    assert bench_fanout.check([events(answer)], 3) == []
    assert bench_fanout.check([events(answer[:2])], 3) != []  # a word lost
    assert bench_fanout.check([events(answer, stop=False)], 3) != []  # no stop
    twice = events(answer)
    assert bench_fanout.check([[twice[0], *twice]], 3) != []  # a word read twice
    assert bench_fanout.check([[twice[1], twice[0], *twice[2:]]], 3) != []  # out of order
