"""The time-skipping server's heartbeat-capability warning is dropped, and only it: the
runtime forwards core's logs to `temporalio.sdk_core`, whose filter lets every other
core warning through (a filter that dropped more would hide a real problem)."""

from __future__ import annotations

import logging

import pytest

from steadyloop.testing import time_skipping_runtime

CORE_LOGGER = "temporalio.sdk_core"  # where the runtime's docstring says core's logs go

FALSE_ALARM = (
    "[sdk_core::temporalio_sdk_core::worker] Temporal Server 1.16.0 or newer is required to "
    "guarantee that the latest heartbeat details are preserved when an activity fails; the "
    "server did not advertise the activity_failure_include_heartbeat capability, so "
    "heartbeat details may be lost on failure {}"
)
REAL_WARNING = "[sdk_core::temporalio_sdk_core::worker] Activity not found on completion {}"


def test_the_runtime_drops_the_false_alarm_and_keeps_other_core_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time_skipping_runtime()
    logger = logging.getLogger(CORE_LOGGER)
    with caplog.at_level(logging.WARNING, logger=CORE_LOGGER):
        for message in (FALSE_ALARM, REAL_WARNING):
            logger.handle(logger.makeRecord(logger.name, logging.WARNING, "", 0, message, (), None))
    assert [r.getMessage() for r in caplog.records] == [REAL_WARNING]
    assert time_skipping_runtime() is time_skipping_runtime()  # one runtime per process
