"""The wire benchmark's streams, assembled once per wire and case: so `bench_wires.py`
cannot time a broken path. Each case's own check asserts that steadyloop and the SDK
read exactly the calls the stream sent, and steadyloop's turn does not depend on where
the reads fall."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_wires
from bench_stream import network_reads

from steadyloop._stream.wire import WIRES

CASES = [
    pytest.param(bench, case, id=f"{bench.wire}-{case[0]}")
    for bench in bench_wires.WIRE_BENCHES
    for case in bench_wires.cases(bench)
]


@pytest.mark.parametrize(("bench", "case"), CASES)
def test_steadyloop_and_the_sdk_read_the_calls_sent(
    bench: bench_wires.WireBench, case: bench_wires.Case
) -> None:
    name, body, calls = case
    reads = network_reads(body)
    assert len(reads) > 1 or len(body) < 16_384  # really cut into network-sized reads
    turn = bench.assemble(reads)
    bench.check(name, turn, body, calls, bench.sdk(reads))
    assert turn.stats.saw_done
    small = [body[i : i + 1_000] for i in range(0, len(body), 1_000)]
    assert bench.assemble(small).model_dump() == turn.model_dump()


def test_the_named_wires_take_the_decoders_named_path() -> None:
    # The figures are for the path the model activity runs: event names handed over.
    assert [b.wire for b in bench_wires.WIRE_BENCHES] == ["chat", "responses", "anthropic"]
    assert not WIRES["responses"].reads_event_names
    assert not WIRES["anthropic"].reads_event_names
