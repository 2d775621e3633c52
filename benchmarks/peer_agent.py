"""pydantic-ai's durable agent for `bench_peers.py`, built in the worker process.

The agent needs the provider's address, known only when the benchmark runs, and the
workflow must see the very agent the worker registered (`AgentPlugin` registers its
activities): so it is built here, on the host, and `peer_workflows` imports this module
passed through the sandbox, where a re-imported copy would hold no agent.
"""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = "You are a benchmark agent."

PYDANTIC_AGENT: Any = None  # set by `build_pydantic_agent` in the worker process


def build_pydantic_agent(base_url: str, models: list[str]) -> Any:
    """pydantic-ai's agent with `TemporalDurability`, streamed, one model per script."""
    global PYDANTIC_AGENT
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.durable_exec.temporal import TemporalDurability
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=base_url, api_key="bench")
    built = {name: OpenAIChatModel(name, provider=provider) for name in models}

    async def drain(_ctx: Any, events: Any) -> None:
        async for _event in events:
            pass

    agent: PydanticAgent[None, str] = PydanticAgent(
        built[models[0]],
        name="bench",
        instructions=SYSTEM_PROMPT,
        capabilities=[TemporalDurability(models=built, event_stream_handler=drain)],
    )

    @agent.tool_plain(name="noop")
    async def noop_tool(text: str) -> str:
        """Does nothing with the text; says how long it was."""
        return f"ok ({len(text)} chars)"

    PYDANTIC_AGENT = agent
    return agent
