"""The chaos suite's invariants: a pure function from collected facts to counted verdicts.

`check(facts)` reads only what the harness collected after the storm (the effects file's
lines, the faults it dealt, each run's end, each history's event types and replay
verdict, what each follower read and a fresh read of each final log, the ambiguous
calls a person saw and how they were resolved) and does no I/O, so every rule here is
unit-tested on hand-made facts (`tests/test_chaos.py`) and a failure is explained by
the facts that produced it. Each invariant counts what passed out of what it checked;
the report prints the counts, not merely a verdict, because "0 of 0" proves nothing.

The invariants, and what excuses what:

- Opaque effects once per call: no `charge` effect line twice for one call, whatever was
  killed, timed out or resolved.
- Resumable items never lost: every item of a `deliver` call that was answered as
  delivered is in the effects file; an item twice is a violation unless the trail could
  not have known it (written within the heartbeat throttle before its worker was lost,
  or by a worker resumed from a SIGSTOP after its attempt was reclaimed); an attempt's
  starting trail never drops an item an earlier attempt started with.
- Every run ends with a named stop (`RunResult.stop_reason`), none still running at the
  bound (wedged).
- No `WorkflowTaskFailed` in any history; every history replays on the project's code.
- Each follower read exactly what one pass over the final log reads, and saw the stop.
- Ambiguous calls surfaced are exactly opaque calls a fault caught in flight: each
  surfaced attempt is an opaque call's whose attempt a kill, a stall, a server outage or
  its own timeout caught; each opaque attempt certainly lost (it never returned, or
  returned past its timeout) in a run that answered was surfaced; and each resolution
  agrees with the effects file at the end (none resolved as not done did take effect).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from chaos_plan import (
    CHARGE_TIMEOUT_S,
    DELIVER_HEARTBEAT_TIMEOUT_S,
    HEARTBEAT_WINDOW_S,
    LEASE_MARGIN_S,
    TOOL_EFFECTS,
    ChaosPlan,
)

from steadyloop._chat import ChatMessage
from steadyloop._output.forwarding import OUTPUT_STREAM_WORKFLOW
from steadyloop._run.models import StopReason

STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
FaultFactKind = Literal["kill", "stall", "server", "crash"]
ResolutionKind = Literal["happened", "did_not_happen"]
# Slack for clocks read in different processes and for a completion in flight.
SLACK_S = 0.5
# How long after a tool returned its completion may still be on its way to the server
# (a loaded worker was seen to lose both completions of a batch 0.6 s after the later).
COMPLETION_S = 2.0
# How long before it is seen an ambiguous attempt whose tool never started can have been
# lost: its timeout, the lease margin after it, and the person's polling.
UNSTARTED_WINDOW_S = CHARGE_TIMEOUT_S + LEASE_MARGIN_S + 10.0


# -- the facts ------------------------------------------------------------------------


@dataclass(frozen=True)
class EffectLine:
    """One line of the effects file (`chaos_worker_main.write_line`)."""

    kind: str  # start | effect | refused | end
    tool: str
    ref: str
    attempt: int
    pid: int
    t: float
    workflow_id: str = ""
    call_id: str = ""
    key: str = ""
    item: str | None = None
    trail: tuple[str, ...] | None = None


def parse_effects(text: str) -> list[EffectLine]:
    """The effects file's lines; a torn last line (a worker killed mid-write) is skipped."""
    lines: list[EffectLine] = []
    for raw in text.splitlines():
        try:
            data: dict[str, Any] = json.loads(raw)
        except ValueError:
            continue
        trail = data.get("trail")
        lines.append(
            EffectLine(
                kind=str(data["kind"]),
                tool=str(data["tool"]),
                ref=str(data["ref"]),
                attempt=int(data["attempt"]),
                pid=int(data["pid"]),
                t=float(data["t"]),
                workflow_id=str(data.get("workflow_id", "")),
                call_id=str(data.get("call_id", "")),
                key=str(data.get("key", "")),
                item=data.get("item"),
                trail=None if trail is None else tuple(str(step) for step in trail),
            )
        )
    return lines


@dataclass(frozen=True)
class FaultFact:
    """A fault as dealt: from `t` to `until` (wall clock); `pid` None is the server."""

    kind: FaultFactKind
    t: float
    until: float
    pid: int | None = None


