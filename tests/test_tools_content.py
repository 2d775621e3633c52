"""The result-encoding rule and the content cap, on their own."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from steadyloop.tools import TRUNCATION_MARKER
from steadyloop.tools._content import cap_content, encode_result, utf8_text


class Item(BaseModel):
    name: str
    price: Decimal


class Opaque:
    def __str__(self) -> str:
        return "<opaque thing>"


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("plain text", "plain text"),
        ("", ""),
        (None, "null"),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        ([1, "a"], '[1,"a"]'),
        ({"b": 1, "a": [None]}, '{"b":1,"a":[null]}'),
        (Item(name="x", price=Decimal("1.10")), '{"name":"x","price":"1.10"}'),
        (uuid.UUID(int=1), '"00000000-0000-0000-0000-000000000001"'),
        (b"bytes", '"bytes"'),
        ({"n": math.nan, "i": math.inf}, '{"n":null,"i":null}'),
        (Opaque(), '"<opaque thing>"'),
        ({"k": "ü"}, '{"k":"ü"}'),
    ],
)
def test_encoding_rule(value: object, encoded: str) -> None:
    assert encode_result(value) == encoded


def test_non_string_results_are_always_valid_json() -> None:
    for value in (None, {"n": math.nan}, [Opaque()], Item(name="x", price=Decimal(1))):
        json.loads(encode_result(value))


@given(st.text(), st.integers(min_value=200, max_value=2000))
def test_cap_never_exceeds_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    capped, truncated = cap_content(text, limit)
    size = len(text.encode("utf-8"))
    assert truncated == (size > limit)
    assert len(capped.encode("utf-8")) <= limit
    if truncated:
        head = capped[: capped.rindex("\n[steadyloop: output truncated")]
        assert text.startswith(head)
        assert capped.endswith(f" of {size} bytes shown]")
    else:
        assert capped == text


def test_limit_smaller_than_marker_is_refused() -> None:
    assert len(TRUNCATION_MARKER) > 10
    with pytest.raises(ValueError, match="smaller than the truncation marker"):
        cap_content("x" * 100, 10)


# A tool already did its work when its result is encoded: encoding never raises, and the
# text always encodes as UTF-8 (else the activity's payload fails and the call reruns).
_hostile_leaves = st.one_of(
    st.text(alphabet=st.characters(codec=None)),  # lone surrogates included
    st.binary(max_size=8),
    st.integers(),
    st.floats(),  # NaN and infinities included
    st.none(),
    st.booleans(),
    st.builds(Opaque),
    st.frozensets(st.integers(), max_size=3),
)
_hostile = st.recursive(
    _hostile_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(), st.integers(), st.none()), inner, max_size=4),
    ),
    max_leaves=20,
)


@given(_hostile)
def test_any_result_encodes_to_utf8_text_without_raising(value: object) -> None:
    text = encode_result(value)
    text.encode("utf-8")
    if not isinstance(value, str):
        json.loads(text)  # still one JSON document, markers being strings in it


def test_lone_surrogates_become_replacement_characters_and_pairs_join() -> None:
    escaped = b"caf\xe9".decode(errors="surrogateescape")
    assert encode_result(escaped) == "caf\ufffd"
    assert encode_result("\ud83d\ude00") == "\U0001f600"
    assert encode_result({"a": ["x\ud800"]}) == '{"a":["x\ufffd"]}'
    assert cap_content("\udcff" * 10, 1000) == ("\ufffd" * 10, False)


def test_values_json_cannot_hold_are_replaced_by_a_named_marker() -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError

        __str__ = __repr__

    cycle: list[object] = []
    cycle.append(cycle)
    assert encode_result([b"\xff", b"ok"]) == '["b\'\\\\xff\'","ok"]'
    assert encode_result(cycle) == '["[steadyloop: cycle, list contains itself]"]'
    assert encode_result([Unprintable()]) == '["[steadyloop: unrepresentable Unprintable]"]'
    assert encode_result({"n": 10**5000, "b": b"\xff"}).startswith(
        '{"n":"[steadyloop: integer of 16610 bits]"'
    )
    # A shared (not cyclic) container is written twice, not mistaken for a cycle.
    shared = [1]
    assert encode_result({"a": shared, "b": shared, "c": b"\xff"}) == (
        '{"a":[1],"b":[1],"c":"b\'\\\\xff\'"}'
    )


@given(st.text(alphabet=st.sampled_from(["a", "\ud83d", "\ude00", "\udcff", "é", "\x00"])))
def test_utf8_text_replaces_each_lone_surrogate_and_joins_each_pair(text: str) -> None:
    reference = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    assert utf8_text(text) == reference
    utf8_text(text).encode("utf-8")


def test_a_model_or_dataclass_holding_bad_values_keeps_its_other_fields() -> None:
    class Blob(BaseModel):
        name: str
        data: bytes

    @dataclasses.dataclass
    class Note:
        raw: bytes
        text: str

    assert json.loads(encode_result(Blob(name="x\udcff", data=b"ok"))) == {
        "name": "x\ufffd",
        "data": "ok",
    }
    assert json.loads(encode_result(Blob(name="x", data=b"\xff"))) == {
        "name": "x",
        "data": "b'\\xff'",
    }
    assert json.loads(encode_result([Note(raw=b"\xff", text="n\ud800")])) == [
        {"raw": "b'\\xff'", "text": "n\ufffd"}
    ]
