"""A 500-turn run on the local dev server stays within bounded history, and completes.

The run continues-as-new at its event threshold, keeps its transcript (and the state it
carries across) in the blob directory rather than in history, and answers every call.
What decides "bounded": no turn late in the run adds more history than one early in it,
and none adds as much as the transcript it sends (hundreds of KB by turn 500). This is
the bounded case of `benchmarks/bench_history.py`, run with its own code.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered

from steadyloop._history.payload_storage import DEFAULT_THRESHOLD_BYTES
from steadyloop._run.models import RunLimits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_history import HistoryBench

pytestmark = pytest.mark.slow

TURNS = 500
CHARS = 256
EVENTS = 2_000


async def test_a_500_turn_run_continues_as_new_and_adds_the_same_history_each_turn(
    tmp_path: Path,
) -> None:
    async with HistoryBench.start(tmp_path / "blobs") as bench:
        limits = RunLimits(continue_as_new_at_events=EVENTS, continue_as_new_at_bytes=None)
        chain = await bench.run("bounded", TURNS, CHARS, limits, timeout_s=300)

    assert chain.problem is None, chain.problem
    result = chain.result
    assert result is not None and result.stop_reason == "final_answer"
    assert result.stats.turns == TURNS + 1 and result.stats.tool_calls == TURNS
    assert_every_call_answered(result.transcript)

    executions = chain.executions
    assert len(executions) >= 3
    assert [e.ending for e in executions] == ["continued as new"] * (len(executions) - 1) + [
        "completed"
    ]
    assert result.stats.continued_as_new == {"events": len(executions) - 1}
    # Each execution handed over at the first turn boundary past its threshold.
    assert all(e.events < EVENTS + 40 for e in executions)

    sizes = chain.turn_bytes
    assert len(sizes) == TURNS
    # The transcript sent at turn 500 is far larger than what any later turn adds.
    transcript_bytes = sum(len(m.model_dump_json()) for m in result.transcript)
    assert transcript_bytes > 5 * DEFAULT_THRESHOLD_BYTES
    assert max(sizes[100:]) < DEFAULT_THRESHOLD_BYTES
    early, late = statistics.mean(sizes[100:200]), statistics.mean(sizes[-100:])
    assert late < 1.1 * early, (early, late)
    assert executions[-1].offloaded > 0  # the requests were kept out of history
