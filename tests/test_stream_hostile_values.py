"""Hostile values on the model activity's side of the stream (issue 14, items 2, 11, 12).

What decides the outcome downstream: the turn the model activity returns, and every
piece it forwards, serialize with the pydantic payload converter whatever the model sent
(lone surrogates, split pairs, NUL, invalid UTF-8); a split emoji is shown whole, once;
a call whose name arrives after its arguments runs; a server that only pings after its
first token trips the inter-chunk stall.
"""

from __future__ import annotations

import asyncio

from loop_harness import running_loop
from test_output_forwarding_workflow import forwarding_run, run_and_watch

from steadyloop.testing import Pause, finish_chunk, sse_response
from steadyloop.testing.chunks import chunk, role_chunk


def split_emoji_answer() -> object:
    """Item 2's repro: "smile \\ud83d", a pause, then "\\ude00 done", as JSON escapes."""
    return sse_response(
        [
            role_chunk(),
            chunk({"content": "smile \ud83d"}),
            Pause(0.3),
            chunk({"content": "\ude00 done"}),
            finish_chunk(),
        ]
    )


async def test_a_split_emoji_is_forwarded_whole_and_the_run_completes() -> None:
    async with running_loop([split_emoji_answer()]) as loop:
        watched = await asyncio.wait_for(run_and_watch(loop, forwarding_run()), 60)
        requests = len(loop.server.requests)

    assert watched.result.stop_reason == "final_answer"
    assert watched.result.final_answer == "smile \U0001f600 done"
    assert watched.text() == "smile \U0001f600 done"  # whole characters only, each once
    assert requests == 1


async def test_a_split_emoji_without_forwarding_is_the_same_answer() -> None:
    async with running_loop([split_emoji_answer()]) as loop:
        handle = await loop.start(forwarding_run().model_copy(update={"forwarding": None}))
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "smile \U0001f600 done"