@dataclass(frozen=True)
class RunFacts:
    """How a run ended: `status` is the workflow's ("running" at the bound: wedged;
    "not_started" when it never could be); `answers` maps each call's `ref` to the tool
    message that answered it in the final transcript."""

    workflow_id: str
    forwarded: bool
    status: str
    stop_reason: str | None = None
    detail: str = ""
    answers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryFacts:
    """One execution's history: its `WorkflowTaskFailed` messages and replay verdict."""

    workflow_id: str
    run_id: str
    workflow_type: str
    events: int
    task_failures: tuple[str, ...] = ()
    replay_failure: str | None = None


@dataclass(frozen=True)
class FollowerFacts:
    """What a run's follower read (each event's JSON), and a fresh single pass over the
    final log after the run ended (`final`; None when it could not be read)."""

    workflow_id: str
    events: tuple[str, ...]
    ended: bool
    error: str | None = None
    resumed: int = 0
    final: tuple[str, ...] | None = None
    final_error: str | None = None


@dataclass(frozen=True)
class AmbiguousSeen:
    """An ambiguous call a person saw (`query`: the run's `ambiguous_receipts`; `event`:
    the follower's `ambiguous_receipt` event), first seen at `t`."""

    workflow_id: str
    ref: str
    tool: str
    attempt: int
    t: float
    source: str = "query"


@dataclass(frozen=True)
class ResolutionFact:
    """A person's resolution, decided from the effects file at `t`."""

    workflow_id: str
    ref: str
    attempt: int
    kind: ResolutionKind
    t: float
    applied: bool = True


@dataclass
class ChaosFacts:
    plan: ChaosPlan
    effects: list[EffectLine] = field(default_factory=list)
    faults: list[FaultFact] = field(default_factory=list)
    runs: list[RunFacts] = field(default_factory=list)
    histories: list[HistoryFacts] = field(default_factory=list)
    followers: list[FollowerFacts] = field(default_factory=list)
    ambiguous: list[AmbiguousSeen] = field(default_factory=list)
    resolutions: list[ResolutionFact] = field(default_factory=list)
    provider_errors: list[str] = field(default_factory=list)
    mutant: str | None = None
    wall_s: float = 0.0


def answers_by_ref(transcript: Sequence[ChatMessage]) -> dict[str, str]:
    """Each call's `ref` (from its arguments) mapped to the tool message answering it."""
    refs: dict[str, str] = {}
    for message in transcript:
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                continue
            if isinstance(arguments, dict) and isinstance(arguments.get("ref"), str):
                refs[call.id] = arguments["ref"]
    answers: dict[str, str] = {}
    for message in transcript:
        if message.role == "tool" and message.tool_call_id in refs:
            answers[refs[message.tool_call_id]] = message.content or ""
    return answers


def ref_of(arguments: str | Mapping[str, Any]) -> str:
    """The `ref` argument of a call (from its JSON text or its parsed arguments)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return ""
        arguments = parsed if isinstance(parsed, dict) else {}
    ref = arguments.get("ref")
    return ref if isinstance(ref, str) else ""


# -- the verdicts ---------------------------------------------------------------------


@dataclass
class Invariant:
    name: str
    passed: int = 0
    total: int = 0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def line(self) -> str:
        verdict = "ok" if self.ok else f"FAILED ({len(self.violations)})"
        notes = f"; {'; '.join(self.notes)}" if self.notes else ""
        return f"{self.name}: {self.passed}/{self.total} {verdict}{notes}"


@dataclass
class ChaosReport:
    seed: int
    runs: int
    forwarded: int
    kills: int
    server_restarts: int
    stalls: int
    crashes: int
    wedged: int
    failed_tasks: int
    sdk_update_replays: int
    replay_failures: int
    ambiguous: int
    resolved: dict[str, int]
    stop_reasons: dict[str, int]
    invariants: dict[str, Invariant]
    mutant: str | None = None
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(invariant.ok for invariant in self.invariants.values())

    def summary_line(self) -> str:
        """One line: what was dealt, and each invariant's count."""
        inv = self.invariants
        once, whole, followers = inv["opaque_once"], inv["resumable_whole"], inv["followers"]
        mutant = f" mutant={self.mutant}" if self.mutant else ""
        return (
            f"chaos seed={self.seed}{mutant}: {self.runs} runs ({self.forwarded} forwarded), "
            f"{self.kills} kills, {self.server_restarts} server restarts, "
            f"{self.stalls} stalls, {self.crashes} crashes; "
            f"effects once {once.passed}/{once.total}, "
            f"resumable items {whole.passed}/{whole.total}, "
            f"ambiguous surfaced {self.ambiguous} "
            f"(explained {inv['ambiguous'].passed}/{inv['ambiguous'].total}), "
            f"wedged {self.wedged}, failed workflow tasks {self.failed_tasks} "
            f"(+{self.sdk_update_replays} SDK update replays on output hosts, retried), "
            f"replay failures {self.replay_failures}, "
            f"followers whole {followers.passed}/{followers.total}; "
            f"{self.wall_s:.0f} s -> {'PASS' if self.ok else 'FAIL'}"
        )

    def lines(self, *, violations: int = 8) -> list[str]:
        """The summary, each invariant's counts, and its first `violations` violations."""
        out = [self.summary_line()]
        stops = ", ".join(f"{k} {v}" for k, v in sorted(self.stop_reasons.items()))
        resolved = ", ".join(f"{k} {v}" for k, v in sorted(self.resolved.items())) or "none"
        out.append(f"  stops: {stops or 'none'}; resolutions: {resolved}")
        for invariant in self.invariants.values():
            out.append(f"  {invariant.line()}")
            out.extend(f"    - {v}" for v in invariant.violations[:violations])
            if len(invariant.violations) > violations:
                out.append(f"    ... {len(invariant.violations) - violations} more")
        return out


