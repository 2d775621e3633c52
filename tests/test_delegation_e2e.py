"""Delegation end to end on a real Temporal dev server: the worker steadyloop ships
(`build_worker`, with the admission entity's activities), the dev server steadyloop
starts (which registers the chain search attributes), chain rules decided by the
tenant's admission entity, and the attributes the workflows set counted by visibility.

The time-skipping server cannot list or count workflows; this is the one place the
workflow, the admission entity and the visibility store meet.
"""

from __future__ import annotations

import uuid

import pytest
from delegation_harness import Gate, Turn, chain_input, delegate, profile, read_turn
from loop_harness import ENDPOINT, Effects, tool_messages

from steadyloop._chains.limits import ChainBudgetLimit, ChainLimit, TenantCeilingLimit
from steadyloop._chains.queries import CHAIN_ROOT, quoted
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import WorkerOptions, running_worker
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    RecordedRequest,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow


def brain(turn: Turn) -> ScriptedResponse:
    """main -> writer -> critic; the critic tries to bring in another writer."""
    if turn.turn == 1 and turn.agent == "main":
        return tool_calls_response(delegate("writer", "draft"))
    if turn.turn == 1 and turn.agent == "writer":
        return tool_calls_response(delegate("critic", "review the draft"))
    if turn.turn == 1 and turn.agent == "critic":
        return tool_calls_response(delegate("writer", "rewrite it"))
    return text_response(f"{turn.agent}: {turn.results[-1]}")


async def test_a_chain_budget_is_decided_by_the_entity_and_visibility_shows_the_chain() -> None:
    # Budget three runs. The entity counted the root and the writer; the critic's own
    # delegation would be the fourth run and is refused. Visibility holds the three runs
    # under the chain's root, set there by the root's upsert and the children's starts.
    agents = {
        "writer": profile("writer", delegates_to=["critic"]),
        "critic": profile("critic", delegates_to=["writer"]),
    }
    limits: list[ChainLimit] = [TenantCeilingLimit(max_active=50), ChainBudgetLimit(max_runs=3)]
    run = chain_input("launch post", to=["writer"], agents=agents, limits=limits)

    def respond(request: RecordedRequest) -> ScriptedResponse:
        return brain(read_turn(request))

    async with ScriptedServer(respond) as server, dev_server(ui=False) as temporal:
        options = WorkerOptions(
            task_queue=f"e2e-{uuid.uuid4().hex[:8]}",
            endpoints=EndpointRegistry([server.endpoint(ENDPOINT)]),
            tools=Gate().tools(Effects()),
        )
        root_id = f"launch-{uuid.uuid4().hex[:8]}"
        async with running_worker(temporal.client, options):
            result = await temporal.client.execute_workflow(
                ToolLoopWorkflow.run, run, id=root_id, task_queue=options.task_queue
            )
        chain = await temporal.client.count_workflows(f"{CHAIN_ROOT} = {quoted(root_id)}")
        critic_turns = [t for t in map(read_turn, server.requests) if t.agent == "critic"]
    (answered,) = tool_messages(result.transcript)
    assert (answered.content or "").startswith("writer: critic: Delegation refused")
    refusal = critic_turns[-1].results[0]
    assert "chain rule 'chain_budget'" in refusal
    assert "already has 3 run(s)" in refusal
    assert chain.count == 3
    assert result.stats.children is not None
    assert result.stats.children.child_runs == 1 and result.stats.children.child_refusals == 1
