"""Reading a tool call's arguments: every outcome is a value, never an exception.

`json.loads(call.arguments)` is the obvious implementation, and it is wrong in ways
that each cost a turn or run a tool on input it never asked for:

- Providers send `""` for a zero-argument call as readily as `"{}"`. The obvious
  version kills a good call as a syntax error. `tool_call_arguments_absent` is the one
  predicate for "no arguments"; `detect_completion_defect` reads the same one, so the
  two halves of the zero-argument rule cannot drift apart.
- Valid JSON that is not an object (`null`, `[]`, `42`, `"x"`, a double-encoded object)
  is refused: arguments are a named parameter bag, and a tool handed an array fails
  confusingly, perhaps after a side effect.
- Python's `json` accepts `NaN`, `Infinity`, numbers like `1e400` (read as infinity)
  and duplicate keys. A duplicate key means
  two values for one parameter and the last silently wins; NaN cannot be hashed into a
  receipt key faithfully. Both are refused here with a detail the model can act on.
- Every refusal carries `detail` written for the model: its next turn is the only
  thing that can correct the arguments, so the detail goes into the tool message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

EXCERPT_CHARS = 200


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    """The arguments parsed to a JSON object (`{}` for a zero-argument call)."""

    arguments: dict[str, Any]
    kind: Literal["parsed"] = "parsed"


@dataclass(frozen=True, slots=True)
class UnsupportedToolCallType:
    """The call's `type` is not `function`; nothing here knows how to run it."""

    type: str
    detail: str
    kind: Literal["unsupported_type"] = "unsupported_type"


@dataclass(frozen=True, slots=True)
class UnparseableArguments:
    """The arguments cannot be read as one JSON object. `detail` is for the model."""

    detail: str
    kind: Literal["unparseable"] = "unparseable"


ArgumentsReading = ParsedArguments | UnsupportedToolCallType | UnparseableArguments


def tool_call_arguments_absent(arguments: str | None) -> bool:
    """True when a call carries no arguments at all: None, `""` or only whitespace."""
    return arguments is None or arguments.strip() == ""


class _Refused(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # `1e400` is a legal JSON number that Python reads as infinity: refuse it like the
    # `Infinity` literal, or it would reach a tool (and a receipt hash) as a non-number.
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:40]} is too large to represent")
    return value


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {key!r} appears more than once")
        out[key] = value
    return out


def _excerpt(text: str) -> str:
    if len(text) <= EXCERPT_CHARS:
        return text
    return text[:EXCERPT_CHARS] + f"... ({len(text)} characters in all)"


def _call_fields(call: Any) -> tuple[str, str | None]:
    """(type, arguments) from a ToolCall, an OpenAI-style object, or a wire dict."""
    if isinstance(call, Mapping):
        function = call.get("function")
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if arguments is None:
            arguments = call.get("arguments")
        call_type = call.get("type")
    else:
        function = getattr(call, "function", None)
        arguments = getattr(function, "arguments", None)
        if arguments is None:
            arguments = getattr(call, "arguments", None)
        call_type = getattr(call, "type", None)
    if call_type is None:
        call_type = "function"
    return str(call_type), arguments


def parse_tool_call_arguments(call: Any) -> ArgumentsReading:
    """Read one tool call's arguments into a dict, or say why not, without raising.

    Accepts a `steadyloop.ToolCall`, any object with `.type` and `.arguments` (or
    `.function.arguments`), or a wire dict `{"type": ..., "function": {"arguments": ...}}`.
    """
    call_type, arguments = _call_fields(call)
    if call_type != "function":
        return UnsupportedToolCallType(
            type=call_type,
            detail=f"Unsupported tool call type {call_type!r}: only 'function' calls can run.",
        )
    if arguments is not None and not isinstance(arguments, str):
        return UnparseableArguments(
            detail=(
                "Tool arguments must be a JSON object encoded as a string, "
                f"got a {type(arguments).__name__}."
            )
        )
    if tool_call_arguments_absent(arguments):
        return ParsedArguments(arguments={})
    assert arguments is not None
    try:
        value = json.loads(
            arguments,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
        )
    except _Refused as refused:
        return UnparseableArguments(
            detail=f"Tool arguments were refused: {refused}. Send one JSON object: "
            f"{_excerpt(arguments)}"
        )
    except (ValueError, RecursionError) as error:
        return UnparseableArguments(
            detail=f"Tool arguments are not valid JSON ({error}). Send one JSON object, "
            f"for example {{\"key\": \"value\"}}. Received: {_excerpt(arguments)}"
        )
    if not isinstance(value, dict):
        return UnparseableArguments(
            detail=(
                "Tool arguments must be a JSON object of named parameters, "
                f"got {_json_kind(value)}. Received: {_excerpt(arguments)}"
            )
        )
    return ParsedArguments(arguments=value)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"  # json.loads yields nothing else here: objects were handled first
