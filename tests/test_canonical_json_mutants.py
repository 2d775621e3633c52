"""Canonical JSON: what mutation testing found no test noticed.

Every depth test nested lists, so an object walk that forgot to count its children
(`depth - 1`) let a dict of any depth through, to a `RecursionError` further on. The
refusal text reaches the model ("Invalid tool arguments: ..."), so its path and reason
are pinned where they say something: which value, and why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from steadyloop._receipts.canonical_json import MAX_DEPTH, CanonicalJsonError, canonical_json


def nested_lists(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_dicts(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def nested_alternately(depth: int) -> Any:
    value: Any = {}
    for level in range(depth - 1):
        value = [value] if level % 2 else {"k": value}
    return value


NESTINGS: list[Callable[[int], Any]] = [nested_lists, nested_dicts, nested_alternately]


def accepted(value: Any) -> bool:
    try:
        canonical_json(value)
    except CanonicalJsonError:
        return False
    return True


@pytest.mark.parametrize("nest", NESTINGS, ids=lambda n: n.__name__)
def test_objects_count_toward_the_depth_limit_like_lists(nest: Callable[[int], Any]) -> None:
    # A known repro: a 1001-deep dict accepted where a 2500-deep one raises
    # RecursionError. Objects and lists nest alike: MAX_DEPTH containers are accepted,
    # one more is refused, whichever kind they are.
    assert accepted(nest(MAX_DEPTH))
    assert not accepted(nest(MAX_DEPTH + 1))
    for depth in (MAX_DEPTH // 2 + 1, MAX_DEPTH - 1):
        assert accepted(nest(depth)) == accepted(nested_lists(depth))


@pytest.mark.parametrize("nest", NESTINGS, ids=lambda n: n.__name__)
def test_a_very_deep_object_is_a_depth_refusal_not_a_recursion_error(
    nest: Callable[[int], Any],
) -> None:
    depth = max(2500, 3 * MAX_DEPTH)
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json(nest(depth))
    assert "deeper than" in error.value.reason


def test_a_dict_at_the_depth_limit_is_spelled_in_full() -> None:
    text = canonical_json(nested_dicts(MAX_DEPTH))
    assert text == '{"k":' * (MAX_DEPTH - 1) + "{}" + "}" * (MAX_DEPTH - 1)


# -- the path a refusal names ------------------------------------------------------------


def nan_under(keys: list[str]) -> Any:
    value: Any = float("nan")
    for key in reversed(keys):
        value = {key: value}
    return value


def refusal_path(value: Any) -> str:
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json(value)
    return error.value.path


def test_a_path_of_sixteen_segments_is_shown_whole() -> None:
    keys = [f"k{n}" for n in range(1, 17)]
    assert refusal_path(nan_under(keys)) == "$" + "".join(f".{k}" for k in keys)


@pytest.mark.parametrize("length", [17, 24, 25, 40])
def test_a_longer_path_shows_eight_segments_at_each_end_and_counts_the_rest(length: int) -> None:
    keys = [f"k{n}" for n in range(1, length + 1)]
    head = "".join(f".{k}" for k in keys[:8])
    tail = "".join(f".{k}" for k in keys[-8:])
    assert refusal_path(nan_under(keys)) == f"${head}...({length - 16} more levels)...{tail}"


def test_a_depth_refusal_path_counts_the_levels_it_elides() -> None:
    path = refusal_path(nested_dicts(MAX_DEPTH + 5))
    # The refused container sits under MAX_DEPTH keys; 16 are shown.
    assert path == "$" + ".k" * 8 + f"...({MAX_DEPTH - 16} more levels)..." + ".k" * 8


# -- the reason a refusal gives ----------------------------------------------------------


def test_a_cycle_is_called_a_cycle() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json({"a": looped})
    assert (error.value.path, error.value.reason) == (
        "$.a[0]",
        "a cycle: this container contains itself",
    )


def test_a_non_string_key_refusal_says_why_it_matters() -> None:
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json({"a": {1: "x"}})
    assert error.value.path == "$.a"
    assert error.value.reason.endswith(
        "got 1 (int); JSON would silently turn it into a string and collide"
    )


def test_a_tuple_refusal_says_it_is_not_json() -> None:
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json({"a": (1, 2)})
    assert error.value.reason.startswith("a tuple is not a JSON value (a JSON array is a list)")


def test_an_integer_too_long_to_spell_names_where_it_is() -> None:
    with pytest.raises(CanonicalJsonError) as error:
        canonical_json({"n": [0, 10 ** sys.get_int_max_str_digits()]})
    assert error.value.path == "$.n[1]"
    assert error.value.reason.startswith("an integer too long to spell: ")


# ---------------------------------------------------------------- utf8=True (stored values)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": ["ok", "x\ud800"]}, "$.a[1]"),
        ({"a": {"b": {"\udc00k": 1}}}, '$.a.b["\\udc00k"]'),
        (["\ud83d"], "$[0]"),
    ],
)
def test_a_lone_surrogate_in_a_stored_value_is_refused_where_it_is(value: Any, path: str) -> None:
    # The path is how a tool author finds the step identifier that cannot be stored.
    with pytest.raises(CanonicalJsonError) as caught:
        canonical_json(value, utf8=True)
    assert caught.value.path == path
    assert "lone surrogate" in caught.value.reason
    assert caught.value.reason.endswith("has no UTF-8 spelling, so this value cannot be stored")
    assert canonical_json(value).isascii()  # without utf8=True it has a text (an escape)
