"""Stop reasons that tell the truth, on the time-skipping server with the scripted provider.

What decides the outcome downstream, point by point:
- an answer cut by the token limit is not `final_answer`: it stops `max_tokens` with the
  text in `RunResult.partial`, or is continued (when the run asks) into one assistant
  message whose text is every piece joined, and a follower prints each piece once;
- a token budget bounds the turn in flight: the stream is cut near the remaining budget
  (counted from usage where sent, else estimated) and the run stops `token_budget` with
  what streamed kept;
- a deadline mid-stream keeps what people saw, as an interrupt does;
- a stream that failed after its text was shown is continued from that text when the run
  asks, and a follower reads the answer exactly once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loop_harness import Loop, run_input, running_loop
from steering_harness import GUARD_S, trickle

from steadyloop._chat import ChatMessage
from steadyloop._output.forwarding import ForwardingOptions, OutputDelta
from steadyloop._run.models import ContinuationOptions, RunInput, RunResult
from steadyloop._stops.continuation import continue_prompt
from steadyloop.client._event_log import follow_output
from steadyloop.testing import (
    Pause,
    ScriptedCall,
    ScriptedResponse,
    chunk,
    finish_chunk,
    role_chunk,
    sse_response,
    text_chunks,
    text_response,
    tool_calls_response,
    usage_chunk,
)

pytestmark = pytest.mark.slow


def cut(text: str) -> ScriptedResponse:
    """An answer the token limit ended."""
    return sse_response([*text_chunks(text), finish_chunk("length")])


def stalls_after(text: str) -> ScriptedResponse:
    """Text, then silence past the endpoint's inter-chunk budget (a failed stream)."""
    return sse_response([*text_chunks(text), Pause(3.0)], done=False)


def words(count: int, *, usage_every: int | None = None) -> ScriptedResponse:
    """A runaway answer of `count` words ("w0 w1 ..."), optionally with a usage-only chunk
    (running usage, as vLLM sends) every `usage_every` words."""
    parts: list[Any] = [role_chunk()]
    for number in range(count):
        parts.append(chunk({"content": f"w{number} "}))
        if usage_every and (number + 1) % usage_every == 0:
            parts.append(usage_chunk(50, number + 1))
    return sse_response([*parts, finish_chunk("stop")])


def with_options(run: RunInput, **options: Any) -> RunInput:
    return run.model_copy(update={"continuation": ContinuationOptions(**options)})


def forwarding(run: RunInput) -> RunInput:
    return run.model_copy(
        update={"forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05)}
    )


async def run_and_follow(loop: Loop, run: RunInput) -> tuple[RunResult, list[OutputDelta]]:
    """The run's result and every piece of output a follower received, to the end."""
    handle = await loop.start(run)
    seen: list[OutputDelta] = []

    async def follow() -> None:
        async for delta in follow_output(loop.client, handle.id, poll_s=0.02):
            seen.append(delta)

    watcher = asyncio.ensure_future(follow())
    result = await handle.result()
    await asyncio.wait_for(watcher, GUARD_S)
    return result, seen


def sent_messages(loop: Loop, number: int) -> list[dict[str, Any]]:
    return loop.server.requests[number].messages


# -- max_tokens -----------------------------------------------------------------------


async def test_an_answer_cut_by_the_token_limit_is_not_a_final_answer() -> None:
    async with running_loop([cut("The first half of an ans")]) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "max_tokens"
    assert result.final_answer is None
    assert result.partial is not None and result.partial.text == "The first half of an ans"
    assert not result.partial.shown  # nothing forwarded: nobody saw it yet
    assert "finish_reason 'length'" in result.detail
    # The transcript stays valid and does not hold the cut text (a resume sends it).
    assert result.transcript[-1].role == "user"


async def test_a_cut_answer_is_continued_into_one_message_up_to_the_bound() -> None:
    script = [cut("Part one, "), cut("part two, "), text_response("and the end.")]
    async with running_loop(script) as loop:
        result = await loop.run(with_options(run_input(), after_max_tokens=2))
        second, third = sent_messages(loop, 1), sent_messages(loop, 2)
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "Part one, part two, and the end."
    assistant = [m for m in result.transcript if m.role == "assistant"]
    assert [m.content for m in assistant] == ["Part one, part two, and the end."]
    assert result.partial is None
    assert result.stats.continuations == {"max_tokens": 2}
    assert result.stats.turns == 1
    # No prefill for a portable provider: the text so far, then a request to go on.
    assert second[-2:] == [
        {"role": "assistant", "content": "Part one, "},
        {"role": "user", "content": continue_prompt("max_tokens")},
    ]
    assert third[-2]["content"] == "Part one, part two, "


async def test_continuations_stop_at_their_bound_with_every_piece_as_partial() -> None:
    async with running_loop([cut("Part one, "), cut("part two, ")]) as loop:
        result = await loop.run(with_options(run_input(), after_max_tokens=1))
    assert result.stop_reason == "max_tokens"
    assert result.partial is not None and result.partial.text == "Part one, part two, "
    assert "after 1 continuation(s)" in result.detail


async def test_a_prefill_continuation_sends_only_the_text_so_far() -> None:
    async with running_loop([cut("Part one, "), text_response("the end.")]) as loop:
        run = with_options(run_input(), after_max_tokens=1, prefill=True)
        result = await loop.run(run)
        second = sent_messages(loop, 1)
    assert result.final_answer == "Part one, the end."
    assert second[-1] == {"role": "assistant", "content": "Part one, "}


async def test_a_follower_reads_a_continued_answer_exactly_once() -> None:
    script = [cut("Part one, "), text_response("and the end.")]
    async with running_loop(script) as loop:
        run = forwarding(with_options(run_input(), after_max_tokens=1))
        result, seen = await run_and_follow(loop, run)
    printed = "".join(d.text for d in seen if d.kind == "text")
    assert result.final_answer == "Part one, and the end."
    assert printed == result.final_answer
    assert sorted({d.attempt for d in seen}) == [1, 2]  # the continuation is a new attempt


# -- the token budget bounds the turn in flight -------------------------------------------


async def test_a_token_budget_cuts_a_runaway_turn_in_flight() -> None:
    async with running_loop([words(3000)]) as loop:
        result = await loop.run(forwarding(run_input(token_budget=300)))
        served = loop.server.exchanges[0]
    full = "".join(f"w{n} " for n in range(3000))
    assert result.stop_reason == "token_budget"
    assert "the turn in flight was cut after" in result.detail and "(estimated)" in result.detail
    partial = result.partial
    assert partial is not None and partial.shown
    assert full.startswith(partial.text)
    # Cut at the budget (about 4 characters a token), not at the end of the stream.
    assert 300 * 4 <= len(partial.text) < 300 * 4 + 100
    assert 300 <= result.stats.completion_tokens < 330
    assert served is not None


async def test_a_token_budget_cut_counts_the_provider_s_usage_where_sent() -> None:
    # Running usage every 10 words says each word is one token, well above the estimate.
    async with running_loop([words(3000, usage_every=10)]) as loop:
        result = await loop.run(run_input(token_budget=300))
    assert result.stop_reason == "token_budget"
    assert "(reported by the provider)" in result.detail
    assert result.partial is not None
    assert result.partial.text.split() == [f"w{n}" for n in range(300)]
    assert not result.partial.shown


async def test_the_workflow_passes_what_is_left_of_the_budget() -> None:
    # Turn 1 spends 250 of 300 tokens (usage reported); turn 2 runs away and is cut near
    # the 50 left, not near 300.
    first = tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="c1"), usage=(240, 10))
    async with running_loop([first, words(3000)]) as loop:
        result = await loop.run(run_input(token_budget=300))
    assert result.stop_reason == "token_budget"
    assert result.partial is not None and result.partial.turn == 2
    assert 50 * 4 <= len(result.partial.text) < 50 * 4 + 40


