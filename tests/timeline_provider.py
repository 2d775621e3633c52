"""A scripted provider whose run shows every timeline fact a person should see.

Turn 1: the first attempt is cut mid-stream (a network failure before any text), the
second asks `add(2, 3)` twice in one batch; turn 2 asks `add(2, 3)` again and
`add(1, 1)`; turn 3 answers. So one call runs for real per distinct content, one answer
is replayed as the batch twin, one as the same call earlier in the run, and the cut
attempt is a retry with its reason.

Run it alone to try the CLI by hand (`python tests/timeline_provider.py [PORT [PAUSE_S]]`):
it prints its base URL and serves the script, once per run, until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import sys

from steadyloop.testing import (
    Chunk,
    Pause,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    finish_chunk,
    role_chunk,
    sse_response,
    text_chunks,
    text_response,
    tool_call_chunks,
    usage_chunk,
)

FINAL_ANSWER = "2 + 3 = 5, and 1 + 1 = 2."


def _calls(text: str, *calls: ScriptedCall, pause_s: float = 0.0) -> list[Chunk | Pause]:
    pause: list[Chunk | Pause] = [Pause(pause_s)] if pause_s else []
    return [
        *text_chunks(text),
        *pause,
        *tool_call_chunks(list(calls), role=False),
        finish_chunk("tool_calls"),
        usage_chunk(20, 10),
    ]


def retried_and_replayed(pause_s: float = 0.0) -> list[ScriptedResponse]:
    """The four responses, in the order the run asks for them."""
    first_turn = _calls(
        "I will add them.",
        ScriptedCall("add", {"a": 2, "b": 3}, id="call_a"),
        ScriptedCall("add", {"a": 2, "b": 3}, id="call_b"),
        pause_s=pause_s,
    )
    return [
        # Only the role chunk goes out, then the connection closes: no text was shown,
        # so the attempt is retried.
        sse_response([role_chunk(), Pause(0.2), *first_turn[1:]], cut_after_bytes=120),
        sse_response(first_turn),
        sse_response(
            _calls(
                "Checking again.",
                ScriptedCall("add", {"a": 2, "b": 3}, id="call_c"),
                ScriptedCall("add", {"a": 1, "b": 1}, id="call_d"),
                pause_s=pause_s,
            )
        ),
        text_response(FINAL_ANSWER, usage=(30, 8)),
    ]


async def _serve(port: int, pause_s: float) -> None:
    script = [response for _ in range(100) for response in retried_and_replayed(pause_s)]
    async with ScriptedServer(script, port=port) as server:
        print(server.base_url, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    arguments = [*sys.argv[1:], "0", "0.5"]
    asyncio.run(_serve(int(arguments[0]), float(arguments[1])))
