"""The result-encoding rule and the content cap, on their own."""

from __future__ import annotations

import json
import math
import uuid
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from steadyloop.tools import TRUNCATION_MARKER, cap_content, encode_result


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
