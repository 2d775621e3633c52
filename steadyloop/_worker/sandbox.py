"""What a steadyloop worker registers and how its sandbox treats steadyloop's modules.

Shared by `steadyloop.plugin` (every worker of steadyloop's is built by it) and the
tests that check the passthrough list stays safe.
"""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop._workflows.output_stream import OutputStreamWorkflow
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop._workflows.worker_description import DescribeWorkerWorkflow

# Every workflow a run needs: the loop, the host of its forwarded output, and the
# endpoint-health entities its routes record outcomes on (started on this task queue).
# A worker serving these also registers `EndpointHealthActivities(...).activities()`:
# the loop reads health through them as local activities.
# The tenants' chain-admission entities run here too (with `ChainAdmissionActivities`).
RUN_WORKFLOWS = [
    ToolLoopWorkflow,
    OutputStreamWorkflow,
    EndpointHealthWorkflow,
    ChainAdmissionWorkflow,
]
# Temporal's sandbox re-imports a workflow's module, and every module it reaches that is
# not passed through, for every run (and every replay): CPU spent on imports, not on the
# loop. Measured with `benchmarks/bench_loop.py`: re-importing `tool_loop` (a
# large module with many imports, each checked by the sandbox's importer) was about
# 13 ms of the 16 ms a steadyloop run cost over the floor. So the helper modules and the
# per-run workflow modules are passed through: they hold functions, classes and
# constants only (no module-level state: `tests/test_worker_sandbox.py`) and are
# deterministic by the rule of `steadyloop._workflows`, so runs can share them, as they
# already share the pure modules they import. What passing through gives up is the
# sandbox's *runtime* check of calls like `datetime.now()` inside them; a static check of
# every module under `steadyloop/_workflows/` takes its place
# (`tests/test_workflow_determinism.py`), and the replay tests still catch
# nondeterminism. It also needs every payload model complete at import, not at its first
# use inside the sandbox (`tests/test_payload_models_complete.py`). The entity workflows
# (`endpoint_health`, `chain_admission`) are created rarely and stay re-imported, as
# the SDK intends.
PASSED_THROUGH_WORKFLOW_HELPERS = (
    "steadyloop._workflows.activity_tools",
    "steadyloop._workflows.approvals",
    "steadyloop._workflows.compaction_step",
    "steadyloop._workflows.delegation",
    "steadyloop._workflows.hand_over",
    "steadyloop._workflows.late_results",
    "steadyloop._workflows.model_request",
    "steadyloop._workflows.model_turn",
    "steadyloop._workflows.payload_ceiling",
    "steadyloop._workflows.receipt_path",
    "steadyloop._workflows.routed_turn",
    "steadyloop._workflows.run_state",
    "steadyloop._workflows.run_timeline",
    "steadyloop._workflows.steering",
    "steadyloop._workflows.tool_attempt",
    "steadyloop._workflows.tool_batch",
    "steadyloop._workflows.tool_disclosure",
    "steadyloop._workflows.turn_continuation",
    "steadyloop._workflows.turn_stops",
)
PASSED_THROUGH_WORKFLOW_MODULES = (
    "steadyloop._workflows.tool_loop",
    "steadyloop._workflows.output_stream",
)
# What a user's own workflow imports to run an agent (`steadyloop.workflow`): pure
# definitions over the payload models, so every run shares the real module.
PASSED_THROUGH_USER_MODULES = ("steadyloop.workflow",)
PASSED_THROUGH = (
    *PASSED_THROUGH_WORKFLOW_HELPERS,
    *PASSED_THROUGH_WORKFLOW_MODULES,
    *PASSED_THROUGH_USER_MODULES,
)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox every steadyloop worker runs workflows in (the SDK's defaults, plus
    `PASSED_THROUGH`)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    )


# What `steadyloop run` asks a worker for (its endpoints and tools, `steadyloop._serving`).
SERVING_WORKFLOWS = [DescribeWorkerWorkflow]
