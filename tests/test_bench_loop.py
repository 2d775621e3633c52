"""The loop `benchmarks/bench_loop.py` times, run for three turns: so it cannot time a broken path.

If the scripted provider, the tool or the workflow went wrong (a call left unanswered,
the loop stopping on max turns, a tool answering with an error), the benchmark's figures
would be for a loop that does not work. This runs the benchmark's own code on the local
dev server and asserts the run is the one it means to measure, and that the floor it is
compared with moves the same payload bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered, tool_messages

from steadyloop.run.models import RunResult

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_loop
from loop_floor import FloorResult, turn_text

pytestmark = pytest.mark.slow

TURNS = 3
CHARS = bench_loop.CALL_CHARS


async def test_benchmark_loop_answers_every_call_and_the_floor_matches_its_payloads() -> None:
    async with bench_loop.LoopBench.start() as bench:
        loop = await bench.run_steadyloop(TURNS, CHARS)
        floor = await bench.run_floor(TURNS, loop.history.sizes, CHARS)

    assert loop.problem is None
    result = loop.result
    assert isinstance(result, RunResult)
    assert result.stop_reason == "final_answer"
    assert result.final_answer == bench_loop.final_answer_text(TURNS)
    assert result.stats.tool_calls == TURNS
    assert_every_call_answered(result.transcript)
    # Each tool message is the no-op tool's own answer to the whole streamed argument.
    assert [m.content for m in tool_messages(result.transcript)] == [
        f"ok ({len(turn_text(turn, CHARS))} chars)" for turn in range(1, TURNS + 1)
    ]
    calls = [c for m in result.transcript if m.role == "assistant" for c in m.tool_calls]
    assert [c.id for c in calls] == [f"call_bench_{turn}" for turn in range(1, TURNS + 1)]

    facts = loop.history
    assert facts.ending == "completed"
    assert [p.turn for p in facts.curve] == [1, 2, 3]
    assert facts.model_calls == TURNS + 1
    assert facts.regular_activities == 2 * TURNS + 2  # + describe_tools
    assert facts.local_activity_markers == TURNS + 1  # the route's health, per model call
    assert facts.workflow_task_failures == 0
    # The transcript really grows: each model call carries the last one's and a turn more.
    growth = [b - a for a, b in zip(facts.sizes.model_in, facts.sizes.model_in[1:], strict=False)]
    assert all(step > CHARS for step in growth)
    assert facts.transcript is not None and facts.transcript.messages == 2 + 2 * TURNS

    assert floor.problem is None
    assert isinstance(floor.result, FloorResult) and floor.result.tool_calls == TURNS
    assert floor.history.ending == "completed"
    assert floor.history.model_calls == TURNS + 1
    assert floor.history.regular_activities == facts.regular_activities
    mine, base = facts.sizes, floor.history.sizes
    assert (base.model_in, base.model_out) == (mine.model_in, mine.model_out)
    assert (base.tool_in, base.tool_out) == (mine.tool_in, mine.tool_out)
    assert (base.final_in, base.final_out, base.result) == (
        mine.final_in,
        mine.final_out,
        mine.result,
    )
