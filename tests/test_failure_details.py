"""Failure details the workflow cannot decode become a marker (steadyloop._failure_details)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import TimeoutType
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from steadyloop._failure_details import UNDECODABLE_DETAILS, TolerantFailureConverter
from steadyloop._history.payload_storage import steadyloop_data_converter

CONVERTER = steadyloop_data_converter(None)


def raw(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


def timeout_with(details: Payload) -> Failure:
    failure = Failure(message="activity Heartbeat timeout")
    failure.timeout_failure_info.timeout_type = TimeoutType.TIMEOUT_TYPE_HEARTBEAT
    failure.timeout_failure_info.last_heartbeat_details.payloads.append(details)
    return failure


UNREADABLE = {
    "lists-300": raw("[" * 300 + "]" * 300),
    "dicts-1000": raw('{"a":' * 999 + "{}" + "}" * 999),
    "lone-surrogate": raw('["\\udcff"]'),
    "not-json": raw("{nope"),
}


def test_the_steadyloop_converter_uses_the_tolerant_failure_converter() -> None:
    assert isinstance(CONVERTER.failure_converter, TolerantFailureConverter)
    with_blobs = steadyloop_data_converter("/tmp/steadyloop-test-blobs-unused")
    assert isinstance(with_blobs.failure_converter, TolerantFailureConverter)


@pytest.mark.parametrize("name", list(UNREADABLE))
def test_undecodable_heartbeat_details_become_one_marker(name: str) -> None:
    failure = timeout_with(UNREADABLE[name])
    # The default converter raises here, during the activation, before workflow code.
    with pytest.raises(Exception):  # noqa: B017  # pydantic ValidationError
        CONVERTER.payload_converter.from_payloads_wrapper(
            failure.timeout_failure_info.last_heartbeat_details
        )
    error = CONVERTER.failure_converter.from_failure(failure, CONVERTER.payload_converter)
    assert isinstance(error, TimeoutError)
    (detail,) = error.last_heartbeat_details
    assert isinstance(detail, str) and detail.startswith(UNDECODABLE_DETAILS.split("{")[0])
    assert failure.timeout_failure_info.last_heartbeat_details.payloads[0] == UNREADABLE[name]


def test_only_the_unreadable_list_is_replaced_anywhere_in_the_cause_chain() -> None:
    outer = Failure(message="a tool gave up")
    outer.application_failure_info.details.payloads.append(raw('{"kept": 1}'))
    outer.cause.CopyFrom(timeout_with(UNREADABLE["lists-300"]))
    error: Any = CONVERTER.failure_converter.from_failure(outer, CONVERTER.payload_converter)
    assert isinstance(error, ApplicationError) and error.details == ({"kept": 1},)
    assert isinstance(error.__cause__, TimeoutError)
    (detail,) = error.__cause__.last_heartbeat_details
    assert "undecodable failure details" in detail


def test_readable_details_decode_exactly_as_before() -> None:
    failure = Failure(message="activity failed")
    failure.activity_failure_info.activity_type.name = "steadyloop.run_tool"
    failure.cause.CopyFrom(timeout_with(raw('[["step", {"page": 2}]]')))
    error = CONVERTER.failure_converter.from_failure(failure, CONVERTER.payload_converter)
    assert isinstance(error, ActivityError)
    assert isinstance(error.cause, TimeoutError)
    assert list(error.cause.last_heartbeat_details) == [[["step", {"page": 2}]]]
