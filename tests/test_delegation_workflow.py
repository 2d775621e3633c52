"""Child runs in the loop, on the time-skipping test server: each chain rule reached by
real delegations, the child's answer as the tool result, and one child per call.

Counting rules are decided by the tenant's admission entity
(`steadyloop._workflows.chain_admission`), run by the same worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from delegation_harness import (
    Turn,
    agent_of,
    chain_input,
    delegate,
    eventually,
    profile,
    run_inputs,
    running_chains,
)
from loop_harness import assert_every_call_answered, tool_messages
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import (
    ADMIT_CHAIN_RUN_ACTIVITY,
    AdmissionAnswer,
    AdmissionLedger,
    AdmissionRequest,
    admission_workflow_id,
)
from steadyloop._chains.delegation_tool import DELEGATE_TOOL
from steadyloop._chains.limits import (
    ChainBudgetLimit,
    ChainLimit,
    DepthLimit,
    PairCooldownLimit,
    PairSeenLimit,
    TenantCeilingLimit,
)
from steadyloop._run.models import RunInput, RunLimits
from steadyloop.errors import RESERVED_TOOL_NAME, UNUSABLE_WORKFLOW_ID
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    error_response,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


@dataclass
class StandIn:
    """The admission activity, held or failing for child requests (registrations pass)."""

    hold: asyncio.Event | None = None
    unavailable: bool = False
    asked: list[AdmissionRequest] = field(default_factory=list)

    def __call__(self, client: Client, task_queue: str) -> Sequence[Callable[..., Any]]:
        real = ChainAdmissionActivities(client, task_queue=task_queue)

        @activity.defn(name=ADMIT_CHAIN_RUN_ACTIVITY)
        async def admit_chain_run(request: AdmissionRequest) -> AdmissionAnswer:
            if request.child is not None:
                self.asked.append(request)
                if self.hold is not None:
                    await self.hold.wait()
                if self.unavailable:
                    raise RuntimeError("the admission entity is unreachable")
            return await real.admit(request)

        return [admit_chain_run, real.closed_chain_runs]


def to_writer(task: str, *limits: ChainLimit) -> RunInput:
    """A root that may delegate to one `writer` agent (depth 1 when no limit is given)."""
    agents = {"writer": profile("writer")}
    chosen = list(limits) or [DepthLimit(max_depth=1)]
    return chain_input(task, to=["writer"], agents=agents, limits=chosen)


async def test_recursive_delegation_stops_at_the_depth_cap() -> None:
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.turn == 1:  # every agent hands the task one level down
            return tool_calls_response(delegate("researcher", f"{turn.task} deeper"))
        return text_response(f"[{turn.agent}: {turn.results[-1]}]")

    agents = {"researcher": profile("researcher", delegates_to=["researcher"])}
    run = chain_input("dig", to=["researcher"], agents=agents, limits=[DepthLimit(max_depth=2)])
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        runs = await chains.runs()
        turns = chains.turns()
    # root (depth 0) -> researcher (1) -> researcher (2), whose delegation is refused.
    assert sorted(agent_of(v) for v in runs) == ["main", "researcher", "researcher"]
    assert [t.task for t in turns if t.turn == 1] == ["dig", "dig deeper", "dig deeper deeper"]
    deepest = next(t for t in turns if t.task == "dig deeper deeper" and t.turn == 2)
    assert "chain rule 'depth'" in deepest.results[0]
    assert "will not help" in deepest.results[0]
    assert result.final_answer is not None
    assert result.final_answer.startswith("[main: [researcher: [researcher: Delegation refused")
    assert_every_call_answered(result.transcript)
    # Stats fold upwards: the root sees its child's and grandchild's work.
    assert result.stats.child_runs == 1 and result.stats.turns == 2
    children = result.stats.children
    assert children is not None
    assert (children.turns, children.child_runs, children.child_refusals) == (4, 1, 1)


async def test_a_fan_out_in_one_batch_is_held_to_the_chain_budget() -> None:
    # Four delegations in one batch, a budget of three runs: the root and two children.
    # The calls run concurrently; admission is one at a time and counts the children
    # already started, which visibility of other runs does not show.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "main" and turn.turn == 1:
            return tool_calls_response(*(delegate("writer", f"part {p}", f"c{p}") for p in "abcd"))
        if turn.agent == "main":
            return text_response("assembled")
        return text_response(f"wrote {turn.task}")

    run = to_writer("write", ChainBudgetLimit(max_runs=3))
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        runs = await chains.runs()
        writers = chains.turns("writer")
    assert sorted(agent_of(v) for v in runs) == ["main", "writer", "writer"]
    assert sorted(t.task for t in writers) == ["part a", "part b"]
    answers = {m.tool_call_id: m.content or "" for m in tool_messages(result.transcript)}
    assert answers["ca"] == "wrote part a" and answers["cb"] == "wrote part b"
    for refused in ("cc", "cd"):
        assert "chain rule 'chain_budget'" in answers[refused]
        assert "already has 3 run(s)" in answers[refused]
    assert result.stats.child_runs == 2 and result.stats.child_refusals == 2
    assert_every_call_answered(result.transcript)


async def test_a_pair_works_together_once_per_chain_in_either_direction() -> None:
    # planner -> writer is admitted; writer handing back to planner is the same pair
    # (refused in the writer's run); planner asking writer again is refused too.
    def brain(turn: Turn) -> ScriptedResponse:
        if (turn.agent, turn.turn) == ("planner", 1):
            return tool_calls_response(delegate("writer", "draft"))
        if (turn.agent, turn.turn) == ("writer", 1):
            return tool_calls_response(delegate("planner", "plan it for me"))
        if (turn.agent, turn.turn) == ("planner", 2):
            return tool_calls_response(delegate("writer", "draft again"))
        return text_response(f"{turn.agent} done: {turn.results[-1][:60]}")

    agents = {
        "planner": profile("planner", delegates_to=["writer"]),
        "writer": profile("writer", delegates_to=["planner"]),
    }
    run = chain_input(
        "plan", agent="planner", to=["writer"], agents=agents, limits=[PairSeenLimit()]
    )
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        runs = await chains.runs()
        writer_turns = chains.turns("writer")
    assert sorted(agent_of(v) for v in runs) == ["planner", "writer"]
    handed_back = writer_turns[-1].results[0]
    assert "chain rule 'pair_seen'" in handed_back
    assert "'writer' and 'planner' already worked together" in handed_back
    first, second = tool_messages(result.transcript)
    assert (first.content or "").startswith("writer done: Delegation refused")
    assert "'planner' and 'writer' already worked together" in (second.content or "")
    assert "will not help" in (second.content or "")


async def test_a_cooldown_refuses_then_admits_once_workflow_time_has_passed() -> None:
    # Between the refusal and the second try the provider is overloaded and asks to be
    # called again in 700 s; the test server fast-forwards workflow time through the
    # retry backoff (nothing runs meanwhile), and the same pair is admitted again.
    overloaded = error_response(503, "overloaded", type="server_error", retry_after=700)
    asked_after_refusal = 0

    def brain(turn: Turn) -> ScriptedResponse:
        nonlocal asked_after_refusal
        if turn.agent == "writer":
            return text_response(f"wrote {turn.task}")
        if turn.turn == 1:
            return tool_calls_response(delegate("writer", "first draft"))
        if turn.turn == 2:
            return tool_calls_response(delegate("writer", "second draft"))
        if turn.turn == 3:
            asked_after_refusal += 1
            if asked_after_refusal == 1:
                return overloaded
            return tool_calls_response(
                delegate("writer", "second draft")
            )  # the refused call, again
        return text_response("both drafts done")

    run = to_writer("write twice", PairCooldownLimit(cooldown_s=600))
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        writers = chains.turns("writer")
        started = sorted(v.started_at for v in await chains.runs() if agent_of(v) == "writer")
    first, refused, later = tool_messages(result.transcript)
    assert first.content == "wrote first draft"
    assert "chain rule 'pair_cooldown'" in (refused.content or "")
    assert "must wait 600s" in (refused.content or "")
    assert "Trying again later can succeed" in (refused.content or "")
    # The refusal was not recorded as the call's answer: the same call is admitted now.
    assert later.content == "wrote second draft"
    assert [t.task for t in writers] == ["first draft", "second draft"]
    assert started[1] - started[0] >= timedelta(seconds=700)


async def test_a_tenant_ceiling_counts_runs_in_flight_and_clears_when_they_finish() -> None:
    # Another chain of the same tenant is in flight (its model turn is held), and one of
    # another tenant; with a ceiling of two runs at once, this root (the tenant's second)
    # may not start a child until the other chain of its tenant finishes.
    other_waiting = asyncio.Event()
    other_release = asyncio.Event()
    other_done = asyncio.Event()

    async def brain(turn: Turn) -> ScriptedResponse:
        if turn.task in ("other chain", "other tenant"):
            if turn.task == "other chain":
                other_waiting.set()
            await other_release.wait()
            return text_response("other done")
        if turn.agent == "writer":
            return text_response(f"wrote {turn.task}")
        if turn.turn == 1:
            return tool_calls_response(delegate("writer", "draft"))
        if turn.turn == 2:
            await other_done.wait()
            return tool_calls_response(delegate("writer", "draft now"))
        return text_response("done")

    agents = {"writer": profile("writer")}
    limits = [TenantCeilingLimit(max_active=2)]
    async with running_chains(brain) as chains:
        elsewhere = await chains.start(
            chain_input("other tenant", to=[], agents=agents, limits=limits, tenant="globex")
        )
        other = await chains.start(
            chain_input("other chain", to=["writer"], agents=agents, limits=limits)
        )
        await asyncio.wait_for(other_waiting.wait(), 30)
        handle = await chains.start(
            chain_input("write", to=["writer"], agents=agents, limits=limits)
        )
        await eventually(
            lambda: any(t.task == "write" and t.turn == 2 for t in chains.turns("main")),
            "the refusal to be read",
        )
        other_release.set()
        await other.result()
        other_done.set()
        result = await handle.result()
        await elsewhere.result()
        ledger = await chains.client.get_workflow_handle(admission_workflow_id("acme")).query(
            "ledger", result_type=AdmissionLedger
        )
    refused, admitted = tool_messages(result.transcript)
    assert "chain rule 'tenant_ceiling'" in (refused.content or "")
    assert "2 run(s) active now" in (refused.content or "")  # not 3: globex is not counted
    assert "Trying again later can succeed" in (refused.content or "")
    assert admitted.content == "wrote draft now"
    # acme's entity counted acme's runs only; the other chain left the count once it
    # had closed (the refusing ceiling asked Temporal, not visibility).
    assert elsewhere.id not in ledger.runs
    assert {handle.id, other.id} <= set(ledger.runs)
    assert not ledger.runs[other.id].active


async def test_a_delegation_asked_again_reattaches_to_the_same_child() -> None:
    # The same call twice in one batch and again next turn (a retried turn asks for
    # what it asked before): one child, every call answered with its answer.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            return text_response(f"wrote {turn.task}")
        if turn.turn == 1:
            twice = [delegate("writer", "the report", call_id) for call_id in "ab"]
            return tool_calls_response(*twice)
        if turn.turn == 2:
            return tool_calls_response(delegate("writer", "the report", "c"))
        return text_response("done")

    run = to_writer("report")
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        runs = await chains.runs()
        writers = chains.turns("writer")
    assert len(writers) == 1
    assert sorted(agent_of(v) for v in runs) == ["main", "writer"]
    assert [m.content for m in tool_messages(result.transcript)] == ["wrote the report"] * 3
    assert result.stats.child_runs == 1 and result.stats.tool_replays == 2
    assert_every_call_answered(result.transcript)


async def test_a_restarted_parent_reattaches_to_the_child_that_already_answered() -> None:
    # The parent's ledger is gone (the run is started again under the same workflow id,
    # as after a reset or a person re-driving it); the child id is derived from the
    # parent id and the call, so the same call finds the same child: its answer, not a
    # second run of it.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            return text_response(f"wrote {turn.task}")
        if turn.turn == 1:
            return tool_calls_response(delegate("writer", "the report"))
        return text_response(f"got: {turn.results[-1]}")

    run = to_writer("report")
    async with running_chains(brain) as chains:
        first = await (await chains.start(run, workflow_id="report-run")).result()
        (child,) = [v for v in await chains.runs() if agent_of(v) == "writer"]
        before = await chains.client.get_workflow_handle(child.workflow_id).describe()
        again = await (await chains.start(run, workflow_id="report-run")).result()
        after = await chains.client.get_workflow_handle(child.workflow_id).describe()
        writers = chains.turns("writer")
    assert len(writers) == 1
    assert before.run_id == after.run_id
    assert first.final_answer == again.final_answer == "got: wrote the report"
    assert again.stats.child_runs == 1
    assert again.stats.children is not None and again.stats.children.turns == 1


async def test_a_failed_child_is_a_tool_message_and_a_retry_runs_it_anew() -> None:
    # The child's profile names a tool the worker lacks, so the child run fails at its
    # start. The parent answers the call with the failure; asked again, the call runs
    # a new child under the same id (a failed child does not block its id).
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.turn <= 2:
            return tool_calls_response(delegate("broken", "try", f"t{turn.turn}"))
        return text_response("gave up")

    agents = {"broken": profile("broken", tools=["no_such_tool"])}
    run = chain_input("go", to=["broken"], agents=agents, limits=[DepthLimit(max_depth=1)])
    async with running_chains(brain) as chains:
        handle = await chains.start(run)
        result = await handle.result()
        history = await handle.fetch_history()
    failures = [m.content or "" for m in tool_messages(result.transcript)]
    assert len(failures) == 2
    for failure in failures:
        assert "Agent 'broken' failed before answering" in failure
        assert "no_such_tool" in failure
    starts = [
        e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        for e in history.events
        if e.HasField("child_workflow_execution_started_event_attributes")
    ]
    assert len(starts) == 2 and len(set(starts)) == 1
    assert result.stats.child_runs == 2 and result.stats.tool_errors == 2


async def test_cancelling_the_parent_cancels_its_child_and_both_end_cancelled() -> None:
    # The child is inside a tool call when its parent is cancelled.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            return (
                tool_calls_response(ScriptedCall("wait_for_release", {}))
                if turn.turn == 1
                else text_response("x")
            )
        return (
            tool_calls_response(delegate("writer", "hold on"))
            if turn.turn == 1
            else text_response("y")
        )

    agents = {"writer": profile("writer", tools=["wait_for_release"])}
    run = chain_input("go", to=["writer"], agents=agents, limits=[DepthLimit(max_depth=1)])
    async with running_chains(brain) as chains:
        handle = await chains.start(run)
        await asyncio.wait_for(chains.gate.entered.wait(), 30)
        (child,) = [v for v in await chains.runs() if agent_of(v) == "writer"]
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        child_handle = chains.client.get_workflow_handle(child.workflow_id)
        child_status = (await child_handle.describe()).status
        writer_turns = len(chains.turns("writer"))
    assert isinstance(failed.value.cause, CancelledError)
    assert child_status == WorkflowExecutionStatus.CANCELED
    assert writer_turns == 1  # the child did not go on to another turn


async def test_a_child_cancelled_during_its_model_turn_closes_with_its_parent() -> None:
    child_asked = asyncio.Event()
    never = asyncio.Event()

    async def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            child_asked.set()
            await never.wait()
        return tool_calls_response(delegate("writer", "forever"))

    run = to_writer("go")
    async with running_chains(brain) as chains:
        handle = await chains.start(run)
        await asyncio.wait_for(child_asked.wait(), 30)
        (child,) = [v for v in await chains.runs() if agent_of(v) == "writer"]
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        child_handle = chains.client.get_workflow_handle(child.workflow_id)
        child_status = (await child_handle.describe()).status
        writer_turns = len(chains.turns("writer"))
        never.set()
    assert isinstance(failed.value.cause, CancelledError)
    # The parent waited for the child to close; it asked the model nothing more.
    assert child_status != WorkflowExecutionStatus.RUNNING
    assert writer_turns == 1


async def test_a_parent_cancelled_while_waiting_for_admission_starts_no_child() -> None:
    # The cancelled admission is not "no answer" (a tool message): no child is
    # started, and the parent ends cancelled at once.
    def brain(turn: Turn) -> ScriptedResponse:
        return (
            tool_calls_response(delegate("writer", "draft"))
            if turn.agent == "main"
            else text_response("x")
        )

    run = to_writer("go", ChainBudgetLimit(max_runs=5))
    stand_in = StandIn(hold=asyncio.Event())
    async with running_chains(brain, admission=stand_in) as chains:
        handle = await chains.start(run)
        await eventually(lambda: bool(stand_in.asked), "an admission request")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        assert stand_in.hold is not None
        stand_in.hold.set()
        runs = await chains.runs()
    assert isinstance(failed.value.cause, CancelledError)
    assert [agent_of(v) for v in runs] == ["main"]
    assert chains.turns("writer") == []


async def test_children_and_lineage_are_carried_across_continue_as_new() -> None:
    # The root continues-as-new after every turn. Its first child still counts against
    # the budget afterwards (visibility of other runs excludes the root's own children,
    # so only carried state can count it); a child that continues-as-new keeps its depth.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer" and turn.turn <= 2:
            return tool_calls_response(delegate("writer", f"{turn.task} / sub {turn.turn}"))
        if turn.agent == "writer":
            return text_response(f"wrote {turn.task}")
        if turn.turn <= 2:
            return tool_calls_response(delegate("writer", f"part {turn.turn}"))
        return text_response("done")

    agents = {
        "writer": profile(
            "writer", delegates_to=["writer"], limits=RunLimits(continue_as_new_after_turns=1)
        )
    }
    limits: list[ChainLimit] = [DepthLimit(max_depth=1), ChainBudgetLimit(max_runs=2)]
    run = chain_input(
        "go", to=["writer"], agents=agents, limits=limits, continue_as_new_after_turns=1
    )
    async with running_chains(brain) as chains:
        handle = await chains.start(run)
        result = await handle.result()
        history = await handle.fetch_history()
        writers = chains.turns("writer")
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id  # the last run is a continuation
    first, second = tool_messages(result.transcript)
    assert first.content == "wrote part 1"
    assert "chain rule 'chain_budget'" in (second.content or "")
    # The child asked twice, once before and once after continuing-as-new: depth both times.
    refusals = writers[-1].results
    assert len(refusals) == 2
    assert all("chain rule 'depth'" in r for r in refusals)


async def test_when_the_admission_entity_cannot_answer_the_call_is_refused_as_retryable() -> None:
    # Counts that could not be taken must not let a burst through the budget: both
    # calls are refused, saying a later try can succeed, and no child starts. Depth,
    # checked in the run, refuses without asking the entity at all.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.turn == 1:
            return tool_calls_response(*(delegate("writer", f"part {p}") for p in "ab"))
        return text_response("done")

    limits: list[ChainLimit] = [DepthLimit(max_depth=1), ChainBudgetLimit(max_runs=9)]
    too_deep: list[ChainLimit] = [DepthLimit(max_depth=0), ChainBudgetLimit(max_runs=9)]
    stand_in = StandIn(unavailable=True)
    async with running_chains(brain, admission=stand_in) as chains:
        result = await (await chains.start(to_writer("go", *limits))).result()
        asked = len(stand_in.asked)
        deep = await (await chains.start(to_writer("go", *too_deep))).result()
        runs = await chains.runs()
    for message in tool_messages(result.transcript):
        assert "admission authority did not answer" in (message.content or "")
        assert "Trying again later can succeed" in (message.content or "")
    assert asked == 2 * 3  # two calls, three attempts of the activity each
    assert [agent_of(v) for v in runs] == ["main", "main"]
    for message in tool_messages(deep.transcript):
        assert "chain rule 'depth'" in (message.content or "")
    assert len(stand_in.asked) == asked


async def test_arguments_the_model_got_wrong_start_nothing() -> None:
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.turn == 1:
            return tool_calls_response(
                delegate("ghost", "x", "g"),
                ScriptedCall(DELEGATE_TOOL, {"agent": "writer"}, id="m"),
            )
        return text_response("ok")

    run = to_writer("go")
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        runs = await chains.runs()
    assert [agent_of(v) for v in runs] == ["main"]
    ghost, missing = tool_messages(result.transcript)
    assert "'agent' must be one of 'writer'; got 'ghost'" in (ghost.content or "")
    assert "'task' must be a non-empty string" in (missing.content or "")


async def test_a_gemini_run_is_offered_delegate_without_the_keyword_gemini_refuses() -> None:
    """Gemini refuses the whole request over `additionalProperties`: the `delegate` tool
    is sanitized for the run's profile like the run's own tools, on what the provider
    received."""
    offered: dict[str, dict[str, Any]] = {}

    def brain(turn: Turn) -> ScriptedResponse:
        return text_response("ok")

    run = to_writer("go").model_copy(update={"provider_profile": "gemini"})
    async with running_chains(brain) as chains:
        await (await chains.start(run)).result()
        for tool in chains.server.requests[0].json["tools"]:
            offered[tool["function"]["name"]] = tool["function"]["parameters"]
    assert offered[DELEGATE_TOOL]["required"] == ["agent", "task"]
    assert all("additionalProperties" not in schema for schema in offered.values()), offered


async def test_a_run_whose_own_tool_is_named_delegate_fails_with_a_clear_error() -> None:
    run = to_writer("go")
    run = run.model_copy(update={"tools": ["add", DELEGATE_TOOL]})
    async with running_chains(lambda turn: text_response("unused")) as chains:
        handle = await chains.start(run)
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == RESERVED_TOOL_NAME
    assert "rename the tool" in str(cause)


async def test_a_delegating_run_under_an_id_visibility_cannot_match_fails_clearly() -> None:
    run = to_writer("go")
    async with running_chains(lambda turn: text_response("unused")) as chains:
        handle = await chains.start(run, workflow_id="order 'B'")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        asked = chains.turns()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == UNUSABLE_WORKFLOW_ID
    assert "order 'B'" in str(cause)
    assert asked == []


# -- the token budget covers child runs ------------------------------------------------


def budgeted(task: str, budget: int | None, **run_limits: Any) -> RunInput:
    """A root that may delegate to `writer` (who may use `add`), with a token budget."""
    agents = {"writer": profile("writer", tools=["add"])}
    limits: list[ChainLimit] = [DepthLimit(max_depth=1)]
    return chain_input(
        task, to=["writer"], agents=agents, limits=limits, token_budget=budget, **run_limits
    )


async def test_a_child_gets_what_the_parent_has_left_and_the_parent_counts_what_it_spent() -> None:
    # Budget 1,000. The parent's first turn costs 400 and delegates: the child may spend
    # the 600 left. Its first turn costs 700, so its own budget stops it; the parent has
    # then spent 1,100 with its child's and stops at its next boundary.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            if turn.turn == 1:
                return tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}), usage=(700, 0))
            return text_response("wrote it", usage=(10, 0))
        if turn.turn == 1:
            return tool_calls_response(delegate("writer", "draft"), usage=(400, 0))
        return text_response("done", usage=(10, 0))

    async with running_chains(brain) as chains:
        result = await (await chains.start(budgeted("go", 1000))).result()
        inputs = await run_inputs(chains.client, await chains.runs())
        parent_turns = len(chains.turns("main"))
    child = next(i for i in inputs if i.agent == "writer")
    assert child.limits.token_budget == 600
    (answered,) = tool_messages(result.transcript)
    assert "stopped without an answer (token_budget: 700 tokens used of a budget of 600" in (
        answered.content or ""
    )
    assert result.stop_reason == "token_budget"
    assert result.detail == (
        "1100 tokens used of a budget of 1000 (400 by this run, 700 by its child runs)"
    )
    assert parent_turns == 1  # stopped before asking the model again
    assert_every_call_answered(result.transcript)


async def test_a_delegation_with_nothing_left_of_the_budget_is_refused_and_starts_nothing() -> None:
    # The first child spends 800 of 1,000; the parent's second turn costs 150 and asks
    # for another child: nothing is left, so the call is answered with a refusal.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            return text_response(f"wrote {turn.task}", usage=(800, 0))
        if turn.turn == 1:
            return tool_calls_response(delegate("writer", "first"), usage=(100, 0))
        if turn.turn == 2:
            return tool_calls_response(delegate("writer", "second", "again"), usage=(150, 0))
        return text_response("done", usage=(10, 0))

    async with running_chains(brain) as chains:
        result = await (await chains.start(budgeted("go", 1000))).result()
        writers = chains.turns("writer")
        runs = await chains.runs()
    first, refused = tool_messages(result.transcript)
    assert first.content == "wrote first"
    assert refused.tool_call_id == "again"
    assert refused.content == (
        "Delegation refused: this run's token budget is spent (1050 tokens used of a budget "
        "of 1000 (250 by this run, 800 by its child runs)), so a child run would have "
        "nothing to spend. Answer with what you have; delegating again will not help."
    )
    assert [t.task for t in writers] == ["first"]
    assert sorted(agent_of(v) for v in runs) == ["main", "writer"]
    assert (result.stats.child_runs, result.stats.child_refusals) == (1, 1)
    assert result.stop_reason == "token_budget"
    assert_every_call_answered(result.transcript)


async def test_a_parent_without_a_budget_leaves_its_children_their_own() -> None:
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent != "main":
            return text_response(f"{turn.agent} done", usage=(5_000, 0))
        if turn.turn == 1:
            return tool_calls_response(
                delegate("writer", "w"), delegate("critic", "c"), usage=(5_000, 0)
            )
        return text_response("done")

    agents = {
        "writer": profile("writer"),
        "critic": profile("critic", limits=RunLimits(token_budget=300)),
    }
    run = chain_input("go", to=["writer", "critic"], agents=agents, limits=[])
    async with running_chains(brain) as chains:
        result = await (await chains.start(run)).result()
        inputs = {i.agent: i for i in await run_inputs(chains.client, await chains.runs())}
    assert inputs["main"].limits.token_budget is None
    assert inputs["writer"].limits.token_budget is None
    assert inputs["critic"].limits.token_budget == 300
    assert result.stop_reason == "final_answer"
    assert result.stats.tokens_with_children > 15_000


async def test_after_continue_as_new_the_parent_still_counts_its_earlier_children() -> None:
    # The parent continues-as-new after every turn. Its first child spent 700 before the
    # hand-over; afterwards the second child gets only what is left with it counted, and
    # the parent stops on the sum.
    def brain(turn: Turn) -> ScriptedResponse:
        if turn.agent == "writer":
            return text_response(
                f"wrote {turn.task}", usage=(700 if turn.task == "first" else 60, 0)
            )
        if turn.turn == 1:
            return tool_calls_response(delegate("writer", "first"), usage=(100, 0))
        if turn.turn == 2:
            return tool_calls_response(delegate("writer", "second"), usage=(150, 0))
        return text_response("done", usage=(10, 0))

    run = budgeted("go", 1000, continue_as_new_after_turns=1)
    async with running_chains(brain) as chains:
        handle = await chains.start(run)
        result = await handle.result()
        history = await handle.fetch_history()
        inputs = await run_inputs(chains.client, await chains.runs())
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id  # the last run is a continuation
    (second,) = [i for i in inputs if i.prompt == "second"]
    assert second.limits.token_budget == 50  # 1,000 - 250 own - 700 by the first child
    assert [m.content for m in tool_messages(result.transcript)] == [
        "wrote first",
        "wrote second",
    ]
    assert result.stop_reason == "token_budget"
    assert result.detail == (
        "1010 tokens used of a budget of 1000 (250 by this run, 760 by its child runs)"
    )
