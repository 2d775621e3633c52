"""The `delegate` tool's pure parts: arguments, the child's id and input, its answer,
the delegation settings, and folding a child's stats into its parent's."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from steadyloop._chains.delegation_tool import (
    DELEGATE_TOOL,
    DelegateRequest,
    child_outcome,
    child_run_input,
    child_workflow_id,
    delegate_tool_description,
    read_delegate_request,
)
from steadyloop._chains.limits import ChainBudgetLimit, DepthLimit
from steadyloop._chains.lineage import Lineage, descend_chain
from steadyloop._receipts.decision import receipt_key
from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._run.models import (
    AgentProfile,
    Delegation,
    RunInput,
    RunLimits,
    RunResult,
    RunStats,
    Sampling,
)
from steadyloop.tools._content import MAX_TOOL_CONTENT_BYTES
from steadyloop.tools._schema_profiles import SCHEMA_PROFILES, SchemaProfile, sanitize_tool_schema

DELEGATION = Delegation(
    to=["writer", "critic"],
    agents={
        "writer": AgentProfile(
            description="Writes prose.",
            system_prompt="You write.",
            tools=["note"],
            delegates_to=["critic"],
            model="writer-model",
            limits=RunLimits(max_turns=4, deadline_s=600),
        ),
        "critic": AgentProfile(description="Finds faults."),
        "editor": AgentProfile(description="Not offered to the root."),
    },
    limits=[DepthLimit(max_depth=2), ChainBudgetLimit(max_runs=5)],
)
PARENT = RunInput(
    endpoint="ep",
    model="parent-model",
    prompt="p",
    tenant_id="acme",
    agent="planner",
    delegation=DELEGATION,
    sampling=Sampling(temperature=0.2),
)


def test_the_tool_offers_exactly_the_agents_this_run_may_delegate_to() -> None:
    tool = delegate_tool_description(DELEGATION)
    assert tool.name == DELEGATE_TOOL and tool.effect == "opaque"
    assert tool.parameters["properties"]["agent"]["enum"] == ["writer", "critic"]
    assert tool.parameters["required"] == ["agent", "task"]
    assert "Writes prose." in tool.description and "Not offered" not in tool.description


@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
def test_the_tools_schema_is_sanitized_for_the_runs_profile(profile: SchemaProfile) -> None:
    """As every other tool's: Gemini refuses a request over `additionalProperties`, and
    OpenAI's strict mode wants the tool marked strict. A portable run's tool is the one
    offered before profiles reached it, so a run recorded then asks the same."""
    own = delegate_tool_description(DELEGATION).parameters
    assert own["additionalProperties"] is False
    tool = delegate_tool_description(DELEGATION, profile)
    assert tool.parameters == sanitize_tool_schema(own, profile)
    assert tool.strict is (profile == "openai_strict")
    if profile == "gemini":
        assert "additionalProperties" not in tool.parameters


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"agent": "editor", "task": "x"}, "must be one of 'writer', 'critic'"),
        ({"agent": "nobody", "task": "x"}, "got 'nobody'"),
        ({"task": "x"}, "got None"),
        ({"agent": "writer", "task": "   "}, "'task' must be a non-empty string"),
        ({"agent": "writer", "task": 5}, "'task' must be a non-empty string"),
        ({"agent": "writer", "task": "x", "urgency": 1}, "unexpected argument(s) ['urgency']"),
    ],
)
def test_arguments_the_model_got_wrong_are_a_tool_message(
    arguments: dict[str, Any], problem: str
) -> None:
    outcome = read_delegate_request(arguments, DELEGATION)
    assert not isinstance(outcome, DelegateRequest)
    assert outcome.status == "invalid_arguments" and problem in outcome.content


def test_readable_arguments_are_a_request() -> None:
    request = read_delegate_request({"agent": "critic", "task": "Check it."}, DELEGATION)
    assert request == DelegateRequest(agent="critic", task="Check it.")


def test_the_child_id_is_the_parent_id_and_the_calls_content() -> None:
    same = receipt_key("acme", "parent-1", DELEGATE_TOOL, {"agent": "writer", "task": "a"})
    respelled = receipt_key("acme", "parent-1", DELEGATE_TOOL, {"task": "a", "agent": "writer"})
    other = receipt_key("acme", "parent-1", DELEGATE_TOOL, {"agent": "writer", "task": "b"})
    assert child_workflow_id("parent-1", same) == child_workflow_id("parent-1", respelled)
    assert child_workflow_id("parent-1", same) != child_workflow_id("parent-1", other)
    assert child_workflow_id("parent-1", same).startswith("parent-1/delegate-")
    assert child_workflow_id("parent-2", same) != child_workflow_id("parent-1", same)


def test_the_child_runs_its_profile_in_the_parents_tenant_one_generation_down() -> None:
    request = DelegateRequest(agent="writer", task="Draft it.")
    child = child_run_input(PARENT, parent_id="p-1", request=request, remaining_s=None)
    assert child.prompt == "Draft it." and child.system_prompt == "You write."
    assert (child.endpoint, child.model) == ("ep", "writer-model")
    assert child.tools == ["note"] and child.limits == RunLimits(max_turns=4, deadline_s=600)
    assert child.sampling == PARENT.sampling
    assert child.tenant_id == "acme"
    assert (child.agent, child.parent_agent) == ("writer", "planner")
    assert child.lineage == descend_chain(Lineage(), "p-1")
    assert child.delegation is not None and child.delegation.to == ["critic"]
    assert child.delegation.agents == DELEGATION.agents
    assert child.delegation.limits == DELEGATION.limits


def test_a_child_takes_the_parents_route_unless_its_profile_names_a_model() -> None:
    route = RouteConfig(
        candidates=[
            RouteCandidate(endpoint="a", model="ma"),
            RouteCandidate(endpoint="b", model="mb"),
        ]
    )
    own = RouteConfig.single("c", "mc")
    delegation = DELEGATION.model_copy(
        update={
            "agents": {
                **DELEGATION.agents,
                "editor": AgentProfile(description="Edits.", route=own),
            }
        }
    )
    routed = {"endpoint": "", "model": "", "route": route, "delegation": delegation}
    parent = RunInput.model_validate(PARENT.model_dump() | routed)

    def child(agent: str) -> RunInput:
        request = DelegateRequest(agent=agent, task="t")
        return child_run_input(parent, parent_id="p-1", request=request, remaining_s=None)

    critic, writer, editor = child("critic"), child("writer"), child("editor")
    assert (critic.route, critic.endpoint, critic.model) == (route, "a", "ma")
    assert (writer.route, writer.endpoint, writer.model) == (None, "a", "writer-model")
    assert (editor.route, editor.endpoint, editor.model) == (own, "c", "mc")


def test_a_profile_names_its_model_by_route_or_by_endpoint_not_both() -> None:
    with pytest.raises(ValidationError, match="not both"):
        AgentProfile(description="x", model="m", route=RouteConfig.single("c", "mc"))


def test_a_profile_that_delegates_nowhere_gets_no_delegation() -> None:
    request = DelegateRequest(agent="critic", task="Check it.")
    child = child_run_input(PARENT, parent_id="p-1", request=request, remaining_s=None)
    assert child.delegation is None and child.model == "parent-model"


@pytest.mark.parametrize(
    ("agent", "remaining", "deadline"),
    [
        ("writer", 30.0, 30.0),
        ("writer", 900.0, 600.0),
        ("critic", 45.0, 45.0),
        ("critic", 0.2, 1.0),
    ],
)
def test_a_child_never_outlives_the_parents_deadline(
    agent: str, remaining: float, deadline: float
) -> None:
    request = DelegateRequest(agent=agent, task="t")
    child = child_run_input(PARENT, parent_id="p", request=request, remaining_s=remaining)
    assert child.limits.deadline_s == deadline


@pytest.mark.parametrize(
    ("own", "left", "budget"),
    [
        (None, None, None),  # neither bounds it
        (None, 700, 700),  # the parent's remainder
        (500, None, 500),  # a parent without a budget leaves the profile's
        (500, 700, 500),  # the smaller wins
        (900, 700, 700),
    ],
)
def test_a_childs_token_budget_is_cut_to_what_the_parent_has_left(
    own: int | None, left: int | None, budget: int | None
) -> None:
    profile = AgentProfile(description="d", limits=RunLimits(token_budget=own))
    delegation = DELEGATION.model_copy(update={"agents": {**DELEGATION.agents, "critic": profile}})
    parent = PARENT.model_copy(update={"delegation": delegation})
    request = DelegateRequest(agent="critic", task="t")
    child = child_run_input(
        parent, parent_id="p", request=request, remaining_s=None, tokens_left=left
    )
    assert child.limits.token_budget == budget


def result(**fields: Any) -> RunResult:
    return RunResult(transcript=[], stats=RunStats(), **fields)


def test_a_childs_final_answer_is_the_tool_result() -> None:
    outcome = child_outcome("writer", result(final_answer="Done.", stop_reason="final_answer"))
    assert (outcome.status, outcome.content) == ("ok", "Done.")


def test_a_child_that_stopped_without_an_answer_says_why() -> None:
    stopped = result(final_answer=None, stop_reason="max_turns", detail="4 model turns taken")
    outcome = child_outcome("writer", stopped)
    assert outcome.status == "tool_error"
    assert "'writer'" in outcome.content and "max_turns: 4 model turns taken" in outcome.content


def test_a_huge_answer_is_capped_like_a_tool_result() -> None:
    huge = result(final_answer="x" * (MAX_TOOL_CONTENT_BYTES * 2), stop_reason="final_answer")
    outcome = child_outcome("writer", huge)
    assert outcome.truncated and len(outcome.content.encode()) <= MAX_TOOL_CONTENT_BYTES


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"to": ["ghost"]}, "to names agents with no profile: ['ghost']"),
        ({"to": ["a", "a"]}, "names an agent twice"),
        (
            {"to": [], "agents": {"a": {"description": "d", "delegates_to": ["ghost"]}}},
            "delegates_to names agents with no profile",
        ),
        ({"to": ["a|b"]}, "pattern"),
        (
            {"to": [], "limits": [{"kind": "depth", "max_depth": d} for d in (1, 2)]},
            "each kind of chain limit may be given once",
        ),
        ({"to": [], "limits": [{"kind": "chain_budget", "max_runs": 0}]}, "greater than or equal"),
    ],
)
def test_a_delegation_that_names_unknown_agents_or_repeats_a_limit_is_refused(
    fields: dict[str, Any], problem: str
) -> None:
    data = {"agents": {"a": {"description": "d"}}} | fields
    with pytest.raises(ValidationError, match=problem.replace("[", r"\[").replace("|", r"\|")):
        Delegation.model_validate(data)


def test_a_delegation_must_have_the_one_limit_that_needs_no_measurement() -> None:
    with pytest.raises(ValidationError, match="must include a depth limit"):
        Delegation(to=[], agents={}, limits=[ChainBudgetLimit(max_runs=3)])


def test_a_run_that_configures_no_limits_is_still_bounded() -> None:
    kinds = {limit.kind for limit in Delegation(to=[], agents={}).limits}
    assert {"depth", "chain_budget"} <= kinds


def test_a_childs_stats_fold_into_the_parents_children_with_its_descendants() -> None:
    grandchild = RunStats(turns=2, prompt_tokens=10, completion_tokens=1, defect_retries={"x": 1})
    child = RunStats(turns=3, prompt_tokens=100, tool_calls=4, child_runs=1)
    child.fold_child(grandchild)
    parent = RunStats(turns=5, prompt_tokens=1000)
    parent.fold_child(child)
    parent.fold_child(RunStats(turns=1, completion_tokens=7, defect_retries={"x": 2, "y": 1}))
    assert parent.turns == 5 and parent.prompt_tokens == 1000  # its own, unchanged
    folded = parent.children
    assert folded is not None and folded.children is None
    assert (folded.turns, folded.prompt_tokens, folded.completion_tokens) == (6, 110, 8)
    assert (folded.tool_calls, folded.child_runs) == (4, 1)
    assert folded.defect_retries == {"x": 3, "y": 1}
    assert parent.flattened().total_tokens == 1000 + 118


def test_a_delegating_run_needs_a_tenant_visibility_can_match() -> None:
    with pytest.raises(ValidationError, match='tenant_id "o\'brien"'):
        PARENT.model_validate(PARENT.model_dump() | {"tenant_id": "o'brien"})
    # Without delegation the tenant is never put in a query.
    plain = RunInput(endpoint="ep", model="m", prompt="p", tenant_id="o'brien")
    assert plain.tenant_id == "o'brien"
