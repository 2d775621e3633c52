"""The chaos suite's seeded plan: what each run asks its tools, and when faults strike.

Pure and I/O-free, so one seed always gives the same scripts and the same fault
schedule (`tests/test_chaos.py` checks it), and the checker (`chaos_checker`) reads the
same tool names and timeouts the worker process (`chaos_worker_main`) serves. What the
processes then do with the plan is not deterministic: that is the point of the suite.

The tools, one per effect, each writing what it did to one effects file outside every
worker (`chaos_worker_main` says how):

- `lookup` (pure): answers from its arguments; may run any number of times.
- `deliver` (resumable): one effect per item, each recorded in the call's trail, so a
  reclaimed attempt skips what an earlier one did.
- `charge` (opaque): one effect, no trail. On its first attempt it may stall past its
  timeout (`stall`), before its effect (which it then refuses to make, as a service
  refuses a request past its deadline) or after it (`effect_first`): either way Temporal
  times it out, its receipt stays running, and once the lease expires the call is
  ambiguous until a person says what happened.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

ToolName = Literal["lookup", "deliver", "charge"]
Effect = Literal["pure", "resumable", "opaque"]
FaultKind = Literal["kill", "stall", "server"]

TOOL_EFFECTS: dict[str, Effect] = {"lookup": "pure", "deliver": "resumable", "charge": "opaque"}
TOOLS: tuple[ToolName, ...] = ("lookup", "deliver", "charge")

# `lookup`'s declared timeout; runs with `local_pure` run it as a local activity.
LOOKUP_TIMEOUT_S = 10.0
# `charge`'s declared timeout, and how long a stalled first attempt holds past it: long
# enough that Temporal times the attempt out, short of the SDK's cancel (~5 s after the
# timeout), so the tool returns late and the worker reports its late result.
CHARGE_TIMEOUT_S = 3.0
CHARGE_STALL_S = CHARGE_TIMEOUT_S + 1.0
# A charge makes its effect only this long before its deadline at the latest: the server
# started the attempt's clock a moment before the tool's own.
CHARGE_DEADLINE_MARGIN_S = 0.25
# `deliver`: the heartbeat timeout that declares a silent attempt lost, and the pause
# after each item (what a real sub-operation costs; it also gives faults a target).
DELIVER_TIMEOUT_S = 30.0
DELIVER_HEARTBEAT_TIMEOUT_S = 2.0
DELIVER_ITEM_S = 0.2
# The worker's heartbeat throttle (`steadyloop._worker.process.HEARTBEAT_THROTTLE`): a
# worker lost within this long after recording an item may not have sent it, and the
# reclaimed attempt repeats that item. The checker excuses a repeat only inside it.
HEARTBEAT_WINDOW_S = 1.0
# `steadyloop._workflows.tool_attempt.LEASE_MARGIN`: an opaque receipt's lease outlives the
# attempt's timeout by this much.
LEASE_MARGIN_S = 5.0


@dataclass(frozen=True)
class PlannedCall:
    """One tool call a run's model asks for. `ref` names it everywhere (effects file,
    arguments, checker); `items` are a `deliver` call's; `stall`/`effect_first` shape a
    `charge`'s first attempt."""

    run: str
    turn: int
    ref: str
    tool: ToolName
    items: tuple[str, ...] = ()
    cents: int = 0
    stall: bool = False
    effect_first: bool = False

    @property
    def call_id(self) -> str:
        """The wire id the model gives the call (letters, digits, `_` and `-` only, as
        every provider accepts, so no transcript healing renames it)."""
        return self.ref.replace(".", "_")

    def arguments(self) -> dict[str, object]:
        """The arguments the scripted model sends (what the tool receives)."""
        if self.tool == "lookup":
            return {"ref": self.ref, "query": f"status of {self.ref}"}
        if self.tool == "deliver":
            return {"ref": self.ref, "items": list(self.items)}
        stall_s = CHARGE_STALL_S if self.stall else 0.0
        return {
            "ref": self.ref,
            "cents": self.cents,
            "stall_s": stall_s,
            "effect_first": self.effect_first,
        }


@dataclass(frozen=True)
class RunPlan:
    """One run: its thread id, whether it forwards output, whether its pure calls run
    as local activities (`RunInput.local_pure_tools_s`), when it starts (seconds into
    the chaos), and its turns of calls (then a final answer)."""

    name: str
    forwarded: bool
    start_at_s: float
    turns: tuple[tuple[PlannedCall, ...], ...]
    local_pure: bool = False

    @property
    def calls(self) -> list[PlannedCall]:
        return [call for turn in self.turns for call in turn]

    @property
    def answer(self) -> str:
        return f"All done for {self.name}."


@dataclass(frozen=True)
class FaultStep:
    """One fault: at `at_s` seconds into the chaos, `kind` strikes worker `slot` (none
    for the server) and lasts `hold_s` (the wait before a restart, or the SIGSTOP)."""

    at_s: float
    kind: FaultKind
    slot: int | None
    hold_s: float


