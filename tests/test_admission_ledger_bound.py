"""The admission ledger rides in its entity's continue-as-new input, which
Temporal refuses past 2 MB (about 8,000 runs in open chains). It is bounded: once it
holds `max_ledger_bytes` (1 MB by default) a new run is refused by the retryable
`ledger_bound` rule, so the serialized input stays under 1 MB plus what one request
adds, however many admissions are asked for and however long the run ids grow.

The model is filled directly (every admission admitted, chains kept open); one
workflow-level check runs the entity on the time-skipping server: refused at its bound,
the hand-over's input measured, and admitted again once the counted runs are gone.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import (
    DEFAULT_MAX_LEDGER_BYTES,
    START_GRACE_S,
    AdmissionEntityInput,
    AdmissionLedger,
    AdmissionRequest,
    ChildAsk,
    RunEntry,
    admission_workflow_id,
)
from steadyloop._chains.limits import ChainBudgetLimit, ChainPosition
from steadyloop._chains.rules import Refused
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TWO_MB = 2 * 1024 * 1024
# The stated bound on the serialized continue-as-new input: the ledger's bound, plus one
# request's runs (two of at most 1,000-character ids here) and the input's envelope.
BOUND_BYTES = DEFAULT_MAX_LEDGER_BYTES + 8 * 1024
LIMITS = [ChainBudgetLimit(max_runs=1000)]


def long_id(kind: str, number: int, length: int = 100) -> str:
    return f"{kind}-{number:08d}-".ljust(length, "x")


def request(number: int, *, tenant: str = "acme", length: int = 100) -> AdmissionRequest:
    """Root `number` asks to start one child: a chain that stays open."""
    root = long_id("root", number, length)
    return AdmissionRequest(
        tenant=tenant,
        run=RunEntry(workflow_id=root, chain_root=root, agent="planner", started_at=T0),
        position=ChainPosition(agent="planner", depth=0, started_at=T0),
        child=ChildAsk(workflow_id=long_id("child", number, length), agent="worker", limits=LIMITS),
    )


def carried_bytes(ledger: AdmissionLedger) -> int:
    entity = AdmissionEntityInput(tenant=ledger.tenant, carried=ledger)
    return len(entity.model_dump_json().encode())


@pytest.mark.parametrize("length", [20, 100, 1000])
def test_a_full_ledger_refuses_new_runs_and_its_input_stays_under_the_bound(length: int) -> None:
    """10,000 admissions asked, each a chain left open, with run ids of `length`
    characters: the ledger stops at its bound, the continue-as-new input stays under
    BOUND_BYTES, and the size it kept as it grew is the size it serializes to."""
    ledger = AdmissionLedger(tenant="acme")
    admitted = refused = 0
    for number in range(10_000):
        asked = request(number, length=length)
        assert ledger.adds_runs(asked)
        full = ledger.refusal_when_full(DEFAULT_MAX_LEDGER_BYTES)
        if full is not None:  # what the entity answers before merging (`_refused_by_bound`)
            refused += 1
            continue
        ledger.merge(asked)
        ledger.record(asked, T0)  # admitted without `decide`: every rule generous here
        admitted += 1
    assert refused > 0 and admitted + refused == 10_000
    size = carried_bytes(ledger)
    assert DEFAULT_MAX_LEDGER_BYTES <= size < BOUND_BYTES < TWO_MB, size
    assert abs(ledger.bytes_held() - len(ledger.model_dump_json().encode())) <= len(ledger.runs)
    if length >= 100:  # unbounded, the same admissions would have passed Temporal's limit
        assert size / len(ledger.runs) * 2 * 10_000 > TWO_MB


def test_the_refusal_names_the_bound_and_says_trying_later_helps() -> None:
    ledger = AdmissionLedger(tenant="acme")
    ledger.merge(request(0))
    bound = ledger.bytes_held() + 1
    assert ledger.refusal_when_full(bound) is None
    ledger.merge(request(1))
    refusal = ledger.refusal_when_full(bound)
    assert isinstance(refusal, Refused) and refusal.retryable
    assert refusal.rule.kind == "ledger_bound"
    assert "holds 2 run(s)" in refusal.reason and f"bound of {bound}" in refusal.reason
    # Forgetting closed chains frees the room it took.
    ledger.mark_closed(list(ledger.runs))
    ledger.prune(T0 + timedelta(days=1))
    assert ledger.refusal_when_full(bound) is None


async def test_the_entity_refuses_at_its_bound_hands_over_under_it_and_admits_again() -> None:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=time_skipping_server_path(),
    )
    async with env:
        task_queue = f"bound-{uuid.uuid4().hex[:8]}"
        tenant = f"t-{uuid.uuid4().hex[:6]}"
        # Room for six runs of 100-character ids (three admissions of a root and a child).
        held = AdmissionLedger(tenant=tenant)
        for n in range(3):
            held.merge(request(n, tenant=tenant))
            held.record(request(n, tenant=tenant), T0)
        admission = ChainAdmissionActivities(
            env.client,
            task_queue=task_queue,
            continue_as_new_after=8,
            max_ledger_bytes=held.bytes_held() - 10,
        )
        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=[ChainAdmissionWorkflow],
            activities=list(admission.activities()),
        ):
            answers = [await admission.admit(request(n, tenant=tenant)) for n in range(5)]
            kinds = [
                a.admission.rule.kind if isinstance(a.admission, Refused) else "admitted"
                for a in answers
            ]
            # Each admission holds two runs (the root and its child): three fill six.
            assert kinds == ["admitted"] * 3 + ["ledger_bound"] * 2
            # The counted runs were never started (fake ids): once the start grace has
            # passed, a full ledger learns they are gone and admits again.
            await env.sleep(timedelta(seconds=START_GRACE_S + 60))
            later = await admission.admit(request(9, tenant=tenant))
            assert later.admission is not None and later.admission.admitted
            for n in range(10, 14):  # past `continue_as_new_after`: it hands over
                await admission.admit(request(n, tenant=tenant))
            handed = await _handed_over_input(env, tenant)
    assert handed is not None
    assert handed < held.bytes_held() + 2 * 1024  # at most its bound, a request, the envelope


async def _handed_over_input(env: WorkflowEnvironment, tenant: str) -> int | None:
    """The byte size of the input the running execution was handed over (None: it is the
    first execution, after waiting for a hand-over)."""
    entity = env.client.get_workflow_handle(admission_workflow_id(tenant))
    for _ in range(50):
        run_id = (await entity.describe()).run_id
        history = await env.client.get_workflow_handle(entity.id, run_id=run_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        if started.continued_execution_run_id:
            return sum(len(p.data) for p in started.input.payloads)
        await asyncio.sleep(0.1)
    return None
