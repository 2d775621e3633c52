"""The chaos suite: seeded, bounded faults against real processes, and
invariants that must hold whatever struck.

Two parts. The checker (`chaos_checker.check`) is a pure function over collected facts,
so each rule is tested here on hand-made facts, failing ones included: a checker that
cannot fail proves nothing. Then two bounded runs on a real dev server (`slow`):

- a short seeded storm (`chaos_harness.run_chaos`): ten runs, half forwarded, on three
  workers (one with the workflow cache off, so every activation replays), with worker
  SIGKILLs, a dev-server SIGKILL and restart on its SQLite file, a SIGSTOP, opaque calls
  that run past their timeout and a person resolving them from the effects file; every
  invariant must hold, and the counts are printed;
- the same harness with `STEADYLOOP_CHAOS_MUTANT=reclaim-opaque` in the workers (an
  expired opaque lease reclaimed instead of ambiguous): the checker must report opaque
  effects that ran twice, proving the suite fails when the lease rule breaks.

`STEADYLOOP_CHAOS_SEED` picks another seed for the short run (the default is fixed, so
a failure reproduces with the same plan). The long run is `benchmarks/bench_chaos.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos_checker import (
    OUTPUT_HOST_TYPE,
    SDK_UPDATE_REPLAY,
    AmbiguousSeen,
    ChaosFacts,
    EffectLine,
    FaultFact,
    FollowerFacts,
    HistoryFacts,
    ResolutionFact,
    RunFacts,
    answers_by_ref,
    check,
    parse_effects,
)
from chaos_harness import ChaosConfig, run_chaos
from chaos_plan import (
    CHARGE_STALL_S,
    ChaosPlan,
    PlannedCall,
    PlanShape,
    RunPlan,
    make_plan,
)

from steadyloop._chat import ChatMessage, ToolCall

SHORT_SEED = int(os.environ.get("STEADYLOOP_CHAOS_SEED", "1"))
# The short storm: 10 runs on 3 workers, kills every 3-6 s for 25 s, one server restart,
# one SIGSTOP; about 35 s on 2 cores.
SHORT = PlanShape(runs=10, workers=3, seconds=25.0, stalls=1, server_restarts=1)
# The mutant's run: every run ends with a charge that stalls past its timeout after its
# effect, so an expired lease is certain to be decided (by the mutant: reclaimed).
MUTANT = PlanShape(
    runs=3,
    workers=2,
    seconds=8.0,
    turns=(1, 1),
    kill_every_s=(4.0, 8.0),
    stalls=0,
    server_restarts=0,
    stall_every_run=True,
)

T0 = 1_000.0


# -- hand-made facts ------------------------------------------------------------------


def one_run_plan(*calls: PlannedCall, name: str = "r") -> ChaosPlan:
    run = RunPlan(name=name, forwarded=False, start_at_s=0.0, turns=(tuple(calls),))
    return ChaosPlan(seed=7, runs=(run,), faults=())


def line(kind: str, tool: str, ref: str, attempt: int, t: float, **extra: object) -> EffectLine:
    return EffectLine(
        kind=kind,
        tool=tool,
        ref=ref,
        attempt=attempt,
        pid=int(str(extra.pop("pid", 100))),
        t=t,
        workflow_id="r/1",
        item=extra.pop("item", None),  # type: ignore[arg-type]
        trail=extra.pop("trail", None),  # type: ignore[arg-type]
    )


def calm_facts(plan: ChaosPlan, effects: list[EffectLine], **answers: str) -> ChaosFacts:
    """Facts of a run that ended well, with a follower that read its whole log."""
    log = ('{"type":"stop"}',)
    return ChaosFacts(
        plan=plan,
        effects=effects,
        runs=[RunFacts("r/1", False, "completed", "final_answer", answers=answers)],
        histories=[HistoryFacts("r/1", "run", "ToolLoopWorkflow", 40)],
        followers=[FollowerFacts("r/1", log, ended=True, final=log)],
    )


CHARGE = PlannedCall("r", 0, "r.t0.c0", "charge", cents=5)
DELIVER = PlannedCall("r", 0, "r.t0.c1", "deliver", items=("a", "b"))


def test_a_calm_run_passes_every_invariant_with_counts() -> None:
    effects = [
        line("start", "charge", CHARGE.ref, 1, T0),
        line("effect", "charge", CHARGE.ref, 1, T0 + 0.1),
        line("end", "charge", CHARGE.ref, 1, T0 + 0.2),
        line("start", "deliver", DELIVER.ref, 1, T0, trail=()),
        line("effect", "deliver", DELIVER.ref, 1, T0 + 0.1, item="a"),
        line("effect", "deliver", DELIVER.ref, 1, T0 + 0.3, item="b"),
    ]
    report = check(calm_facts(one_run_plan(CHARGE, DELIVER), effects, **{DELIVER.ref: "delivered"}))
    assert report.ok, report.lines()
    inv = report.invariants
    assert (inv["opaque_once"].passed, inv["opaque_once"].total) == (1, 1)
    assert (inv["resumable_whole"].passed, inv["resumable_whole"].total) == (2, 2)
    assert "effects once 1/1" in report.summary_line()
    assert report.summary_line().endswith("PASS")


def test_an_opaque_effect_twice_fails_with_counts() -> None:
    effects = [
        line("effect", "charge", CHARGE.ref, 1, T0, pid=100),
        line("effect", "charge", CHARGE.ref, 2, T0 + 9, pid=200),
    ]
    report = check(calm_facts(one_run_plan(CHARGE), effects))
    once = report.invariants["opaque_once"]
    assert (once.passed, once.total) == (0, 1)
    assert "effect ran 2 times" in once.violations[0]
    assert "effects once 0/1" in report.summary_line()
    assert report.summary_line().endswith("FAIL")


def test_a_delivered_call_missing_an_item_is_a_lost_item() -> None:
    effects = [line("effect", "deliver", DELIVER.ref, 1, T0, item="a")]
    report = check(calm_facts(one_run_plan(DELIVER), effects, **{DELIVER.ref: "delivered"}))
    whole = report.invariants["resumable_whole"]
    assert (whole.passed, whole.total) == (1, 2)
    assert "item b lost" in whole.violations[0]


def test_a_repeated_item_is_excused_only_within_a_lost_heartbeat_window() -> None:
    repeated = [
        line("effect", "deliver", DELIVER.ref, 1, T0, item="a", pid=100),
        line("effect", "deliver", DELIVER.ref, 1, T0 + 0.2, item="b", pid=100),
        line("effect", "deliver", DELIVER.ref, 2, T0 + 5, item="b", pid=200),
    ]
    plan = one_run_plan(DELIVER)
    answers = {DELIVER.ref: "delivered"}
    killed_soon = calm_facts(plan, repeated, **answers)
    killed_soon.faults = [FaultFact("kill", T0 + 0.5, T0 + 1, pid=100)]
    assert check(killed_soon).invariants["resumable_whole"].ok
    killed_late = calm_facts(plan, repeated, **answers)
    killed_late.faults = [FaultFact("kill", T0 + 4, T0 + 4.5, pid=100)]
    late = check(killed_late).invariants["resumable_whole"]
    assert not late.ok and "repeated by attempt 2" in late.violations[0]


def test_a_trail_that_drops_an_item_fails() -> None:
    effects = [
        line("start", "deliver", DELIVER.ref, 2, T0, trail=("a",)),
        line("start", "deliver", DELIVER.ref, 3, T0 + 5, trail=()),
    ]
    report = check(calm_facts(one_run_plan(DELIVER), effects))
    assert "started without ['a']" in report.invariants["resumable_whole"].violations[0]


def test_a_wedged_run_a_failed_task_and_a_replay_failure_are_counted() -> None:
    facts = calm_facts(one_run_plan(CHARGE), [])
    facts.runs = [RunFacts("r/1", False, "running")]
    facts.histories = [
        HistoryFacts("r/1", "run", "ToolLoopWorkflow", 40, ("Nondeterminism",), "replay broke")
    ]
    report = check(facts)
    assert report.wedged == 1 and report.failed_tasks == 1 and report.replay_failures == 1
    assert "wedged" in report.invariants["named_stops"].violations[0]
    assert not report.invariants["no_failed_tasks"].ok
    assert not report.invariants["replays"].ok


def test_the_sdks_repeated_update_response_on_an_output_host_is_counted_apart_only() -> None:
    """Only that failure, only on an output host that went on, is counted apart (and
    printed); on a run, or any other failure on a host, the invariant fails."""
    sdk = f"BadUpdateWorkflowExecutionMessage: invalid state transition: {SDK_UPDATE_REPLAY}"
    facts = calm_facts(one_run_plan(CHARGE), [])
    host = HistoryFacts("r/1/output/x", "h", OUTPUT_HOST_TYPE, 30, (sdk,))
    facts.histories = [*facts.histories, host]
    report = check(facts)
    assert report.invariants["no_failed_tasks"].ok
    assert report.failed_tasks == 0 and report.sdk_update_replays == 1
    assert "+1 SDK update replays" in report.summary_line()
    for other in (
        HistoryFacts("r/1", "run", "ToolLoopWorkflow", 40, (sdk,)),
        HistoryFacts("r/1/output/x", "h", OUTPUT_HOST_TYPE, 30, ("Nondeterminism",)),
        HistoryFacts("r/1/output/x", "h", OUTPUT_HOST_TYPE, 30, (sdk,), "replay broke"),
    ):
        facts.histories = [other]
        assert not check(facts).invariants["no_failed_tasks"].ok, other


def test_a_follower_that_missed_the_stop_or_an_event_did_not_read_the_whole_log() -> None:
    final = ('{"type":"tool_call"}', '{"type":"stop"}')
    facts = calm_facts(one_run_plan(CHARGE), [])
    facts.followers = [FollowerFacts("r/1", final[:1], ended=False, final=final)]
    assert "did not reach the stop" in check(facts).invariants["followers"].violations[0]
    facts.followers = [FollowerFacts("r/1", ('{"type":"x"}', final[1]), ended=True, final=final)]
    assert "event 0 differs" in check(facts).invariants["followers"].violations[0]


def test_ambiguous_calls_must_be_opaque_attempts_a_fault_caught() -> None:
    ref = CHARGE.ref
    timely = [line("start", "charge", ref, 1, T0), line("end", "charge", ref, 1, T0 + 0.2)]
    seen = [AmbiguousSeen("r/1", ref, "charge", 1, T0 + 9)]
    facts = calm_facts(one_run_plan(CHARGE), timely)
    facts.ambiguous = seen
    assert "no fault near it" in check(facts).invariants["ambiguous"].violations[0]
    facts.faults = [FaultFact("kill", T0 + 0.3, T0 + 1, pid=100)]  # lost its completion
    assert check(facts).invariants["ambiguous"].ok
    stalled = [line("start", "charge", ref, 1, T0), line("end", "charge", ref, 1, T0 + 4)]
    facts = calm_facts(one_run_plan(CHARGE), stalled)
    facts.ambiguous = seen
    assert check(facts).invariants["ambiguous"].notes[0] == "caught by its timeout 1"


def test_a_lost_opaque_attempt_never_surfaced_fails() -> None:
    """What the mutant does: a stalled charge's attempt is run again, never surfaced."""
    ref = CHARGE.ref
    effects = [
        line("start", "charge", ref, 1, T0),
        line("effect", "charge", ref, 1, T0 + 0.1),
        line("end", "charge", ref, 1, T0 + CHARGE_STALL_S),
    ]
    ambiguous = check(calm_facts(one_run_plan(CHARGE), effects)).invariants["ambiguous"]
    assert "never surfaced as ambiguous" in ambiguous.violations[0]


