"""What `steadyloop run` and `steadyloop resume` show and do with forwarded output.

Pure formatting first (the text printed as it streams, the status line from the model
stream's heartbeat, the partial answer of an interrupted run), then the same through
Temporal: `follow` prints a run's text as it streams, and a resumed run carries on from
the partial answer the person saw.
"""

from __future__ import annotations

import io
import uuid

import pytest
from follow_fakes import printed
from loop_harness import running_loop
from test_output_forwarding_workflow import forwarding_run, slow_answer

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._cli.follow import follow
from steadyloop._cli.progress import (
    ActivityState,
    ProgressDisplay,
    partial_lines,
    status_line,
)
from steadyloop._output.forwarding import OutputDelta, PartialOutput
from steadyloop._run.models import RunProgress, RunResult, RunStats
from steadyloop._run.resume import resume_input
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.events import TextDeltaEvent, ToolCallEvent
from steadyloop.testing import Pause, sse_response, text_chunks


def delta(text: str, turn: int = 1, attempt: int = 1, kind: str = "text") -> OutputDelta:
    return OutputDelta.model_validate(
        {"turn": turn, "attempt": attempt, "kind": kind, "text": text}
    )


def test_streamed_text_is_written_as_it_arrives_one_line_per_turn() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, live=False)
    display.text(delta("Hel"))
    display.text(delta("lo"))
    display.status("turn 1 | model")  # held back: it would cut through the text
    display.text(delta("thinking", kind="reasoning"))  # reasoning is not printed
    display.event("turn 1  -> search {}")
    display.text(delta("Done.", turn=2))
    display.close()
    assert out.getvalue() == ("turn 1  model: Hello\nturn 1  -> search {}\nturn 2  model: Done.\n")


async def test_a_streamed_run_does_not_repeat_its_text_from_the_transcript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assistant = ChatMessage(
        role="assistant",
        content="Let me search.",
        tool_calls=[ToolCall(id="c1", name="search", arguments="{}")],
    )
    search = ToolCallEvent(turn=1, call_id="c1", name="search", arguments="{}")
    plain = await printed(monkeypatch, [search], [assistant])
    text = TextDeltaEvent(turn=1, attempt=1, text="Let me search.")
    streamed = await printed(monkeypatch, [text, search], [assistant])
    assert plain == ["turn 1  model: Let me search.", "turn 1  -> search {}"]
    assert streamed == plain  # said once, as it streamed: not again from the transcript


def test_the_status_line_shows_the_model_stream_s_own_progress() -> None:
    progress = RunProgress(turn=2, tool_calls=1, tokens=40, phase="model")
    stream: dict[str, object] = {"output_chars": 120, "tool_calls": 2, "produced_output": True}
    line = status_line(progress, ActivityState("steadyloop.stream_completion", 1, stream=stream))
    assert line.endswith("streaming: 120 chars, 2 tool calls, shown")
    quiet: dict[str, object] = {"output_chars": 0, "tool_calls": 0, "produced_output": False}
    line = status_line(progress, ActivityState("steadyloop.stream_completion", 1, stream=quiet))
    assert line.endswith("streaming: 0 chars")


def interrupted(text: str = "The first half") -> RunResult:
    return RunResult(
        final_answer=None,
        stop_reason="output_interrupted",
        transcript=[
            ChatMessage(role="system", content="Be brief."),
            ChatMessage(role="user", content="Tell me."),
        ],
        stats=RunStats(),
        partial=PartialOutput(turn=1, attempt=1, text=text, source="stream"),
    )


def test_an_interrupted_run_shows_what_was_seen_and_how_to_resume() -> None:
    lines = partial_lines(interrupted(), "run-7")
    assert lines[0] == "partial output of turn 1, shown before the stream failed:"
    assert "  The first half" in lines
    assert lines[-1].startswith("resume the run: steadyloop resume run-7")
    assert partial_lines(interrupted().model_copy(update={"partial": None}), "run-7") == lines[-1:]


def test_resuming_continues_from_the_partial_answer_with_the_same_configuration() -> None:
    original = forwarding_run(max_turns=7)
    resumed = resume_input(original, interrupted(), prompt="Go on.")
    assert [(m.role, m.content) for m in resumed.messages] == [
        ("system", "Be brief."),
        ("user", "Tell me."),
        ("assistant", "The first half"),
        ("user", "Go on."),
    ]
    assert resumed.system_prompt is None and resumed.prompt is None  # not added twice
    assert resumed.limits == original.limits and resumed.forwarding == original.forwarding
    assert resumed.tools == original.tools and resumed.endpoint == original.endpoint
    blank = resume_input(original, interrupted(text="  "), prompt=None)
    assert [m.role for m in blank.messages] == ["system", "user"]


async def test_follow_prints_the_answer_as_it_streams_and_a_resumed_run_completes() -> None:
    stalls = sse_response([*text_chunks("Half an"), Pause(3.0)], done=False)
    script = [stalls, slow_answer("answer, finished.")]
    # A watchdog well above the answer's own gaps, so a loaded machine cannot make the
    # resumed answer look stalled; the first stream's pause still trips it.
    async with running_loop(script, inter_chunk_s=1.0) as loop:
        out = io.StringIO()
        first = await loop.start(forwarding_run())
        stopped = await follow(loop.client, first, ProgressDisplay(out, live=False))
        assert stopped.stop_reason == "output_interrupted"
        assert "turn 1  model: Half an\n" in out.getvalue()

        run = resume_input(forwarding_run(), stopped)
        handle = await loop.client.start_workflow(
            ToolLoopWorkflow.run, run, id=f"resumed-{uuid.uuid4()}", task_queue=loop.task_queue
        )
        out = io.StringIO()
        done = await follow(loop.client, handle, ProgressDisplay(out, live=False))
        sent = loop.server.requests[-1].messages

    assert done.stop_reason == "final_answer" and done.final_answer == "answer, finished."
    assert "turn 1  model: answer, finished.\n" in out.getvalue()
    assert [m["role"] for m in sent][-2:] == ["assistant", "user"]
    assert sent[-2]["content"] == "Half an"
