"""canonical_json: one text per value a tool would receive, a refusal for anything else.

A collision reads as "this call already ran" and skips a write that never happened,
so the tests that matter most are the distinctness ones (`1` vs `1.0` vs `True` vs
`"1"`) and the refusals; the properties check that formatting never changes identity.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import math
import sys
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop._receipts.canonical_json import MAX_DEPTH, CanonicalJsonError, canonical_json
from steadyloop._receipts.decision import tool_call_args_hash

# -- helpers -------------------------------------------------------------------------


def strictly_equal(a: Any, b: Any) -> bool:
    """Equal *and* of the same types all the way down; -0.0 is not 0.0, 1 is not 1.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strictly_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def nested_lists(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


# Every code point, lone surrogates included: json.loads('"\\ud800"') produces one.
any_text = st.text(st.characters(exclude_categories=()), max_size=12)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_scalars = st.none() | st.booleans() | st.integers() | finite_floats | any_text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=25,
)


# -- spelling --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({}, "{}"),
        ([], "[]"),
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ({"z": {"y": 1, "x": [3, {"d": 0, "c": 0}]}}, '{"z":{"x":[3,{"c":0,"d":0}],"y":1}}'),
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (1, "1"),
        (-0, "0"),
        (1.0, "1.0"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (0.1, "0.1"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (1.5e-7, "1.5e-07"),
        (1e2, "100.0"),
        (2**53 + 1, "9007199254740993"),
        (-(2**70), "-1180591620717411303424"),
        ("", '""'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("\n\t\r\b\f\x01", '"\\n\\t\\r\\b\\f\\u0001"'),
        ("\x7f", '"\\u007f"'),
        ("é", '"\\u00e9"'),
        ("😀", '"\\ud83d\\ude00"'),
        ("\ud800", '"\\ud800"'),
        ("e\u0301", '"e\\u0301"'),  # not normalized to é
    ],
)
def test_spelling(value: Any, text: str) -> None:
    assert canonical_json(value) == text


def test_keys_sort_by_code_point_not_utf16() -> None:
    # U+FFFF < U+1F600 by code point; in UTF-16 units 0xD83D < 0xFFFF. One fixed order.
    value = {"😀": 0, "\uffff": 0, "b": 0, "B": 0, "a": 0, "é": 0, "": 0}
    assert canonical_json(value) == (
        '{"":0,"B":0,"a":0,"b":0,"\\u00e9":0,"\\uffff":0,"\\ud83d\\ude00":0}'
    )


def test_output_is_ascii_so_hashing_never_fails() -> None:
    text = canonical_json({"\ud800": ["\udfff", "😀", "é"]})
    assert text.isascii()
    assert tool_call_args_hash({"\ud800": ["\udfff", "😀", "é"]}) == (
        hashlib.sha256(text.encode("ascii")).hexdigest()
    )


def test_args_hash_is_sha256_of_the_canonical_text() -> None:
    assert tool_call_args_hash({"b": [1.0, True], "a": 1}) == (
        hashlib.sha256(b'{"a":1,"b":[1.0,true]}').hexdigest()
    )


def test_distinct_values_have_distinct_texts() -> None:
    samples: list[Any] = [
        {"a": 1},
        {"a": "1"},
        {"a": True},
        {"a": 1.5},
        {"a": 1.0},
        {"a": 0},
        {"a": 0.0},
        {"a": -0.0},
        {"a": False},
        {"a": None},
        {"a": "null"},
        {"a": "true"},
        {"a": [1]},
        {"a": {}},
        {"a": []},
        {"a": ""},
        {"1": "a"},
        {"a": 2**53},
        {"a": 2**53 + 1},
        {"a": float(2**53)},
        {"a ": 1},
        {"A": 1},
        {"e\u0301": 1},
        {"é": 1},
        [{"a": 1}],
        ["a", 1],
        ["a1"],
    ]
    texts = [canonical_json(v) for v in samples]
    hashes = [tool_call_args_hash(v) for v in samples]
    assert len(set(texts)) == len(samples)
    assert len(set(hashes)) == len(samples)


def test_shared_subvalues_are_not_cycles() -> None:
    shared: list[Any] = [1, {"x": 2}]
    diamond = {"a": shared, "b": shared, "c": [shared, shared]}
    assert canonical_json(diamond) == (
        '{"a":[1,{"x":2}],"b":[1,{"x":2}],"c":[[1,{"x":2}],[1,{"x":2}]]}'
    )


def test_input_is_not_modified() -> None:
    value: dict[str, Any] = {"b": [3, 1], "a": {"d": 1, "c": 2}}
    before = json.dumps(value)
    canonical_json(value)
    assert json.dumps(value) == before


# -- refusals --------------------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int


class Model(pydantic.BaseModel):
    x: int


class Colour(enum.IntEnum):
    RED = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class TaggedStr(str):
    pass


class MyFloat(float):
    pass


class MyList(list[int]):
    pass


REFUSED: list[tuple[str, Any, str]] = [
    ("nan", float("nan"), "NaN"),
    ("inf", float("inf"), "infinities"),
    ("-inf", float("-inf"), "infinities"),
    ("int key", {1: "x"}, "key must be a string, got 1 (int)"),
    ("bool key", {True: 1}, "got True (bool)"),
    ("None key", {None: 1}, "got None (NoneType)"),
    ("float key", {1.5: 1}, "(float)"),
    ("tuple key", {(1,): 1}, "(tuple)"),
    ("mixed keys", {"a": 1, 2: 1}, "got 2 (int)"),
    ("set", {1, 2}, "set is not a JSON value"),
    ("empty set", set(), "set is not a JSON value"),
    ("frozenset", frozenset({"a"}), "frozenset is not a JSON value"),
    ("bytes", b"x", "bytes is not a JSON value"),
    ("bytearray", bytearray(b"x"), "bytearray is not a JSON value"),
    ("memoryview", memoryview(b"x"), "memoryview is not a JSON value"),
    ("tuple", (1, 2), "a tuple is not a JSON value"),
    ("empty tuple", (), "a tuple is not a JSON value"),
    ("object", object(), "builtins.object is not a JSON value"),
    ("decimal", decimal.Decimal("1.0"), "decimal.Decimal is not a JSON value"),
    ("datetime", datetime.datetime(2026, 1, 1), "datetime.datetime is not a JSON value"),
    ("date", datetime.date(2026, 1, 1), "datetime.date is not a JSON value"),
    ("dataclass", Point(1), "Point is not a JSON value"),
    ("pydantic model", Model(x=1), "Model is not a JSON value"),
    ("complex", 1j, "complex is not a JSON value"),
    ("OrderedDict", collections.OrderedDict(a=1), "subclass of dict"),
    ("defaultdict", collections.defaultdict(int), "subclass of dict"),
    ("IntEnum", Colour.RED, "subclass of int"),
    ("StrEnum", Mode.FAST, "subclass of str"),
    ("str subclass", TaggedStr("x"), "subclass of str"),
    ("float subclass", MyFloat(1.0), "subclass of float"),
    ("list subclass", MyList([1]), "subclass of list"),
    ("function", len, "is not a JSON value"),
]


@pytest.mark.parametrize(("name", "bad", "reason"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_at_root_and_nested(name: str, bad: Any, reason: str) -> None:
    with pytest.raises(CanonicalJsonError) as root:
        canonical_json(bad)
    assert root.value.path == "$"
    assert reason in root.value.reason
    with pytest.raises(CanonicalJsonError) as nested:
        canonical_json({"z": 1, "a": [True, bad], "b": 2})
    assert nested.value.path == "$.a[1]"
    assert reason in nested.value.reason
    assert str(nested.value).startswith("$.a[1]: ")
    with pytest.raises(CanonicalJsonError):
        tool_call_args_hash({"x": bad})


def test_refusal_is_a_value_error() -> None:
    assert issubclass(CanonicalJsonError, ValueError)


def test_path_spells_awkward_keys_as_json() -> None:
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json({"b c": {'q"': [0, {"_ok1": [float("nan")]}]}})
    assert error.value.path == '$["b c"]["q\\""][1]._ok1[0]'


def list_in_itself() -> Any:
    a: list[Any] = []
    a.append(a)
    return a


def dict_in_itself() -> Any:
    d: dict[str, Any] = {}
    d["k"] = d
    return d


def through_a_list_and_a_dict() -> Any:
    d: dict[str, Any] = {}
    d["k"] = [1, {"back": d}]
    return d


@pytest.mark.parametrize("make_cycle", [list_in_itself, dict_in_itself, through_a_list_and_a_dict])
def test_cycles_are_refused(make_cycle: Any) -> None:
    with pytest.raises(CanonicalJsonError, match="cycle"):
        canonical_json(make_cycle())
    with pytest.raises(CanonicalJsonError, match="cycle"):
        canonical_json({"a": [make_cycle()]})


def test_cycle_path_names_the_reentry() -> None:
    inner: dict[str, Any] = {}
    outer = {"a": [0, inner]}
    inner["back"] = outer
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json(outer)
    assert error.value.path == "$.a[1].back"


@pytest.mark.parametrize("limit", [1, 2, 7, 50])
def test_depth_bound_is_exact(limit: int) -> None:
    assert canonical_json(nested_lists(limit), max_depth=limit) == "[" * limit + "]" * limit
    with pytest.raises(CanonicalJsonError, match=f"deeper than {limit} levels"):
        canonical_json(nested_lists(limit + 1), max_depth=limit)


def test_default_depth_is_stored_by_everything_that_stores_it() -> None:
    # The one depth limit sits below pydantic's own: the deepest value canonical_json
    # accepts, as progress in a receipt (validation) carried across continue-as-new and
    # decoded by the data converter (jiter refuses 200 levels), round-trips intact.
    from datetime import UTC, datetime

    from temporalio.contrib.pydantic import pydantic_data_converter

    from steadyloop._receipts.decision import Receipt
    from steadyloop._receipts.ledger import ReceiptLedger

    for deepest in (nested_lists(MAX_DEPTH - 1), nested_dicts(MAX_DEPTH - 1)):
        trail = [deepest]
        canonical_json(trail)  # MAX_DEPTH containers with the trail: accepted
        receipt = Receipt(
            status="running",
            attempt=1,
            lease_expires_at=datetime(2026, 1, 1, tzinfo=UTC),
            recorded_progress=trail,
        )
        ledger = ReceiptLedger(receipts={"k": receipt})
        carried = {"input": {"carried": {"receipts": ledger.model_dump(mode="json")}}}
        converter = pydantic_data_converter.payload_converter
        (back,) = converter.from_payloads(converter.to_payloads([carried]), [dict[str, Any]])
        stored = back["input"]["carried"]["receipts"]
        assert ReceiptLedger.model_validate(stored) == ledger


def nested_dicts(depth: int) -> dict[str, Any]:
    """`depth` objects, each the only value of the one above."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 600, 1001, 2500, 200_000])
def test_deep_objects_are_refused_like_deep_arrays(depth: int) -> None:
    assert canonical_json(nested_dicts(MAX_DEPTH)).startswith('{"a":' * (MAX_DEPTH - 1))
    for deep in (nested_dicts(depth), nested_lists(depth)):
        with pytest.raises(CanonicalJsonError, match=f"deeper than {MAX_DEPTH} levels"):
            canonical_json(deep)


def test_objects_and_arrays_count_depth_alike() -> None:
    mixed: Any = {}
    for level in range(MAX_DEPTH - 1):
        mixed = [mixed] if level % 2 else {"a": mixed}
    canonical_json(mixed)
    with pytest.raises(CanonicalJsonError, match=f"deeper than {MAX_DEPTH} levels"):
        canonical_json({"a": mixed})
    with pytest.raises(CanonicalJsonError, match=f"deeper than {MAX_DEPTH} levels"):
        canonical_json([mixed])


def test_very_deep_nesting_is_a_clear_error_not_a_recursion_error() -> None:
    deep = nested_lists(200_000)
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json(deep)
    assert f"deeper than {MAX_DEPTH} levels" in error.value.reason
    assert "more levels" in error.value.path  # elided, not 1000 segments
    assert len(error.value.path) < 200


def test_integer_longer_than_the_interpreter_spells_is_refused() -> None:
    limit = sys.get_int_max_str_digits()
    assert limit > 0
    exactly = 10 ** (limit - 1)  # `limit` digits: spelled
    assert canonical_json(exactly) == "1" + "0" * (limit - 1)
    with pytest.raises(CanonicalJsonError, match="integer too long"):
        canonical_json({"n": [10**limit]})


# -- properties ------------------------------------------------------------------------


def reorder(value: Any, draw: Any) -> Any:
    """The same value with every object's insertion order permuted."""
    if type(value) is dict:
        keys = draw(st.permutations(list(value)))
        return {k: reorder(value[k], draw) for k in keys}
    if type(value) is list:
        return [reorder(v, draw) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(value=json_values, data=st.data())
def test_key_order_and_whitespace_do_not_change_the_hash(value: Any, data: st.DataObject) -> None:
    shuffled = reorder(value, data.draw)
    text = json.dumps(
        shuffled,
        indent=data.draw(st.none() | st.integers(0, 4) | st.just("\t")),
        separators=data.draw(st.sampled_from([None, (",", ":"), (" ,  ", " : ")])),
        ensure_ascii=data.draw(st.booleans()),
    )
    reparsed = json.loads(text)
    assert canonical_json(reparsed) == canonical_json(value)
    assert tool_call_args_hash(reparsed) == tool_call_args_hash(value)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_round_trip_is_exact_and_the_spelling_is_json_dumps(value: Any) -> None:
    text = canonical_json(value)
    assert text.isascii()
    # Strict equality (types, the sign of zero): with it, the round trip also proves
    # that distinct values never share a text.
    assert strictly_equal(json.loads(text), value)
    assert canonical_json(json.loads(text)) == text
    assert text == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


@settings(max_examples=300, deadline=None)
@given(a=json_values, b=json_values)
def test_texts_equal_exactly_when_values_strictly_equal(a: Any, b: Any) -> None:
    assert (canonical_json(a) == canonical_json(b)) == strictly_equal(a, b)


@given(n=st.integers(-(2**1000), 2**1000))
def test_an_integer_never_collides_with_its_float_or_a_bool(n: int) -> None:
    spellings = {canonical_json(n), canonical_json(float(n)), canonical_json(str(n))}
    assert len(spellings) == 3
    if n in (0, 1):
        assert canonical_json(bool(n)) not in spellings


refused_leaves = (
    st.sampled_from([r[1] for r in REFUSED])
    | st.sampled_from([math.nan, math.inf, -math.inf])
    | st.tuples(json_scalars)
    | st.sets(st.integers(), max_size=3)
    | st.binary(max_size=4)
    | st.dictionaries(
        st.integers() | st.booleans() | st.none() | finite_floats, json_scalars, min_size=1
    )
    | st.decimals(allow_nan=False)
    | st.datetimes()
)
identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True)


@settings(max_examples=400, deadline=None)
@given(bad=refused_leaves, data=st.data())
def test_every_refused_value_raises_wherever_it_sits(bad: Any, data: st.DataObject) -> None:
    value = bad
    segments: list[str] = []
    for _ in range(data.draw(st.integers(0, 6))):
        if data.draw(st.booleans()):
            siblings = data.draw(st.lists(json_values, max_size=3))
            index = data.draw(st.integers(0, len(siblings)))
            value = [*siblings[:index], value, *siblings[index:]]
            segments.append(f"[{index}]")
        else:
            key = data.draw(identifiers)
            others = data.draw(st.dictionaries(any_text, json_values, max_size=3))
            others.pop(key, None)
            value = {**others, key: value}
            segments.append(f".{key}")
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json(value)
    assert error.value.path == "$" + "".join(reversed(segments))
    with pytest.raises(CanonicalJsonError):
        tool_call_args_hash(value)