def test_a_resolution_the_effects_file_contradicts_fails() -> None:
    ref = CHARGE.ref
    effects = [line("effect", "charge", ref, 1, T0 + 10)]  # came after "did not happen"
    facts = calm_facts(one_run_plan(CHARGE), effects)
    facts.resolutions = [ResolutionFact("r/1", ref, 1, "did_not_happen", T0 + 8)]
    assert "resolved as not done" in check(facts).invariants["ambiguous"].violations[0]
    facts.effects = []
    facts.resolutions = [ResolutionFact("r/1", ref, 1, "happened", T0 + 8)]
    assert "resolved as done" in check(facts).invariants["ambiguous"].violations[0]


def test_effects_lines_parse_and_a_torn_last_line_is_skipped() -> None:
    text = (
        '{"kind":"effect","tool":"deliver","ref":"x","attempt":1,"pid":5,"t":1.5,'
        '"item":"a","trail":["z"]}\n{"kind":"eff'
    )
    (parsed,) = parse_effects(text)
    assert (parsed.item, parsed.trail, parsed.pid) == ("a", ("z",), 5)


def test_answers_are_mapped_to_refs_through_call_ids() -> None:
    transcript = [
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="c1", name="deliver", arguments='{"ref":"r.t0.c1"}')],
        ),
        ChatMessage(role="tool", tool_call_id="c1", content="delivered 2 items"),
    ]
    assert answers_by_ref(transcript) == {"r.t0.c1": "delivered 2 items"}


