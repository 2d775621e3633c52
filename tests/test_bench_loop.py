"""The loop `benchmarks/bench_loop.py` times, run for three turns: so it cannot time a broken path.

If the scripted provider, the tool or the workflow went wrong (a call left unanswered,
the loop stopping on max turns, a tool answering with an error), the benchmark's figures
would be for a loop that does not work. This runs the benchmark's own code on the local
dev server and asserts the run is the one it means to measure, and that the floor it is
compared with moves the same payload bytes.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
from loop_harness import assert_every_call_answered, tool_messages

from steadyloop._run.models import RunResult

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_loop
from loop_bare import BareLoopResult
from loop_floor import FloorResult, PayloadSizes, turn_text

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
    assert facts.regular_activities == 2 * TURNS + 1  # describe_tools is a local activity
    # The tools are described and the route's health is read once (one endpoint, healthy),
    # each a local activity; the log's events ride on the activities' inputs and the
    # result (no publish, and no patch marker: its mode is a rule of the run's input).
    assert facts.local_activity_markers == 2
    assert facts.sizes.describe_out > 0  # the floor's describe returns as much
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


async def test_the_bare_floor_runs_the_same_activities_to_the_same_transcript() -> None:
    """Section 1's floor: steadyloop's own activities, same provider and tool, no logic
    of steadyloop's; its transcript is the loop's, message for message."""
    async with bench_loop.LoopBench.start() as bench:
        loop = await bench.run_steadyloop(TURNS, CHARS)
        bare = await bench.run_bare(TURNS, CHARS)
    assert loop.problem is None and bare.problem is None
    assert isinstance(loop.result, RunResult) and isinstance(bare.result, BareLoopResult)
    assert bare.result.final_answer == loop.result.final_answer
    strip = {"role", "content", "tool_call_id"}
    assert [m.model_dump(include=strip) for m in bare.result.transcript] == [
        m.model_dump(include=strip) for m in loop.result.transcript
    ]
    assert bare.history.regular_activities == loop.history.regular_activities
    assert bare.history.local_activity_markers == 1  # its describe, as steadyloop's
    assert bare.worker_cpu_s > 0


async def test_section_two_reads_every_execution_of_a_continued_run() -> None:
    """A run that continued-as-new is read from every execution: read from its last one
    only, the benchmark would print "0 of 200 turns done" and hand the floor empty sizes."""
    async with bench_loop.LoopBench.start() as bench:
        loop = await bench.run_steadyloop(TURNS, CHARS, continue_as_new_after_turns=1)
        floor = await bench.run_floor(TURNS, loop.history.sizes, CHARS)
    assert loop.problem is None
    # One execution per tool turn, and the final answer in one more.
    assert loop.history.executions == TURNS + 1
    assert loop.history.turns_done == TURNS
    assert loop.history.ending == f"completed in {TURNS + 1} executions"
    # Sizes read across executions (event ids restart in each): the transcript grows.
    model_in = loop.history.sizes.model_in
    assert len(model_in) == TURNS
    assert all(later - earlier > CHARS for earlier, later in itertools.pairwise(model_in))
    assert floor.problem is None and floor.history.turns_done == TURNS
    assert floor.history.sizes.model_in == model_in


def test_the_floor_takes_sizes_of_a_run_that_did_no_turn() -> None:
    """The floor's workflow code must never raise: empty sizes are padding of zero."""
    empty = PayloadSizes(
        describe_in=10, describe_out=20, model_in=[], model_out=[], tool_in=[], tool_out=[]
    )
    sizes = empty.for_turns(3)
    assert sizes.model_in == [0, 0, 0] and sizes.tool_out == [0, 0, 0]
    assert (sizes.final_in, sizes.final_out, sizes.result) == (0, 0, 0)
