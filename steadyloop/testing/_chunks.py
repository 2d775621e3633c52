"""Builders for OpenAI `chat.completion.chunk` objects, in the shape real servers send.

Tests and the no-API-key demo script conversations with these instead of hand-writing
JSON, so a script reads like the stream it stands for. The shapes follow OpenAI's
streaming format (`id`, `object`, `created`, `model`, `choices[i].delta`, a separate
usage chunk with empty `choices`), and the tool-call builder can reproduce what
gateways actually do to tool calls: every call labelled `index: 0` (Ollama), no index
at all, the id on the last fragment instead of the first, the name split across
fragments, `""` for a zero-argument call. Anything these builders cannot express can
be built with `chunk()` and `tool_call_delta()` directly, or sent as raw SSE bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

CHUNK_ID = "chatcmpl-scripted"
MODEL = "scripted-model"
CREATED = 1_700_000_000

Chunk = dict[str, Any]


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    choice_index: int = 0,
    usage: dict[str, Any] | None = None,
    choices: list[dict[str, Any]] | None = None,
    id: str = CHUNK_ID,
    model: str = MODEL,
) -> Chunk:
    """One chunk. `choices` overrides the single choice built from `delta`/`finish_reason`."""
    if choices is None:
        choices = [
            {
                "index": choice_index,
                "delta": {} if delta is None else delta,
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ]
    out: Chunk = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": None,
        "choices": choices,
    }
    if usage is not None:
        out["usage"] = usage
    return out


def role_chunk() -> Chunk:
    """The opening chunk OpenAI sends: the role and an empty content string."""
    return chunk({"role": "assistant", "content": ""})


def text_chunks(text: str | Sequence[str], *, role: bool = True) -> list[Chunk]:
    """Content deltas: one per element of `text`, or one per word (with its space) of a str."""
    pieces = _words(text) if isinstance(text, str) else list(text)
    out = [role_chunk()] if role else []
    out.extend(chunk({"content": piece}) for piece in pieces)
    return out


def reasoning_chunks(
    text: str | Sequence[str],
    *,
    field: Literal["reasoning_content", "reasoning"] = "reasoning_content",
) -> list[Chunk]:
    """Reasoning deltas (`reasoning_content`: DeepSeek, vLLM; `reasoning`: OpenRouter, Ollama)."""
    pieces = _words(text) if isinstance(text, str) else list(text)
    return [chunk({field: piece}) for piece in pieces]


def finish_chunk(reason: str = "stop") -> Chunk:
    """`finish_reason` in a chunk of its own, with an empty delta."""
    return chunk({}, finish_reason=reason)


def usage_chunk(
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    *,
    reasoning_tokens: int | None = None,
    cached_tokens: int | None = None,
) -> Chunk:
    """The usage chunk sent after the finish when `stream_options.include_usage` is set."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return chunk(choices=[], usage=usage)


def error_object(
    message: str, *, type: str | None = "server_error", code: str | int | None = None
) -> dict[str, Any]:
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


def tool_call_delta(
    *,
    index: int | Literal["omit"] | None = "omit",
    id: str | Literal["omit"] | None = "omit",
    name: str | Literal["omit"] | None = "omit",
    arguments: str | Literal["omit"] | None = "omit",
    type: str | Literal["omit"] | None = "omit",
) -> dict[str, Any]:
    """One element of `delta.tool_calls`; `"omit"` leaves a key out, None sends `null`."""
    out: dict[str, Any] = {}
    if index != "omit":
        out["index"] = index
    if id != "omit":
        out["id"] = id
    if type != "omit":
        out["type"] = type
    function: dict[str, Any] = {}
    if name != "omit":
        function["name"] = name
    if arguments != "omit":
        function["arguments"] = arguments
    if function:
        out["function"] = function
    return out


def tool_calls_chunk(deltas: Iterable[dict[str, Any]]) -> Chunk:
    """A chunk carrying the given tool-call deltas."""
    return chunk({"tool_calls": list(deltas)})


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call to stream: `arguments` is sent verbatim (a str) or as JSON (a dict)."""

    name: str
    arguments: str | dict[str, Any] = ""
    id: str | None = None

    @property
    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


def tool_call_chunks(
    calls: Sequence[ScriptedCall],
    *,
    fragment_size: int | None = None,
    index: Literal["distinct", "zero", "omit"] = "distinct",
    id_on: Literal["first", "every", "last", "none"] = "first",
    name_split: int | None = None,
    parallel: bool = False,
    role: bool = True,
) -> list[Chunk]:
    """Chunks streaming `calls` as `delta.tool_calls`, in the shape gateways produce.

    - `fragment_size`: argument bytes per delta (None: all arguments in one delta).
    - `index`: `distinct` (0, 1, 2: OpenAI), `zero` (every call `index: 0`: Ollama),
      `omit` (no index key at all).
    - `id_on`: which fragment of a call carries its id (`first`: OpenAI; `last`: a late
      id; `every`; `none`). A call with `id=None` gets `call_<n>`.
    - `name_split`: send the name in pieces of this many characters, on the first
      deltas, before any argument text.
    - `parallel`: interleave the calls' fragments round-robin instead of one call after
      another.
    """
    per_call: list[list[dict[str, Any]]] = []
    for n, call in enumerate(calls):
        call_id = call.id if call.id is not None else f"call_{n}"
        names = (
            [call.name[i : i + name_split] for i in range(0, len(call.name), name_split)]
            if name_split
            else [call.name]
        ) or [""]
        args = call.arguments_text
        frags = (
            [args[i : i + fragment_size] for i in range(0, len(args), fragment_size)]
            if fragment_size
            else [args]
        ) or [""]
        deltas: list[dict[str, Any]] = []
        for name_piece in names[:-1]:
            deltas.append({"function": {"name": name_piece}})
        deltas.append({"type": "function", "function": {"name": names[-1], "arguments": frags[0]}})
        deltas.extend({"function": {"arguments": frag}} for frag in frags[1:])
        for pos, delta in enumerate(deltas):
            if index == "distinct":
                delta["index"] = n
            elif index == "zero":
                delta["index"] = 0
            carries_id = (
                (id_on == "first" and pos == 0)
                or (id_on == "last" and pos == len(deltas) - 1)
                or id_on == "every"
            )
            if carries_id:
                delta["id"] = call_id
        per_call.append([_ordered(d) for d in deltas])

    ordered: list[dict[str, Any]] = []
    if parallel:
        longest = max((len(d) for d in per_call), default=0)
        for i in range(longest):
            ordered.extend(deltas[i] for deltas in per_call if i < len(deltas))
    else:
        for deltas in per_call:
            ordered.extend(deltas)
    out = [chunk({"role": "assistant", "content": None})] if role else []
    out.extend(tool_calls_chunk([d]) for d in ordered)
    return out


def _ordered(delta: dict[str, Any]) -> dict[str, Any]:
    """Keys in the order OpenAI writes them (index, id, type, function), for readable bytes."""
    keys = ("index", "id", "type", "function")
    return {k: delta[k] for k in keys if k in delta}


def _words(text: str) -> list[str]:
    pieces: list[str] = []
    for word in text.split(" "):
        pieces.append(word if not pieces else " " + word)
    return [p for p in pieces if p]
