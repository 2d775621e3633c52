"""The benchmark `benchmarks/bench_entities.py` prints the entities' ceilings from, run
quick: so it cannot print a rate for a path that loses or refuses what it measures.

Ten admissions and ten failure reports at once, on the dev server: every phase
finishes, each burst costs fewer updates than callers (it is batched), and the health
entity counted every report the benchmark sent.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_entities

pytestmark = pytest.mark.slow

AT_ONCE = 10


async def test_the_quick_benchmark_batches_and_counts_every_report() -> None:
    lines = await bench_entities.main(AT_ONCE, AT_ONCE)
    admissions, reports = lines[1], lines[2]
    assert "did not finish" not in admissions + reports
    for line in (admissions, reports):
        updates = re.search(r"; (\d+) update\(s\), (\d+) refused", line)
        assert updates is not None, line
        assert int(updates.group(1)) < AT_ONCE
    counted = re.search(r"counted (\d+) of (\d+) reports", reports)
    assert counted is not None and counted.group(1) == counted.group(2)
