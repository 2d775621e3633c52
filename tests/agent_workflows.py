"""Workflows of a user's own, each running an agent through `steadyloop.workflow.Agent`:
hosted beside the loop by `AgentEnv(workflows=...)` in tests/test_workflow_agent.py."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop import RunLimits
    from steadyloop.workflow import Agent, AgentStopped

helper = Agent(name="helper", instructions="Answer in one line.", model="helper-model")
one_turn = Agent(
    name="one-turn", model="looping-model", tools=["add"], limits=RunLimits(max_turns=1)
)


@workflow.defn
class AskWorkflow:
    """Asks the helper agent once and returns its answer."""

    @workflow.run
    async def run(self, question: str) -> str:
        return await helper.run(question)


@workflow.defn
class CatchingWorkflow:
    """Runs an agent that cannot finish in one turn, and says how it stopped."""

    @workflow.run
    async def run(self, question: str) -> str:
        try:
            return await one_turn.run(question)
        except AgentStopped as stopped:
            return f"stopped {stopped.stop_reason} in {stopped.run_id}"


@workflow.defn
class FailingWorkflow:
    """Runs the same agent without catching: its stop fails this workflow."""

    @workflow.run
    async def run(self, question: str) -> str:
        return await one_turn.run(question)


@workflow.defn
class KeyedWorkflow:
    """Asks under a key, then continues as new once and asks again under the same key:
    the second ask must get the first child's answer, not run the agent again."""

    @workflow.run
    async def run(self, question: str, answer: str | None = None) -> str:
        got = await helper.run(question, key="only")
        if answer is None:
            workflow.continue_as_new(args=[question, got])
        return f"{answer} / {got}"


@workflow.defn
class WaitingWorkflow:
    """Runs an agent whose call waits for a person: cancelled meanwhile in a test."""

    @workflow.run
    async def run(self, question: str) -> str:
        return await Agent(name="waiter", model="waiting-model", tools=["refund"]).run(
            question, key="waiter"
        )


@workflow.defn
class TenantWorkflow:
    """Runs an agent in tenant acme's space, so acme's people approve it on the web."""

    @workflow.run
    async def run(self, question: str) -> str:
        agent = Agent(name="desk", model="desk-model", tools=["refund"], tenant="acme")
        return await agent.run(question, key="desk")


@workflow.defn
class SurrogateWorkflow:
    """Asks the helper with a prompt the loop refuses (a lone surrogate made in here)."""

    @workflow.run
    async def run(self, question: str) -> str:
        return await helper.run(question + chr(0xD800))
