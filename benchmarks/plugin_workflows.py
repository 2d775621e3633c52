"""steadyloop's side of `bench_peers.py` the way a Temporal user writes it: a workflow of
their own that runs an `Agent` (`steadyloop.workflow`) on a worker given
`SteadyloopPlugin`. The agent is the one `bench_peers.py` starts as `ToolLoopWorkflow`
directly (the same endpoint, instructions, prompt, tool and turn limit), so a round
costs the same loop; the run adds this workflow and the child's start.

A workflow class must live in an importable module, not `__main__` (the sandbox refuses
it). The constants come from `bench_loop`, passed through: the worker process has it
imported already, and it imports none of the peers' packages.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from bench_loop import ENDPOINT, PROMPT, SYSTEM_PROMPT, TOOL_NAME

    from steadyloop import RunLimits
    from steadyloop.workflow import Agent

AGENT = "bench"
KEY = "bench"  # the child's id: `<this workflow's id>.bench.bench/1`


@workflow.defn(name="BenchSteadyloopAgent")
class BenchAgentWorkflow:
    """`Agent.run` of the bench's agent, as a child of this workflow; its final answer."""

    @workflow.run
    async def run(self, model: str, max_turns: int) -> str:
        agent: Agent[str] = Agent(
            name=AGENT,
            endpoint=ENDPOINT,
            model=model,
            instructions=SYSTEM_PROMPT,
            tools=[TOOL_NAME],
            limits=RunLimits(max_turns=max_turns),
        )
        return await agent.run(PROMPT, key=KEY)
