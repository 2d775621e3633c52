"""Child runs: the agents a run may delegate to, and the chain limits that admit each one.

A run with `RunInput.delegation` offers the model a `delegate` tool; every child it
starts is admitted (or refused, with the reason given to the model as the tool's
answer) by the limits named here, checked across the whole chain of runs and the
tenant, so a model that delegates in a loop cannot start runs without end. See the
Chains page of the docs for what each limit counts and where it is enforced.

    from steadyloop.delegation import AgentProfile, Delegation, DepthLimit

    Delegation(
        to=["writer"],
        agents={"writer": AgentProfile(description="Writes prose.")},
        limits=[DepthLimit(max_depth=2)],
    )
"""

from temporalio import workflow

# Passed through for the reason the package root gives: one copy of each payload class,
# inside a workflow's sandbox and out.
with workflow.unsafe.imports_passed_through():
    from steadyloop._chains.limits import (
        ChainBudgetLimit,
        DepthLimit,
        PairCooldownLimit,
        PairSeenLimit,
        TenantCeilingLimit,
        TenantRateLimit,
    )
    from steadyloop._run.models import AgentProfile, Delegation

__all__ = [
    "AgentProfile",
    "ChainBudgetLimit",
    "Delegation",
    "DepthLimit",
    "PairCooldownLimit",
    "PairSeenLimit",
    "TenantCeilingLimit",
    "TenantRateLimit",
]
