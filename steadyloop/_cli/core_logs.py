"""The Temporal runtime of the command line's clients: the SDK core's log lines in our words.

The SDK's Rust core writes its warnings straight to the process's stderr, coloured, in
its own format: a follower whose Temporal went away printed, every few seconds,

    WARN temporalio_client::retry: gRPC call poll_workflow_execution_update retried 6
    times error=Status { code: Unavailable, message: "tcp connect error", ... }

which the follower already says once, in a line of its own (`follow`). So the clients of
`run`, `show`, `resume`, the steering commands and `serve` use `cli_runtime()`: core logs
(WARN and up) go to the Python logger `CORE_LOGGER`, which drops the client's retry
warnings (each is a call the follower retries and reports itself) and prints any other
as one plain line on stderr, `steadyloop: Temporal: <message>`. The worker keeps the
default runtime: its log is where an operator reads the core's own words.
"""

from __future__ import annotations

import functools
import logging
import sys

from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

CORE_LOGGER = "steadyloop.cli.temporal_core"
# The core's target for a gRPC call it retries (`temporalio_client::retry`).
RETRY_TARGET = "temporalio_client::retry"


class DropRetryWarnings(logging.Filter):
    """Drop the core client's "gRPC call ... retried N times" lines: the caller that
    retries says so itself, once per outage."""

    def filter(self, record: logging.LogRecord) -> bool:
        log = getattr(record, "temporal_log", None)
        target = getattr(log, "target", "") or record.name
        return RETRY_TARGET not in target


class _StderrLine(logging.Handler):
    """One line on the stderr of the moment (a test's captured stream, too)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = " ".join(record.getMessage().split())
            print(f"steadyloop: Temporal: {line}", file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


@functools.cache
def cli_runtime() -> Runtime:
    """One per process (a runtime owns a thread pool): core WARN and up, other crates'
    ERROR, forwarded to `CORE_LOGGER` as plain messages, minus the retry warnings."""
    logger = logging.getLogger(CORE_LOGGER)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    logger.addFilter(DropRetryWarnings())
    logger.addHandler(_StderrLine())
    forwarding = LogForwardingConfig(
        logger=logger,
        append_target_to_name=True,
        prepend_target_on_message=False,
        append_log_fields_to_message=False,
    )
    logging_config = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=forwarding,
    )
    return Runtime(telemetry=TelemetryConfig(logging=logging_config))
