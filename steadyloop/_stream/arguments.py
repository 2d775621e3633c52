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
  receipt key faithfully. Both are refused here with a detail the model can act on, and
  so is an integer too long for Python to read (`sys.get_int_max_str_digits()`).
- `json.loads` turns the escape `"\\ud83d"` (valid JSON: a tokenizer split an emoji) into
  a lone surrogate, which no UTF-8 encoder accepts: the tool's activity input cannot be
  serialized, and the run would die there with the call unanswered. A lone surrogate
  anywhere (a value or an object key, at any depth) is refused with its path (`$.key`),
  so the model can send whole characters. Refused, not replaced with U+FFFD: a tool with
  a side effect would write the replacement into someone's data, and a key would
  silently change name (pydantic already does that to keys).
- Deep nesting: `json.loads` recurses, so how deep it gets before `RecursionError`
  depends on the stack it was called from (not the same on replay), and pydantic's JSON
  reader refuses documents over 200 levels on the activity side, after the workflow
  scheduled them. Nesting deeper than `MAX_ARGUMENT_DEPTH` is refused before parsing,
  counted on the text, the same way every time.
- A refusal's detail quotes what the model sent, with surrogates escaped: the detail
  becomes a tool message, which must itself be encodable.
- Every refusal carries `detail` written for the model: its next turn is the only
  thing that can correct the arguments, so the detail goes into the tool message.

Whatever `ParsedArguments` holds is therefore plain JSON data (str keys, no lone
surrogates, finite floats, readable ints, at most `MAX_ARGUMENT_DEPTH` deep) that
`canonical_json` can key and the workflow's data converter can send to a tool; NUL
characters are legal JSON and pass through.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal, NamedTuple

from steadyloop._receipts.canonical_json import MAX_DEPTH
from steadyloop.errors import SteadyloopError

EXCERPT_CHARS = 200

MAX_ARGUMENT_DEPTH = MAX_DEPTH
"""Arrays and objects nested deeper than this (the arguments object is level 1) are refused:
steadyloop's one depth limit (`canonical_json.MAX_DEPTH`), which the receipt key applies
to the same value, so a call the reader accepts can always be keyed and stored."""

# The JSON escape of a UTF-16 surrogate (D800-DFFF). Text without one, and without a raw
# surrogate character, cannot parse to a string holding a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# A JSON string, closed or cut at the end of the text (for counting nesting outside them).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_CHARS = 40  # a path spells at most this much of one key


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


class _Refused(SteadyloopError, ValueError):
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


def _readable_int(text: str) -> int:
    # Past `sys.get_int_max_str_digits()` (4300 by default) `int` refuses the digits; say
    # so in words the model can act on, not as a JSON syntax error.
    try:
        return int(text)
    except ValueError:
        raise _Refused(
            f"the integer {text[:40]}... has {len(text)} digits, too many to read"
        ) from None


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {_short(key)} appears more than once")
        out[key] = value
    return out


def _short(text: str) -> str:
    """`repr` of at most `_KEY_CHARS` characters of `text` (surrogates come out escaped)."""
    if len(text) <= _KEY_CHARS:
        return repr(text)
    return repr(text[:_KEY_CHARS]) + f"... ({len(text)} characters)"


def _encodable(text: str) -> str:
    """`text` with every surrogate spelled as its escape: a detail must encode as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _excerpt(text: str) -> str:
    if len(text) <= EXCERPT_CHARS:
        return _encodable(text)
    return _encodable(text[:EXCERPT_CHARS]) + f"... ({len(text)} characters in all)"


def _nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in `text`, outside strings, without parsing it.

    Exact for JSON; for other text, a bound good enough to refuse it as too deep.
    """
    if text.count("[") + text.count("{") <= MAX_ARGUMENT_DEPTH:
        return 0  # cannot exceed the limit: skip the scan (the common case)
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


class _Path(NamedTuple):
    parent: _Path | None
    segment: str | int


def _path_text(path: _Path | None) -> str:
    segments: list[str] = []
    while path is not None:
        segment = path.segment
        if isinstance(segment, int):
            segments.append(f"[{segment}]")
        elif _IDENTIFIER.fullmatch(segment):
            segments.append(f".{segment}")
        else:
            spelled = json.dumps(segment[:_KEY_CHARS])  # ASCII: surrogates as escapes
            more = "..." if len(segment) > _KEY_CHARS else ""
            segments.append(f"[{spelled}{more}]")
        path = path.parent
    return "$" + "".join(reversed(segments))


def _lone_surrogate(value: object) -> str | None:
    """Where the first lone surrogate of a parsed value sits, in document order, or None."""
    # (value, its path, whether the value is the last segment's key rather than a member)
    stack: list[tuple[object, _Path | None, bool]] = [(value, None, False)]
    while stack:
        item, path, is_key = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                what = "the object key" if is_key else "the string at"
                return f"{what} {_path_text(path)} {_holds(found)}"
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                stack.append((child, _Path(path, key), False))
                stack.append((key, _Path(path, key), True))  # a key before its value
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], _Path(path, index), False))
    return None


def _holds(found: re.Match[str]) -> str:
    return (
        f"holds a lone surrogate {_encodable(found.group())} at character {found.start()} "
        "(half of a character such as an emoji, which no tool can receive as text); "
        "send whole characters"
    )


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
    if _nesting_depth(arguments) > MAX_ARGUMENT_DEPTH:
        return _refused(
            f"arrays and objects nest deeper than {MAX_ARGUMENT_DEPTH} levels", arguments
        )
    try:
        value = json.loads(
            arguments,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_readable_int,
        )
    except _Refused as refused:
        return _refused(str(refused), arguments)
    except (ValueError, RecursionError) as error:
        return UnparseableArguments(
            detail=f"Tool arguments are not valid JSON ({_encodable(str(error))}). Send one "
            f'JSON object, for example {{"key": "value"}}. Received: {_excerpt(arguments)}'
        )
    if not isinstance(value, dict):
        return UnparseableArguments(
            detail=(
                "Tool arguments must be a JSON object of named parameters, "
                f"got {_json_kind(value)}. Received: {_excerpt(arguments)}"
            )
        )
    if _SURROGATE_ESCAPE.search(arguments) or not _utf8(arguments):
        lone = _lone_surrogate(value)
        if lone is not None:
            return _refused(lone, arguments)
    return ParsedArguments(arguments=value)


def _refused(reason: str, arguments: str) -> UnparseableArguments:
    return UnparseableArguments(
        detail=f"Tool arguments were refused: {reason}. Send one JSON object: {_excerpt(arguments)}"
    )


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
