"""Typed output: a run's final answer as a JSON value its caller's schema accepts.

`OutputType` is the serializable form of what a caller asks for (a pydantic model or a
JSON object schema): it rides in the run's settings, so a run that continues as new, or
is resumed, checks its answer against the same schema. `check_answer` reads a final
answer against it; it is pure and deterministic, so the workflow runs it.

What the obvious implementation gets wrong, and where it is handled here:

- A prose answer parsed in workflow code raises, and an exception from workflow code
  fails the workflow *task*, which Temporal retries forever. `check_answer` never
  raises: every way an answer can be wrong (prose, bad JSON, NaN or an infinity, a
  number with too many digits, nesting past the parser's stack, a lone surrogate a JSON
  escape decoded to, a schema violation) is a `problem` the model is told about.
- A schema shaped for OpenAI's strict mode makes every property required, so the model
  answers `null` for what it would have left out, and the caller's schema refuses that
  `null`. The answer is read back through `drop_absent_nulls` before it is checked.
- A schema strict mode cannot express (a free-form object, a recursive model) is sent
  with `strict: false` rather than refused by the provider on every attempt.
- An endpoint that refuses the structured-output parameter has it dropped by the route
  (`unsupported_parameter`): the model is then never told the schema, so the correction
  the run sends names the schema itself.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Self

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from steadyloop.tools._schema import sanitize_schema
from steadyloop.tools._schema_profiles import drop_absent_nulls, sanitize_tool_schema

__all__ = [
    "MAX_OUTPUT_RETRIES",
    "MAX_SCHEMA_BYTES",
    "AnswerCheck",
    "OutputType",
    "check_answer",
    "correction",
]

# Extra turns a run may spend asking again for a valid answer: each is a whole request.
MAX_OUTPUT_RETRIES = 10
# A schema travels in the run's input and in every request of a typed run.
MAX_SCHEMA_BYTES = 64 * 1024
# How much of a validation error the model and the caller read.
_PROBLEM_CHARS = 1_000
# OpenAI's rule for a `json_schema` name (the other wires take it too).
_NAME_PATTERN = r"[A-Za-z0-9_-]{1,64}"


class OutputType(BaseModel):
    """What a typed run's final answer must be: a JSON value `json_schema` accepts.

    Given as a pydantic model class (its `model_json_schema()`, named after the class)
    or as a JSON schema whose root is an object (named by its `title`, else `output`);
    the payload itself (`name`, `json_schema`, `strict`, `retries`) is taken as it is.
    `strict`: ask for the provider's strict mode (OpenAI), sent only when the schema can
    be shaped for it. `retries`: how many extra turns the run spends asking again after
    an invalid answer before it stops `invalid_output`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=f"^{_NAME_PATTERN}$")
    json_schema: dict[str, JsonValue]
    strict: bool = True
    retries: int = Field(default=2, ge=0, le=MAX_OUTPUT_RETRIES)

    @model_validator(mode="before")
    @classmethod
    def _from_model_or_schema(cls, value: Any) -> Any:
        if isinstance(value, type) and issubclass(value, BaseModel):
            schema = _root_inlined(value.model_json_schema())
            return {"name": value.__name__, "json_schema": schema}
        if isinstance(value, type):
            raise ValueError(
                f"{value.__name__} is not a pydantic model: give a BaseModel subclass "
                "or a JSON schema (a dict)"
            )
        if isinstance(value, dict) and "json_schema" not in value:
            title = value.get("title")
            named = isinstance(title, str) and re.fullmatch(_NAME_PATTERN, title)
            name = title if named else "output"
            return {"name": name, "json_schema": _root_inlined(value)}
        return value

    @model_validator(mode="after")
    def _an_object_schema(self) -> Self:
        schema = self.json_schema
        kind = schema.get("type")
        if kind != "object":
            raise ValueError(
                f'the schema\'s root must be an object (`"type": "object"`), got type '
                f"{kind!r}: every structured-output API takes an object at the root; wrap "
                "a list or a single value in an object property"
            )
        try:
            size = len(json.dumps(schema, allow_nan=False, ensure_ascii=False).encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("the schema holds a lone surrogate (\\udXXX)") from None
        except (ValueError, RecursionError) as error:
            raise ValueError(f"the schema is not JSON: {error!r}") from None
        if size > MAX_SCHEMA_BYTES:
            raise ValueError(f"the schema is larger than {MAX_SCHEMA_BYTES} bytes")
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as error:
            raise ValueError(f"not a valid JSON schema: {_short(error.message)}") from None
        return self

    def wire_schema(self) -> tuple[dict[str, Any], bool]:
        """The schema sent to the provider, and whether it is sent `strict`: shaped for
        strict mode when asked and possible, else portable (`$ref`s inlined), else as
        given (a recursive schema cannot be inlined)."""
        # Workflow code calls this for every request: nothing it raises may escape.
        if self.strict:
            try:
                return sanitize_tool_schema(self.json_schema, "openai_strict"), True
            except Exception:  # SchemaError: not expressible; anything else: not shaped
                pass
        try:
            return sanitize_schema(self.json_schema), False
        except Exception:  # SchemaError: a recursive schema cannot be inlined
            return dict(self.json_schema), False

    def response_format(self) -> dict[str, Any]:
        """The Chat Completions `response_format` (the other wires translate it)."""
        schema, strict = self.wire_schema()
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": schema, "strict": strict},
        }


