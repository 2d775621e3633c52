"""Typed output without a server: the `output_type` payload and its refusals, what each
wire sends for it, the check of an answer against it (hostile answers included), and
`steadyloop run --output-schema FILE`.

What each test protects:
- a pydantic model, a JSON schema and the stored payload all become the same
  `OutputType`, which survives a JSON round trip (history, continue-as-new), and what
  cannot be one is refused naming `output_type`; `RunInput` refuses unknown fields;
- each wire sends its native structured-output request, shaped for strict mode where
  the schema allows it, and drops it when the endpoint is known to refuse it;
- an endpoint's refusal of the parameter, by any wire's name for it, degrades it;
- `check_answer` never raises, and says what is wrong in a bounded sentence.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from steadyloop import OutputType, RunInput, RunOptions
from steadyloop._chat import ChatMessage
from steadyloop._cli.run_command import output_type_of
from steadyloop._output.typed import MAX_OUTPUT_RETRIES, check_answer, correction
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._routing.taxonomy import degradable_parameter
from steadyloop._stream.anthropic_request import anthropic_body
from steadyloop._stream.chat_request import build_request_body
from steadyloop._stream.completion import CompletionRequest
from steadyloop._stream.responses_request import build_responses_body
from steadyloop._worker.config import ConfigError


class Address(BaseModel):
    city: str
    zip: str | None = None


class RefundDecision(BaseModel):
    approve: bool
    amount_cents: int
    reason: str | None = None
    ship_to: Address | None = None


class Tree(BaseModel):  # recursive: strict mode cannot express it (no inlining)
    label: str
    children: list[Tree] = []


FREE_FORM = {
    "type": "object",
    "title": "Notes",
    "properties": {"tags": {"type": "object", "additionalProperties": True}},
}


def run(**fields: Any) -> RunInput:
    return RunInput(endpoint="e", model="m", prompt="p", **fields)


# -- the payload -------------------------------------------------------------------------


def test_a_model_a_schema_and_the_payload_are_the_same_output_type() -> None:
    from_model = OutputType.model_validate(RefundDecision)
    assert from_model.name == "RefundDecision"
    assert from_model.json_schema == RefundDecision.model_json_schema()
    assert (from_model.strict, from_model.retries) == (True, 2)
    from_schema = OutputType.model_validate(RefundDecision.model_json_schema())
    assert from_schema == from_model  # named by the schema's title
    assert OutputType.model_validate(from_model.model_dump()) == from_model
    carried = run(output_type=RefundDecision)
    assert RunInput.model_validate_json(carried.model_dump_json()) == carried
    assert OutputType.model_validate({"type": "object", "title": "a title"}).name == "output"


def test_run_options_take_it_and_give_it_to_the_run() -> None:
    options = RunOptions(endpoint="e", model="m", output_type=RefundDecision)
    assert options.output_type == OutputType.model_validate(RefundDecision)
    assert options.run_input(prompt="p").output_type == options.output_type
    assert RunOptions.of(options.run_input(prompt="p")) == options


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"type": "array", "items": {"type": "string"}}, "root must be an object"),
        ({"properties": {"a": {"type": "string"}}}, "root must be an object"),
        ({"type": "object", "properties": {"a": {"type": "nope"}}}, "not a valid JSON schema"),
        ({"type": "object", "minProperties": -1}, "not a valid JSON schema"),
        ({"type": "object", "default": float("nan")}, "not JSON"),
        ({"type": "object", "description": "\ud800"}, "lone surrogate"),
        ({"type": "object", "description": "x" * 70_000}, "larger than"),
        (int, "int is not a pydantic model"),
        ({"name": "bad name!", "json_schema": {"type": "object"}}, "String should match"),
        ({"name": "a", "json_schema": {"type": "object"}, "retries": -1}, "greater than"),
        (
            {"name": "a", "json_schema": {"type": "object"}, "retries": MAX_OUTPUT_RETRIES + 1},
            "less than",
        ),
        ({"name": "a", "json_schema": {"type": "object"}, "schema": {}}, "Extra inputs"),
    ],
)
def test_what_cannot_be_an_output_type_is_refused_naming_the_field(given: Any, said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        run(output_type=given)
    text = str(refused.value)
    assert "output_type" in text
    assert said in text


def test_run_input_refuses_an_unknown_field_by_name() -> None:
    with pytest.raises(ValidationError) as refused:
        RunInput(endpoint="e", model="m", prompt="p", response_format={"type": "json_object"})  # type: ignore[call-arg]
    error = refused.value.errors()[0]
    assert (error["loc"], error["type"]) == (("response_format",), "extra_forbidden")


def test_a_prefill_and_a_typed_answer_are_refused_together() -> None:
    with pytest.raises(ValidationError, match="prefill"):
        run(output_type=RefundDecision, prefill="Sure")


# -- what each wire sends ----------------------------------------------------------------


def typed_request(output: Any, **fields: Any) -> CompletionRequest:
    return CompletionRequest(
        endpoint="e",
        model="m",
        messages=[ChatMessage(role="user", content="refund?")],
        response_format=OutputType.model_validate(output).response_format(),
        **fields,
    )


CHAT = EndpointConfig(name="e", base_url="http://h/v1")
RESPONSES = EndpointConfig(name="e", base_url="http://h/v1", api="responses")
ANTHROPIC = EndpointConfig(
    name="e",
    base_url="http://h/v1",
    api="anthropic",
    extra_body={"output_config": {"effort": "low"}},
)


def test_chat_sends_response_format_json_schema_shaped_for_strict_mode() -> None:
    sent = build_request_body(typed_request(RefundDecision), CHAT)["response_format"]
    assert sent["type"] == "json_schema"
    spec = sent["json_schema"]
    assert (spec["name"], spec["strict"]) == ("RefundDecision", True)
    schema = spec["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["approve", "amount_cents", "reason", "ship_to"]
    ship_to = schema["properties"]["ship_to"]  # inlined, nullable, strict inside too
    shape = next(option for option in ship_to["anyOf"] if option.get("type") == "object")
    assert shape["additionalProperties"] is False and shape["required"] == ["city", "zip"]
    assert "$defs" not in json.dumps(schema)


def test_responses_sends_text_format_flat() -> None:
    body = build_responses_body(typed_request(RefundDecision), RESPONSES)
    chat = typed_request(RefundDecision).response_format
    assert chat is not None
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "RefundDecision",
            "schema": chat["json_schema"]["schema"],
            "strict": True,
        }
    }


def test_anthropic_sends_output_config_format_beside_the_endpoints_own_settings() -> None:
    body = anthropic_body(typed_request(RefundDecision), ANTHROPIC)
    chat = typed_request(RefundDecision).response_format
    assert chat is not None
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": chat["json_schema"]["schema"]},
    }
    assert "output_format" not in body and "tool_choice" not in body and "tools" not in body


@pytest.mark.parametrize("schema", [Tree, FREE_FORM])
def test_a_schema_strict_mode_cannot_express_is_sent_not_strict(schema: Any) -> None:
    spec = build_request_body(typed_request(schema), CHAT)["response_format"]["json_schema"]
    assert spec["strict"] is False
    assert spec["schema"]["type"] == "object"
    not_asked = OutputType.model_validate(
        {"name": "x", "json_schema": RefundDecision.model_json_schema(), "strict": False}
    )
    assert not_asked.response_format()["json_schema"]["strict"] is False


@pytest.mark.parametrize(
    ("builder", "endpoint", "field"),
    [
        (build_request_body, CHAT, "response_format"),
        (build_responses_body, RESPONSES, "text"),
        (anthropic_body, ANTHROPIC, "output_config"),
    ],
)
def test_an_endpoint_known_to_refuse_it_is_not_sent_it(
    builder: Any, endpoint: EndpointConfig, field: str
) -> None:
    request = typed_request(RefundDecision, omit_parameters=["response_format"])
    assert field not in builder(request, endpoint)
    assert field in builder(typed_request(RefundDecision), endpoint)


@pytest.mark.parametrize(
    ("param", "code", "message"),
    [
        ("response_format", "unsupported_parameter", "Unsupported parameter"),
        ("text.format", "unsupported_parameter", "Unsupported parameter: 'text.format'"),
        (None, None, "output_config: Extra inputs are not permitted"),
        (None, None, "output_format: Extra inputs are not permitted"),
        ("output_config.format", "extra_forbidden", "Extra inputs are not permitted"),
    ],
)
def test_a_refusal_by_any_wires_name_degrades_the_parameter(
    param: str | None, code: str | None, message: str
) -> None:
    assert degradable_parameter(param, code, message) == "response_format"


def test_an_invalid_schema_is_not_degraded() -> None:
    said = "Invalid schema for response_format 'x': 'additionalProperties' is required"
    assert degradable_parameter("response_format", None, said) is None


# -- the check ---------------------------------------------------------------------------

DECISION = OutputType.model_validate(RefundDecision)


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ('{"approve": true, "amount_cents": 5}', {"approve": True, "amount_cents": 5}),
        # Strict mode's nulls for what the model left out are read as left out.
        (
            '{"approve": true, "amount_cents": 5, "reason": null, "ship_to": null}',
            {"approve": True, "amount_cents": 5, "reason": None, "ship_to": None},
        ),
        (
            '{"approve": true, "amount_cents": 5, "ship_to": {"city": "Oslo", "zip": null}}',
            {"approve": True, "amount_cents": 5, "ship_to": {"city": "Oslo", "zip": None}},
        ),
        (
            '```json\n{"approve": false, "amount_cents": 0}\n```',
            {"approve": False, "amount_cents": 0},
        ),
        ('  {"approve": false, "amount_cents": 0, "reason": "\\u0000"}  ', None),
    ],
)
def test_a_valid_answer_is_its_value(answer: str, value: Any) -> None:
    checked = check_answer(DECISION, answer)
    assert checked.valid, checked.problem
    if value is not None:
        assert checked.value == value
    RefundDecision.model_validate(checked.value)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("Yes, refund it.", "the answer is not JSON"),
        ("", "the answer is empty"),
        ("   \n ", "the answer is empty"),
        ("NaN", "NaN is not a JSON number"),
        ('{"approve": true, "amount_cents": Infinity}', "Infinity is not a JSON number"),
        ('{"approve": true, "amount_cents": 1e400}', "past a float's range"),
        ('{"approve": "\\udc00", "amount_cents": 1}', "lone surrogate"),
        ("[" * 200_000, "nested too deeply"),
        ('{"approve": true, "amount_cents": ' + "1" * 10_000 + "}", "digits"),
        ('{"approve": true}', "$: 'amount_cents' is a required property"),
        ('{"approve": 1, "amount_cents": "x"}', "at $.amount_cents"),
        ('{"approve": true, "amount_cents": 1}{"again": 1}', "extra data at line 1, column 37"),
        ('[{"approve": true, "amount_cents": 1}]', "is not of type 'object'"),
        ('{"approve": true, "amount_cents": 1, "reason": "' + "x" * 5_000_000 + '"', "not JSON"),
    ],
)
def test_an_invalid_answer_is_a_bounded_problem_never_an_exception(answer: str, said: str) -> None:
    checked = check_answer(DECISION, answer)
    assert not checked.valid and checked.value is None
    assert checked.problem is not None
    assert said in checked.problem
    assert len(checked.problem) <= 1_000
    assert len(correction(DECISION, checked.problem)) < 5_000


def test_a_huge_float_with_no_fraction_is_an_integer_to_the_schema() -> None:
    # JSON Schema's rule: the schema accepts it, so the run does. pydantic's model refuses
    # an integer that large: a caller turning `output` into its model must expect that.
    checked = check_answer(DECISION, '{"approve": true, "amount_cents": 1e300}')
    assert checked.valid and checked.value == {"approve": True, "amount_cents": 1e300}
    with pytest.raises(ValidationError, match="amount_cents"):
        RefundDecision.model_validate(checked.value)


def test_a_schema_the_validator_cannot_apply_is_a_problem_not_an_exception() -> None:
    remote = OutputType.model_validate(
        {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}}
    )
    checked = check_answer(remote, '{"a": 1}')
    assert not checked.valid
    assert "could not be checked" in (checked.problem or "")


# -- steadyloop run --output-schema FILE ---------------------------------------------------


def test_the_flag_reads_a_schema_file(tmp_path: Path) -> None:
    path = tmp_path / "refund.json"
    path.write_text(json.dumps(RefundDecision.model_json_schema()))
    assert output_type_of(str(path)) == DECISION
    assert output_type_of(None) is None


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot be read"),
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON schema is an object, got list"),
        ('{"type": "array"}', "root must be an object"),
        ('{"type": "object", "properties": {"a": {"type": 3}}}', "not a valid JSON schema"),
    ],
)
def test_a_bad_schema_file_is_refused_naming_it(
    tmp_path: Path, content: str | None, said: str
) -> None:
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        output_type_of(str(path))
    assert str(refused.value).startswith(f"--output-schema {path}: ")
    assert said in str(refused.value)


def test_the_flag_is_on_the_run_command() -> None:
    from steadyloop._cli.main import build_parser

    parser = build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    args = parser.parse_args(["run", "hi", "--output-schema", "refund.json"])
    assert args.output_schema == "refund.json"


def test_the_outcome_prints_the_output_as_json_or_the_raw_text_cut_short() -> None:
    from steadyloop._cli.progress import RAW_OUTPUT_CHARS, typed_output_lines
    from steadyloop._run.models import RunResult, RunStats

    def result(**fields: Any) -> RunResult:
        return RunResult(transcript=[], stats=RunStats(), **fields)

    valid = result(final_answer="{}", stop_reason="final_answer", output={"a": [1, "é"]})
    assert typed_output_lines(valid) == [
        "output:",
        "  {",
        '    "a": [',
        "      1,",
        '      "é"',
        "    ]",
        "  }",
    ]
    huge = result(final_answer=None, stop_reason="invalid_output", raw_output="x" * 5_000)
    lines = typed_output_lines(huge)
    assert lines[0] == "raw output (not valid):"
    assert lines[1] == "  " + "x" * RAW_OUTPUT_CHARS
    assert lines[-1] == f"  ... ({5_000 - RAW_OUTPUT_CHARS} more characters)"
    empty = result(final_answer=None, stop_reason="invalid_output", raw_output="  ")
    assert typed_output_lines(empty) == ["raw output (not valid):", "  (empty)"]
    assert typed_output_lines(result(final_answer="hi", stop_reason="final_answer")) == []
