"""How large one activity input a run may schedule (and the state it carries, and its
result): Temporal's inline limit, or more when the workers' external payload storage
takes large payloads out of history.

An input over Temporal's 2 MB limit fails the workflow task, which Temporal retries
forever, so the run checks first and fails with a reason (`PayloadTooLarge`). But with
`steadyloop_data_converter`'s storage on, a 3 MB transcript reaches Temporal as a
reference of a few hundred bytes and is fine. Which applies is worker configuration,
which workflow code must not read (it could differ on replay); so it enters history:
the describe-tools activity reports its worker's limit
(`DescribeToolsResult.payload_limit_bytes`, from the worker's data converter). A run
with tools learned it at its start (`disclose_tools`). A run without asks once, when an
input first passes the inline limit, so a run that never does records nothing new. If
the question cannot be answered (the worker lacks the activity), the inline
limit applies. The same limit holds the input a run continues-as-new with and the
`RunResult` it returns: the SDK refuses those the same way, and a refused one is a
workflow task retried forever.

Workers of one task queue are expected to share one converter. If they do not, the limit
is what the worker that answered reported, and a worker without storage that later
schedules a 3 MB input is refused by its own SDK before Temporal sees it: a workflow
task failure, retried (visible in the run's pending workflow task) until a worker with
storage takes the task. Give every worker the same `STEADYLOOP_BLOB_DIR`.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
    from steadyloop.errors import PAYLOAD_TOO_LARGE
    from steadyloop.tools._payloads import (
        DESCRIBE_TOOLS_ACTIVITY,
        DescribeToolsInput,
        DescribeToolsResult,
    )

ASK_TIMEOUT = timedelta(seconds=30)
ASK_ATTEMPTS = 3


class PayloadCeiling:
    """The run's limit on one activity input; `known` when the run's start described it."""

    def __init__(self, known: int | None = None) -> None:
        self._limit = known

    async def check(self, value: object, what: str) -> None:
        """Fail the run, naming the cause, rather than let an input be refused forever."""
        size = payload_bytes(value)
        limit = await self.limit_for(size)
        if size <= limit:
            return
        if limit <= MAX_INLINE_PAYLOAD_BYTES:
            why = (
                f"the {limit:,}-byte limit for one activity input (Temporal refuses "
                "payloads over 2 MB, and the worker's data converter keeps them inline). "
                "Shorten the conversation or the tool arguments, or run the workers with "
                "external payload storage (STEADYLOOP_BLOB_DIR)."
            )
        else:
            why = (
                f"the {limit:,}-byte limit the worker sets on one stored activity input. "
                "Shorten the conversation or the tool arguments."
            )
        raise ApplicationError(
            f"{what} is {size:,} bytes, over {why}", type=PAYLOAD_TOO_LARGE, non_retryable=True
        )

    def known_limit(self, size: int) -> int | None:
        """The limit an input of `size` bytes is held to, if known without asking the
        worker (None: `limit_for` would ask, and the workflow would yield meanwhile)."""
        if size <= MAX_INLINE_PAYLOAD_BYTES:
            return MAX_INLINE_PAYLOAD_BYTES
        return self._limit

    async def limit_for(self, size: int) -> int:
        """The limit an input of `size` bytes is held to; asks the worker only when the
        inline limit would refuse it and the run does not know yet."""
        if size <= MAX_INLINE_PAYLOAD_BYTES:
            return MAX_INLINE_PAYLOAD_BYTES
        if self._limit is None:
            self._limit = await _ask_worker()
        return self._limit


def payload_bytes(value: object) -> int:
    """The size of `value` as one payload, before any external storage."""
    return sum(p.ByteSize() for p in workflow.payload_converter().to_payloads([value]))


async def _ask_worker() -> int:
    try:
        described: DescribeToolsResult = await workflow.execute_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            DescribeToolsInput(names=[]),
            result_type=DescribeToolsResult,
            start_to_close_timeout=ASK_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=ASK_ATTEMPTS),
        )
    except ActivityError as error:
        if isinstance(error.cause, CancelledError):
            raise
        workflow.logger.warning("the worker's payload limit is unknown (%s): inline", error)
        return MAX_INLINE_PAYLOAD_BYTES
    return described.payload_limit_bytes
