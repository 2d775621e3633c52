"""The disposition table, row by row, and every rule it can name."""

from __future__ import annotations

import pytest

from steadyloop._routing.disposition import (
    RETRIED_WHEN_LAST,
    ROWS,
    RULES,
    AttemptContext,
    Disposition,
    Row,
    failure_disposition,
    failure_row,
)
from steadyloop._routing.route_plan import Backoff
from steadyloop._routing.taxonomy import StreamFailure

# One failure per row, as the classifier would report it.
EXAMPLES: dict[Row, StreamFailure] = {
    "aborted": StreamFailure(kind="aborted"),
    "configuration": StreamFailure(kind="configuration", message="no key"),
    "context_length": StreamFailure(kind="http_status", status=400, category="context_length"),
    "unsupported_parameter": StreamFailure(
        kind="http_status",
        status=400,
        category="request_rejected",
        unsupported_parameter="parallel_tool_calls",
    ),
    "request_rejected": StreamFailure(kind="http_status", status=400, category="request_rejected"),
    "content_filter": StreamFailure(kind="http_status", status=400, category="content_filter"),
    "not_found": StreamFailure(kind="http_status", status=404, category="not_found"),
    "auth": StreamFailure(kind="http_status", status=401, category="auth"),
    "quota": StreamFailure(kind="http_status", status=429, category="quota"),
    "rate_limit": StreamFailure(kind="http_status", status=429, category="rate_limit"),
    "server_error": StreamFailure(kind="http_status", status=500, category="server_error"),
    "transient": StreamFailure(kind="http_status", status=408, category="transient"),
    "unreachable": StreamFailure(kind="network", network_reason="refused"),
    "interrupted": StreamFailure(kind="network", network_reason="reset"),
    "stall_before_first_token": StreamFailure(kind="stall", stall_phase="before_first_token"),
    "stall_mid_stream": StreamFailure(kind="stall", stall_phase="between_chunks"),
    "protocol": StreamFailure(kind="not_sse"),
    "lost": StreamFailure(kind="lost"),
    "completion_defect": StreamFailure(kind="completion_defect"),
    "other": StreamFailure(kind="http_status", status=307, category="other"),
}

# The table as the issue states it: (action on a first attempt, breaker records).
EXPECTED: dict[Row, tuple[str, bool]] = {
    "aborted": ("stop", False),
    "configuration": ("traverse", False),
    "context_length": ("stop", False),
    "unsupported_parameter": ("retry", False),
    "request_rejected": ("traverse", False),
    "content_filter": ("traverse", False),
    "not_found": ("traverse", False),
    "auth": ("traverse", True),
    "quota": ("traverse", True),
    "rate_limit": ("retry", True),
    "server_error": ("retry", True),
    "transient": ("retry", True),
    "unreachable": ("traverse", True),
    "interrupted": ("retry", True),
    "stall_before_first_token": ("traverse", True),
    "stall_mid_stream": ("retry", True),
    "protocol": ("traverse", True),
    "lost": ("retry", False),
    "completion_defect": ("retry", False),
    "other": ("traverse", True),
}

FIRST = AttemptContext(attempt=1, attempts=3, backoff=Backoff(initial_s=1, multiplier=2, max_s=30))


def test_every_row_has_an_example_and_an_expectation() -> None:
    assert set(EXAMPLES) == set(EXPECTED) == set(ROWS)


@pytest.mark.parametrize("row", list(ROWS))
def test_each_row_on_a_first_attempt(row: Row) -> None:
    facts = EXAMPLES[row]
    assert failure_row(facts) == row

    decided = failure_disposition(facts, FIRST)

    assert (decided.action, decided.record_failure) == EXPECTED[row]
    assert decided.rule == row


@pytest.mark.parametrize("row", list(ROWS))
def test_produced_output_is_never_retried_nor_traversed(row: Row) -> None:
    facts = EXAMPLES[row].model_copy(update={"produced_output": True})

    decided = failure_disposition(facts, FIRST)

    assert decided.action == "stop"
    assert decided.rule == "produced_output"
    assert decided.delay_s == 0 and decided.drop_parameter is None
    # A late failure still counts against the endpoint when the row says it is at fault.
    assert decided.record_failure == EXPECTED[row][1]


def test_a_stall_after_output_was_forwarded_stops_and_records() -> None:
    late = StreamFailure(kind="stall", stall_phase="between_chunks", produced_output=True)
    decided = failure_disposition(late, FIRST)
    assert (decided.action, decided.rule, decided.record_failure) == (
        "stop",
        "produced_output",
        True,
    )


@pytest.mark.parametrize(
    "row",
    [
        row
        for row, (action, _, _) in ROWS.items()
        if action == "retry" and row != "unsupported_parameter"  # (spends no attempt)
    ],
)
def test_a_retry_row_traverses_when_the_candidate_has_no_attempt_left(row: Row) -> None:
    last = FIRST.model_copy(update={"attempt": 3})
    decided = failure_disposition(EXAMPLES[row], last)
    assert (decided.action, decided.rule) == ("traverse", f"{row}_attempts_spent")
    assert decided.record_failure == EXPECTED[row][1]


def test_dropping_a_parameter_spends_no_attempt_and_does_not_wait() -> None:
    last = FIRST.model_copy(update={"attempt": 3})
    decided = failure_disposition(EXAMPLES["unsupported_parameter"], last)
    assert decided == Disposition(
        action="retry",
        rule="unsupported_parameter",
        reason=decided.reason,
        drop_parameter="parallel_tool_calls",
    )


def test_a_parameter_already_dropped_is_a_plain_rejection() -> None:
    context = FIRST.model_copy(update={"omitted": ["parallel_tool_calls"]})
    decided = failure_disposition(EXAMPLES["unsupported_parameter"], context)
    assert (decided.action, decided.rule, decided.record_failure) == (
        "traverse",
        "request_rejected",
        False,
    )


