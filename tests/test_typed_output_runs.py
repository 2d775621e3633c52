"""Typed output end to end, on the time-skipping server with the scripted provider.

What a user of `output_type` relies on, point by point:
- the request carries the schema as the wire's structured-output parameter, and a valid
  JSON answer is `RunResult.output`;
- prose is answered with the validation error and asked again, and a valid answer
  after that succeeds, the correction in the transcript;
- prose every time stops `invalid_output` after exactly `retries` extra turns, with the
  last answer's text as `raw_output`, and never fails the workflow task, whatever the
  model sends;
- an endpoint that refuses the parameter has it dropped, and the answer is still
  validated (the correction names the schema);
- the count of extra turns and the schema survive continue-as-new; tool calls with
  receipts and approvals come before a typed answer as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from steadyloop._run.models import RunLimits
from steadyloop.testing import AgentEnv, ScriptedModel
from steadyloop.tools import ToolRegistry, tool

pytestmark = pytest.mark.slow


class RefundDecision(BaseModel):
    approve: bool
    amount_cents: int
    reason: str | None = None


VALID = '{"approve": true, "amount_cents": 1200, "reason": null}'


def tools(charged: list[int]) -> ToolRegistry:
    @tool(effect="pure")
    async def order_total(order: str) -> int:
        """The order's total in cents."""
        return 1200

    @tool(effect="opaque", approval=True)
    async def refund(cents: int) -> str:
        """Refund the customer (a person approves it first)."""
        charged.append(cents)
        return f"refunded {cents}"

    return ToolRegistry([order_total, refund])


def sent_format(model: ScriptedModel, request: int = 0) -> Any:
    return model.requests[request].json.get("response_format")


async def test_a_valid_answer_is_the_output_and_the_request_asks_for_the_schema() -> None:
    async with AgentEnv(tools([])) as env:
        model = ScriptedModel().says(VALID)
        run = await env.run(model, "refund order 7?", output_type=RefundDecision)
    assert run.stop_reason == "final_answer"
    assert run.result.output == {"approve": True, "amount_cents": 1200, "reason": None}
    assert run.answer == VALID
    sent = sent_format(model)
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "RefundDecision"
    assert sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["additionalProperties"] is False
    assert sent["json_schema"]["schema"]["required"] == ["approve", "amount_cents", "reason"]
    RefundDecision.model_validate(run.result.output)  # what the workflow API will return


async def test_prose_is_answered_with_the_error_and_a_valid_answer_after_it_succeeds() -> None:
    async with AgentEnv(tools([])) as env:
        model = ScriptedModel().says("Yes, refund it in full.").says(VALID)
        run = await env.run(model, "refund order 7?", output_type=RefundDecision)
    assert run.stop_reason == "final_answer"
    assert run.result.output == {"approve": True, "amount_cents": 1200, "reason": None}
    assert run.stats.retries == {"invalid_output": 1}
    roles = [m.role for m in run.transcript]
    assert roles[-4:] == ["user", "assistant", "user", "assistant"]
    prose, correction = run.transcript[-3], run.transcript[-2]
    assert prose.content == "Yes, refund it in full."  # the invalid answer is kept
    assert correction.content is not None
    assert "not valid RefundDecision output: the answer is not JSON" in correction.content
    assert '"amount_cents"' in correction.content  # the schema itself, for the model
    # The model read its own answer and the correction on the second request.
    second = model.sent_messages(1)
    assert [m["role"] for m in second[-2:]] == ["assistant", "user"]


@pytest.mark.parametrize("retries", [0, 1, 3])
async def test_prose_every_time_stops_invalid_output_after_exactly_retries_extra_turns(
    retries: int,
) -> None:
    schema = RefundDecision.model_json_schema()
    output_type = {"name": "RefundDecision", "json_schema": schema, "retries": retries}
    async with AgentEnv(tools([])) as env:
        model = ScriptedModel()
        for number in range(retries + 1):
            model.says(f"prose {number}")
        run = await env.run(model, "refund order 7?", output_type=output_type)
    assert run.stop_reason == "invalid_output"
    assert len(model.requests) == retries + 1
    assert run.result.raw_output == f"prose {retries}"
    assert run.result.output is None and run.answer is None
    assert run.stats.retries.get("invalid_output", 0) == retries
    assert f"after {retries} extra turn(s)" in run.result.detail
    assert "the answer is not JSON" in run.result.detail


HOSTILE = [
    "NaN",  # not JSON
    '{"approve": true, "amount_cents": 1e400}',  # past a float's range
    '{"approve": "\\ud800", "amount_cents": 1}',  # a lone surrogate, once decoded
    "[" * 100_000,  # nested past any stack
    '{"approve": true, "amount_cents": ' + "9" * 5_000 + "}",  # too many digits
    '{"approve": true, "amount_cents": 1, "reason": "' + "x" * 300_000 + '",}',  # huge, bad
]


