"""`steadyloop blobs gc`'s flags and settings, refused with one line before anything
connects."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

import pytest

from steadyloop._cli.blobs import duration_argument
from steadyloop._cli.main import run_cli


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("3600", timedelta(hours=1)),
        ("0.5s", timedelta(milliseconds=500)),
        ("0s", timedelta(0)),
    ],
)
def test_a_duration_reads_as_its_period(text: str, period: timedelta) -> None:
    assert duration_argument(text) == period


@pytest.mark.parametrize(
    "text", ["", "soon", "-1d", "1w", "1e300d", "99999999999d", "nan", "1d\x00", "\ud800"]
)
def test_a_duration_that_is_not_one_is_refused_naming_it(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"duration|hundred years"):
        duration_argument(text)


def test_no_store_or_storage_off_is_a_usage_error_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEADYLOOP_HOME", str(tmp_path))
    monkeypatch.setenv("STEADYLOOP_BLOB_DIR", str(tmp_path / "nowhere"))
    assert run_cli(["blobs", "gc", "--dry-run"]) == 2
    assert "no blob store at" in capsys.readouterr().err
    monkeypatch.setenv("STEADYLOOP_BLOB_DIR", "off")
    assert run_cli(["blobs", "gc"]) == 2
    assert "STEADYLOOP_BLOB_DIR is off" in capsys.readouterr().err
