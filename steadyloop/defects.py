"""Completion defects: a finished stream whose turn must not be dispatched as it is.

A defect is not a transport failure: the HTTP exchange succeeded, but what came back
cannot be used. Each kind has a retry budget: the workflow spends it on a fresh
completion (nothing was forwarded yet), and when it is spent the run stops with the
defect named, the transcript still valid.

What the obvious implementation gets wrong, and where it is handled here:

- Zero-argument calls: `""` is a legal call, not a truncation, unless the completion
  was cut by the token limit. The emptiness test is `tool_call_arguments_absent`, the
  same predicate the argument reader uses.
- Dropped deltas: a fragment the accumulator could not attribute without guessing was
  left out. The calls it did assemble may all parse, so without this check a partial
  batch would be dispatched as if whole.
- Structured output: when the request asked for JSON, content that does not parse is
  a defect even though the stream was clean.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict

from steadyloop.arguments import tool_call_arguments_absent
from steadyloop.chat import ToolCall

DefectKind = Literal[
    "dropped_deltas",
    "unnamed_tool_call",
    "truncated_tool_call",
    "empty_completion",
    "structured_output_unparseable",
    # The runaway-argument guard cut the stream (`steadyloop.runaway_guard`): the kind
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
            found.append(
                _defect("unnamed_tool_call", "a tool call arrived with no name.", call.id)
            )
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
            found.append(
                _defect(
                    "truncated_tool_call",
                    f"the arguments of tool call {call.name!r} do not parse as JSON"
                    + (" (the completion was cut by the token limit)." if cut_by_limit else "."),
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
