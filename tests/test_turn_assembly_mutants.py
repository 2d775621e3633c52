"""Tests that pin `TurnAssembler.content_mark` and the usage-count bound `_count`.

`content_mark` is what the stream watchdog compares across a read: it must change on
every chunk that carries content (answer or reasoning text, a tool-call fragment, usage,
a finish reason), several kinds in one chunk included, and never on a keep-alive.
`_count` decides which usage numbers reach the pricing arithmetic in workflow code.
Each test kills a hand-made or mutmut mutant of those lines.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest

from steadyloop._stream.turn_assembly import TurnAssembler


def chunk(delta: dict[str, Any], finish_reason: str | None = None, **top: Any) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return json.dumps({"id": "c", "model": "m", "choices": [choice], **top})


def marks(payloads: list[str]) -> list[int]:
    """The mark after each payload, fed one at a time as the activity reads them."""
    assembler = TurnAssembler()
    out = [assembler.content_mark]
    for payload in payloads:
        assembler.feed(payload)
        out.append(assembler.content_mark)
    return out


def fragment(arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}


def test_content_mark_grows_on_every_kind_of_content() -> None:
    seen = marks(
        [
            chunk({"content": "a"}),
            chunk({"reasoning_content": "r"}),
            chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "f"}}]}),
            chunk(fragment("{")),  # the bare fragment the assembler appends itself
            chunk(fragment("}")),
            chunk({}, finish_reason="tool_calls"),
            json.dumps({"choices": [], "usage": {"prompt_tokens": 1}}),
            json.dumps({"choices": [], "usage": {"prompt_tokens": 2}}),  # a second usage
        ]
    )
    assert all(after > before for before, after in pairwise(seen)), seen


def test_content_mark_grows_when_one_chunk_carries_several_kinds() -> None:
    """Text and reasoning (or text and a fragment) in one chunk must not cancel out."""
    seen = marks(
        [
            chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "f"}}]}),
            chunk({"content": "a", "reasoning_content": "r"}),
            chunk({"content": "b", **fragment("{}")}),
            chunk({"reasoning_content": "s", **fragment(" ")}),
            chunk({"content": "c"}, finish_reason="stop"),
        ]
    )
    assert all(after > before for before, after in pairwise(seen)), seen


def test_keep_alives_leave_the_content_mark_alone() -> None:
    seen = marks(
        [
            chunk({"content": "a"}),
            json.dumps({}),
            chunk({}),
            chunk({"content": ""}),
            json.dumps({"choices": []}),
            json.dumps({"choices": [], "usage": None}),
        ]
    )
    assert seen[2:] == [seen[1]] * 5, seen


def usage_of(value: str) -> tuple[int, int, int | None, int | None, int | None]:
    """Every count of a usage object set to `value` (JSON text), as the turn reports it."""
    assembler = TurnAssembler()
    counts = f'"prompt_tokens":{value},"completion_tokens":{value},"total_tokens":{value}'
    details = (
        f'"completion_tokens_details":{{"reasoning_tokens":{value}}},'
        f'"prompt_tokens_details":{{"cached_tokens":{value}}}'
    )
    assembler.feed('{"choices":[],"usage":{' + counts + "," + details + "}}")
    usage = assembler.finish().usage
    assert usage is not None
    return (
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.total_tokens,
        usage.reasoning_tokens,
        usage.cached_tokens,
    )


@pytest.mark.parametrize(
    ("raw", "count"),
    [
        ("128000", 128000),  # a real context's worth
        ("128000.0", 128000),
        ("1000000000000", 10**12),  # the bound itself is a count
        ("1e12", 10**12),
        ("1000000000001", None),  # one past it is not
        ("1000000000001.0", None),
        ("-1.0", None),
        ("0.0", 0),  # zero is a count, not "not reported"
        ("0", 0),
    ],
)
def test_usage_counts_up_to_the_bound_are_kept_and_past_it_left_out(
    raw: str, count: int | None
) -> None:
    """A count that is not one is left out: 0 where a number is required (prompt,
    completion, and the total derived from them), None where the count is optional."""
    kept = count if count is not None else 0
    assert usage_of(raw) == (kept, kept, kept, count, count)
