"""An agent run from a user's own workflow (`steadyloop.workflow.Agent`), hosted by the
test kit beside the loop on one task queue, as `SteadyloopPlugin` hosts it in production.

What decides the outcome for a user: the parent gets the agent's answer; a stop other
than an answer fails the parent (or is caught), never its workflow task; a person can
approve the child's call through the client API by the child's id; cancelling the parent
cancels the child; a parent that continued as new and asks under the same key gets the
child's answer without running the agent again."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from agent_workflows import (
    AskWorkflow,
    CatchingWorkflow,
    FailingWorkflow,
    KeyedWorkflow,
    SurrogateWorkflow,
    TenantWorkflow,
    WaitingWorkflow,
)
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from steadyloop._web.app import create_app
from steadyloop._web.client_backend import ClientBackend
from steadyloop._web.settings import web_settings
from steadyloop.client import PendingApproval, RunHandle
from steadyloop.errors import AGENT_INPUT_REFUSED, AGENT_STOPPED
from steadyloop.testing import AgentEnv, ScriptedModel
from steadyloop.tools import ToolRegistry, tool
from steadyloop.workflow import Agent, AgentDefinitionError

pytestmark = pytest.mark.slow
WORKFLOWS = [
    AskWorkflow,
    CatchingWorkflow,
    FailingWorkflow,
    KeyedWorkflow,
    WaitingWorkflow,
    TenantWorkflow,
    SurrogateWorkflow,
]


@tool(effect="pure")
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


REFUNDS: list[str] = []


@tool(effect="opaque", approval=True)
async def refund(order: str) -> str:
    """Refund an order."""
    REFUNDS.append(order)
    return f"refunded {order}"


def env() -> AgentEnv:
    return AgentEnv(ToolRegistry([add, refund]), workflows=WORKFLOWS)


def wid() -> str:
    return f"order-{uuid.uuid4().hex[:8]}"


async def test_the_parent_gets_the_agents_answer_and_the_child_is_a_run_of_its_own() -> None:
    async with env() as e:
        script = e.script(ScriptedModel().says("forty-two"))
        parent = wid()
        answer = await e.client.execute_workflow(
            AskWorkflow.run, "What is 6 * 7?", id=parent, task_queue=e.task_queue
        )
        assert answer == "forty-two"
        assert script.requests[0].messages[0]["content"] == "Answer in one line."
        # The child is the loop, under an id derived from the parent's, on its queue.
        children = [
            event.start_child_workflow_execution_initiated_event_attributes
            async for event in e.client.get_workflow_handle(parent).fetch_history_events()
            if event.HasField("start_child_workflow_execution_initiated_event_attributes")
        ]
        assert [c.workflow_type.name for c in children] == ["ToolLoopWorkflow"]
        assert children[0].workflow_id.startswith(f"{parent}.helper.")
        assert children[0].workflow_id.endswith("/1")  # its thread's first run
        assert children[0].task_queue.name == e.task_queue
        result = await e.steadyloop.run(children[0].workflow_id).result()
        assert result.final_answer == "forty-two"


async def test_a_stop_without_an_answer_can_be_caught_or_fails_the_parent() -> None:
    async with env() as e:
        e.script(ScriptedModel().calls("add", a=1, b=2).calls("add", a=3, b=4))
        caught = await e.client.execute_workflow(
            CatchingWorkflow.run, "sum", id=wid(), task_queue=e.task_queue
        )
        assert caught.startswith("stopped max_turns in ")
    async with env() as e:
        e.script(ScriptedModel().calls("add", a=1, b=2).calls("add", a=3, b=4))
        handle = await e.client.start_workflow(
            FailingWorkflow.run, "sum", id=wid(), task_queue=e.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == AGENT_STOPPED
        assert "stopped max_turns" in cause.message and cause.non_retryable
        # Failed once, as a workflow: not a workflow task retried forever.
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.FAILED


async def test_a_person_approves_the_childs_call_by_the_childs_id() -> None:
    REFUNDS.clear()
    async with env() as e:
        e.script(ScriptedModel().calls("refund", order="A-1").says("done"))
        parent = wid()
        handle = await e.client.start_workflow(
            WaitingWorkflow.run, "refund A-1", id=parent, task_queue=e.task_queue
        )
        # The child is its thread's run 1: found as the web page and the CLI find runs.
        child = await _latest(e, f"{parent}.waiter.waiter")
        assert child.workflow_id == f"{parent}.waiter.waiter/1"
        pending = await _pending(child)
        assert [p.tool for p in pending] == ["refund"] and REFUNDS == []
        await child.approve(pending[0])
        async with e.skipping_time():
            assert await handle.result() == "done"
        assert REFUNDS == ["A-1"]


async def test_the_tenants_people_approve_the_childs_call_on_the_web_and_others_cannot() -> None:
    REFUNDS.clear()
    async with env() as e:
        e.script(ScriptedModel().calls("refund", order="W-3").says("done"))
        parent = wid()
        handle = await e.client.start_workflow(
            TenantWorkflow.run, "refund W-3", id=parent, task_queue=e.task_queue
        )
        agent = Agent(name="desk", model="desk-model", tenant="acme")
        thread = agent.web_thread_id_for(parent, "desk")
        (waiting,) = await _pending(e.steadyloop.run(agent.child_id_for(parent, "desk")))
        backend = ClientBackend(e.steadyloop)
        tokens = {"STEADYLOOP_WEB_TOKENS": "acme=a,globex=g"}
        app = create_app(backend, web_settings({}, tokens))
        url = f"/v1/threads/{thread}/runs/1/approvals/{waiting.call_id}"
        body = {"approve": True, "sha256": waiting.arguments_sha256}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60
        ) as http:
            other = await http.post(url, json=body, headers={"Authorization": "Bearer g"})
            assert other.status_code == 404, other.text  # another tenant names nothing
            assert REFUNDS == []
            approved = await http.post(url, json=body, headers={"Authorization": "Bearer a"})
            assert approved.status_code == 200, approved.text
        async with e.skipping_time():
            assert await handle.result() == "done"
        assert REFUNDS == ["W-3"]


async def test_cancelling_the_parent_cancels_the_child() -> None:
    REFUNDS.clear()
    async with env() as e:
        e.script(ScriptedModel().calls("refund", order="B-2").says("done"))
        parent = wid()
        handle = await e.client.start_workflow(
            WaitingWorkflow.run, "refund B-2", id=parent, task_queue=e.task_queue
        )
        child = e.steadyloop.run(f"{parent}.waiter.waiter/1")
        await _pending(child)
        await handle.cancel()
        async with e.skipping_time():
            with pytest.raises(WorkflowFailureError):
                await handle.result()
        status = (await child.temporal_handle.describe()).status
        assert status == WorkflowExecutionStatus.CANCELED
        assert REFUNDS == []


async def test_a_parent_that_continued_as_new_gets_the_childs_answer_again() -> None:
    async with env() as e:
        script = e.script(ScriptedModel().says("first and only"))
        parent = wid()
        answer = await e.client.execute_workflow(
            KeyedWorkflow.run, "once", id=parent, task_queue=e.task_queue
        )
        assert answer == "first and only / first and only"
        assert len(script.requests) == 1  # the agent ran once


async def _latest(e: AgentEnv, thread: str) -> RunHandle:
    for _ in range(400):
        latest = await e.steadyloop.thread(thread).latest()
        if latest is not None:
            return latest
        await asyncio.sleep(0.05)
    raise AssertionError(f"thread {thread} never had a run")


async def _pending(child: RunHandle) -> list[PendingApproval]:
    for _ in range(400):
        try:
            pending = await child.pending_approvals()
        except Exception:  # the child may not have started yet
            pending = []
        if pending:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError("the child's call never waited for approval")


def test_an_agent_the_loop_could_not_run_is_refused_where_it_is_defined() -> None:
    with pytest.raises(AgentDefinitionError, match="endpoint and a model"):
        Agent(name="nameless")  # no model: refused at import, not as a task failing forever
    with pytest.raises(AgentDefinitionError, match="response_format"):
        Agent(name="x", model="m", settings={"response_format": {"type": "json_object"}})


async def test_a_prompt_the_loop_refuses_fails_the_parent_once_naming_it() -> None:
    async with env() as e:
        handle = await e.client.start_workflow(
            SurrogateWorkflow.run, "hi", id=wid(), task_queue=e.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == AGENT_INPUT_REFUSED
        assert "prompt" in cause.message and "surrogate" in cause.message
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.FAILED
