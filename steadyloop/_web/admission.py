"""Root runs started through the server pass their tenant's `tenant_rate` and
`tenant_ceiling`, decided by the tenant's chain admission entity.

The entity (`steadyloop._workflows.chain_admission`) is the one count every server
process and every delegating run share, so a limit holds behind a load balancer: no
process counts on its own. The server asks it before starting a root
(`AdmissionRequest.root_limits`), as `admit_chain_run` does for a child, and a refusal
is 429 with `Retry-After`. A root admitted but never started (a start that lost a race
for the thread's next id) leaves the count once `START_GRACE_S` passed without it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.client import Client

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import AdmissionRequest, RunEntry
from steadyloop._chains.limits import ChainLimit, ChainPosition, TenantCeilingLimit, TenantRateLimit
from steadyloop._chains.rules import Refused
from steadyloop._web.backend import TooManyRuns
from steadyloop._web.settings import WebSettings
from steadyloop.client import RunHandle
from steadyloop.client._threads import run_workflow_id

__all__ = ["RootAdmission"]

# When the ceiling refuses, a run must end before another starts: ask again soon.
CEILING_RETRY_S = 5.0


class RootAdmission:
    """Asks the tenant's admission entity whether a thread's next root run may start."""

    def __init__(self, client: Client, *, task_queue: str, settings: WebSettings) -> None:
        self.entities = ChainAdmissionActivities(client, task_queue=task_queue)
        self.settings = settings

    def limits(self, tenant: str) -> list[ChainLimit]:
        tenant_limits = self.settings.limits(tenant)
        return [
            TenantRateLimit(
                window_s=tenant_limits.rate_window_s, max_started=tenant_limits.max_started_runs
            ),
            TenantCeilingLimit(max_active=tenant_limits.max_active_runs),
        ]

    async def admit(self, tenant: str, thread: str, latest: RunHandle | None) -> None:
        """Return when the next run of `thread` may start; `TooManyRuns` when not."""
        number = 1 if latest is None or latest.number is None else latest.number + 1
        workflow_id = run_workflow_id(thread, number)
        now = datetime.now(UTC)
        limits = self.limits(tenant)
        answer = await self.entities.admit(
            AdmissionRequest(
                tenant=tenant,
                run=RunEntry(
                    workflow_id=workflow_id, chain_root=workflow_id, agent="main", started_at=now
                ),
                position=ChainPosition(agent="main", started_at=now),
                root_limits=limits,
            )
        )
        decision = answer.admission
        if isinstance(decision, Refused):
            window = next(
                (x.window_s for x in limits if isinstance(x, TenantRateLimit)), CEILING_RETRY_S
            )
            retry = window if decision.rule.kind == "tenant_rate" else CEILING_RETRY_S
            raise TooManyRuns(decision.reason.replace("Delegation refused", "Run refused"), retry)
