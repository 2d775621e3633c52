"""The floor of `bench_loop.py` section 1: the tool loop with nothing but its activities.

`BareLoopWorkflow` runs steadyloop's own activities in the order and with the options a
healthy `ToolLoopWorkflow` run uses them, against the same scripted provider and tool,
and nothing else. It sits in a module of its own, small like a user's workflow file,
because Temporal's sandbox re-imports a workflow's module for every run: a floor in a
larger module would pay for code it does not run.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import orjson
    from pydantic import BaseModel, Field

    from steadyloop._chat import ChatMessage
    from steadyloop._run.models import RunLimits
    from steadyloop._stream.completion import (
        STREAM_COMPLETION_ACTIVITY,
        AssembledTurn,
        CompletionRequest,
    )
    from steadyloop.tools._payloads import (
        DESCRIBE_TOOLS_ACTIVITY,
        RUN_TOOL_ACTIVITY,
        DescribeToolsInput,
        DescribeToolsResult,
        ToolInvocation,
        ToolOutcome,
    )

# What `ToolLoopWorkflow` gives describe_tools, and a tool without a declared timeout.
DESCRIBE_TIMEOUT = timedelta(seconds=30)
TOOL_TIMEOUT = timedelta(seconds=30)

_LIMITS = RunLimits()


class BareLoopInput(BaseModel):
    """What a `ToolLoopWorkflow` run is given, as far as the bare loop needs it."""

    endpoint: str
    model: str
    system_prompt: str
    prompt: str
    tools: list[str]
    max_turns: int
    tenant_id: str = "default"


class BareLoopResult(BaseModel):
    """The final answer, the calls made, and the transcript (as `RunResult` carries it)."""

    final_answer: str | None = None
    tool_calls: int = 0
    transcript: list[ChatMessage] = Field(default_factory=list)


@workflow.defn(name="BenchBareLoopWorkflow", failure_exception_types=[Exception])
class BareLoopWorkflow:
    """The floor of `bench_loop.py` section 1: the tool loop with nothing but its activities.

    It runs steadyloop's own activities in the order and with the options a healthy
    `ToolLoopWorkflow` run uses them (`describe_tools` once, as a local activity; per
    turn `stream_completion` with the whole transcript and the tool specs, one attempt;
    then `run_tool` per call, one attempt, the tool's declared timeout), against the same
    scripted provider and tool, and returns the transcript as `RunResult` does. What it
    leaves out is what steadyloop adds: routing and health, receipts, transcript
    validation, argument reading, budgets and stats, steering, payload checks. So the
    ratio of the two is the cost of that logic, on the same server, worker and payloads.
    """

    @workflow.run
    async def run(self, request: BareLoopInput) -> BareLoopResult:
        described = await workflow.execute_local_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            DescribeToolsInput(names=request.tools),
            result_type=DescribeToolsResult,
            start_to_close_timeout=DESCRIBE_TIMEOUT,
        )
        specs = [tool.to_spec() for tool in described.tools]
        timeouts = {tool.name: timedelta(seconds=tool.timeout_s) for tool in described.tools}
        result = BareLoopResult(
            transcript=[
                ChatMessage(role="system", content=request.system_prompt),
                ChatMessage(role="user", content=request.prompt),
            ]
        )
        for turn in range(1, request.max_turns + 1):
            assembled: AssembledTurn = await workflow.execute_activity(
                STREAM_COMPLETION_ACTIVITY,
                CompletionRequest(
                    endpoint=request.endpoint,
                    model=request.model,
                    messages=result.transcript,
                    tools=specs,
                    mint_prefix=f"call_sl_t{turn}a1",
                ),
                result_type=AssembledTurn,
                # The timeouts a run with default limits gives each routed attempt.
                start_to_close_timeout=timedelta(seconds=_LIMITS.model_timeout_s),
                heartbeat_timeout=timedelta(seconds=_LIMITS.model_heartbeat_timeout_s or 0) or None,
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
            result.transcript.append(assembled.to_message())
            if not assembled.tool_calls:
                result.final_answer = assembled.text
                return result
            for call in assembled.tool_calls:
                outcome: ToolOutcome = await workflow.execute_activity(
                    RUN_TOOL_ACTIVITY,
                    ToolInvocation(
                        tool=call.name,
                        arguments=orjson.loads(call.arguments or "{}"),
                        call_id=call.id,
                        workflow_id=workflow.info().workflow_id,
                        tenant_id=request.tenant_id,
                    ),
                    result_type=ToolOutcome,
                    start_to_close_timeout=timeouts.get(call.name, TOOL_TIMEOUT),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
                result.transcript.append(
                    ChatMessage(role="tool", tool_call_id=call.id, content=outcome.content)
                )
                result.tool_calls += 1
        return result