# -- a deadline keeps what was shown ------------------------------------------------------


async def test_a_deadline_mid_stream_keeps_what_the_follower_received() -> None:
    async with running_loop([trickle(400, gap_s=0.05)]) as loop:
        result, seen = await run_and_follow(loop, forwarding(run_input(deadline_s=1.5)))
    shown = "".join(d.text for d in seen if d.kind == "text")
    assert result.stop_reason == "deadline"
    assert shown and not shown.endswith("w399 ")
    assert result.partial is not None and result.partial.text == shown
    assert result.partial.cause.startswith("deadline")


# -- a stream that failed once shown is continued from what was shown ---------------------


async def test_a_stalled_stream_is_continued_from_the_shown_text() -> None:
    script = [stalls_after("Half an"), text_response("swer, finished.")]
    async with running_loop(script, inter_chunk_s=0.3) as loop:
        run = forwarding(with_options(run_input(), after_stream_failure=1))
        result, seen = await run_and_follow(loop, run)
        second = sent_messages(loop, 1)
    printed = "".join(d.text for d in seen if d.kind == "text")
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "Half answer, finished."
    assert printed == result.final_answer  # the rest, never the text again
    assert second[-2:] == [
        {"role": "assistant", "content": "Half an"},
        {"role": "user", "content": continue_prompt("stream_failure")},
    ]
    assert result.stats.continuations == {"stream_failure": 1}
    assert [m.content for m in result.transcript if m.role == "assistant"] == [
        "Half answer, finished."
    ]


async def test_without_the_option_a_stalled_stream_still_stops_output_interrupted() -> None:
    async with running_loop([stalls_after("Half an")], inter_chunk_s=0.3) as loop:
        result = await loop.run(forwarding(run_input()))
    assert result.stop_reason == "output_interrupted"
    assert result.partial is not None and result.partial.text == "Half an"


async def test_a_second_stall_past_the_bound_keeps_every_piece_shown() -> None:
    script = [stalls_after("One, "), stalls_after("two, ")]
    async with running_loop(script, inter_chunk_s=0.3) as loop:
        run = forwarding(with_options(run_input(), after_stream_failure=1))
        result, seen = await run_and_follow(loop, run)
    printed = "".join(d.text for d in seen if d.kind == "text")
    assert result.stop_reason == "output_interrupted"
    assert result.partial is not None and result.partial.text == "One, two, " == printed


def test_a_continued_transcript_is_a_valid_conversation() -> None:
    # The request for the rest never leaves two assistant messages in a row.
    from steadyloop._stops.continuation import continuation_messages

    cut = continuation_messages("Hal", "max_tokens", prefill=False)
    messages = [ChatMessage(role="user", content="hi"), *cut]
    assert [m.role for m in messages] == ["user", "assistant", "user"]
