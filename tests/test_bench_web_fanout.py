"""The web fan-out benchmark runs and its checks hold (`--quick`: 4 runs, 20 clients)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "bench_web_fanout.py"


def test_the_quick_benchmark_passes_its_checks() -> None:
    ran = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "clients whose cursors differ from the iterator's: 0" in ran.stdout
    assert "Temporal updates and queries per run" in ran.stdout
