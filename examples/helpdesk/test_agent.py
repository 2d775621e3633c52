"""The helpdesk agent, tested with a scripted model: no key, no network, no waiting."""

from datetime import timedelta

from examples.helpdesk.agent import Desk
from steadyloop import RunLimits
from steadyloop.testing import AgentEnv, ScriptedModel


async def test_it_looks_the_order_up_then_emails_the_customer(
    agent_env: AgentEnv, desk: Desk
) -> None:
    model = (
        ScriptedModel()
        .calls("lookup_order", order_id="B-02")
        .rate_limited(retry_after=30)  # the provider pushes back once: retried
        .calls("send_email", to="ana@example.com", subject="B-02", body="It has shipped.")
        .cuts_stream()  # the connection drops mid-answer: retried
        .says("Ana has been told her toaster has shipped.")
    )
    run = await agent_env.run(model, "Where is Ana's order B-02?")

    assert run.stop_reason == "final_answer"
    assert run.answer == "Ana has been told her toaster has shipped."
    assert '"status":"shipped"' in (run.calls_to("lookup_order")[0].result or "")
    assert desk.outbox == [{"to": "ana@example.com", "subject": "B-02", "body": "It has shipped."}]
    assert run.stats.retries == {"model_http_status": 1, "model_network": 1}
    run.assert_every_call_answered()


async def test_a_refund_waits_overnight_for_a_person_and_runs_once(
    agent_env: AgentEnv, desk: Desk
) -> None:
    model = (
        ScriptedModel()
        .calls("refund", order_id="A-17", cents=3450)
        .calls("refund", order_id="A-17", cents=3450)  # asked again: replayed, not repeated
        .says("Refunded.")
    )
    running = await agent_env.start(model, "Refund A-17.", limits=RunLimits(deadline_s=24 * 3600))
    (waiting,) = await running.approvals()
    assert (waiting.tool, waiting.arguments) == ("refund", {"order_id": "A-17", "cents": 3450})
    assert desk.refunds == []  # nothing moves before a person says so

    await agent_env.sleep(timedelta(hours=14))  # the approver comes in the next morning
    await running.approve()
    run = await running.result()

    assert run.stop_reason == "final_answer"
    assert desk.refunds == [("A-17", 3450)]  # once, though the model asked twice
    assert [r.status for r in run.receipts] == ["completed"]
    assert run.stats.tool_replays == 1
    assert run.stats.wall_time_s >= 14 * 3600


async def test_nobody_approving_stops_the_run_at_its_deadline(
    agent_env: AgentEnv, desk: Desk
) -> None:
    model = ScriptedModel().calls("refund", order_id="A-17", cents=3450)
    run = await agent_env.run(model, "Refund A-17.", limits=RunLimits(deadline_s=3600))

    assert run.stop_reason == "deadline"  # an hour of workflow time, skipped
    assert desk.refunds == []
    assert "deadline" in (run.calls_to("refund")[0].result or "")
