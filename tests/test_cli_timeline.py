"""What `steadyloop run` and `steadyloop show` tell a person, as separate processes against a
dev server: replays said as replays (and why), a retried attempt said when it happens,
every line in the run's order, the answer once.

The scripted provider (`timeline_provider`) cuts turn 1's first attempt, then asks
`add(2, 3)` twice in one batch, asks it again in turn 2 beside `add(1, 1)`, and answers
in turn 3.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import deque

import pytest
from test_cli_worker import (  # noqa: F401  (the fixture is used by name)
    GUARD_S,
    cli_environment,
    start_worker,
    steadyloop,
    temporal,
)
from timeline_provider import FINAL_ANSWER, retried_and_replayed

from steadyloop._worker.dev_server import DevServer
from steadyloop.testing import RecordedRequest, ScriptedResponse, ScriptedServer, error_response

pytestmark = pytest.mark.slow

# Requests answered only once `show` attached: turn 2 of the third and of the fourth run
# (each run asks four times: the cut attempt, turn 1, turn 2, turn 3).
HELD_REQUESTS = (2 * 4 + 3, 3 * 4 + 3)

# The run's lines in its order: each printed line must start with these, in this order.
EXPECTED = [
    "turn 1  ! model attempt 1 failed, network (cut); retrying in 1 s (endpoint '{endpoint}')",
    "turn 1  ! failure recorded on the breaker of endpoint '{endpoint}'",
    "turn 1  model: I will add them.",
    'turn 1  -> add {"a":2,"b":3}',
    'turn 1  -> add {"a":2,"b":3}',
    "turn 1  <- add: 5.0",
    "turn 1  <- add (replayed, not run: same call twice in this batch (call_a's answer)): 5.0",
    "turn 2  model: Checking again.",
    'turn 2  -> add {"a":2,"b":3}',
    'turn 2  -> add {"a":1,"b":1}',
    "turn 2  <- add (replayed, not run: same call earlier in the run (turn 1, call_a)): 5.0",
    "turn 2  <- add: 2.0",
    f"turn 3  model: {FINAL_ANSWER}",
]


def run_lines(out: str) -> list[str]:
    """The event lines of a command's output (status lines and the header left out)."""
    return [line for line in out.splitlines() if line.startswith("turn ")]


def assert_in_order(out: str, endpoint: str) -> None:
    lines = run_lines(out)
    assert len(lines) == len(EXPECTED), out
    for line, expected in zip(lines, EXPECTED, strict=True):
        expected = expected.replace("{endpoint}", endpoint)
        assert line.startswith(expected), f"{line!r} is not {expected!r}:\n{out}"
    assert out.count(FINAL_ANSWER) == 1, out  # the answer once, where it came
    assert "answer:" not in out, out
    assert "4 tool calls (2 of them replayed from receipts, not run again)" in out, out
    assert "retries: model_network 1" in out, out


async def test_run_and_show_say_replays_and_retries_in_the_run_s_order(
    temporal: DevServer,  # noqa: F811
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment()
    script = deque(retried_and_replayed() * 4)
    attached = {number: asyncio.Event() for number in HELD_REQUESTS}

    async def respond(request: RecordedRequest) -> ScriptedResponse:
        held = attached.get(len(provider.exchanges))
        if held is not None:
            await held.wait()
        return script.popleft()

    async def attach(workflow_id: str, held: int) -> str:
        """`steadyloop show` started while request `held` (turn 2) waits; its output."""
        async with asyncio.timeout(GUARD_S):
            while len(provider.exchanges) < held:
                await asyncio.sleep(0.05)
        show = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steadyloop", "show", workflow_id, *connection,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=environ,
        )  # fmt: skip
        assert show.stdout is not None
        header = await asyncio.wait_for(show.stdout.readline(), GUARD_S)
        assert header.startswith(f"run {workflow_id} (running".encode()), header
        await asyncio.sleep(0.5)  # let it read the run so far, then let turn 2 answer
        attached[held].set()
        rest, _ = await asyncio.wait_for(show.communicate(), GUARD_S)
        out = rest.decode()
        assert show.returncode == 0, out
        return out

    async with ScriptedServer(respond) as provider:
        # An endpoint per run: each run's cut attempt counts on its endpoint's breaker,
        # which the worker's runs share.
        endpoints = [f"--endpoint=s{n}={provider.base_url}" for n in range(1, 5)]
        worker = await start_worker(*connection, *endpoints, environ=environ)
        asked = ["--model", "m", "--tool", "add"]
        try:
            # Live, streamed: the retry is said before the attempt that follows it.
            code, out = await steadyloop(
                "run", "add", *connection, *asked, "--endpoint=s1", "--id", "live",
                environ=environ,
            )  # fmt: skip
            assert code == 0, out
            assert_in_order(out, "s1")

            # Live, not streamed: the same lines from the transcript alone.
            code, out = await steadyloop(
                "run", "add", *connection, *asked, "--endpoint=s2", "--no-stream",
                environ=environ,
            )  # fmt: skip
            assert code == 0, out
            assert_in_order(out, "s2")

            # After the run: show prints it from its result, in the same order.
            code, out = await steadyloop("show", "live", *connection, environ=environ)
            assert code == 0, out
            assert "run live (completed" in out
            assert_in_order(out, "s1")

            # Attached mid-run (turn 2 in flight): turn 1 from the transcript, the rest
            # as it happens, never text before the answers that came first.
            code, out = await steadyloop(
                "run", "add", *connection, *asked, "--endpoint=s3", "--id", "attached",
                "--detach",
                environ=environ,
            )  # fmt: skip
            assert code == 0, out
            assert_in_order(await attach("attached", HELD_REQUESTS[0]), "s3")

            # The same for a run that forwards nothing: everything from its transcript.
            code, out = await steadyloop(
                "run", "add", *connection, *asked, "--endpoint=s4", "--id", "quiet",
                "--no-stream", "--detach",
                environ=environ,
            )  # fmt: skip
            assert code == 0, out
            assert_in_order(await attach("quiet", HELD_REQUESTS[1]), "s4")

            # An endpoint the worker does not have: which it has, and how to add one.
            code, out = await steadyloop(
                "run", "x", *connection, "--model", "m", "--endpoint", "nowhere",
                environ=environ,
            )  # fmt: skip
            # Refused before a run starts (exit 2), from what the worker says it serves.
            assert code == 2, out
            assert "knows: s1, s2, s3, s4" in out, out
            assert "`steadyloop worker --endpoint nowhere=BASE_URL" in out, out

            # A 404 names the address it came from.
            script.append(error_response(404, "model 'm' not found", code="model_not_found"))
            code, out = await steadyloop(
                "run", "x", *connection, "--model", "m", "--endpoint", "s1", environ=environ
            )
            assert code == 1, out
            assert f"(POST {provider.base_url}/chat/completions: check the endpoint's" in out
        finally:
            assert await worker.stop() == 0, worker.output
