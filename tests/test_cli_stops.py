"""Stop reasons as a user meets them: `steadyloop worker`, `run`, `show` and `resume` as
separate processes against a Temporal dev server and a scripted provider.

What decides the outcome: an answer cut by the token limit exits 3 as `max_tokens` with
its text shown as a partial and the command to continue it, and `resume` asks the model
to go on from it (never calling a finished answer cut off); `--continue-cut` goes on by
itself and the answer is printed once, in one line; `--token-budget` cuts a runaway turn
while it streams.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from test_cli_worker import (
    cli_environment,
    start_worker,
    steadyloop,
    temporal,  # noqa: F401  (the fixture)
    typed,
    workspace,  # noqa: F401  (the fixture)
)

from steadyloop._worker.dev_server import DevServer
from steadyloop.testing import (
    Pause,
    ScriptedResponse,
    ScriptedServer,
    chunk,
    finish_chunk,
    role_chunk,
    sse_response,
    text_chunks,
    text_response,
)

pytestmark = pytest.mark.slow


def cut(text: str) -> ScriptedResponse:
    return sse_response([*text_chunks(text), finish_chunk("length")])


def runaway(words: int) -> ScriptedResponse:
    parts: list[Any] = [role_chunk()]
    parts += [chunk({"content": f"w{n} "}) for n in range(words)]
    return sse_response([*parts, finish_chunk("stop")])


async def test_an_answer_cut_by_the_token_limit_stops_max_tokens_and_resumes(
    temporal: DevServer,  # noqa: F811
    workspace: dict[str, str],  # noqa: F811
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    script = [cut("The first half of a long ans"), text_response("wer, and the end.")]
    async with ScriptedServer(script) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url}",
            environ=cli_environment(**workspace),
        )
        try:
            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "scripted", "--no-tools", "--id", "cut",
                environ=environ,
            )  # fmt: skip
            print(out)
            assert code == 3, out
            assert "stop reason: max_tokens: the answer was cut by the output token limit" in out
            assert "answer: (none)" in out
            assert "partial output of turn 1, cut at the output token limit:" in out
            assert "  The first half of a long ans" in out
            assert f"continue the answer: {typed('resume', 'cut', *connection)}" in out

            code, shown = await steadyloop("show", "cut", *connection, environ=environ)
            assert code == 3, shown
            assert "run cut (stopped: max_tokens, started" in shown

            code, out = await steadyloop("resume", "cut", *connection, environ=environ)
            print(out)
            assert code == 0, out
            assert "run cut-resumed-1 resumes cut (max_tokens)" in out
            sent = provider.requests[-1].messages
            assert sent[-2] == {"role": "assistant", "content": "The first half of a long ans"}
            assert sent[-1]["role"] == "user"
            assert "cut off by the output token limit" in sent[-1]["content"]

            # The resumed run ended with a final answer: nothing was cut off.
            code, out = await steadyloop("resume", "cut-resumed-1", *connection, environ=environ)
            print(out)
            assert code == 2, out
            assert "ended with a final answer, so there is nothing to continue" in out
            assert f'{typed("resume", "cut-resumed-1", *connection)} --prompt "..."' in out
            assert len(provider.requests) == 2  # the refusal started nothing
        finally:
            assert await worker.stop() == 0, worker.output


async def test_continue_cut_goes_on_by_itself_and_prints_the_answer_once(
    temporal: DevServer,  # noqa: F811
    workspace: dict[str, str],  # noqa: F811
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    async with ScriptedServer([cut("Part one, "), text_response("and the end.")]) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url}",
            environ=cli_environment(**workspace),
        )
        try:
            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "scripted", "--no-tools",
                "--continue-cut", "1",
                environ=environ,
            )  # fmt: skip
            print(out)
            assert code == 0, out
            assert "turn 1  model: Part one, and the end.\n" in out  # one line, no repeat
            assert out.count("Part one,") == 1  # as it streamed, once: no `answer:` repeat
            assert "answers continued: max_tokens 1" in out
            assert "stop reason: final_answer" in out
        finally:
            assert await worker.stop() == 0, worker.output


async def test_a_token_budget_cuts_a_runaway_turn_while_it_streams(
    temporal: DevServer,  # noqa: F811
    workspace: dict[str, str],  # noqa: F811
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    async with ScriptedServer([runaway(3000)]) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url}",
            environ=cli_environment(**workspace),
        )
        try:
            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "scripted", "--no-tools",
                "--token-budget", "300", "--id", "runaway",
                environ=environ,
            )  # fmt: skip
            print(out)
            assert code == 3, out
            assert (
                "stop reason: token_budget: the turn in flight was cut after 300 output tokens "
                "(estimated)" in out
            )
            assert "partial output of turn 1, streamed until the token budget ran out:" in out
            resume = typed("resume", "runaway", *connection)
            assert f"resume the run with a fresh budget: {resume}" in out
            streamed = out.split("turn 1  model: ", 1)[1].split("\n", 1)[0]
            assert streamed.startswith("w0 w1 ") and "w2999" not in out
            assert len(streamed) < 300 * 4 + 100  # about the budget, not the 3,000 words
        finally:
            assert await worker.stop() == 0, worker.output


async def test_continue_stalled_goes_on_from_the_shown_text_on_the_same_line(
    temporal: DevServer,  # noqa: F811
    workspace: dict[str, str],  # noqa: F811
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    stalls = sse_response([*text_chunks("Half an"), Pause(5.0)], done=False)
    async with ScriptedServer([stalls, text_response("swer, finished.")]) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url},inter_chunk_s=0.5",
            environ=cli_environment(**workspace),
        )
        try:
            code, out = await steadyloop(
                "run", "x", *connection, "--endpoint", "scripted", "--no-tools",
                "--continue-stalled", "1",
                environ=environ,
            )  # fmt: skip
            print(out)
            assert code == 0, out
            assert "turn 1  model: Half answer, finished.\n" in out  # the rest, same line
            assert "answers continued: stream_failure 1" in out
            sent = provider.requests[-1].messages
            assert sent[-2] == {"role": "assistant", "content": "Half an"}
        finally:
            assert await worker.stop() == 0, worker.output
