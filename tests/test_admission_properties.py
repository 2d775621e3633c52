"""Chain admission as properties: over random delegation trees and arrival orders, the
admission entity never lets a chain exceed `max_runs`, nor a tenant `max_active`.

Runs are `ParkedWorkflow`s on Temporal's time-skipping test server (so the entity can
ask Temporal whether a counted run closed), admissions go through the entity the
worker runs (`ChainAdmissionWorkflow`), and the requests of a round are sent at once,
in an order Hypothesis picks. After each round Hypothesis closes some runs (the root
among them: a chain whose root ended keeps its counts). The entity continues as new
every few updates (`continue_as_new_after` drawn too), so counts carried across its
continue-as-new are part of every property.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parked_workflow import ParkedWorkflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import AdmissionRequest, ChildAsk, RunEntry
from steadyloop._chains.limits import (
    ChainBudgetLimit,
    ChainLimit,
    ChainPosition,
    TenantCeilingLimit,
    pair_key,
)
from steadyloop._chains.rules import Refused
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow

pytestmark = pytest.mark.slow
AGENT = "worker"
START_DELAY_S = 0.05
PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass
class Lab:
    """A time-skipping server and a worker, on a loop of their own (Hypothesis calls
    the test body synchronously, once per example)."""

    loop: asyncio.AbstractEventLoop
    client: Client
    task_queue: str
    stack: AsyncExitStack

    def run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self.loop.run_until_complete(coroutine)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()

    async def start() -> Lab:
        env = await stack.enter_async_context(
            await WorkflowEnvironment.start_time_skipping(
                data_converter=pydantic_data_converter,
                test_server_existing_path=time_skipping_server_path(),
            )
        )
        task_queue = f"admission-{uuid.uuid4().hex[:8]}"
        activities = ChainAdmissionActivities(env.client, task_queue=task_queue)
        await stack.enter_async_context(
            Worker(
                env.client,
                task_queue=task_queue,
                workflows=[ChainAdmissionWorkflow, ParkedWorkflow],
                activities=activities.activities(),
            )
        )
        return Lab(loop, env.client, task_queue, stack)

    built = loop.run_until_complete(start())
    try:
        yield built
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


@dataclass(eq=False)
class Node:
    index: int
    parent: int | None
    depth: int
    workflow_id: str
    admitted: bool = False
    running: bool = False


@dataclass
class Forest:
    """Chains of one tenant: `parents[i]` is node i's parent (None: a root)."""

    tenant: str
    nodes: list[Node]
    refusals: list[tuple[Node, Refused]] = field(default_factory=list)  # (the child, why)

    @classmethod
    def build(cls, parents: list[int | None]) -> Forest:
        tenant = f"t-{uuid.uuid4().hex[:8]}"
        nodes: list[Node] = []
        for index, parent in enumerate(parents):
            depth = 0 if parent is None else nodes[parent].depth + 1
            nodes.append(Node(index, parent, depth, f"{tenant}/run-{index}"))
        return cls(tenant, nodes)

    def root_of(self, node: Node) -> Node:
        while node.parent is not None:
            node = self.nodes[node.parent]
        return node

    def chain_runs(self, root: Node) -> int:
        return sum(n.admitted and self.root_of(n) is root for n in self.nodes)

    def running(self) -> int:
        return sum(n.running for n in self.nodes)


def forests(max_nodes: int) -> st.SearchStrategy[list[int | None]]:
    """Parent indices: node 0 is a root, each later node a root or a child of an earlier."""

    @st.composite
    def build(draw: st.DrawFn) -> list[int | None]:
        size = draw(st.integers(2, max_nodes))
        parents: list[int | None] = [None]
        for index in range(1, size):
            parents.append(draw(st.one_of(st.none(), st.integers(0, index - 1))))
        return parents

    return build()


