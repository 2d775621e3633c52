"""Run an agent from your own workflow: an `Agent` defined at module level, run as a child.

    refund_agent = Agent(
        name="refund",
        instructions="Decide whether the order gets a refund.",
        tools=["lookup_order", "charge_card"],
        output_type=RefundDecision,
    )

    @workflow.defn
    class OrderWorkflow:
        @workflow.run
        async def run(self, order: Order) -> str:
            decision = await refund_agent.run(f"Order {order.id}: {order.complaint}")
            ...

`Agent.run` starts steadyloop's loop as a child workflow of the calling workflow, on its
task queue (the worker has `SteadyloopPlugin`), and returns the final answer: the
`output_type` instance, validated, or the text when the agent has none. Everything a run
started any other way has holds for it: its tool calls run under receipts, a person can
approve a call from the CLI, the client API or the web page (the child's workflow id is
the run's id), messages steer it, and its event log is followed the same way.

A stop other than a final answer raises `AgentStopped`, an `ApplicationError`: uncaught,
it fails the calling workflow (never a workflow task retried forever); caught, the
workflow decides (`stopped.stop_reason`, `stopped.result`).

The child's id is deterministic: it is run 1 of thread `<your workflow id>.<agent
name>.<key>` (workflow id `<thread>/1`), so the CLI, `steadyloop.client` threads and the
web page find it as they find any thread's run. `key` defaults to an id from
`workflow.uuid4()` (replay gives the same); pass your own to find the same child again:
a workflow that continued as new and asks with the same key gets the child's result
(finished, or still running with `ParentClosePolicy.ABANDON`) instead of running the
agent twice. Cancelling the calling workflow cancels the child.

Importable in workflow code: it holds definitions over steadyloop's payload models, and
a worker with the plugin passes it through the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, cast

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from typing_extensions import TypeVar

with workflow.unsafe.imports_passed_through():
    from steadyloop._chains.delegation_tool import (
        AWAIT_CHILD_RUN_ACTIVITY,
        AwaitChildRunInput,
    )
    from steadyloop._routing.route_plan import RouteConfig
    from steadyloop._run.models import RunInput, RunLimits, RunResult, Sampling
    from steadyloop._web.thread_ids import client_thread, web_thread_id
    from steadyloop.client._threads import THREAD_MEMO, ThreadMemo, run_workflow_id
    from steadyloop.errors import AGENT_INPUT_REFUSED, AGENT_STOPPED, SteadyloopError
    from steadyloop.events._publishing import log_mode_memo

__all__ = [
    "AGENT_INPUT_REFUSED",
    "AGENT_STOPPED",
    "Agent",
    "AgentDefinitionError",
    "AgentStopped",
]

OutputT = TypeVar("OutputT", default=str)

LOOP_WORKFLOW = "ToolLoopWorkflow"
# How long re-attaching to a child started before a continue-as-new may wait for it.
DEFAULT_ATTACH_HORIZON = timedelta(days=7)
ATTACH_HEARTBEAT_TIMEOUT = timedelta(seconds=30)


class AgentDefinitionError(SteadyloopError, ValueError):
    """An `Agent` the loop could not run (no model, an unknown field in `settings`, a
    bad `output_type`...): raised where it is defined, naming the field."""


class AgentStopped(ApplicationError, SteadyloopError):
    """The agent's run stopped without a final answer (a turn limit, a deadline, an
    interrupt, an output the model never got right...). An `ApplicationError`, so an
    uncaught one fails the calling workflow with the stop named, instead of failing its
    task forever. `stop_reason`, `detail` and `run_id` say which run and why; `result` is
    the whole `RunResult` when this workflow caught it (not carried across a failure)."""

    def __init__(self, agent: str, run_id: str, result: RunResult) -> None:
        detail = result.detail or ""
        partial = result.partial.text if result.partial is not None else ""
        raw = result.raw_output or ""  # an `invalid_output` stop's last answer
        super().__init__(
            f"agent {agent!r} (run {run_id}) stopped {result.stop_reason}"
            + (f": {detail}" if detail else ""),
            {
                "agent": agent,
                "run_id": run_id,
                "stop_reason": result.stop_reason,
                "detail": detail,
                "partial": partial,
                "raw_output": raw,
            },
            type=AGENT_STOPPED,
            non_retryable=True,
        )
        self.agent = agent
        self.run_id = run_id
        self.stop_reason: str = result.stop_reason
        self.detail = detail
        self.result = result


@dataclass(frozen=True)
class Agent(Generic[OutputT]):
    """An agent a workflow can run: what it is told, which model, which tools, its
    limits and the type of its answer. Immutable, so one definition at module level
    serves every workflow run.

    `model` and `endpoint` name a model on one of the worker's endpoints; `route` a list
    of candidates instead (then leave both out).
    `tools` are tool names (or tools, read by `.name`) the worker serves. `output_type`
    a pydantic model: the answer is asked for in that shape, validated, and returned as
    an instance. `task_queue`: where its workers poll (the calling workflow's queue when
    None). `settings`: any other `RunInput` field (`sampling`, `forwarding`,
    `tool_choice`...), checked by `RunInput` when the agent runs."""

    name: str
    instructions: str | None = None
    model: str = ""
    endpoint: str = "default"
    route: RouteConfig | None = None
    tools: Sequence[Any] = ()
    limits: RunLimits = field(default_factory=RunLimits)
    sampling: Sampling | None = None
    output_type: type[OutputT] | None = None
    task_queue: str | None = None
    tenant: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A definition the loop would refuse fails where it is written (at import, so a
        # worker with it does not start), never as a workflow task retried forever.
        try:
            self.run_input("(checking the definition)")
        except ValidationError as exc:
            raise AgentDefinitionError(f"agent {self.name!r}: {_problems(exc)}") from None

    def run_input(self, prompt: str, *, messages: Sequence[Any] = ()) -> RunInput:
        """The loop's input for one run of this agent with `prompt`."""
        fields: dict[str, Any] = dict(self.settings)
        if self.tenant is not None:
            fields["tenant_id"] = self.tenant
        if self.sampling is not None:
            fields["sampling"] = self.sampling
        if self.output_type is not None:
            fields["output_type"] = self.output_type
        return RunInput(
            agent=self.name,
            endpoint=self.endpoint,
            model=self.model,
            route=self.route,
            system_prompt=self.instructions,
            tools=[tool if isinstance(tool, str) else str(tool.name) for tool in self.tools],
            limits=self.limits,
            prompt=prompt,
            messages=list(messages),
            **fields,
        )

    async def run(
        self,
        prompt: str,
        *,
        key: str | None = None,
        parent_close_policy: workflow.ParentClosePolicy = workflow.ParentClosePolicy.REQUEST_CANCEL,
    ) -> OutputT:
        """Run the agent as a child of the calling workflow; its answer, typed.
        `AgentStopped` when it stops another way (see the module's docstring)."""
        child_id, result = await self._child(prompt, key, parent_close_policy)
        if result.stop_reason != "final_answer":
            raise AgentStopped(self.name, child_id, result)
        if self.output_type is None:
            return cast(OutputT, result.final_answer or "")
        return self._typed(child_id, result)

    async def run_result(
        self,
        prompt: str,
        *,
        key: str | None = None,
        parent_close_policy: workflow.ParentClosePolicy = workflow.ParentClosePolicy.REQUEST_CANCEL,
    ) -> RunResult:
        """Run the agent as `run` does; the whole `RunResult`, however it stopped."""
        return (await self._child(prompt, key, parent_close_policy))[1]

    def thread_id(self, key: str) -> str:
        """The thread of this agent's run under `key` in the calling workflow."""
        return self.thread_id_for(workflow.info().workflow_id, key)

    def child_id(self, key: str) -> str:
        """The workflow id of this agent's run under `key`: its thread's run 1."""
        return self.child_id_for(workflow.info().workflow_id, key)

    def thread_id_for(self, parent_workflow_id: str, key: str) -> str:
        """The thread of this agent's run under `key` in workflow `parent_workflow_id`
        (outside workflow code: a test, a script approving its calls)."""
        name = f"{parent_workflow_id}.{self.name}.{key}"
        return name if self.tenant is None else client_thread(self.tenant, name)

    def web_thread_id_for(self, parent_workflow_id: str, key: str) -> str:
        """The id the web page and routes give this run's thread, for an agent with a
        `tenant` (its people open `/threads/<id>`)."""
        if self.tenant is None:
            raise ValueError(f"agent {self.name!r} has no tenant: no web page lists its runs")
        return web_thread_id(self.tenant, f"{parent_workflow_id}.{self.name}.{key}")

    def child_id_for(self, parent_workflow_id: str, key: str) -> str:
        """The workflow id of this agent's run under `key` in `parent_workflow_id`."""
        return run_workflow_id(self.thread_id_for(parent_workflow_id, key), 1)

    async def _child(
        self, prompt: str, key: str | None, policy: workflow.ParentClosePolicy
    ) -> tuple[str, RunResult]:
        key = key if key is not None else str(workflow.uuid4())
        child_id = self.child_id(key)
        try:
            run = self.run_input(prompt)
        except ValidationError as exc:  # the prompt (its size, a lone surrogate...)
            raise ApplicationError(
                f"agent {self.name!r} cannot run this prompt: {_problems(exc)}",
                type=AGENT_INPUT_REFUSED,
                non_retryable=True,
            ) from None
        thread = ThreadMemo(thread=self.thread_id(key), run=1, key=f"agent:{key}")
        try:
            handle = await workflow.start_child_workflow(
                LOOP_WORKFLOW,
                run,
                id=child_id,
                task_queue=self.task_queue or workflow.info().task_queue,
                result_type=RunResult,
                parent_close_policy=policy,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                # A thread's first run, to every reader; where its followers find its log.
                memo={THREAD_MEMO: thread.model_dump(mode="json"), **log_mode_memo(run)},
                static_summary=f"agent {self.name}: {prompt[:120]}",
            )
        except WorkflowAlreadyStartedError:
            return child_id, await self._attach(child_id)
        result: RunResult = await handle
        return child_id, result

    async def _attach(self, child_id: str) -> RunResult:
        result: RunResult = await workflow.execute_activity(
            AWAIT_CHILD_RUN_ACTIVITY,
            AwaitChildRunInput(workflow_id=child_id),
            result_type=RunResult,
            task_queue=self.task_queue or workflow.info().task_queue,
            schedule_to_close_timeout=DEFAULT_ATTACH_HORIZON,
            heartbeat_timeout=ATTACH_HEARTBEAT_TIMEOUT,
        )
        return result

    def _typed(self, child_id: str, result: RunResult) -> OutputT:
        output_type = cast(type[BaseModel], self.output_type)
        value = getattr(result, "output", None)
        try:
            return cast(OutputT, output_type.model_validate(value))
        except ValidationError as exc:
            refused = result.model_copy(
                update={
                    "stop_reason": "invalid_output",
                    "detail": f"{output_type.__name__} refused the answer: {exc}",
                    "raw_output": result.final_answer,
                }
            )
            raise AgentStopped(self.name, child_id, refused) from None


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )
