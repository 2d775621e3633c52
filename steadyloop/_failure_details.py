"""Failure details that cannot be decoded become a marker, not a failed workflow task.

When an activity fails or times out, Temporal hands the workflow its failure, and the
SDK decodes every payload inside it (an `ApplicationError`'s details, a timeout's last
heartbeat details) while applying the activation, *before* any workflow code runs.
`temporalio.contrib.pydantic` decodes JSON with a nesting limit of 200 and refuses a
lone-surrogate escape, and a worker writes what its own converter allows: an older or
foreign worker, or a tool that calls `activity.heartbeat` by hand with a 210-deep list
(pydantic *encodes* up to 255 levels), sends bytes the workflow cannot read. The SDK then
raises out of the activation: the workflow task fails, or (since `ValidationError` is
one of the run's `failure_exception_types`) the whole run fails, on every replay, for a
value the workflow never needed.

`TolerantFailureConverter` decodes as the default converter does; only when that
raises does it decode again with each unreadable detail list replaced by one marker
string, `[steadyloop: undecodable failure details: ...]`. A timeout's heartbeat details
are then `["[steadyloop: ...]"]`, which the loop reads as "no progress recorded"
(`_recorded_progress` wants a list), so the lost attempt is handled like any other. It
changes nothing a readable failure decodes to, so recorded histories replay unchanged.
"""

from __future__ import annotations

import logging

import temporalio.api.common.v1
import temporalio.api.failure.v1
from temporalio.converter import DefaultFailureConverter, PayloadConverter

__all__ = ["UNDECODABLE_DETAILS", "TolerantFailureConverter"]

UNDECODABLE_DETAILS = "[steadyloop: undecodable failure details: {reason}]"

logger = logging.getLogger(__name__)


class TolerantFailureConverter(DefaultFailureConverter):
    """`DefaultFailureConverter`, with unreadable detail payloads replaced by a marker."""

    def from_failure(
        self,
        failure: temporalio.api.failure.v1.Failure,
        payload_converter: PayloadConverter,
    ) -> BaseException:
        try:
            return super().from_failure(failure, payload_converter)
        except Exception:
            readable = temporalio.api.failure.v1.Failure()
            readable.CopyFrom(failure)
            _replace_unreadable(readable, payload_converter)
            return super().from_failure(readable, payload_converter)


def _replace_unreadable(
    failure: temporalio.api.failure.v1.Failure, payload_converter: PayloadConverter
) -> None:
    """Each detail list of `failure` and its causes that does not decode: a marker."""
    node: temporalio.api.failure.v1.Failure | None = failure
    while node is not None:
        for details in _detail_lists(node):
            try:
                payload_converter.from_payloads_wrapper(details)
            except Exception as error:
                reason = f"{type(error).__name__}, {len(details.payloads)} payload(s)"
                logger.warning("replaced undecodable failure details: %s", reason)
                details.ClearField("payloads")
                details.payloads.extend(
                    payload_converter.to_payloads([UNDECODABLE_DETAILS.format(reason=reason)])
                )
        node = node.cause if node.HasField("cause") else None


def _detail_lists(
    failure: temporalio.api.failure.v1.Failure,
) -> list[temporalio.api.common.v1.Payloads]:
    kind = failure.WhichOneof("failure_info")
    if kind == "application_failure_info":
        return [failure.application_failure_info.details]
    if kind == "timeout_failure_info":
        return [failure.timeout_failure_info.last_heartbeat_details]
    if kind == "canceled_failure_info":
        return [failure.canceled_failure_info.details]
    if kind == "reset_workflow_failure_info":
        return [failure.reset_workflow_failure_info.last_heartbeat_details]
    return []
