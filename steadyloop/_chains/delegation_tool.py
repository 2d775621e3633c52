"""The built-in `delegate` tool: its schema, reading its arguments, and the child it starts.

Pure, no I/O; the workflow (`steadyloop._workflows.delegation`) does the starting.
What is decided here, and why:

- **The child's workflow id is derived from the parent's id and the call's receipt
  key** (`child_workflow_id`), never random: a parent that asks for the same
  delegation again under a fresh ledger (restarted under the same id, reset) finds the
  same child instead of starting a second one.
- **Arguments the model got wrong are a tool message**, like any tool's: an agent that
  is not offered, a blank task, an unexpected key. Nothing is started.
- **A child cannot outlive its parent's deadline**: its own deadline is cut to what
  remains of the parent's, so it stops with its own `deadline` reason and answers.
- **A child cannot spend more than its parent has left**: its token budget is cut to
  what remains of the parent's (`tokens_left`), so it stops with its own
  `token_budget` reason and answers; a parent without a budget leaves the child's own.
- **Every way a child ends is an answer**: its final answer is the tool result; a child
  that stopped without one (turns, tokens, deadline) or failed is reported in words
  the model can act on.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from steadyloop._chains.lineage import descend_chain
from steadyloop._receipts.decision import ReceiptKey
from steadyloop._run.bounds import text_problem
from steadyloop._run.models import Delegation, RunInput, RunResult
from steadyloop.tools._content import cap_content
from steadyloop.tools._payloads import ToolDescription, ToolOutcome
from steadyloop.tools._schema_profiles import SchemaProfile, sanitize_tool_schema

__all__ = [
    "AWAIT_CHILD_RUN_ACTIVITY",
    "DELEGATE_TOOL",
    "DELEGATION_HORIZON_S",
    "AwaitChildRunInput",
    "DelegateRequest",
    "child_failed_outcome",
    "child_outcome",
    "child_run_input",
    "child_workflow_id",
    "delegate_tool_description",
    "read_delegate_request",
]

DELEGATE_TOOL = "delegate"
AWAIT_CHILD_RUN_ACTIVITY = "steadyloop.await_child_run"
# How long a delegation's receipt is leased when neither run has a deadline: a child
# workflow is durable, so the lease only has to outlast it, not detect a lost worker.
DELEGATION_HORIZON_S = 30 * 24 * 3600.0


class DelegateRequest(BaseModel):
    """A readable `delegate` call: which agent, and the task it is given."""

    model_config = ConfigDict(frozen=True)

    agent: str
    task: str


class AwaitChildRunInput(BaseModel):
    """Which existing child run to wait for (one this run's state does not know)."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str


def delegate_tool_description(
    delegation: Delegation, profile: SchemaProfile = "portable"
) -> ToolDescription:
    """The tool the model sees: one `agent` from those offered, and a self-contained task,
    its schema made acceptable to `profile`'s provider as every other tool's is (Gemini
    refuses the whole request over `additionalProperties`; `openai_strict` marks it
    strict)."""
    agents = delegation.agents
    listing = "\n".join(f"- {name}: {agents[name].description}" for name in delegation.to)
    return ToolDescription(
        name=DELEGATE_TOOL,
        description=(
            "Hand a task to another agent and wait for its answer. The agent works in its "
            "own run and sees only the task, so include everything it needs. Agents:\n" + listing
        ),
        parameters=sanitize_tool_schema(
            {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "enum": list(delegation.to)},
                    "task": {"type": "string", "description": "The complete task for the agent."},
                },
                "required": ["agent", "task"],
                "additionalProperties": False,
            },
            profile,
        ),
        strict=profile == "openai_strict",
        effect="opaque",
        timeout_s=DELEGATION_HORIZON_S,
    )


def _invalid(detail: str) -> ToolOutcome:
    return ToolOutcome(
        status="invalid_arguments",
        content=f"Invalid tool arguments: {detail}",
        error_type="InvalidDelegation",
    )


