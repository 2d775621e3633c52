"""The breaker's state machine: closed, open, half-open, over workflow time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from steadyloop._routing.circuit_breaker import (
    BreakerPolicy,
    BreakerState,
    admit_probe,
    breaker_phase,
    record_failure,
    record_success,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = BreakerPolicy(failure_threshold=3, window_s=60, cool_off_s=30, probe_lease_s=10)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def failures(*times: float, state: BreakerState | None = None) -> BreakerState:
    state = state or BreakerState()
    for t in times:
        state = record_failure(state, POLICY, at(t), f"failure at {t}")
    return state


def test_it_opens_at_the_threshold_within_the_window() -> None:
    assert breaker_phase(failures(0, 10), at(11)) == "closed"
    state = failures(0, 10, 20)
    assert breaker_phase(state, at(20)) == "open"
    assert state.open_until == at(50)
    assert state.opened_count == 1 and state.failures_total == 3
    assert state.last_failure == "failure at 20"


def test_failures_outside_the_window_do_not_count() -> None:
    state = failures(0, 10, 61)  # the first has left the window by t=61
    assert breaker_phase(state, at(61)) == "closed"
    assert state.recent_failures == [at(10), at(61)]


def test_a_failure_exactly_one_window_old_has_left_it() -> None:
    assert breaker_phase(failures(0, 30, 60), at(60)) == "closed"
    assert breaker_phase(failures(0, 30, 59.999), at(60)) == "open"


def test_successes_while_closed_do_not_erase_failures() -> None:
    """A flapping endpoint (fail, succeed, fail, ...) still opens."""
    state = failures(0)
    state = record_success(state, at(1))
    state = failures(2, state=state)
    state = record_success(state, at(3))
    state = failures(4, state=state)
    assert breaker_phase(state, at(4)) == "open"


def test_open_refuses_then_half_open_admits_exactly_one_probe() -> None:
    state = failures(0, 1, 2)  # open until 32
    state, granted = admit_probe(state, POLICY, at(31))
    assert not granted and breaker_phase(state, at(31)) == "open"

    assert breaker_phase(state, at(32)) == "half_open"
    state, first = admit_probe(state, POLICY, at(32))
    state, second = admit_probe(state, POLICY, at(33))
    assert (first, second) == (True, False)


def test_a_probe_that_never_reports_frees_the_slot_after_its_lease() -> None:
    state, _ = admit_probe(failures(0, 1, 2), POLICY, at(40))  # lease until 50
    assert admit_probe(state, POLICY, at(49.9))[1] is False
    assert admit_probe(state, POLICY, at(50))[1] is True


def test_the_probe_succeeding_closes_the_breaker_with_a_clean_window() -> None:
    state, _ = admit_probe(failures(0, 1, 2), POLICY, at(40))
    state = record_success(state, at(41))
    assert breaker_phase(state, at(41)) == "closed"
    assert state.recent_failures == [] and state.probe_until is None
    assert admit_probe(state, POLICY, at(41)) == (state, True)
    # One new failure does not reopen it: the window starts again.
    assert breaker_phase(failures(42, state=state), at(42)) == "closed"


def test_the_probe_failing_reopens_for_another_cool_off() -> None:
    state, _ = admit_probe(failures(0, 1, 2), POLICY, at(40))
    state = failures(41, state=state)
    assert breaker_phase(state, at(41)) == "open"
    assert state.open_until == at(71)
    assert state.opened_count == 2
    assert state.probe_until is None


def test_a_straggler_failure_while_open_does_not_extend_the_cool_off() -> None:
    state = failures(0, 1, 2)
    later = failures(20, state=state)
    assert later.open_until == state.open_until
    assert later.failures_total == 4


def test_a_straggler_success_while_open_does_not_close_it() -> None:
    state = failures(0, 1, 2)
    assert record_success(state, at(10)) == state


def test_a_late_failure_after_output_is_recorded_like_any_other() -> None:
    """The breaker has no notion of produced output: the table decides what counts, and a
    stall after output was forwarded counts (the endpoint really failed)."""
    assert breaker_phase(failures(0, 1, 2), at(2)) == "open"


@given(st.lists(st.floats(min_value=0, max_value=600, allow_nan=False), max_size=30))
def test_open_only_after_threshold_failures_within_one_window(times: list[float]) -> None:
    """Property: whenever the breaker first opens, `threshold` failures fell within one
    window ending at that moment."""
    state = BreakerState()
    for t in sorted(times):
        before = breaker_phase(state, at(t))
        state = record_failure(state, POLICY, at(t))
        if before == "closed" and breaker_phase(state, at(t)) == "open":
            recent = [u for u in times if t - POLICY.window_s < u <= t]
            assert len(recent) >= POLICY.failure_threshold
