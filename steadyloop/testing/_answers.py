"""Whole model answers to script: a text answer, or a turn of tool calls.

Most scripted turns are one of these two shapes, streamed as OpenAI streams them: the
role chunk, the content or the tool-call deltas, the finish reason in a chunk of its
own (`stop` or `tool_calls`), a usage chunk when asked for, then `data: [DONE]`.

    server = ScriptedServer([
        tool_calls_response(ScriptedCall("add", {"a": 2, "b": 3}, id="c1")),
        text_response("5", usage=(12, 1)),
    ])

Anything else (a stream cut short, a stall between two chunks, a malformed delta) is
built from the chunk builders and `sse_response` directly.
"""

from __future__ import annotations

from typing import Literal

from steadyloop.testing._chunks import (
    Chunk,
    ScriptedCall,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing._scripted_server import Pause, ScriptedResponse, sse_response


def text_response(
    text: str, *, usage: tuple[int, int] | None = None, pause_s: float = 0.0
) -> ScriptedResponse:
    """A text answer (finish reason `stop`), one chunk a word: a run's final answer.

    `usage` adds a usage chunk reporting `(prompt_tokens, completion_tokens)`, so the
    run counts what the turn cost; without it the turn reports no usage, as a server
    not asked for `include_usage` does. `pause_s` holds the stream that long before
    its first chunk, in real time (the server waits; the test server's clock does not
    skip it): a slow first token, or a window in which a test acts while the turn is
    streaming.
    """
    return sse_response([*_pause(pause_s), *text_chunks(text), *_finish("stop", usage)])


def tool_calls_response(
    *calls: ScriptedCall,
    text: str | None = None,
    usage: tuple[int, int] | None = None,
    pause_s: float = 0.0,
    fragment_size: int | None = None,
    index: Literal["distinct", "zero", "omit"] = "distinct",
    id_on: Literal["first", "every", "last", "none"] = "first",
    parallel: bool = False,
) -> ScriptedResponse:
    """A turn of tool calls (finish reason `tool_calls`), run by the loop as one batch.

    A call without an id gets `call_<n>`, its position in this turn, so ids repeat
    from one turn to the next (as some servers' do): give each call its own id
    (`ScriptedCall(..., id="c1")`) to assert on a call by id. `text` streams before the
    calls, as from a model that says what it is about to do. `usage` and `pause_s` are
    `text_response`'s. `fragment_size`, `index`, `id_on` and `parallel` shape the
    deltas the way gateways do (see `tool_call_chunks`).
    """
    head = text_chunks(text) if text is not None else []
    deltas = tool_call_chunks(
        list(calls),
        fragment_size=fragment_size,
        index=index,
        id_on=id_on,
        parallel=parallel,
        role=text is None,
    )
    return sse_response([*_pause(pause_s), *head, *deltas, *_finish("tool_calls", usage)])


def _pause(seconds: float) -> list[Pause]:
    return [Pause(seconds)] if seconds else []


def _finish(reason: str, usage: tuple[int, int] | None) -> list[Chunk]:
    return [finish_chunk(reason)] + ([] if usage is None else [usage_chunk(*usage)])