def check(facts: ChaosFacts) -> ChaosReport:
    """Every invariant over `facts`, counted."""
    histories = facts.histories
    runs = {run.workflow_id: run for run in facts.runs}
    stop_reasons: dict[str, int] = defaultdict(int)
    for run in facts.runs:
        stop_reasons[run.stop_reason or run.status] += 1
    resolved: dict[str, int] = defaultdict(int)
    for resolution in facts.resolutions:
        if resolution.applied:
            resolved[resolution.kind] += 1
    invariants = {
        "opaque_once": check_opaque_once(facts.effects),
        "resumable_whole": check_resumable(facts),
        "named_stops": check_stops(facts.plan, runs),
        "no_failed_tasks": check_task_failures(histories),
        "replays": check_replays(histories),
        "followers": check_followers(facts.plan, facts.followers),
        "ambiguous": check_ambiguous(facts),
        "provider": check_provider(facts.provider_errors),
    }
    surfaced = {(a.workflow_id, a.ref, a.attempt) for a in facts.ambiguous}
    return ChaosReport(
        seed=facts.plan.seed,
        runs=len(facts.plan.runs),
        forwarded=sum(1 for run in facts.plan.runs if run.forwarded),
        kills=sum(1 for f in facts.faults if f.kind == "kill"),
        server_restarts=sum(1 for f in facts.faults if f.kind == "server"),
        stalls=sum(1 for f in facts.faults if f.kind == "stall"),
        crashes=sum(1 for f in facts.faults if f.kind == "crash"),
        wedged=sum(1 for run in facts.runs if run.status == "running"),
        failed_tasks=sum(len(h.task_failures) for h in histories if not sdk_update_replay(h)),
        sdk_update_replays=sum(len(h.task_failures) for h in histories if sdk_update_replay(h)),
        replay_failures=sum(1 for h in histories if h.replay_failure is not None),
        ambiguous=len(surfaced),
        resolved=dict(resolved),
        stop_reasons=dict(stop_reasons),
        invariants=invariants,
        mutant=facts.mutant,
        wall_s=facts.wall_s,
    )


def _calls(effects: Iterable[EffectLine]) -> dict[tuple[str, str], list[EffectLine]]:
    by_call: dict[tuple[str, str], list[EffectLine]] = defaultdict(list)
    for line in effects:
        by_call[(line.workflow_id, line.ref)].append(line)
    return by_call


def check_opaque_once(effects: Sequence[EffectLine]) -> Invariant:
    """No opaque call's effect ran twice."""
    invariant = Invariant("opaque effects once per call")
    for (_, ref), lines in sorted(_calls(effects).items()):
        if TOOL_EFFECTS.get(lines[0].tool) != "opaque":
            continue
        made = [line for line in lines if line.kind == "effect"]
        if not made:
            continue
        invariant.total += 1
        if len(made) == 1:
            invariant.passed += 1
        else:
            by = ", ".join(f"attempt {m.attempt} (pid {m.pid})" for m in made)
            invariant.violations.append(f"{ref}: effect ran {len(made)} times: {by}")
    return invariant


