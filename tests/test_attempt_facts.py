"""What the workflow reads from a failed model activity: the failure's facts, and whether
the attempt had already forwarded output (from the error's details, or from the last
heartbeat of an attempt whose worker died)."""

from __future__ import annotations

from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)
from wire_activity_harness import activity_error

from steadyloop._activities.model_stream import StreamProgress, failure_to_application_error
from steadyloop._routing.disposition import AttemptContext, failure_disposition
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._workflows.routed_turn import facts_from_activity_error
from steadyloop.errors import MISSING_API_KEY


def test_a_classified_failure_as_the_model_activity_raises_it() -> None:
    failure = StreamFailure(
        kind="http_status",
        message="Unsupported parameter: 'parallel_tool_calls' is not supported with this model.",
        status=400,
        provider_code="unsupported_parameter",
        parameter="parallel_tool_calls",
    )
    raised = failure_to_application_error(failure)
    # What the workflow receives: details decoded to plain JSON values.
    received = ApplicationError(
        raised.message, failure.model_dump(mode="json"), type=raised.type, non_retryable=True
    )

    facts = facts_from_activity_error(activity_error(received))

    assert (facts.kind, facts.category, facts.unsupported_parameter) == (
        "http_status",
        "request_rejected",
        "parallel_tool_calls",
    )
    assert facts.produced_output is False
    # Temporal prints `type: message`: the kind is named once in every log line.
    assert str(raised) == (
        "http_status: HTTP 400: code=unsupported_parameter: Unsupported parameter: "
        "'parallel_tool_calls' is not supported with this model."
    )


def test_produced_output_in_the_failure_details_stops_everything() -> None:
    details = StreamFailure(
        kind="stall", message="stalled", stall_phase="between_chunks"
    ).model_dump(mode="json") | {"produced_output": True}
    cause = ApplicationError("stalled", details, type="stall", non_retryable=True)

    facts = facts_from_activity_error(activity_error(cause))

    assert facts.produced_output is True and facts.stall_phase == "between_chunks"
    decided = failure_disposition(facts, AttemptContext())
    assert (decided.action, decided.rule, decided.record_failure) == (
        "stop",
        "produced_output",
        True,
    )


def test_a_lost_attempt_reads_produced_output_from_its_last_heartbeat() -> None:
    forwarded = StreamProgress(chunks=4, first_token_seen=True, produced_output=True)
    cause = TimeoutError(
        "heartbeat timeout",
        type=TimeoutType.HEARTBEAT,
        last_heartbeat_details=[forwarded.model_dump()],
    )

    facts = facts_from_activity_error(activity_error(cause))

    assert (facts.kind, facts.produced_output) == ("lost", True)
    assert failure_disposition(facts, AttemptContext()).action == "stop"


def test_a_lost_attempt_that_forwarded_nothing_is_retried() -> None:
    quiet = StreamProgress(chunks=2, first_token_seen=True)
    cause = TimeoutError(
        "start-to-close",
        type=TimeoutType.START_TO_CLOSE,
        last_heartbeat_details=[quiet.model_dump()],
    )

    facts = facts_from_activity_error(activity_error(cause))

    assert (facts.kind, facts.produced_output) == ("lost", False)
    decided = failure_disposition(facts, AttemptContext())
    assert (decided.action, decided.record_failure) == ("retry", False)


def test_configuration_errors_and_cancellation() -> None:
    missing = ApplicationError("no key", {"endpoint": "a", "variable": "K"}, type=MISSING_API_KEY)
    assert facts_from_activity_error(activity_error(missing)).kind == "configuration"
    assert facts_from_activity_error(activity_error(CancelledError("cancelled"))).kind == (
        "aborted"
    )


def test_an_unexpected_error_in_the_activity_is_a_lost_attempt() -> None:
    crash = ApplicationError("boom", type="RuntimeError")
    facts = facts_from_activity_error(activity_error(crash))
    assert facts.kind == "lost" and "RuntimeError" in facts.message