def test_the_plan_is_a_function_of_the_seed() -> None:
    assert make_plan(3, SHORT) == make_plan(3, SHORT)
    assert make_plan(3, SHORT) != make_plan(4, SHORT)
    plan = make_plan(3, SHORT)
    kinds = [step.kind for step in plan.faults]
    assert kinds.count("server") == 1 and kinds.count("stall") == 1 and "kill" in kinds
    assert all(0 < step.at_s < SHORT.seconds for step in plan.faults)
    assert {call.tool for call in plan.calls} == {"lookup", "deliver", "charge"}
    assert any(call.stall for call in plan.calls)  # some charge runs past its timeout


# -- real processes -------------------------------------------------------------------


@pytest.mark.slow
async def test_a_short_seeded_storm_keeps_every_invariant(tmp_path: Path) -> None:
    config = ChaosConfig(seed=SHORT_SEED, shape=SHORT, cache_off_slots=(0,), settle_s=60.0)
    facts, report = await run_chaos(config, tmp_path, log=print)
    lines = report.lines()
    print("\n".join(lines))
    dealt = report.kills + report.server_restarts + report.stalls
    assert report.kills >= 1 and report.server_restarts == 1 and report.stalls == 1, lines
    assert dealt == len(facts.plan.faults), lines
    assert report.ok, "\n".join([*lines, f"logs: {tmp_path}"])


@pytest.mark.slow
async def test_the_suite_fails_when_an_expired_opaque_lease_is_reclaimed(tmp_path: Path) -> None:
    config = ChaosConfig(
        seed=SHORT_SEED, shape=MUTANT, mutant="reclaim-opaque", settle_s=60.0, log_delay_s=0.0
    )
    _, report = await run_chaos(config, tmp_path, log=print)
    lines = report.lines()
    print("\n".join(lines))
    once = report.invariants["opaque_once"]
    assert once.total >= MUTANT.runs, lines  # each run's stalled charge took effect
    assert once.passed < once.total, lines  # some opaque effect ran twice
    assert any("effect ran 2 times" in v for v in once.violations), lines
    assert not report.invariants["ambiguous"].ok, lines  # lost attempts never surfaced
    assert not report.ok