def _touched(faults: Sequence[FaultFact], pid: int, start: float, end: float) -> bool:
    """Whether a fault on `pid` (or a server outage) overlapped [start, end]."""
    return any(
        (fault.pid is None or fault.pid == pid) and fault.t <= end and fault.until >= start
        for fault in faults
    )


def check_resumable(facts: ChaosFacts) -> Invariant:
    """Every item of a resumable call answered as delivered is present; repeats only where
    the trail could not have known the item; trails never shrink."""
    invariant = Invariant("resumable items never lost")
    by_call = _calls(facts.effects)
    answers = {run.workflow_id: run.answers for run in facts.runs}
    excused = 0
    for run in facts.plan.runs:
        workflow_id = f"{run.name}/1"
        for call in run.calls:
            if call.tool != "deliver":
                continue
            lines = by_call.get((workflow_id, call.ref), [])
            writes: dict[str, list[EffectLine]] = defaultdict(list)
            for line in lines:
                if line.kind == "effect" and line.item is not None:
                    writes[line.item].append(line)
            answer = answers.get(workflow_id, {}).get(call.ref, "")
            if answer.startswith("delivered"):
                invariant.total += len(call.items)
                for item in call.items:
                    if writes.get(item):
                        invariant.passed += 1
                    else:
                        invariant.violations.append(
                            f"{call.ref}: item {item} lost (answered {answer!r})"
                        )
            for item, made in writes.items():
                made.sort(key=lambda line: line.t)
                for earlier, later in itertools.pairwise(made):
                    if _repeat_excused(facts.faults, earlier, later):
                        excused += 1
                    else:
                        invariant.violations.append(
                            f"{call.ref}: item {item} repeated by attempt {later.attempt} "
                            f"(pid {later.pid}) though attempt {earlier.attempt} (pid "
                            f"{earlier.pid}) wrote it {later.t - earlier.t:.1f} s before "
                            "with no fault to lose its trail"
                        )
            starts = sorted(
                (line for line in lines if line.kind == "start" and line.trail is not None),
                key=lambda line: line.attempt,
            )
            for before, after in itertools.pairwise(starts):
                lost = set(before.trail or ()) - set(after.trail or ())
                if lost and after.attempt > before.attempt:
                    invariant.violations.append(
                        f"{call.ref}: attempt {after.attempt} started without "
                        f"{sorted(lost)} that attempt {before.attempt} started with"
                    )
    invariant.notes.append(f"{excused} repeats within a lost heartbeat window")
    return invariant


def _repeat_excused(faults: Sequence[FaultFact], earlier: EffectLine, later: EffectLine) -> bool:
    """A repeated item the trail could not have prevented: a different attempt, after a
    fault on the first writer (or the server) that overlapped the item's heartbeat
    window, or the writer's resumption from a stall (a zombie attempt writing on)."""
    if earlier.attempt == later.attempt and earlier.pid == later.pid:
        return False
    window = (
        earlier.t - 2 * DELIVER_HEARTBEAT_TIMEOUT_S,
        earlier.t + HEARTBEAT_WINDOW_S + SLACK_S,
    )
    if _touched(faults, earlier.pid, *window):
        return True
    # The later write came from a zombie: a stalled attempt resumed after its reclaim.
    return _touched(faults, later.pid, later.t - 2 * DELIVER_HEARTBEAT_TIMEOUT_S, later.t)


def check_stops(plan: ChaosPlan, runs: Mapping[str, RunFacts]) -> Invariant:
    """Every run ended with a named stop; none wedged."""
    invariant = Invariant("runs end with a named stop")
    for run in plan.runs:
        invariant.total += 1
        facts = runs.get(f"{run.name}/1")
        if facts is None:
            invariant.violations.append(f"{run.name}: no facts collected")
        elif facts.status == "completed" and facts.stop_reason in STOP_REASONS:
            invariant.passed += 1
        elif facts.status == "running":
            invariant.violations.append(f"{run.name}: wedged (still running at the bound)")
        else:
            invariant.violations.append(
                f"{run.name}: {facts.status}, stop {facts.stop_reason!r}: {facts.detail[:200]}"
            )
    return invariant


