"""What a recorded SSE body says, read the plain way, independently of steadyloop's reader.

The real-server tests compare the model activity's turn with this reading of the same
bytes. It is deliberately naive (events split on blank lines, `data:` lines parsed as
JSON, tool-call fragments grouped by `index`), which is correct for the two servers
recorded here only because they label calls with distinct, ordered indices and put the
id and the name on each call's first delta: `assert_plain_call_labels` checks exactly
that on the wire, so the comparison never rests on an unverified assumption.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WireCall:
    index: int
    id: str
    name: str
    arguments: str = ""
    # Every delta of this call as it arrived, for checking the wire's own shape.
    deltas: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WireMeaning:
    comments: int = 0
    chunks: list[dict[str, Any]] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    calls: list[WireCall] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    done: bool = False
    call_order: list[int] = field(default_factory=list)  # index of each tool-call delta

    def call(self, index: int) -> WireCall | None:
        return next((c for c in self.calls if c.index == index), None)


def read_sse(body: bytes) -> WireMeaning:
    meaning = WireMeaning()
    text = body.decode("utf-8", "replace").replace("\r\n", "\n")
    for event in text.split("\n\n"):
        for line in event.split("\n"):
            if line.startswith(":"):
                meaning.comments += 1
            elif line.startswith("data:"):
                _read_data(meaning, line[5:].strip())
    return meaning


def _read_data(meaning: WireMeaning, payload: str) -> None:
    if payload == "[DONE]":
        meaning.done = True
        return
    try:
        chunk = json.loads(payload)
    except ValueError:
        meaning.unparsed.append(payload)
        return
    meaning.chunks.append(chunk)
    if isinstance(chunk.get("error"), dict):
        meaning.error = chunk["error"]
    if chunk.get("usage"):
        meaning.usage = chunk["usage"]
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        meaning.text += delta.get("content") or ""
        if choice.get("finish_reason"):
            meaning.finish_reason = choice["finish_reason"]
        for piece in delta.get("tool_calls") or []:
            _read_call_delta(meaning, piece)


def _read_call_delta(meaning: WireMeaning, piece: dict[str, Any]) -> None:
    index = piece["index"]
    meaning.call_order.append(index)
    function = piece.get("function") or {}
    call = meaning.call(index)
    if call is None:
        call = WireCall(index=index, id=piece.get("id") or "", name=function.get("name") or "")
        meaning.calls.append(call)
    call.arguments += function.get("arguments") or ""
    call.deltas.append(piece)


def assert_plain_call_labels(meaning: WireMeaning) -> None:
    """The shape that makes grouping by `index` the true reading: calls indexed 0, 1, ...
    in arrival order, one after another; each opened by a delta with its id, type and
    name; every later delta carrying only its index and an argument fragment."""
    assert [c.index for c in meaning.calls] == list(range(len(meaning.calls)))
    assert meaning.call_order == sorted(meaning.call_order), "calls interleave"
    for call in meaning.calls:
        first, *rest = call.deltas
        assert first.get("id") and first.get("type") == "function", first
        assert (first.get("function") or {}).get("name"), first
        for delta in rest:
            assert set(delta) == {"index", "function"}, delta
            assert set(delta["function"]) == {"arguments"}, delta