class AnswerCheck(BaseModel):
    """A final answer read against its `OutputType`: the value, or what is wrong."""

    model_config = ConfigDict(frozen=True)

    value: JsonValue = None
    problem: str | None = None

    @property
    def valid(self) -> bool:
        return self.problem is None


def check_answer(output: OutputType, text: str) -> AnswerCheck:
    """`text` read as JSON and validated against `output`; never raises."""
    try:
        return _checked(output, text)
    except Exception as error:  # a schema the validator cannot apply, a deep value
        return AnswerCheck(problem=_short(f"the answer could not be checked: {error!r}"))


def correction(output: OutputType, problem: str) -> str:
    """The user message that answers an invalid final answer: what failed, and the
    schema (the provider may not have been sent it)."""
    schema = json.dumps(output.json_schema, separators=(",", ":"))
    return (
        f"Your answer is not valid {output.name} output: {problem}\n"
        "Answer again with only the JSON value, no other text, matching this JSON "
        f"schema: {schema}"
    )


def _checked(output: OutputType, text: str) -> AnswerCheck:
    body = _unfenced(text.strip())
    if not body:
        return AnswerCheck(problem="the answer is empty; a JSON value was expected")
    try:
        value = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        return AnswerCheck(problem="the JSON is nested too deeply to read")
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        return AnswerCheck(problem=f"the answer is not JSON: {error.msg.lower()} at {where}")
    except ValueError as error:  # NaN, past a float's range, too many digits
        return AnswerCheck(problem=_short(f"the answer is not JSON: {error}"))
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return AnswerCheck(problem="a string in the answer holds a lone surrogate (\\udXXX)")
    if isinstance(value, dict) and output.strict:
        _, strict = output.wire_schema()
        if strict:
            value = drop_absent_nulls(value, sanitize_schema(output.json_schema))
    errors = sorted(
        jsonschema.Draft202012Validator(output.json_schema).iter_errors(value),
        key=lambda e: (len(e.absolute_path), e.message),
    )
    if errors:
        said = "; ".join(_located(error) for error in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        return AnswerCheck(problem=_short(f"the JSON does not match the schema: {said}{more}"))
    return AnswerCheck(value=value)


def _root_inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema whose root is only a `$ref` into its `$defs` (pydantic writes a recursive
    model so) with that definition at the root instead, `$defs` kept for the references
    inside it: every structured-output API wants an object at the root."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/") or not isinstance(defs, dict):
        return schema
    target = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(target, dict):
        return schema
    rest = {key: value for key, value in schema.items() if key != "$ref"}
    return {**target, **rest}


def _unfenced(text: str) -> str:
    """A lone Markdown code block's content (models often fence JSON), else `text`."""
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2:
        inner = text[3:-3]
        newline = inner.find("\n")
        return inner[newline + 1 :].strip() if newline >= 0 else inner.strip()
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:40]} is past a float's range")
    return number


def _located(error: jsonschema.ValidationError) -> str:
    path = "".join(
        f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
    )
    return f"at ${path}: {_short(error.message, 200)}"


def _short(text: str, limit: int = _PROBLEM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