# What the server answers when a worker that replayed an output host's whole history
# sends the response of a poll update that another worker already completed: the SDK's
# update replay, not steadyloop's workflow code (the host runs no decision of its own on
# the poll: `temporalio.contrib.workflow_streams`). The task is retried and succeeds.
SDK_UPDATE_REPLAY = "received *update.Response message while in state Completed"
OUTPUT_HOST_TYPE = OUTPUT_STREAM_WORKFLOW


def sdk_update_replay(history: HistoryFacts) -> bool:
    """Whether every failed task of `history` is the SDK's repeated update response on
    an output host that went on (it replays, so it was not wedged)."""
    return (
        history.workflow_type == OUTPUT_HOST_TYPE
        and history.replay_failure is None
        and bool(history.task_failures)
        and all(SDK_UPDATE_REPLAY in failure for failure in history.task_failures)
    )


def check_task_failures(histories: Sequence[HistoryFacts]) -> Invariant:
    """No failed workflow task, counted apart (not excused in silence) where the cause is
    the SDK's repeated update response on an output host (`sdk_update_replay`)."""
    invariant = Invariant("no WorkflowTaskFailed")
    for history in histories:
        invariant.total += 1
        if not history.task_failures or sdk_update_replay(history):
            invariant.passed += 1
            continue
        invariant.violations.append(
            f"{history.workflow_id} ({history.workflow_type}): "
            f"{len(history.task_failures)} failed workflow tasks, first: "
            f"{history.task_failures[0][:300]}"
        )
    return invariant


def check_replays(histories: Sequence[HistoryFacts]) -> Invariant:
    invariant = Invariant("histories replay")
    for history in histories:
        invariant.total += 1
        if history.replay_failure is None:
            invariant.passed += 1
        else:
            invariant.violations.append(
                f"{history.workflow_id} ({history.workflow_type}): {history.replay_failure[:300]}"
            )
    return invariant


def check_followers(plan: ChaosPlan, followers: Sequence[FollowerFacts]) -> Invariant:
    """Each follower read what one pass over the final log reads, stop included."""
    invariant = Invariant("followers read the whole log")
    by_run = {f.workflow_id: f for f in followers}
    for run in plan.runs:
        invariant.total += 1
        follower = by_run.get(f"{run.name}/1")
        if follower is None:
            invariant.violations.append(f"{run.name}: no follower")
            continue
        problem = _follower_problem(follower)
        if problem is None:
            invariant.passed += 1
        else:
            invariant.violations.append(f"{run.name}: {problem}")
    return invariant


def _follower_problem(follower: FollowerFacts) -> str | None:
    if follower.final is None:
        return f"the final log could not be read: {follower.final_error}"
    if not follower.ended:
        why = f" ({follower.error})" if follower.error else ""
        return (
            f"did not reach the stop within the bound{why}: read {len(follower.events)} "
            f"of {len(follower.final)} events"
        )
    if tuple(follower.events) == tuple(follower.final):
        return None
    for index, (read, final) in enumerate(zip(follower.events, follower.final, strict=False)):
        if read != final:
            return f"event {index} differs: read {read[:160]} / log {final[:160]}"
    return f"read {len(follower.events)} events, the final log has {len(follower.final)}"


def _attempts(lines: Sequence[EffectLine]) -> dict[int, dict[str, EffectLine]]:
    by_attempt: dict[int, dict[str, EffectLine]] = defaultdict(dict)
    for line in lines:
        by_attempt[line.attempt].setdefault(line.kind, line)
    return by_attempt


def _lost_for_sure(steps: Mapping[str, EffectLine]) -> bool:
    """An attempt that started and never returned in time: Temporal timed it out."""
    start, end = steps.get("start"), steps.get("end")
    if start is None:
        return False
    return end is None or end.t - start.t >= CHARGE_TIMEOUT_S - SLACK_S


