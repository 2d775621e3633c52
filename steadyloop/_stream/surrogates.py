"""Text that encodes as UTF-8, from text that may hold lone UTF-16 surrogates: one rule.

Lone surrogates reach steadyloop from every side: a stream's JSON escapes cut between the
two halves of a pair (`"\\ud83d"` in one delta, `"\\ude00"` in the next), a provider's
error message, a tool's output decoded with `surrogateescape`. A `str` holding one cannot
be encoded as UTF-8, so a payload, a log line or an HTTP body carrying it fails far from
where it came in. The redaction of provider text (`steadyloop._redaction.clean_text`), tool
results (`steadyloop.tools._content.utf8_text`) and the stream's assembly (text, names,
ids, arguments) all answer it with the rule here, so a text cleaned twice, or on two
paths, reads the same.

What the obvious implementations get wrong, and what prevents each:

- Replacing every surrogate code point with U+FFFD turns a pair split across fragments
  and joined again (two code points, one character) into two replacement characters:
  pairs are joined first (a UTF-16 round trip with `surrogatepass`), and only the halves
  left unpaired are replaced.
- `encode("utf-8", "replace")` writes `?`, not U+FFFD, and drops the pair's character.
- In JSON argument text a raw U+FFFD changes the value the model sent: there a half left
  unpaired becomes its JSON escape (`json_escape=True`), so the arguments parse to exactly
  the string the model produced, and the argument reader decides what to do with it.
- Scanning character by character in Python costs ~50 ns a character on the hot path:
  ASCII text (`str.isascii`, no allocation) and text that encodes are returned as they
  are, and repairs go through compiled regular expressions.
- A `str` subclass (a tool's own string type) passes the checks but may serialize its own
  way: the result is always a plain `str`.
"""

from __future__ import annotations

import re

__all__ = ["rejoin_surrogates"]

_LONE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def rejoin_surrogates(text: str, *, json_escape: bool = False) -> str:
    """`text` as a plain `str` that encodes as UTF-8.

    Surrogate halves that form a pair are joined into their character; a half left
    unpaired becomes U+FFFD, or with `json_escape=True` its JSON escape (`\\ud83d` as six
    characters), so JSON text holding it still parses to the same value. Text that already
    encodes comes back unchanged.
    """
    if text.__class__ is not str:
        text = str.__str__(text)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    if _PAIR.search(text) is not None:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE.sub(_json_escape if json_escape else "\ufffd", text)
