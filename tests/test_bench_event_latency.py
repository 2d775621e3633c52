"""`benchmarks/bench_event_latency.py`: its quick run passes its own checks (both followers
received the whole answer once, in order; the log-off run is a correct tool loop) and
prints both sections, so its figures come from runs that did what they claim."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_event_latency

from steadyloop._workflows import event_log


@pytest.mark.slow
async def test_the_quick_run_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    original = event_log.EventLog.begin
    status = await bench_event_latency.main(["--quick"])
    out = capsys.readouterr().out
    assert "PROBLEM" not in out and status == 0
    assert "run_events" in out and "bare subscribe" in out and "ratio" in out
    added = next(line for line in out.splitlines() if line.strip().startswith("added"))
    # A run that does not forward keeps its log on the inputs of the activities it already
    # schedules: no event more, and the bytes it does cost are shown.
    assert int(added.split()[1]) == 0 and int(added.split()[3]) > 0
    assert event_log.EventLog.begin is original  # the "off" switch was put back
