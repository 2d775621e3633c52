"""A replay answers what the first execution answered.

Time-skipping test server, real HTTP to the scripted provider. A tool answers up to
64 KB; the receipt ledger kept 16 KB, so the model asking for a 40 KB result again (or
a resumed run asking for its predecessor's) read a cut copy. With blob storage the
receipt keeps the whole answer: byte for byte the same. Without, the cut copy stays
(the carried state must fit 2 MB inline), and the replay says so.
"""

from __future__ import annotations

import asyncio

import pytest
from loop_harness import (
    Loop,
    assert_every_call_answered,
    files_run,
    running_loop,
    tool_messages,
)

from steadyloop._receipts.ledger import DEFAULT_RESULT_LIMIT_BYTES
from steadyloop._run.models import RunInput, RunResult
from steadyloop._run.resume import resume_input
from steadyloop.client import RunHandle
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

ANSWER_CHARS = 40_000  # over the ledger's 16 KiB, under a tool message's 64 KiB


def read(call_id: str) -> ScriptedResponse:
    call = ScriptedCall("read_scratch", {"path": "big"}, id=call_id)
    return tool_calls_response(call)


def big_file(loop: Loop) -> str:
    # Multi-byte characters too: the bound counts bytes, and a cut must not split one.
    text = "".join(f"{line:05d} é✓ line of the scratch file\n" for line in range(1_200))
    text = text[:ANSWER_CHARS]
    loop.effects.files["big"] = text
    return text


async def run_and_replays(loop: Loop, run: RunInput, call_id: str) -> tuple[RunResult, list[str]]:
    """The run's result, and what its timeline (a view of its log) says of `call_id`'s
    replays."""
    handle = await loop.start(run)
    result: RunResult = await asyncio.wait_for(handle.result(), 60)
    timeline = await RunHandle(loop.client, handle.id).timeline()
    return result, [e.text for e in timeline if e.call_id == call_id and e.kind == "replay"]


async def test_with_blob_storage_the_model_asking_again_reads_the_first_answer_byte_for_byte() -> (
    None
):
    async with running_loop([read("r1"), read("r2"), text_response("read it twice")]) as loop:
        text = big_file(loop)
        result, replays = await run_and_replays(loop, files_run(), "r2")
    assert_every_call_answered(result.transcript)
    first, again = tool_messages(result.transcript)
    assert first.content == text
    assert again.content == first.content  # not the receipt's 16 KB copy
    assert result.stats.tool_replays == 1
    (said,) = replays
    assert "cut copy" not in said


async def test_without_blob_storage_the_replay_is_the_cut_copy_and_says_so() -> None:
    script = [read("r1"), read("r2"), text_response("read it twice")]
    async with running_loop(script, blob_storage=False) as loop:
        text = big_file(loop)
        result, replays = await run_and_replays(loop, files_run(), "r2")
    assert_every_call_answered(result.transcript)
    first, again = tool_messages(result.transcript)
    assert first.content == text
    replayed = again.content or ""
    size = len(text.encode("utf-8"))
    kept = len(replayed.encode("utf-8"))
    # The model reads the beginning and a marker saying how much there was.
    assert kept <= DEFAULT_RESULT_LIMIT_BYTES
    head = replayed.split("\n[steadyloop: result truncated", 1)[0]
    assert head and text.startswith(head)
    assert f"of {size} bytes]" in replayed
    (said,) = replays
    assert f"{kept:,}-byte cut copy of the first answer's {size:,} bytes" in said
    assert "STEADYLOOP_BLOB_DIR" in said


async def test_a_resumed_run_replays_its_predecessors_whole_answer_across_continue_as_new() -> None:
    # The predecessor reads the file and stops; the file changes; the resumed run hands
    # over every turn (the ledger packed against the transcript each time) and then asks
    # again: the answer is the predecessor's, whole, not a new read and not a cut copy.
    script = [read("r1"), read("r2"), text_response("done")]
    async with running_loop(script) as loop:
        text = big_file(loop)
        original = files_run(max_turns=1)
        first: RunResult = await asyncio.wait_for(loop.run(original), 60)
        assert first.stop_reason == "max_turns"
        loop.effects.files["big"] = "changed since"
        again = original.model_copy(
            update={"limits": files_run(continue_as_new_after_turns=1).limits}
        )
        resumed = await asyncio.wait_for(loop.run(resume_input(again, first)), 60)
    assert resumed.stop_reason == "final_answer"
    assert sum(resumed.stats.continued_as_new.values()) >= 1
    assert_every_call_answered(resumed.transcript)
    answers = {m.tool_call_id: m.content for m in tool_messages(resumed.transcript)}
    assert answers == {"r1": text, "r2": text}
    assert resumed.stats.tool_replays == 1
