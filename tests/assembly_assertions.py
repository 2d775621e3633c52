"""Assertions on assembled tool calls that decide the outcome downstream.

Each check is what a consumer of the calls depends on, not a projection of them:

- ids are answerable: a non-blank string, unique within the turn (a tool message is
  matched to its call by id; two calls sharing one collide, a blank one cannot be
  answered), and a minted id never equals an id the wire used in the turn;
- every arguments string parses alone to a JSON object, or is `""` for a zero-argument
  call (merged calls show up here as `{...}{...}`, interleaving as broken JSON);
- the calls are exactly the expected ones, in order, with the exact wire id where it
  must be kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from openai.types.chat.chat_completion_chunk import (
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from wire_shapes import MINTED, Chunk, ExpectedCall

from steadyloop._chat import ToolCall
from steadyloop._stream.accumulator import ToolCallAccumulator
from steadyloop._stream.arguments import ParsedArguments, parse_tool_call_arguments

DEFAULT_MINT_PREFIX = "call_sl"


def wire_ids_seen(chunks: Iterable[Any]) -> set[str]:
    """Every string id any delta of the stream carried (blank ones included)."""
    seen: set[str] = set()
    for chunk in chunks:
        if not isinstance(chunk, list):
            continue
        for delta in chunk:
            if isinstance(delta, Mapping) and isinstance(delta.get("id"), str):
                seen.add(delta["id"])
    return seen


def feed(acc: ToolCallAccumulator, chunks: Iterable[Any]) -> ToolCallAccumulator:
    for chunk in chunks:
        acc.observe(chunk)
    return acc


def run_chunks(chunks: Iterable[Any], mint_prefix: str | None = None) -> ToolCallAccumulator:
    acc = ToolCallAccumulator() if mint_prefix is None else ToolCallAccumulator(mint_prefix)
    return feed(acc, chunks)


def assert_ids_usable(calls: Sequence[ToolCall]) -> None:
    """Every emitted id is a non-blank string and no two calls share one."""
    ids = [call.id for call in calls]
    for call_id in ids:
        assert isinstance(call_id, str), ids
        assert call_id.strip() != "", f"blank id emitted: {ids!r}"
    assert len(set(ids)) == len(ids), f"duplicate ids emitted: {ids!r}"


def assert_arguments_self_contained(calls: Sequence[ToolCall]) -> None:
    """Every arguments string parses alone to a JSON object, or is "" (zero-argument)."""
    for call in calls:
        assert isinstance(call.arguments, str), call
        if call.arguments == "":
            continue
        value = json.loads(call.arguments)
        assert isinstance(value, dict), f"{call.name}: arguments are not an object: {call!r}"
        assert isinstance(parse_tool_call_arguments(call), ParsedArguments), call


def assert_minted(call_id: str, *, wire_ids: set[str], mint_prefix: str) -> None:
    assert call_id.strip() != ""
    assert call_id not in wire_ids, f"minted id {call_id!r} equals a wire id {wire_ids!r}"
    assert call_id.startswith(mint_prefix), f"minted id {call_id!r} lacks {mint_prefix!r}"


def assert_calls_exactly(
    calls: Sequence[ToolCall],
    expected: Sequence[ExpectedCall],
    *,
    wire_ids: set[str],
    mint_prefix: str = DEFAULT_MINT_PREFIX,
) -> None:
    """The dispatched calls are exactly `expected`, in order, ids included."""
    got = [(call.name, call.arguments) for call in calls]
    want = [(call.name, call.arguments) for call in expected]
    assert got == want, f"calls differ\n got: {got!r}\nwant: {want!r}"
    for call, exp in zip(calls, expected, strict=True):
        assert isinstance(call, ToolCall), call
        assert call.type == "function", call
        if exp.id == MINTED:
            assert_minted(call.id, wire_ids=wire_ids, mint_prefix=mint_prefix)
        else:
            assert call.id == exp.id, f"{call.name}: id {call.id!r}, want wire id {exp.id!r}"
    assert_ids_usable(calls)
    assert_arguments_self_contained(calls)


def _namespace(delta: Mapping[str, Any]) -> SimpleNamespace:
    fields = dict(delta)
    function = fields.get("function")
    if isinstance(function, Mapping):
        # Only the delta and its `function` become objects; values (an arguments object
        # sent by a misbehaving gateway) stay what the JSON decoder made of them.
        fields["function"] = SimpleNamespace(**dict(function))
    return SimpleNamespace(**fields)


def as_attribute_objects(chunk: Chunk) -> Any:
    """The chunk's deltas as plain attribute objects; omitted fields are missing attributes."""
    if chunk is None:
        return None
    return [_namespace(delta) for delta in chunk]


def as_openai_models(chunk: Chunk) -> Any:
    """The chunk as the `openai` client builds it: models constructed without validation."""
    if chunk is None:
        return None
    out: list[Any] = []
    for delta in chunk:
        fields = dict(delta)
        function = fields.pop("function", None)
        if isinstance(function, Mapping):
            fields["function"] = ChoiceDeltaToolCallFunction.model_construct(**dict(function))
        elif "function" in delta:
            fields["function"] = function
        out.append(ChoiceDeltaToolCall.model_construct(**fields))
    return out
