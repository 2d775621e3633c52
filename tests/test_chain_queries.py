"""Quoting a value into a visibility query (`steadyloop._chains.queries`): a value no query
can match exactly is refused, never mangled into a query that silently matches nothing."""

from __future__ import annotations

import pytest

from steadyloop._chains.queries import UnquotableValue, quotable, quoted


@pytest.mark.parametrize("value", ["it's", 'say "hi"', "back\\slash", "line\nbreak", "nul\x00"])
def test_a_value_no_query_can_match_exactly_is_refused_not_mangled(value: str) -> None:
    assert not quotable(value)
    with pytest.raises(UnquotableValue):
        quoted(value)


@pytest.mark.parametrize("value", ["plain", "sp ace", "ünï-ç", "pct%_x", "pi|pe", "semi;--x"])
def test_other_values_are_quoted_as_written(value: str) -> None:
    assert quoted(value) == f"'{value}'"
