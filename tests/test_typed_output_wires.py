"""A typed run on each wire, end to end: the request the provider received carries that
wire's native structured-output form, and the answer is checked the same way whatever
the wire; an Anthropic endpoint that refuses `output_config` has it dropped and the run
still ends in a validated answer.

Requests are read as the scripted provider received them (`RecordedRequest`), so what is
asserted is the body on the wire, not a value inside the library.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from wire_loop_harness import Provider, text_answer, wire_loop

from steadyloop._run.bounds import WireApi
from steadyloop._run.models import RunInput
from steadyloop.testing import error_response

pytestmark = pytest.mark.slow


class Verdict(BaseModel):
    approve: bool
    note: str | None = None


VALID = '{"approve": true, "note": null}'


def typed_run(endpoint: str) -> RunInput:
    return RunInput(endpoint=endpoint, model="m", prompt="approve?", output_type=Verdict)


def native(api: WireApi, body: dict[str, Any]) -> dict[str, Any] | None:
    """The structured-output request in `body`, as `api`'s wire spells it, normalized."""
    if api == "chat":
        spec = body.get("response_format")
        if spec is None:
            return None
        assert spec["type"] == "json_schema"
        return {"name": spec["json_schema"]["name"], **spec["json_schema"]}
    if api == "responses":
        text = body.get("text")
        return None if text is None else text["format"]
    config = body.get("output_config")
    return None if config is None else config["format"]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
async def test_each_wire_asks_natively_and_the_answer_is_checked_alike(api: WireApi) -> None:
    script = [text_answer(api, "Approved."), text_answer(api, VALID)]
    async with wire_loop({"p": Provider(api, script)}) as loop:
        result = await loop.run(typed_run("p"))
        requests = loop.servers["p"].requests
    assert result.stop_reason == "final_answer", result.detail
    assert result.output == {"approve": True, "note": None}
    assert result.stats.retries == {"invalid_output": 1}
    assert len(requests) == 2
    for request in requests:
        sent = native(api, request.json)
        assert sent is not None, request.json
        assert sent["schema"]["additionalProperties"] is False
        assert sent["schema"]["required"] == ["approve", "note"]
        if api == "anthropic":
            assert sent["type"] == "json_schema" and "strict" not in sent
            assert request.header("anthropic-beta") is None  # generally available
            assert "tool_choice" not in request.json
        else:
            assert (sent["name"], sent["strict"]) == ("Verdict", True)


async def test_an_anthropic_endpoint_that_refuses_output_config_still_validates() -> None:
    refusal = error_response(
        400, "output_config: Extra inputs are not permitted", type="invalid_request_error"
    )
    script = [refusal, text_answer("anthropic", "Approved."), text_answer("anthropic", VALID)]
    async with wire_loop({"p": Provider("anthropic", script)}) as loop:
        result = await loop.run(typed_run("p"))
        requests = loop.servers["p"].requests
    assert result.stop_reason == "final_answer", result.detail
    assert result.output == {"approve": True, "note": None}
    assert ["output_config" in r.json for r in requests] == [True, False, False]
    assert '"approve"' in str(requests[2].json["messages"][-1])  # the schema, in the correction
