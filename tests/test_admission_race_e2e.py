"""From outside: siblings that delegate at once cannot overshoot a
chain budget. A real dev server, the worker steadyloop ships, a scripted model.

Every run of the chain asks for three delegations per batch to an agent that may
delegate back; the root's three children hold their first answer until all three have
asked (`Barrier`), so the three siblings ask for admission at the same moment. With
`ChainBudgetLimit(max_runs=6)` the chain must end with 6 runs: the root, its 3
children, and 2 of the 9 grandchildren asked for. Counting through visibility, each
sibling saw the root and its two siblings, admitted, and the chain ended with 7.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from delegation_harness import Gate, Turn, chain_input, delegate, profile, read_turn
from loop_harness import ENDPOINT, Effects, tool_messages

from steadyloop._chains.limits import ChainBudgetLimit, ChainLimit, DepthLimit
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

SIBLINGS = 3


class Barrier:
    """Holds each of the root's children's first answer until all of them have asked."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_here = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.all_here.set()
        await asyncio.wait_for(self.all_here.wait(), 30)


def fan_out(task: str) -> ScriptedResponse:
    return tool_calls_response(*(delegate("worker", f"{task}/{part}") for part in "abc"))


async def test_siblings_admitting_at_once_cannot_overshoot_the_chain_budget() -> None:
    barrier = Barrier(SIBLINGS)

    async def brain(turn: Turn) -> ScriptedResponse:
        if turn.turn > 1:
            return text_response(f"{turn.task} done")
        if turn.task.count("/") == 1:  # a child of the root: its siblings ask at once
            await barrier.wait()
        return fan_out(turn.task)

    async def respond(request: RecordedRequest) -> ScriptedResponse:
        return await brain(read_turn(request))

    agents = {"worker": profile("worker", delegates_to=["worker"])}
    limits: list[ChainLimit] = [DepthLimit(max_depth=5), ChainBudgetLimit(max_runs=6)]
    run = chain_input("t", to=["worker"], agents=agents, limits=limits)
    async with ScriptedServer(respond) as server, dev_server(ui=False) as temporal:
        options = WorkerOptions(
            task_queue=f"race-{uuid.uuid4().hex[:8]}",
            endpoints=EndpointRegistry([server.endpoint(ENDPOINT)]),
            tools=Gate().tools(Effects()),
        )
        async with running_worker(temporal.client, options):
            result = await temporal.client.execute_workflow(
                ToolLoopWorkflow.run,
                run,
                id=f"race-{uuid.uuid4().hex[:8]}",
                task_queue=options.task_queue,
            )
        turns = [read_turn(r) for r in server.requests]
    runs = sorted(t.task for t in turns if t.turn == 1)
    assert barrier.all_here.is_set()  # the siblings did ask at once
    assert len(runs) == 6, runs  # the root, 3 children, 2 grandchildren: never 7
    assert len([r for r in runs if r.count("/") == 2]) == 2
    refusals = [r for t in turns for r in t.results if "chain rule 'chain_budget'" in r]
    assert refusals and all("already has 6 run(s)" in r for r in refusals)
    assert [m.content for m in tool_messages(result.transcript)] == [
        f"t/{part} done" for part in "abc"
    ]