@dataclass(frozen=True)
class ChaosPlan:
    seed: int
    runs: tuple[RunPlan, ...]
    faults: tuple[FaultStep, ...]

    @property
    def calls(self) -> list[PlannedCall]:
        return [call for run in self.runs for call in run.calls]


@dataclass(frozen=True)
class PlanShape:
    """The bounds a plan is drawn within (the test's small run, the benchmark's long one)."""

    runs: int = 10
    workers: int = 3
    seconds: float = 25.0  # the chaos window: faults strike within it
    kill_every_s: tuple[float, float] = (3.0, 6.0)
    restart_after_s: tuple[float, float] = (0.0, 3.0)
    stall_s: tuple[float, float] = (1.0, 3.0)
    stalls: int = 1  # SIGSTOPs (each followed by a SIGCONT)
    server_restarts: int = 1
    turns: tuple[int, int] = (2, 3)
    calls_per_turn: tuple[int, int] = (1, 2)
    charge_stall_p: float = 0.35  # how often a charge's first attempt runs past its timeout
    # Runs start within this share of the window, so faults meet them in every phase.
    start_spread: float = 0.4
    # Every run asks for at least one charge that stalls (the mutant test needs them).
    stall_every_run: bool = False
    faults_enabled: bool = True
    tools: tuple[ToolName, ...] = field(default=TOOLS)


def make_plan(seed: int, shape: PlanShape) -> ChaosPlan:
    """The plan for `seed`: the same seed and shape always give the same plan."""
    rng = random.Random(seed)
    runs = tuple(_run_plan(rng, seed, number, shape) for number in range(shape.runs))
    faults = _fault_plan(rng, shape) if shape.faults_enabled else ()
    return ChaosPlan(seed=seed, runs=runs, faults=faults)


def _run_plan(rng: random.Random, seed: int, number: int, shape: PlanShape) -> RunPlan:
    name = f"chaos-s{seed}-r{number}"
    turns: list[tuple[PlannedCall, ...]] = []
    for turn in range(rng.randint(*shape.turns)):
        calls: list[PlannedCall] = []
        for n in range(rng.randint(*shape.calls_per_turn)):
            ref = f"{name}.t{turn}.c{n}"
            tool = rng.choice(shape.tools)
            if tool == "deliver":
                items = tuple(f"{ref}.i{i}" for i in range(rng.randint(3, 5)))
                calls.append(PlannedCall(name, turn, ref, "deliver", items=items))
            elif tool == "charge":
                calls.append(
                    PlannedCall(
                        name,
                        turn,
                        ref,
                        "charge",
                        cents=rng.randint(100, 9999),
                        stall=rng.random() < shape.charge_stall_p,
                        effect_first=rng.random() < 0.5,
                    )
                )
            else:
                calls.append(PlannedCall(name, turn, ref, "lookup"))
        turns.append(tuple(calls))
    if shape.stall_every_run:
        ref = f"{name}.t{len(turns)}.c0"
        # Its effect first: an attempt run again (the mutant) repeats it where it shows.
        stalled = PlannedCall(
            name, len(turns), ref, "charge", cents=4242, stall=True, effect_first=True
        )
        turns.append((stalled,))
    start_at = rng.uniform(0, shape.seconds * shape.start_spread)
    # Every combination of forwarded and local pure calls, in turn.
    return RunPlan(
        name=name,
        forwarded=number % 2 == 0,
        start_at_s=start_at,
        turns=tuple(turns),
        local_pure=number % 4 in (1, 2),
    )


def _fault_plan(rng: random.Random, shape: PlanShape) -> tuple[FaultStep, ...]:
    """Kills every `kill_every_s`, restarted after `restart_after_s`; `stalls` SIGSTOPs and
    `server_restarts` server kills at seeded moments inside the window (not in its first
    or last seconds, so runs are under way and have time to recover)."""
    steps: list[FaultStep] = []
    at = rng.uniform(*shape.kill_every_s)
    while at < shape.seconds:
        slot = rng.randrange(shape.workers)
        steps.append(FaultStep(at, "kill", slot, rng.uniform(*shape.restart_after_s)))
        at += rng.uniform(*shape.kill_every_s)
    inner = (shape.seconds * 0.2, shape.seconds * 0.8)
    for _ in range(shape.stalls):
        slot = rng.randrange(shape.workers)
        steps.append(FaultStep(rng.uniform(*inner), "stall", slot, rng.uniform(*shape.stall_s)))
    for _ in range(shape.server_restarts):
        steps.append(
            FaultStep(rng.uniform(*inner), "server", None, rng.uniform(*shape.restart_after_s))
        )
    return tuple(sorted(steps, key=lambda step: step.at_s))