async def test_hostile_answers_are_corrected_never_a_failed_task() -> None:
    output_type = {
        "name": "RefundDecision",
        "json_schema": RefundDecision.model_json_schema(),
        "retries": len(HOSTILE),
    }
    weird_but_valid = '{"approve": false, "amount_cents": 0, "reason": "nul \\u0000 here"}'
    async with AgentEnv(tools([])) as env:
        model = ScriptedModel()
        for answer in HOSTILE:
            model.says(answer)
        model.says(weird_but_valid)
        run = await env.run(model, "refund?", output_type=output_type)
    assert run.stop_reason == "final_answer", run.result.detail
    assert run.result.output == {"approve": False, "amount_cents": 0, "reason": "nul \x00 here"}
    assert run.stats.retries == {"invalid_output": len(HOSTILE)}
    corrections = [
        m.content or ""
        for m in run.transcript
        if m.role == "user" and "not valid" in (m.content or "")
    ]
    assert len(corrections) == len(HOSTILE)
    assert "NaN is not a JSON number" in corrections[0]
    assert "past a float's range" in corrections[1]
    assert "lone surrogate" in corrections[2]
    assert "nested too deeply" in corrections[3]
    assert all(len(text) < 5_000 for text in corrections)  # bounded, whatever was sent


async def test_an_endpoint_that_refuses_the_parameter_still_ends_in_a_validated_answer() -> None:
    async with AgentEnv(tools([])) as env:
        model = (
            ScriptedModel()
            .errors(400, "response_format is not supported by this model")
            .says("Refund it.")  # without the schema, the model answers prose
            .says(VALID)
        )
        run = await env.run(model, "refund order 7?", output_type=RefundDecision)
    assert run.stop_reason == "final_answer"
    assert run.result.output == {"approve": True, "amount_cents": 1200, "reason": None}
    assert sent_format(model, 0) is not None
    assert sent_format(model, 1) is None and sent_format(model, 2) is None  # dropped
    correction = model.sent_messages(2)[-1]["content"]
    assert '"amount_cents"' in correction  # the schema reached the model after all


async def test_a_tool_call_under_its_receipt_then_an_approval_then_a_typed_answer() -> None:
    charged: list[int] = []
    async with AgentEnv(tools(charged)) as env:
        model = (
            ScriptedModel()
            .calls("order_total", order="7")
            .calls("refund", cents=1200)
            .says("done")
            .says(VALID)
        )
        running = await env.start(model, "refund order 7?", output_type=RefundDecision)
        await running.approve("refund")
        run = await running.result()
    assert run.stop_reason == "final_answer"
    assert charged == [1200]
    assert [r.tool for r in run.receipts] == ["order_total", "refund"]
    assert run.result.output == {"approve": True, "amount_cents": 1200, "reason": None}
    assert run.stats.retries == {"invalid_output": 1}  # "done" was corrected
    run.assert_every_call_answered()
    # Every request of a typed run asks for the schema, tool rounds included.
    assert all(r.json.get("response_format") is not None for r in model.requests)


async def test_a_run_that_continues_as_new_before_its_answer_still_validates_it() -> None:
    async with AgentEnv(tools([])) as env:
        model = ScriptedModel().calls("order_total", order="7").says("prose").says(VALID)
        run = await env.run(
            model,
            "refund order 7?",
            output_type=RefundDecision,
            limits=RunLimits(continue_as_new_after_turns=1),
        )
    assert run.stats.continued_as_new  # it handed over between turns
    assert run.stop_reason == "final_answer"
    assert run.result.output == {"approve": True, "amount_cents": 1200, "reason": None}
    assert all(r.json.get("response_format") is not None for r in model.requests)


async def test_the_extra_turns_spent_are_carried_across_continue_as_new() -> None:
    output_type = {
        "name": "RefundDecision",
        "json_schema": RefundDecision.model_json_schema(),
        "retries": 1,
    }
    async with AgentEnv(tools([])) as env:
        model = ScriptedModel().says("prose one").says("prose two").says(VALID)
        run = await env.run(
            model,
            "refund order 7?",
            output_type=output_type,
            limits=RunLimits(continue_as_new_after_turns=1),
        )
    assert run.stats.continued_as_new
    assert run.stop_reason == "invalid_output"  # one extra turn, not one per execution
    assert run.result.raw_output == "prose two"
    assert model.pending == 1


def test_the_correction_is_json_serializable_whatever_the_problem() -> None:
    # A correction names the schema as JSON text the model reads.
    from steadyloop._output.typed import OutputType, correction

    text = correction(OutputType.model_validate(RefundDecision), "x")
    schema = json.loads(text.rsplit("schema: ", 1)[1])
    assert schema == RefundDecision.model_json_schema()
