"""One rule for lone surrogates (`steadyloop._stream.surrogates`), and its callers agree.

The oracle is UTF-16's own reading (`decode("utf-16-le", "replace")` of the code units),
independent of the implementation. Each caller keeps the behaviour its own tests pin:
`redaction.clean_text` also replaces NUL, `tools.content.utf8_text` returns a plain `str`,
the accumulator escapes a lone half in JSON argument text.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop._receipts.ledger import _bounded
from steadyloop._redaction import clean_text
from steadyloop._stream.surrogates import rejoin_surrogates
from steadyloop.tools._content import utf8_text

ALPHABET = ["a", "é", "\U0001f600", "\ud83d", "\ude00", "\udbff", "\udc00", "\x00", "\ufeff"]
TEXTS = st.lists(st.sampled_from(ALPHABET), max_size=12).map("".join)


def oracle(text: str) -> str:
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_every_caller_reads_text_as_utf16_does(text: str) -> None:
    want = oracle(text)
    assert rejoin_surrogates(text) == want
    assert utf8_text(text) == want
    assert clean_text(text) == want.replace("\x00", "\ufffd")
    assert _bounded(text, 1 << 20)[0] == want  # a receipt's stored result
    want.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([c for c in ALPHABET if c != "\x00"]), max_size=12).map("".join))
def test_json_escape_keeps_the_value_json_text_parses_to(text: str) -> None:
    escaped = rejoin_surrogates(text, json_escape=True)
    escaped.encode("utf-8")
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    assert json.loads(f'"{escaped}"') == joined


def test_a_split_pair_is_one_character_not_two_replacements() -> None:
    assert rejoin_surrogates("a\ud83d\ude00b") == "a\U0001f600b"
    assert rejoin_surrogates("\ud83d\ud83d\ude00\ude00") == "\ufffd\U0001f600\ufffd"
    assert rejoin_surrogates('{"e":"\ud83d"}', json_escape=True) == '{"e":"\\ud83d"}'


def test_a_str_subclass_comes_back_as_a_plain_str() -> None:
    class Tagged(str):
        def __str__(self) -> str:
            return "not the text"

    for text in (Tagged("abc"), Tagged("é\ud83d")):
        out = rejoin_surrogates(text)
        assert out.__class__ is str
        assert out in ("abc", "é\ufffd")


def test_text_that_encodes_is_returned_as_it_is() -> None:
    text = "plain ascii"
    assert rejoin_surrogates(text) is text
    intl = "Zürich 😀"
    assert rejoin_surrogates(intl) is intl
