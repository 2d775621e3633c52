"""The peers' side of `bench_peers.py`: the same agent (one tool, the same prompts) as a
workflow of Temporal's OpenAI Agents plugin and of pydantic-ai's `TemporalDurability`.

A workflow class must live in an importable module, not `__main__` (the sandbox refuses
it), so the peers' workflows live here and `bench_peers.py --worker` imports this module
only in a worker process, after the `bench` extra is known to be installed.

What a fair comparison needs, and where each is kept:
- the same tool, as the peer's own tool activity (`noop`: the OpenAI plugin's
  `activity_as_tool`, pydantic-ai's tool wrapped by its durability capability), so each
  round is one model call and one tool call in every system;
- no hidden extra work: the OpenAI Agents SDK exports traces to OpenAI by default
  (`set_tracing_disabled` in the worker), and its `Runner.run` stops at 10 turns unless
  told otherwise (`max_turns`);
- pydantic-ai streamed, as its docs recommend for durable agents (an event stream
  handler in the model activity), against the same provider; its agent is built with the
  provider's address before the sandbox imports the workflow (`peer_agent`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import peer_agent  # passed through: the worker built its agent there, outside the sandbox
    from agents import Agent, Runner
    from temporalio.openai_agents.workflow import activity_as_tool

SYSTEM_PROMPT = "You are a benchmark agent."
PROMPT = "Call the tool until you are told to stop."
TOOL_TIMEOUT = timedelta(seconds=30)


@activity.defn(name="noop")
async def noop(text: str) -> str:
    """Does nothing with the text; says how long it was (as bench_loop's tool does)."""
    return f"ok ({len(text)} chars)"


@workflow.defn(name="BenchOpenAIAgents")
class OpenAIAgentsWorkflow:
    """`Runner.run` of one agent with one activity tool, on the plugin's model activity."""

    @workflow.run
    async def run(self, model: str, max_turns: int) -> str:
        agent: Agent[Any] = Agent(
            name="bench",
            instructions=SYSTEM_PROMPT,
            model=model,
            tools=[activity_as_tool(noop, start_to_close_timeout=TOOL_TIMEOUT)],
        )
        result = await Runner.run(agent, PROMPT, max_turns=max_turns)
        return str(result.final_output)


@workflow.defn(name="BenchPydanticAI")
class PydanticAIWorkflow:
    """`agent.run` of the durable agent, its model picked by the script's name."""

    @workflow.run
    async def run(self, model: str, max_turns: int) -> str:
        from pydantic_ai.usage import UsageLimits

        agent = peer_agent.PYDANTIC_AGENT
        assert agent is not None, "peer_agent.build_pydantic_agent was not called"
        result = await agent.run(
            PROMPT, model=model, usage_limits=UsageLimits(request_limit=max_turns)
        )
        return str(result.output)
