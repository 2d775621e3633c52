"""Turning a tool's return value into the text of its tool message, within a size cap.

A tool message's content is a string. Tools return whatever is natural to them, so
there is one rule, applied the same way every time (a replayed receipt must read the
same as the first answer):

- a `str` is the content, verbatim;
- anything else is JSON, encoded by pydantic (`pydantic_core.to_json`): models,
  dataclasses, dicts, lists, numbers, `None` (as `null`), datetimes and dates (ISO
  8601), UUIDs, Decimals, sets (as arrays), bytes (as UTF-8 text); NaN and infinities
  become `null`, because `NaN` is not JSON; a value pydantic cannot encode becomes its
  `str()`, so a tool that already did its work is never reported as failed for the
  shape of its answer.

Failure mode handled: a huge result. Temporal refuses payloads over 2 MB and a
workflow task that schedules one fails forever; a long transcript also costs every
later model call. `cap_content` cuts content at `MAX_TOOL_CONTENT_BYTES` of UTF-8, on a
character boundary, and ends it with a marker that says how much was cut, so the model
knows it saw a part and not the whole.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

MAX_TOOL_CONTENT_BYTES = 64 * 1024
TRUNCATION_MARKER = "\n[steadyloop: output truncated, {shown} of {total} bytes shown]"


def encode_result(value: Any) -> str:
    """The tool-message text for a tool's return value (the rule in the module docstring)."""
    if isinstance(value, str):
        return value
    encoded = pydantic_core.to_json(value, inf_nan_mode="null", fallback=str)
    return encoded.decode("utf-8")


def cap_content(text: str, limit: int = MAX_TOOL_CONTENT_BYTES) -> tuple[str, bool]:
    """`(text, False)` when it fits in `limit` UTF-8 bytes, else a cut copy and True.

    The cut copy, marker included, is at most `limit` bytes and never splits a
    character. `limit` must leave room for the marker.
    """
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    # The marker's length depends on the numbers in it; the largest it can be is with
    # `shown` as long as `total`, so reserve that much.
    reserve = len(TRUNCATION_MARKER.format(shown=len(data), total=len(data)).encode("utf-8"))
    if limit < reserve:
        raise ValueError(f"limit {limit} is smaller than the truncation marker ({reserve} bytes)")
    head = data[: limit - reserve].decode("utf-8", errors="ignore")
    shown = len(head.encode("utf-8"))
    return head + TRUNCATION_MARKER.format(shown=shown, total=len(data)), True
