"""When a run continues-as-new (`steadyloop._history.budget`)."""

from __future__ import annotations

import pytest

from steadyloop._history.budget import (
    HistoryReading,
    HistoryThresholds,
    continue_as_new_reason,
)

LIMITS = HistoryThresholds(turns=50, events=8_000, bytes=8_000_000, updates=1_500)


def reading(**values: int | bool) -> HistoryReading:
    base: dict[str, int | bool] = {
        "turns": 3,
        "events": 100,
        "bytes": 10_000,
        "updates": 0,
        "suggested": False,
    }
    return HistoryReading(**{**base, **values})  # type: ignore[arg-type]


def test_below_every_threshold_the_run_goes_on() -> None:
    assert continue_as_new_reason(reading(), LIMITS) is None
    just_below = reading(turns=49, events=7_999, bytes=7_999_999, updates=1_499)
    assert continue_as_new_reason(just_below, LIMITS) is None


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("turns", 50, "turns"),
        ("events", 8_000, "events"),
        ("bytes", 8_000_000, "bytes"),
        ("updates", 1_500, "updates"),
        ("suggested", True, "suggested"),
    ],
)
def test_each_threshold_reached_hands_over_and_says_why(
    field: str, value: int | bool, reason: str
) -> None:
    assert continue_as_new_reason(reading(**{field: value}), LIMITS) == reason


def test_a_bound_set_to_none_is_off() -> None:
    huge = reading(turns=10**6, events=10**6, bytes=10**9, updates=10**6)
    assert continue_as_new_reason(huge, HistoryThresholds()) is None


def test_never_before_the_first_turn_of_an_execution() -> None:
    """A carried state alone may be past a threshold; handing over again at once would
    loop without progress."""
    past = reading(turns=0, events=10**6, bytes=10**9, updates=10**6, suggested=True)
    assert continue_as_new_reason(past, LIMITS) is None