async def play(
    lab: Lab,
    forest: Forest,
    limits: list[ChainLimit],
    data: st.DataObject,
    continue_as_new_after: int,
) -> None:
    """Start the roots; then, round after round, every waiting child of a running run
    asks at once (in a drawn order), and a drawn set of running runs closes."""
    admission = ChainAdmissionActivities(
        lab.client, task_queue=lab.task_queue, continue_as_new_after=continue_as_new_after
    )
    started = datetime.now(UTC)

    async def start(node: Node) -> None:
        await lab.client.start_workflow(
            ParkedWorkflow.run, False, id=node.workflow_id, task_queue=lab.task_queue
        )
        node.running = True

    def request(node: Node, child: Node | None) -> AdmissionRequest:
        parent = None if node.parent is None else forest.nodes[node.parent]
        pair = None if parent is None else pair_key(AGENT, AGENT)
        return AdmissionRequest(
            tenant=forest.tenant,
            run=RunEntry(
                workflow_id=node.workflow_id,
                chain_root=forest.root_of(node).workflow_id,
                parent=None if parent is None else parent.workflow_id,
                agent=AGENT,
                pair=pair,
                started_at=started,
            ),
            position=ChainPosition(
                agent=AGENT,
                parent_agent=None if parent is None else AGENT,
                depth=node.depth,
                started_at=started,
            ),
            child=None
            if child is None
            else ChildAsk(workflow_id=child.workflow_id, agent=AGENT, limits=limits),
        )

    async def ask(child: Node) -> None:
        assert child.parent is not None
        answer = await admission.admit(request(forest.nodes[child.parent], child))
        if isinstance(answer.admission, Refused):
            forest.refusals.append((child, answer.admission))
            return
        child.admitted = True
        # The parent starts it once admitted, a moment later (its activity completes,
        # then a workflow task starts the child): a window other admissions fall in.
        await asyncio.sleep(START_DELAY_S)
        await start(child)

    for root in (n for n in forest.nodes if n.parent is None):
        root.admitted = True
        await start(root)
        await admission.admit(request(root, None))  # a delegating root registers
    # Drawn up front, not from what happened: which runs admit depends on timing, and a
    # draw that depended on it would make Hypothesis's replays inconsistent.
    size = len(forest.nodes)
    priority = data.draw(st.permutations(range(size)), label="arrival priority")
    closing = data.draw(
        st.lists(st.sets(st.integers(0, size - 1)), min_size=size, max_size=size),
        label="runs closing after each round",
    )
    asked: set[int] = set()
    for closes in closing:
        waiting = [
            n
            for n in forest.nodes
            if n.parent is not None and n.index not in asked and forest.nodes[n.parent].running
        ]
        if not waiting:
            break
        order = sorted(waiting, key=lambda n: priority.index(n.index))
        asked.update(n.index for n in order)
        await asyncio.gather(*(ask(n) for n in order))
        # The ceiling's property: never more runs at once than the ceiling allows.
        for limit in limits:
            if isinstance(limit, TenantCeilingLimit):
                assert forest.running() <= limit.max_active
        for node in (forest.nodes[i] for i in sorted(closes) if forest.nodes[i].running):
            await lab.client.get_workflow_handle(node.workflow_id).signal(ParkedWorkflow.release)
            await lab.client.get_workflow_handle(node.workflow_id).result()
            node.running = False
    for node in forest.nodes:
        if node.running:
            await lab.client.get_workflow_handle(node.workflow_id).signal(ParkedWorkflow.release)


@PROPERTY
@given(parents=forests(12), max_runs=st.integers(1, 6), every=st.integers(1, 6), data=st.data())
def test_no_arrival_order_lets_a_chain_exceed_its_budget(
    lab: Lab, parents: list[int | None], max_runs: int, every: int, data: st.DataObject
) -> None:
    forest = Forest.build(parents)
    lab.run(play(lab, forest, [ChainBudgetLimit(max_runs=max_runs)], data, every))
    for root in (n for n in forest.nodes if n.parent is None):
        runs = forest.chain_runs(root)
        assert runs <= max_runs
        # Authoritative, not merely conservative: a chain refuses only once it is full
        # (runs never leave a budget's count, closed or not).
        if any(forest.root_of(child) is root for child, _ in forest.refusals):
            assert runs == max_runs
    for _, refused in forest.refusals:
        assert refused.rule.kind == "chain_budget"
        assert f"already has {max_runs} run(s)" in refused.reason


@PROPERTY
@given(parents=forests(12), extra=st.integers(0, 3), every=st.integers(1, 6), data=st.data())
def test_no_arrival_order_lets_a_tenant_exceed_its_ceiling(
    lab: Lab, parents: list[int | None], extra: int, every: int, data: st.DataObject
) -> None:
    # Roots are never refused (only delegations are): the ceiling leaves room for them.
    max_active = sum(p is None for p in parents) + extra
    forest = Forest.build(parents)
    # `play` asserts after every round that no more runs are running than the ceiling.
    lab.run(play(lab, forest, [TenantCeilingLimit(max_active=max_active)], data, every))
    for _, refused in forest.refusals:
        assert refused.rule.kind == "tenant_ceiling"
        assert f"may have at most {max_active} at once" in refused.reason
