"""Record ToolLoopWorkflow histories as replay fixtures: `python tests/record_histories.py [NAME]`.

Re-record only on purpose (a deliberate, versioned workflow change): the point of the
fixtures is that histories written by earlier code still replay on the current code.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from delegation_harness import Brain, Turn, chain_input, delegate, profile, running_chains
from loop_harness import run_input, running_loop, summarize

from steadyloop.chain_limits import ChainBudgetLimit, DepthLimit
from steadyloop.chat import ChatMessage, ToolCall
from steadyloop.compaction import CompactionPolicy
from steadyloop.pricing import Price
from steadyloop.receipt_ledger import Happened
from steadyloop.run_models import AmbiguousCall, ResolveReceipt, RunInput, RunLimits
from steadyloop.testing.chunks import (
    ScriptedCall,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing.scripted_server import ScriptedResponse, error_response, sse_response

HISTORIES = Path(__file__).parent / "histories"


def _calls(*calls: ScriptedCall, index: str = "distinct") -> ScriptedResponse:
    return sse_response(
        [*tool_call_chunks(list(calls), index=index, fragment_size=5), finish_chunk("tool_calls")]  # type: ignore[arg-type]
    )


def _answer(text: str) -> ScriptedResponse:
    return sse_response([*text_chunks(text), finish_chunk("stop"), usage_chunk(12, 3)])


SCENARIOS: dict[str, list[ScriptedResponse]] = {
    "multi_turn_parallel_calls": [
        _calls(
            ScriptedCall("add", {"a": 1, "b": 2}, id="c1"),
            ScriptedCall("note", {"text": "hi"}, id="c2"),
            ScriptedCall("no_such_tool", {}, id="c3"),
            index="zero",
        ),
        _calls(ScriptedCall("current_time", ""), ScriptedCall("boom", {"reason": "x"})),
        _answer("done"),
    ],
    "defect_retry_then_answer": [
        sse_response([*tool_call_chunks([ScriptedCall("add", '{"a": 1')]), finish_chunk("length")]),
        _answer("fine"),
    ],
    "deadline_during_backoff": [
        error_response(503, "overloaded", type="server_error", retry_after=7200),
    ],
    "receipts_replay_and_ambiguous": [
        _calls(
            ScriptedCall("note", {"text": "once"}, id="a"),
            ScriptedCall("note", {"text": "once"}, id="b"),
            ScriptedCall("slow_note", {"text": "maybe"}, id="c"),
        ),
        _calls(
            ScriptedCall("note", {"text": "once"}, id="d"),
            ScriptedCall("slow_note", {"text": "maybe"}, id="e"),
        ),
        _answer("done"),
    ],
    # A broken history healed before the first request (Mistral ids), cost counted, and
    # the transcript compacted by a user activity at a turn boundary.
    "long_run_upkeep": [
        _calls(ScriptedCall("note", {"text": "0" + "u" * 600}, id="call_1")),
        _calls(ScriptedCall("note", {"text": "1" + "u" * 600}, id="call_2")),
        _calls(ScriptedCall("note", {"text": "2" + "u" * 600}, id="call_3")),
        _answer("done"),
    ],
}
DEADLINES = {"deadline_during_backoff": 3600.0}
# Scenarios that start from more than a prompt: fields of RunInput to set.
RUN_UPDATES: dict[str, dict[str, Any]] = {
    "long_run_upkeep": {
        "provider_profile": "mistral",
        "prices": {"scripted": Price(input=1.0, cached_input=0.5, output=2.0)},
        "limits": RunLimits(
            compaction=CompactionPolicy(
                max_chars=2500, keep_recent_turns=1, min_result_chars=100, activity="test.summarize"
            )
        ),
        "messages": [
            ChatMessage(role="user", content="earlier"),
            ChatMessage(
                role="assistant",
                tool_calls=[ToolCall(id="old-1", name="add", arguments='{"a": 1, "b": 2}')],
            ),
            ChatMessage(role="tool", content="stray", tool_call_id="nobody"),
        ],
    }
}
# Scenarios in which a person resolves the ambiguous call, with this answer.
RESOLUTIONS = {"receipts_replay_and_ambiguous": Happened(result="it was noted")}


def _fan_out_brain(turn: Turn) -> ScriptedResponse:
    """Four delegations in one batch (one a repeat, one over the budget), the first again
    next turn (replayed from its receipt), then an answer."""
    if turn.agent == "writer":
        return _answer(f"wrote {turn.task}")
    if turn.turn == 1:
        return _calls(
            delegate("writer", "part a", "d1"),
            delegate("writer", "part a", "d2"),
            delegate("writer", "part b", "d3"),
            delegate("writer", "part c", "d4"),
        )
    if turn.turn == 2:
        return _calls(delegate("writer", "part a", "d5"))
    return _answer("assembled")


# Delegation scenarios: the root's history, recorded with chain measurements and a child
# run per admitted delegation (see delegation_harness).
CHAIN_SCENARIOS: dict[str, tuple[Brain, RunInput]] = {
    "delegation_fan_out_budget_and_replay": (
        _fan_out_brain,
        chain_input(
            "write it",
            to=["writer"],
            agents={"writer": profile("writer")},
            limits=[DepthLimit(max_depth=2), ChainBudgetLimit(max_runs=3)],
        ),
    ),
}


async def record_chain(name: str, directory: Path = HISTORIES) -> Path:
    brain, run = CHAIN_SCENARIOS[name]
    async with running_chains(brain) as chains:
        handle = await chains.start(run, workflow_id=f"replay-{name}")
        await handle.result()
        history = await handle.fetch_history()
    path = directory / f"{name}.json"
    path.write_text(history.to_json())
    return path


async def record(name: str, script: list[ScriptedResponse], directory: Path = HISTORIES) -> Path:
    async with running_loop(script, [summarize]) as loop:
        run = run_input(deadline_s=DEADLINES.get(name)).model_copy(update=RUN_UPDATES.get(name, {}))
        handle = await loop.start(run, workflow_id=f"replay-{name}")
        if name in RESOLUTIONS:
            open_calls: list[AmbiguousCall] = []
            while not open_calls:
                await asyncio.sleep(0.05)
                open_calls = await handle.query(
                    "ambiguous_receipts", result_type=list[AmbiguousCall]
                )
            update = ResolveReceipt(key=open_calls[0].key, resolution=RESOLUTIONS[name])
            await handle.execute_update("resolve_receipt", update)
        await handle.result()
        history = await handle.fetch_history()
    path = directory / f"{name}.json"
    path.write_text(history.to_json())
    return path


async def main(names: list[str]) -> None:
    """Record the named scenarios (all when none are named)."""
    HISTORIES.mkdir(exist_ok=True)
    for name in names or [*SCENARIOS, *CHAIN_SCENARIOS]:
        if name in CHAIN_SCENARIOS:
            print("recorded", await record_chain(name))
        else:
            print("recorded", await record(name, SCENARIOS[name]))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
