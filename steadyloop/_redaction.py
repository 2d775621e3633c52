"""Provider-controlled text made safe to record: no secret, always serializable, bounded.

Everything a provider sends back (an error's message, code, type and param, a body,
a reason phrase, a `Location` header) may echo the API key the request carried, and
may hold lone surrogates, NUL or megabytes. Every such string that reaches a failure
message, a failure's details, a log line or a return value goes through `safe_text`
with the keys the activity read from the worker's environment (`Secrets`), so there is
one rule, applied in one place:

1. Clean: lone UTF-16 surrogates and NUL become U+FFFD (a split pair is rejoined), so
   the text encodes as UTF-8 and as JSON anywhere it is recorded.
2. Bound coarsely (`_SCAN_LIMIT`), so a 50 MB body costs no more than a short one.
3. Redact: every occurrence of a key, and of any fragment of it of `MIN_FRAGMENT` (8)
   or more characters, becomes `[redacted]`. Fragments matter because text is cut:
   the coarse bound of step 2, the byte limit a body is read to, or a provider that
   truncates its own echo, can leave the head or tail of a key that whole-key matching
   would miss (a key straddling a 500-character excerpt leaked 40 of its 47
   characters). The key's JSON-escaped spellings (`\\"`, `\\\\`, `\\/`) count as the key.
4. Bound finally, *after* redaction, so the last cut cannot expose part of a key.

Pure: no I/O, no Temporal import, so the activity, `transport_errors` and tests share it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Final

from steadyloop._stream.surrogates import rejoin_surrogates

__all__ = [
    "HTTP_LOGGERS",
    "MIN_FRAGMENT",
    "REDACTED",
    "KeyRedactingFilter",
    "Secrets",
    "clean_text",
    "safe_text",
]

REDACTED: Final = "[redacted]"
# The shortest fragment of a key that is redacted wherever it appears.
MIN_FRAGMENT: Final = 8
# The loggers of the HTTP stack that print what a provider sent: httpx's status line
# (with the reason phrase) at INFO, httpcore's response headers at DEBUG. A logger's
# filters do not apply to its children's records, so each is named.
HTTP_LOGGERS: Final = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
)
# How much of one such log line is kept.
_LOG_LINE_CHARS: Final = 4000
# Text longer than this is cut before it is scanned (redaction of a fragment at the cut
# makes the cut safe); no recorded field is allowed anywhere near this long.
_SCAN_LIMIT: Final = 128 * 1024


class Secrets:
    """The keys one activity read from the environment, indexed for fragment matching.

    Keys shorter than `MIN_FRAGMENT` are redacted where they occur whole; longer ones
    wherever any `MIN_FRAGMENT`-character piece of them occurs (which covers every
    longer fragment, since a fragment is a run of overlapping pieces).
    """

    __slots__ = ("_grams", "_short")

    def __init__(self, keys: Iterable[str | None] = ()) -> None:
        grams: set[str] = set()
        short: set[str] = set()
        for key in keys:
            if not key:
                continue
            for spelling in _spellings(key):
                if len(spelling) < MIN_FRAGMENT:
                    short.add(spelling)
                    continue
                grams.update(
                    spelling[i : i + MIN_FRAGMENT] for i in range(len(spelling) - MIN_FRAGMENT + 1)
                )
        self._grams: frozenset[str] = frozenset(grams)
        # Longest first, so a key is replaced before a shorter key inside it.
        self._short: tuple[str, ...] = tuple(sorted(short, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._grams or self._short)

    def redact(self, text: str) -> str:
        """`text` with every key, and every fragment of `MIN_FRAGMENT`+ characters of
        one, replaced by `[redacted]` (adjacent or overlapping matches merge into one)."""
        for key in self._short:
            text = text.replace(key, REDACTED)
        grams = self._grams
        if not grams or len(text) < MIN_FRAGMENT:
            return text
        spans: list[list[int]] = []
        for start in range(len(text) - MIN_FRAGMENT + 1):
            if text[start : start + MIN_FRAGMENT] in grams:
                end = start + MIN_FRAGMENT
                if spans and start <= spans[-1][1]:
                    spans[-1][1] = end
                else:
                    spans.append([start, end])
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in spans:
            out.append(text[last:start])
            out.append(REDACTED)
            last = end
        out.append(text[last:])
        return "".join(out)


def _spellings(key: str) -> set[str]:
    """The key as sent, and as a JSON body may spell it (escaped quotes, backslashes,
    solidus, non-ASCII), so an echo inside a raw JSON excerpt is caught too."""
    escaped = json.dumps(key)[1:-1]
    return {key, escaped, escaped.replace("/", "\\/")}


def clean_text(text: str) -> str:
    """`text` that encodes as UTF-8: split surrogate pairs rejoined, lone surrogates and
    NUL replaced by U+FFFD (`steadyloop._stream.surrogates`, then NUL)."""
    text = rejoin_surrogates(text)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def safe_text(text: str, secrets: Secrets | None, limit: int) -> str:
    """Provider-controlled `text`, cleaned, redacted, then cut to `limit` characters
    (the cut says how long the text was). The one function every provider string that
    is recorded or logged passes through."""
    total = len(text)
    if total > _SCAN_LIMIT:
        text = text[:_SCAN_LIMIT]
    text = clean_text(text)
    if secrets:
        text = secrets.redact(text)
    if len(text) > limit:
        text = text[:limit] + f"... ({total} chars)"
    elif total > _SCAN_LIMIT:
        text += f"... ({total} chars)"
    return text


class KeyRedactingFilter(logging.Filter):
    """A log filter that redacts the keys `keys()` returns (read when a record is logged,
    so a rotated key is covered) from every record of the HTTP stack's loggers."""

    def __init__(self, keys: Callable[[], Iterable[str | None]]) -> None:
        super().__init__()
        self._keys = keys

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = Secrets(self._keys())
        if not secrets:
            return True
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is logging's to report, not ours
            return True
        safe = safe_text(text, secrets, _LOG_LINE_CHARS)
        if safe != text:
            record.msg, record.args = safe, ()
        return True

    def install(self, names: Iterable[str] = HTTP_LOGGERS) -> None:
        for name in names:
            logging.getLogger(name).addFilter(self)

    def uninstall(self, names: Iterable[str] = HTTP_LOGGERS) -> None:
        for name in names:
            logging.getLogger(name).removeFilter(self)
