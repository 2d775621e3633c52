"""Roots started from outside pass the tenant's rate and ceiling (`decide_root`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from steadyloop._chains.admission import AdmissionLedger, AdmissionRequest, RunEntry
from steadyloop._chains.limits import ChainLimit, ChainPosition, TenantCeilingLimit, TenantRateLimit
from steadyloop._chains.rules import Refused

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def root(workflow_id: str, limits: list[ChainLimit]) -> AdmissionRequest:
    return AdmissionRequest(
        tenant="acme",
        run=RunEntry(workflow_id=workflow_id, chain_root=workflow_id, agent="main", started_at=T0),
        position=ChainPosition(agent="main", started_at=T0),
        root_limits=limits,
    )


def admit(ledger: AdmissionLedger, request: AdmissionRequest, now: datetime = T0) -> bool:
    decision = ledger.decide_root(request, now)
    if decision.admitted:
        ledger.record_root(request, now)
    return decision.admitted


def test_a_tenants_roots_stop_at_its_ceiling_and_a_refused_root_is_not_counted() -> None:
    ledger = AdmissionLedger(tenant="acme")
    limits: list[ChainLimit] = [TenantCeilingLimit(max_active=2)]
    assert admit(ledger, root("r1", limits))
    assert admit(ledger, root("r2", limits))
    refused = ledger.decide_root(root("r3", limits), T0)
    assert isinstance(refused, Refused) and refused.rule.kind == "tenant_ceiling"
    assert refused.retryable
    assert "r3" not in ledger.runs  # refusals do not fill the ceiling
    ledger.mark_closed(["r1"])
    assert admit(ledger, root("r3", limits))
    assert ledger.active() == 2


def test_a_tenants_roots_stop_at_its_rate_until_the_window_passes() -> None:
    ledger = AdmissionLedger(tenant="acme")
    limits: list[ChainLimit] = [TenantRateLimit(window_s=60, max_started=2)]
    assert admit(ledger, root("r1", limits))
    assert admit(ledger, root("r2", limits), T0 + timedelta(seconds=10))
    refused = ledger.decide_root(root("r3", limits), T0 + timedelta(seconds=20))
    assert isinstance(refused, Refused) and refused.rule.kind == "tenant_rate"
    assert admit(ledger, root("r3", limits), T0 + timedelta(seconds=61))
    assert ledger.horizon_s == 60  # kept long enough for the rate to read


def test_a_root_is_counted_against_the_runs_of_every_chain_of_its_tenant() -> None:
    ledger = AdmissionLedger(tenant="acme")
    ledger.runs["child"] = RunEntry(
        workflow_id="child", chain_root="other", parent="other", agent="b", started_at=T0
    )
    assert not admit(ledger, root("r1", [TenantCeilingLimit(max_active=1)]))
