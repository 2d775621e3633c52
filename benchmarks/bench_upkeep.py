"""What the per-turn transcript upkeep costs the workflow, against what a turn costs anyway.

Run: `.venv/bin/python benchmarks/bench_upkeep.py` (`--repeat N` for N rounds).

Before every model request the workflow runs `validate_and_heal` on the whole
transcript and, at every turn boundary, measures it for compaction
(`transcript_chars`). Both are pure Python over every message, every turn, and run
again on every replay. The baseline is work the same turn already does: converting the
`CompletionRequest` (the transcript) to a Temporal payload with the pydantic data
converter, which the workflow does to schedule the model activity.

Transcripts are healthy agent histories (a user prompt, then turns of one assistant
message with two tool calls and their two answers of ~1 KB), at 25, 125 and 500 turns;
a healthy transcript is the common case (nothing to heal, the same objects returned).
Timings are `time.perf_counter`, best of N rounds, each round timing every candidate.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from temporalio.contrib.pydantic import pydantic_data_converter

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.compaction import transcript_chars
from steadyloop._history.healing import validate_and_heal
from steadyloop._stream.completion import CompletionRequest

TURN_COUNTS = (25, 125, 500)
RESULT_CHARS = 1000


def transcript(turns: int) -> list[ChatMessage]:
    messages = [
        ChatMessage(role="system", content="You are an agent."),
        ChatMessage(role="user", content="Do the work."),
    ]
    for turn in range(turns):
        ids = [f"call_{turn}_{k}" for k in range(2)]
        messages.append(
            ChatMessage(
                role="assistant",
                tool_calls=[
                    ToolCall(id=i, name="read_file", arguments=f'{{"path": "f{i}.txt"}}')
                    for i in ids
                ],
            )
        )
        messages += [
            ChatMessage(role="tool", content=f"{i}: " + "x" * RESULT_CHARS, tool_call_id=i)
            for i in ids
        ]
    return messages


def best_of(rounds: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    converter = pydantic_data_converter.payload_converter
    print(
        f"{'turns':>6} {'messages':>9} {'payload ms':>11} {'heal ms':>8} {'size ms':>8} "
        f"{'heal/payload':>13} {'size/payload':>13}"
    )
    for turns in TURN_COUNTS:
        messages = transcript(turns)
        request = CompletionRequest(endpoint="e", model="m", messages=messages)
        healed, healings = validate_and_heal(messages)
        assert healings == [] and all(a is b for a, b in zip(healed, messages, strict=True))
        payload = best_of(args.repeat, partial(converter.to_payloads, [request]))
        heal = best_of(args.repeat, partial(validate_and_heal, messages))
        size = best_of(args.repeat, partial(transcript_chars, messages))
        print(
            f"{turns:>6} {len(messages):>9} {payload * 1e3:>11.2f} {heal * 1e3:>8.2f} "
            f"{size * 1e3:>8.2f} {heal / payload:>13.2f} {size / payload:>13.2f}"
        )


if __name__ == "__main__":
    main()