def read_delegate_request(
    arguments: dict[str, Any], delegation: Delegation
) -> DelegateRequest | ToolOutcome:
    """The request, or the tool message that says what to fix."""
    extra = sorted(set(arguments) - {"agent", "task"})
    if extra:
        return _invalid(f"unexpected argument(s) {extra}; expected 'agent' and 'task'")
    agent, task = arguments.get("agent"), arguments.get("task")
    if not isinstance(agent, str) or agent not in delegation.to:
        offered = ", ".join(repr(name) for name in delegation.to)
        return _invalid(f"'agent' must be one of {offered}; got {agent!r}")
    if not isinstance(task, str) or not task.strip():
        return _invalid("'task' must be a non-empty string describing the work")
    problem = text_problem(task)
    if problem is not None:  # the child's prompt (`RunInput.prompt`) would be refused
        return _invalid(f"'task' {problem}")
    return DelegateRequest(agent=agent, task=task)


def child_workflow_id(parent_id: str, key: ReceiptKey) -> str:
    """The child's workflow id: the parent's id and the call's content hash.

    The receipt key's other parts (tenant, tool) are fixed within one parent, so the
    parent id and the arguments hash identify the call.
    """
    return f"{parent_id}/delegate-{key.args_hash[:32]}"


def child_run_input(
    parent: RunInput,
    *,
    parent_id: str,
    request: DelegateRequest,
    remaining_s: float | None,
    tokens_left: int | None = None,
) -> RunInput:
    """The child's input: its profile, the parent's tenant, and its place in the chain.

    `remaining_s` and `tokens_left` are what the parent has left of its deadline and
    token budget (None: no bound); each caps the profile's own limit.
    """
    assert parent.delegation is not None  # only a run that may delegate gets here
    profile = parent.delegation.agents[request.agent]
    limits = profile.limits
    if remaining_s is not None:
        own = limits.deadline_s
        cut = max(1.0, remaining_s if own is None else min(own, remaining_s))
        limits = limits.model_copy(update={"deadline_s": cut})
    if tokens_left is not None:
        budget = limits.token_budget
        tokens = max(1, tokens_left if budget is None else min(budget, tokens_left))
        limits = limits.model_copy(update={"token_budget": tokens})
    route = profile.route
    if route is None and profile.endpoint is None and profile.model is None:
        route = parent.route  # the parent's model, and the parent's way of reaching it
    return RunInput(
        endpoint="" if route is not None else profile.endpoint or parent.endpoint,
        model="" if route is not None else profile.model or parent.model,
        route=route,
        prompt=request.task,
        system_prompt=profile.system_prompt,
        tools=list(profile.tools),
        limits=limits,
        sampling=profile.sampling or parent.sampling,
        tool_choice=profile.tool_choice,
        prefill=profile.prefill or parent.prefill,
        tenant_id=parent.tenant_id,
        agent=request.agent,
        delegation=parent.delegation.for_child(request.agent),
        lineage=descend_chain(parent.lineage, parent_id),
        parent_agent=parent.agent,
    )


def child_outcome(agent: str, result: RunResult) -> ToolOutcome:
    """A finished child as the call's answer: its final answer, or why it has none."""
    if result.stop_reason == "final_answer" and result.final_answer is not None:
        content, truncated = cap_content(result.final_answer)
        return ToolOutcome(status="ok", content=content, truncated=truncated)
    return ToolOutcome(
        status="tool_error",
        content=(
            f"Agent {agent!r} stopped without an answer ({result.stop_reason}: "
            f"{result.detail or 'no detail'})."
        ),
        error_type="ChildStopped",
    )


def child_failed_outcome(agent: str, cause: str) -> ToolOutcome:
    """A child run that failed (no result at all)."""
    return ToolOutcome(
        status="tool_error",
        content=f"Agent {agent!r} failed before answering: {cause}",
        error_type="ChildFailed",
    )