def check_ambiguous(facts: ChaosFacts) -> Invariant:
    """Surfaced ambiguous calls are exactly opaque attempts a fault caught in flight, and
    every resolution agrees with the effects file."""
    invariant = Invariant("ambiguous calls are caught opaque calls")
    by_call = _calls(facts.effects)
    first_seen: dict[tuple[str, str, int], AmbiguousSeen] = {}
    for seen in sorted(facts.ambiguous, key=lambda a: a.t):
        first_seen.setdefault((seen.workflow_id, seen.ref, seen.attempt), seen)
    causes: dict[str, int] = defaultdict(int)
    stalls = {call.ref for call in facts.plan.calls if call.stall}
    for (workflow_id, ref, attempt), seen in sorted(first_seen.items()):
        invariant.total += 1
        if TOOL_EFFECTS.get(seen.tool) != "opaque":
            invariant.violations.append(f"{ref}: a {seen.tool} call surfaced as ambiguous")
            continue
        steps = _attempts(by_call.get((workflow_id, ref), [])).get(attempt, {})
        cause = _cause(facts.faults, steps, seen, stalled=attempt == 1 and ref in stalls)
        if cause is None:
            invariant.violations.append(f"{ref}: attempt {attempt} {_uncaught(steps)}")
            continue
        causes[cause] += 1
        invariant.passed += 1
    answered = {run.workflow_id for run in facts.runs if run.stop_reason == "final_answer"}
    missed = 0
    for (workflow_id, ref), lines in sorted(by_call.items()):
        if TOOL_EFFECTS.get(lines[0].tool) != "opaque" or workflow_id not in answered:
            continue
        for attempt, steps in sorted(_attempts(lines).items()):
            if _lost_for_sure(steps) and (workflow_id, ref, attempt) not in first_seen:
                missed += 1
                invariant.violations.append(
                    f"{ref}: attempt {attempt} was lost (no answer within its timeout) "
                    "but never surfaced as ambiguous"
                )
    for resolution in facts.resolutions:
        if not resolution.applied:
            continue
        made = [
            line
            for line in by_call.get((resolution.workflow_id, resolution.ref), [])
            if line.kind == "effect" and line.attempt <= resolution.attempt
        ]
        if resolution.kind == "did_not_happen" and made:
            invariant.violations.append(
                f"{resolution.ref}: resolved as not done, but attempt {made[0].attempt} took "
                f"effect ({made[0].t - resolution.t:+.1f} s from the resolution)"
            )
        if resolution.kind == "happened" and not made:
            invariant.violations.append(
                f"{resolution.ref}: resolved as done, but no attempt up to "
                f"{resolution.attempt} took effect"
            )
    invariant.notes.append(
        "caught by " + (", ".join(f"{k} {v}" for k, v in sorted(causes.items())) or "nothing")
    )
    if missed:
        invariant.notes.append(f"{missed} lost attempts not surfaced")
    return invariant


def _uncaught(steps: Mapping[str, EffectLine]) -> str:
    """Why nothing explains an ambiguous attempt (`_cause` found no fault)."""
    start, end = steps.get("start"), steps.get("end")
    if start is None:
        return "surfaced as ambiguous, yet its tool never began and no fault came before"
    if end is None:
        return (
            f"surfaced as ambiguous; its tool never returned, yet no fault struck pid "
            f"{start.pid} while it ran"
        )
    return (
        f"surfaced as ambiguous, yet it returned in {end.t - start.t:.1f} s on pid "
        f"{end.pid} with no fault near it"
    )


def _cause(
    faults: Sequence[FaultFact],
    steps: Mapping[str, EffectLine],
    seen: AmbiguousSeen,
    *,
    stalled: bool,
) -> str | None:
    """What caught an ambiguous attempt in flight, or None when nothing did. `stalled`:
    the plan had this attempt run past its timeout."""
    start, end = steps.get("start"), steps.get("end")
    if start is None:
        # Lost before the tool began (the worker died holding the task): some fault
        # must have struck within the time the lease can take to expire.
        near = [f for f in faults if seen.t - UNSTARTED_WINDOW_S <= f.t <= seen.t]
        return f"{near[-1].kind} before the tool began" if near else None
    # A charge takes 0.1 s; one that took half its timeout was starved (a loaded
    # machine), and the server, whose clock started first, may have timed it out.
    late = end is not None and end.t - start.t >= CHARGE_TIMEOUT_S / 2
    if late or (stalled and end is None):
        return "its timeout"
    # Until it returned (and its completion was on its way), or, if it never returned,
    # until the lease ran out: a kill, a stop or an outage of its worker then caught it.
    until = end.t + COMPLETION_S if end else start.t + CHARGE_TIMEOUT_S + LEASE_MARGIN_S + SLACK_S
    hit = [
        f
        for f in faults
        if (f.pid is None or f.pid == start.pid) and f.t <= until and f.until >= start.t
    ]
    return hit[0].kind if hit else None


def check_provider(errors: Sequence[str]) -> Invariant:
    invariant = Invariant("provider answered every request", passed=1, total=1)
    if errors:
        invariant.passed = 0
        invariant.violations.extend(errors[:20])
    return invariant
