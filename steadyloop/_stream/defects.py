"""Completion defects: a finished stream whose turn must not be dispatched as it is.

A defect is not a transport failure: the HTTP exchange succeeded, but what came back
cannot be used. Each kind has a retry budget: the workflow spends it on a fresh
completion (nothing was forwarded yet), and when it is spent the run stops with the
defect named, the transcript still valid.

What the obvious implementation gets wrong, and where it is handled here:

- Zero-argument calls: `""` is a legal call, not a truncation, unless the completion
  was cut by the token limit. The emptiness test is `tool_call_arguments_absent`, the
  same predicate the argument reader uses.
- Truncated is not malformed. Arguments that do not parse are a defect (retried fresh)
  only when they were *cut*: by the token limit or a content filter, by the stream's
  end without a finish reason, or when the text is a proper prefix of a JSON document
  (`{"city": "Par`). So are complete JSON values run together (`{"a":1}{"a":2}`): the
  shape calls merged on the wire take (`steadyloop._stream.accumulator`). A *finished* call
  whose JSON is wrong inside (`{"city": Paris}`) is the model's mistake, and a fresh
  sample is no more likely to fix it than the model is once told: it is not a defect,
  and the argument reader answers it with the parse error, like arguments the schema
  refuses. Retrying it instead stopped the run after two fresh completions.
- Dropped deltas: a fragment the accumulator could not attribute without guessing was
  left out. The calls it did assemble may all parse, so without this check a partial
  batch would be dispatched as if whole.
- Structured output: when the request asked for JSON, content that does not parse is
  a defect even though the stream was clean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict

from steadyloop._chat import ToolCall
from steadyloop._stream.arguments import tool_call_arguments_absent

DefectKind = Literal[
    "dropped_deltas",
    "unnamed_tool_call",
    "truncated_tool_call",
    "empty_completion",
    "structured_output_unparseable",
    # The runaway-argument guard cut the stream (`steadyloop._stream.runaway_guard`): the kind
    # is the guard's stable code, and the turn carries no tool calls.
    "TOOL_CALL_ARGUMENTS_TOO_LARGE",
    "TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS",
    "TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE",
]

# Fresh completions the workflow may spend on each kind before it stops the run.
DEFECT_RETRY_BUDGETS: dict[str, int] = {
    "dropped_deltas": 2,
    "unnamed_tool_call": 2,
    "truncated_tool_call": 2,
    "empty_completion": 2,
    "structured_output_unparseable": 2,
    # One fresh sample: a runaway costs a whole output budget, and often repeats.
    "TOOL_CALL_ARGUMENTS_TOO_LARGE": 1,
    "TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS": 1,
    "TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE": 1,
}

LENGTH_FINISH_REASONS = frozenset({"length", "max_tokens"})
# Finish reasons that say the output was cut, not finished: arguments that do not parse
# under one of these (or under no finish reason at all) are truncated, whatever they hold.
CUT_FINISH_REASONS = LENGTH_FINISH_REASONS | {"content_filter"}

JsonTextShape = Literal["complete", "prefix", "run_together", "malformed"]


class CompletionDefect(BaseModel):
    """What is wrong with a finished completion, as a value the workflow can act on."""

    model_config = ConfigDict(frozen=True)

    kind: DefectKind
    detail: str
    tool_call_id: str | None = None
    retry_budget: int = 0


def _defect(kind: DefectKind, detail: str, tool_call_id: str | None = None) -> CompletionDefect:
    return CompletionDefect(
        kind=kind,
        detail=detail,
        tool_call_id=tool_call_id,
        retry_budget=DEFECT_RETRY_BUDGETS[kind],
    )


def _parses(text: str) -> bool:
    """Whether `text` is JSON, as the stdlib reads it.

    This runs on every call of every turn, so orjson reads it first (about 3x faster
    on tool-call arguments), and the stdlib only what orjson refuses: NaN and Infinity,
    escapes of lone surrogates, numbers past a float's range. What orjson reads, the
    stdlib reads too, but for nesting between the stdlib's recursion limit (about
    1,000 levels, less the caller's stack) and orjson's 1,024, which parses here; the
    argument reader still refuses it, with a detail for the model.
    """
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    else:
        return True
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


_WHITESPACE = re.compile(r"[ \t\n\r]*")
# A string's body up to its closing quote, an unfinished escape, a control character or
# the end of the text (the stdlib refuses raw control characters inside strings).
_STRING_BODY = re.compile(r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_ESCAPE_PREFIX = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# The start of a number: every prefix of a text `_NUMBER` matches, and nothing else.
_NUMBER_PREFIX = re.compile(
    r"-?(?:(?:0|[1-9][0-9]*)(?:\.(?:[0-9]+(?:[eE][+-]?[0-9]*)?)?|[eE][+-]?[0-9]*)?)?"
)
# The stdlib reads these too (the argument reader refuses the last three with a reason).
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def json_text_shape(text: str) -> JsonTextShape:
    """What `text` is as JSON, read the way the stdlib reads it, without recursion.

    - `complete`: one JSON value (surrounded by whitespace at most).
    - `prefix`: text that ends before its value does; appending could complete it.
    - `run_together`: one complete value followed by more text (`{"a":1}{"a":2}`).
    - `malformed`: wrong before its end (`{"city": Paris}`); nothing appended helps.
    """
    stack: list[str] = []  # the open containers: "{" or "["
    # What may come next: a value, a value or "]", a key, a key or "}", ":", "," or the
    # closer of the innermost container, or nothing (the top-level value is complete).
    expect = "value"
    pos, end = 0, len(text)
    while True:
        pos = _skip_whitespace(text, pos)
        if pos == end:
            return "complete" if expect == "done" else "prefix"
        char = text[pos]
        if expect == "done":
            return "run_together"
        if expect == "colon":
            if char != ":":
                return "malformed"
            pos, expect = pos + 1, "value"
        elif expect == "comma":
            if char == ",":
                pos, expect = pos + 1, ("key" if stack[-1] == "{" else "value")
            elif char == ("}" if stack[-1] == "{" else "]"):
                stack.pop()
                pos, expect = pos + 1, ("comma" if stack else "done")
            else:
                return "malformed"
        elif char in "}]" and (expect, char) in (("key_or_close", "}"), ("value_or_close", "]")):
            stack.pop()
            pos, expect = pos + 1, ("comma" if stack else "done")
        elif expect in ("key", "key_or_close"):
            if char != '"':
                return "malformed"
            after = _string_end(text, pos)
            if isinstance(after, str):
                return after
            pos, expect = after, "colon"
        elif char in "{[":
            stack.append(char)
            pos, expect = pos + 1, ("key_or_close" if char == "{" else "value_or_close")
        else:
            after = _scalar_end(text, pos)
            if isinstance(after, str):
                return after
            pos, expect = after, ("comma" if stack else "done")


def _skip_whitespace(text: str, pos: int) -> int:
    found = _WHITESPACE.match(text, pos)
    assert found is not None  # the pattern matches the empty string
    return found.end()


def _string_end(text: str, pos: int) -> int | Literal["prefix", "malformed"]:
    """Where the string opening at `pos` ends (after its quote), or why it does not."""
    body = _STRING_BODY.match(text, pos + 1)
    assert body is not None  # the pattern matches the empty string
    after = body.end()
    if after == len(text):
        return "prefix"
    if text[after] == '"':
        return after + 1
    # An escape cut by the end of the text is a prefix; any other stop is an error.
    escape = _ESCAPE_PREFIX.match(text, after)
    if escape is not None and escape.end() == len(text):
        return "prefix"
    return "malformed"


def _scalar_end(text: str, pos: int) -> int | Literal["prefix", "malformed"]:
    """Where the number or literal at `pos` ends, or why it does not."""
    if text[pos] == '"':
        return _string_end(text, pos)
    rest = len(text) - pos
    for literal in _LITERALS:
        if text.startswith(literal, pos):
            return pos + len(literal)
        # The text ends inside the literal (`rest` first: slicing the whole rest of a
        # long text at every scalar would make the scan quadratic).
        if rest < len(literal) and literal.startswith(text[pos:]):
            return "prefix"
    if _NUMBER_PREFIX.fullmatch(text, pos):  # the text ends in (the start of) a number
        return len(text) if _NUMBER.fullmatch(text, pos) else "prefix"
    number = _NUMBER.match(text, pos)
    return "malformed" if number is None else number.end()


def _truncation(arguments: str, finish_reason: str | None) -> str | None:
    """Why unparseable `arguments` read as cut or merged (a defect), or None: malformed."""
    if finish_reason is None:
        return " (the stream ended without a finish reason)."
    if finish_reason in LENGTH_FINISH_REASONS:
        return " (the completion was cut by the token limit)."
    if finish_reason in CUT_FINISH_REASONS:
        return f" (the completion was cut: finish reason {finish_reason!r})."
    shape = json_text_shape(arguments)
    if shape == "prefix":
        return ": they end before their JSON value does."
    if shape == "run_together":
        return ": they hold several JSON values run together (calls merged on the wire?)."
    return None


def detect_completion_defects(
    *,
    text: str,
    tool_calls: Sequence[ToolCall],
    finish_reason: str | None,
    dropped_deltas: int = 0,
    wants_json: bool = False,
) -> list[CompletionDefect]:
    """Every defect of an assembled completion, most fundamental first (empty when usable)."""
    found: list[CompletionDefect] = []
    if dropped_deltas:
        found.append(
            _defect(
                "dropped_deltas",
                f"{dropped_deltas} streamed tool-call fragment(s) could not be attributed "
                "to a call without guessing; the batch may be incomplete.",
            )
        )
    cut_by_limit = finish_reason in LENGTH_FINISH_REASONS
    for call in tool_calls:
        if not call.name.strip():
            found.append(_defect("unnamed_tool_call", "a tool call arrived with no name.", call.id))
        if tool_call_arguments_absent(call.arguments):
            if cut_by_limit:
                found.append(
                    _defect(
                        "truncated_tool_call",
                        f"tool call {call.name!r} has no arguments and the completion was "
                        "cut by the token limit.",
                        call.id,
                    )
                )
        elif not _parses(call.arguments):
            why = _truncation(call.arguments, finish_reason)
            if why is not None:  # else malformed: the argument reader answers the call
                found.append(
                    _defect(
                        "truncated_tool_call",
                        f"the arguments of tool call {call.name!r} do not parse as JSON{why}",
                        call.id,
                    )
                )
    if not tool_calls and not text.strip():
        found.append(_defect("empty_completion", "the completion has no text and no tool calls."))
    if wants_json and not tool_calls and text.strip() and not _parses(text):
        found.append(
            _defect(
                "structured_output_unparseable",
                "JSON output was requested and the content does not parse as JSON.",
            )
        )
    return found


def detect_completion_defect(
    *,
    text: str,
    tool_calls: Sequence[ToolCall],
    finish_reason: str | None,
    dropped_deltas: int = 0,
    wants_json: bool = False,
) -> CompletionDefect | None:
    """The first (most fundamental) defect of an assembled completion, or None."""
    found = detect_completion_defects(
        text=text,
        tool_calls=tool_calls,
        finish_reason=finish_reason,
        dropped_deltas=dropped_deltas,
        wants_json=wants_json,
    )
    return found[0] if found else None
