"""What a provider's error says: its message, code and type, and how long it asks to wait.

Pure functions over a response body and headers, with no I/O and no Temporal import,
so the model activity and any caller with its own HTTP client read errors the same way.

What the obvious implementation gets wrong:

- Providers shape errors differently: OpenAI `{"error": {"message", "type", "code"}}`,
  Ollama `{"error": "text"}`, vLLM a top-level `{"object": "error", "message", ...}`,
  FastAPI `{"detail": ...}` (Mistral nests it in `message`), Gemini's OpenAI endpoint
  a list `[{"error": {..., "status"}}]`, and codes as numbers as often as strings.
  `provider_error` reads them all, and returns None for what is absent rather than
  inventing a message. `blamed_parameter` reads which request parameter an error
  names (`param`, or a validation error's `loc`), for degrading an unsupported one.
- `Retry-After` is seconds (possibly fractional) or an HTTP date, and OpenAI also sends
  `retry-after-ms`; a negative, NaN or unparseable value is ignored, not a wait. An
  absurd one (`1e300`, `inf`, a run of 10,000 digits, a date centuries ahead) is a
  request to wait longer than anyone will: it becomes `RETRY_AFTER_CEILING_S`, which
  the disposition table treats as any too-long Retry-After (traverse), instead of a
  number that overflows the first `timedelta` it meets. A date in the past is no wait.

What a failure leads to (retry, traverse, stop) is decided once, by the route table
(`steadyloop._routing.disposition`) over the failure's category
(`steadyloop._routing.taxonomy`), not here.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from steadyloop._stream.failures import RETRY_AFTER_CEILING_S, bounded_retry_after

__all__ = [
    "RETRY_AFTER_CEILING_S",
    "blamed_parameter",
    "parse_retry_after",
    "provider_error",
]

# A header value longer than this is not a number or a date anyone sends on purpose.
_RETRY_AFTER_CHARS = 64


def provider_error(body: bytes) -> tuple[str | None, str | None, str | None]:
    """(message, code, type) from a provider's JSON error body, each None when absent.

    Shapes: OpenAI `{"error": {"message", "type", "code"}}`; Ollama `{"error": "text"}`;
    vLLM `{"object": "error", "message", "type", "code"}`; FastAPI `{"detail": ...}`;
    Gemini's OpenAI endpoint `[{"error": {"code", "message", "status"}}]`.
    """
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None, None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict):
        return None, None, None
    error = data.get("error")
    if isinstance(error, str):
        return _text(error), None, None
    source = error if isinstance(error, dict) else data
    message = _text(source.get("message"))
    for holder in (source, source.get("message")):
        if message is None and isinstance(holder, dict) and "detail" in holder:
            message = _detail_text(holder["detail"])
    kind = _text(source.get("type")) or _text(source.get("status"))
    return message, _text(source.get("code")), kind


def _detail_text(detail: Any) -> str | None:
    """A validation `detail`: text as is; a list of `{loc, msg, type}` as one line each
    (`body.stream_options: Extra inputs are not permitted [extra_forbidden]`)."""
    if isinstance(detail, list) and detail and all(isinstance(e, dict) for e in detail):
        lines = []
        for entry in detail:
            loc = entry.get("loc")
            where = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
            kind = _text(entry.get("type"))
            line = f"{where}: {entry.get('msg', '')}" if where else str(entry.get("msg", ""))
            lines.append(line + (f" [{kind}]" if kind else ""))
        return "; ".join(lines)
    return _text(detail) or _text(orjson.dumps(detail).decode())


def blamed_parameter(body: bytes) -> str | None:
    """The request parameter an error body blames, or None when it names none.

    OpenAI and Groq put it in `error.param`, vLLM in a top-level `param`; FastAPI-style
    validators (Mistral, some gateways) list `{"loc": ["body", "<name>"], ...}` under
    `detail`, at the top or inside `message`. Only a top-level body field counts: a
    `loc` deeper in the body (`["body", "messages", 3, "content"]`) blames content,
    not a parameter.
    """
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    source = error if isinstance(error, dict) else data
    param = _text(source.get("param"))
    if param is not None:
        return param
    for holder in (source, source.get("message")):
        detail = holder.get("detail") if isinstance(holder, dict) else None
        for entry in detail if isinstance(detail, list) else ():
            loc = entry.get("loc") if isinstance(entry, dict) else None
            if isinstance(loc, list) and len(loc) == 2 and loc[0] == "body":
                return _text(loc[1])
    return None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list | bool):
        return None
    try:
        text = str(value).strip()
    except ValueError:  # an integer past Python's digit limit for str()
        return f"<a number of {value.bit_length()} bits>" if isinstance(value, int) else None
    return text or None


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` (seconds or an HTTP date),
    never more than `RETRY_AFTER_CEILING_S`; None when neither says anything usable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = bounded_retry_after(_number(millis) / 1000.0)
        if seconds is not None:
            return seconds
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = bounded_retry_after(_number(value))
    if seconds is not None:
        return seconds
    return _date_delay(value, now)


def _number(value: str) -> float:
    """The number a header value spells, NaN when it spells none."""
    text = value.strip()
    if len(text) > _RETRY_AFTER_CHARS:
        # Only a run of digits is still a (huge) number; anything else this long is
        # garbage, and float() of it need not be attempted.
        return math.inf if text.isascii() and text.isdigit() else math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _date_delay(value: str, now: datetime | None) -> float | None:
    """The seconds until an HTTP date (0 for one in the past), bounded; None when the
    value is not a date `datetime` can hold."""
    text = value.strip()
    if len(text) > _RETRY_AFTER_CHARS:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        delay = (when - (now or datetime.now(UTC))).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return bounded_retry_after(max(0.0, delay))
