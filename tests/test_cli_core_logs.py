"""The command line's Temporal runtime keeps the SDK core's retry warnings off the
terminal (the follower says the outage itself) and words any other core line; its
reconnect bound is read from `STEADYLOOP_RECONNECT_S`, refused when it is not seconds."""

from __future__ import annotations

import logging
from datetime import timedelta
from types import SimpleNamespace

import pytest

from steadyloop._cli.core_logs import CORE_LOGGER, DropRetryWarnings, cli_runtime
from steadyloop._cli.outcome import RECONNECT_ENV, reconnect_bound
from steadyloop._worker.config import ConfigError
from steadyloop.client._reconnect import DEFAULT_RECONNECT_BOUND


def core_record(target: str, message: str) -> logging.LogRecord:
    record = logging.getLogger(CORE_LOGGER).makeRecord(
        f"{CORE_LOGGER}-sdk_core::{target}",
        logging.WARNING,
        "(sdk-core)",
        0,
        message,
        (),
        None,
        extra={"temporal_log": SimpleNamespace(target=target)},
    )
    return record


def test_the_retry_warnings_are_dropped_and_other_core_lines_kept() -> None:
    drop = DropRetryWarnings()
    retried = core_record(
        "temporalio_client::retry", "gRPC call poll_workflow_execution_update retried 6 times"
    )
    assert not drop.filter(retried)
    other = core_record("temporalio_sdk_core::worker", "Failing workflow task")
    assert drop.filter(other)


def test_other_core_lines_reach_stderr_as_one_plain_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli_runtime()  # installs the logger's filter and handler (once per process)
    logger = logging.getLogger(CORE_LOGGER)
    logger.handle(core_record("temporalio_client::retry", "retried 6 times"))
    logger.handle(core_record("temporalio_sdk_core::worker", "something\nodd"))
    err = capsys.readouterr().err
    assert err == "steadyloop: Temporal: something odd\n"


def test_the_reconnect_bound_is_read_from_the_environment() -> None:
    assert reconnect_bound({}) == DEFAULT_RECONNECT_BOUND
    assert reconnect_bound({RECONNECT_ENV: "2.5"}) == timedelta(seconds=2.5)
    for bad in ("soon", "-1", "nan", "1e300"):
        with pytest.raises(ConfigError, match=RECONNECT_ENV):
            reconnect_bound({RECONNECT_ENV: bad})