@pytest.mark.parametrize(
    ("attempt", "retry_after", "delay"),
    [
        (1, None, 1.0),  # the backoff
        (2, None, 2.0),
        (1, 7.0, 7.0),  # Retry-After longer than the backoff: honoured
        (2, 0.5, 2.0),  # Retry-After shorter: a floor, not a replacement
        (1, 60.0, 60.0),  # exactly the cap still waits
    ],
)
def test_the_delay_honours_retry_after(
    attempt: int, retry_after: float | None, delay: float
) -> None:
    facts = EXAMPLES["rate_limit"].model_copy(update={"retry_after_s": retry_after})
    decided = failure_disposition(facts, FIRST.model_copy(update={"attempt": attempt}))
    assert (decided.action, decided.delay_s) == ("retry", delay)


def test_a_retry_after_longer_than_the_candidate_waits_traverses() -> None:
    facts = EXAMPLES["rate_limit"].model_copy(update={"retry_after_s": 7200.0})
    decided = failure_disposition(facts, FIRST)
    assert (decided.action, decided.rule, decided.record_failure) == (
        "traverse",
        "rate_limit_retry_after_too_long",
        True,
    )


def test_the_backoff_is_capped() -> None:
    context = AttemptContext(
        attempt=9, attempts=10, backoff=Backoff(initial_s=1, multiplier=3, max_s=5)
    )
    assert failure_disposition(EXAMPLES["server_error"], context).delay_s == 5.0


def test_rows_that_retry_at_once() -> None:
    for row in ("completion_defect", "unsupported_parameter"):
        assert failure_disposition(EXAMPLES[row], FIRST).delay_s == 0.0


def test_context_length_goes_on_only_to_a_larger_window() -> None:
    facts = EXAMPLES["context_length"]
    assert failure_disposition(facts, FIRST).action == "stop"
    larger = FIRST.model_copy(update={"larger_context_available": True})
    decided = failure_disposition(facts, larger)
    assert (decided.action, decided.rule, decided.record_failure) == (
        "traverse",
        "context_length_larger_window",
        False,
    )


@pytest.mark.parametrize("row", sorted(RETRIED_WHEN_LAST))
def test_a_momentary_failure_retries_the_last_candidate_until_its_attempts_are_spent(
    row: Row,
) -> None:
    """With nowhere to traverse to, a refused connection or a silent start is tried again
    (a run with one endpoint must not fail on the first refusal of a restart)."""
    last = FIRST.model_copy(update={"later_candidates": False})
    first = failure_disposition(EXAMPLES[row], last)
    second = failure_disposition(EXAMPLES[row], last.model_copy(update={"attempt": 2}))
    spent = failure_disposition(EXAMPLES[row], last.model_copy(update={"attempt": 3}))
    assert (first.action, first.rule, first.delay_s) == ("retry", f"{row}_last_candidate", 1.0)
    assert (second.action, second.delay_s) == ("retry", 2.0)
    assert (spent.action, spent.rule) == ("traverse", f"{row}_attempts_spent")
    assert first.record_failure and spent.record_failure  # still the endpoint's failure


@pytest.mark.parametrize(
    "row",
    [r for r, (act, _, _) in ROWS.items() if act == "traverse" and r not in RETRIED_WHEN_LAST],
)
def test_other_traverse_rows_do_not_retry_the_last_candidate(row: Row) -> None:
    """A rejected request, a bad key or a spent quota fails the same way every time."""
    last = FIRST.model_copy(update={"later_candidates": False})
    assert failure_disposition(EXAMPLES[row], last).action == "traverse"


def test_a_momentary_failure_after_output_still_stops_on_the_last_candidate() -> None:
    facts = EXAMPLES["stall_before_first_token"].model_copy(update={"produced_output": True})
    last = FIRST.model_copy(update={"later_candidates": False})
    assert failure_disposition(facts, last).rule == "produced_output"


def _example_for(rule: str) -> tuple[StreamFailure, AttemptContext]:
    """Facts and a context that make the table name `rule`."""
    last = FIRST.model_copy(update={"later_candidates": False})
    if rule.endswith("_last_candidate"):
        return EXAMPLES[rule.removesuffix("_last_candidate")], last  # type: ignore[index]
    row = rule.removesuffix("_attempts_spent")
    if rule.endswith("_attempts_spent") and row in RETRIED_WHEN_LAST:
        return EXAMPLES[row], last.model_copy(update={"attempt": 3})
    if rule == "produced_output":
        return EXAMPLES["server_error"].model_copy(update={"produced_output": True}), FIRST
    if rule == "context_length_larger_window":
        return EXAMPLES["context_length"], FIRST.model_copy(
            update={"larger_context_available": True}
        )
    if rule.endswith("_attempts_spent"):
        return EXAMPLES[rule.removesuffix("_attempts_spent")], FIRST.model_copy(  # type: ignore[index]
            update={"attempt": 3}
        )
    if rule.endswith("_retry_after_too_long"):
        row = rule.removesuffix("_retry_after_too_long")
        return EXAMPLES[row].model_copy(update={"retry_after_s": 999.0}), FIRST  # type: ignore[index]
    return EXAMPLES[rule], FIRST  # type: ignore[index]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_rule_is_reachable(rule: str) -> None:
    facts, context = _example_for(rule)
    assert failure_disposition(facts, context).rule == rule


def test_the_table_is_deterministic() -> None:
    for row, facts in EXAMPLES.items():
        first = failure_disposition(facts, FIRST)
        assert all(failure_disposition(facts, FIRST) == first for _ in range(3)), row
