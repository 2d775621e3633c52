"""`sanitize_tool_schema`: each profile's rules, checked against what its provider refuses.

The provider rules live in `provider_schema_rules.py`, quoted from the providers' 400s.
"""

from __future__ import annotations

import copy
import uuid
from datetime import date, datetime
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from provider_schema_rules import CHECKERS
from pydantic import BaseModel, Field, ValidationError

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop.tools import SCHEMA_PROFILES, SchemaError, ToolRegistry, tool
from steadyloop.tools._payloads import DescribeToolsInput
from steadyloop.tools._schema_profiles import drop_absent_nulls, sanitize_tool_schema


class Address(BaseModel):
    street: str
    city: str = "Paris"


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Cat(BaseModel):
    kind: Literal["cat"]
    meows: bool = True


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class Everything(BaseModel):
    """One of most shapes pydantic emits."""

    name: str = Field(description="Who.", min_length=1, max_length=40, pattern="^[a-z]+$")
    age: int = Field(default=3, ge=0, lt=200)
    ratio: float | None = None
    when: datetime | None = None
    day: date = date(2026, 1, 1)
    ident: uuid.UUID | None = None
    kind: Literal["a", "b"] = "a"
    level: Literal[1, 2, 3] = 1
    color: Color = Color.RED
    home: Address | None = None
    past: list[Address] = []
    tags: list[str] = Field(default_factory=list, max_length=5)
    unique: set[int] = set()
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    pair: tuple[int, str] | None = None
    url: str = Field(default="https://x", json_schema_extra={"format": "uri"})


class Tree(BaseModel):
    children: list[Tree] = []


class FreeForm(BaseModel):
    labels: dict[str, int] = {}


CORPUS: dict[str, type[BaseModel]] = {"everything": Everything, "address": Address}


@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
@pytest.mark.parametrize("model", ["everything", "address"])
def test_every_profile_yields_a_schema_its_provider_accepts(profile: str, model: str) -> None:
    schema = CORPUS[model].model_json_schema()
    sanitized = sanitize_tool_schema(schema, profile)  # type: ignore[arg-type]
    assert CHECKERS[profile](sanitized) == []


def test_the_checkers_reject_what_the_profiles_fix() -> None:
    raw = Everything.model_json_schema()
    for profile, checker in CHECKERS.items():
        assert checker(raw), profile
    assert CHECKERS["openai_strict"](sanitize_tool_schema(raw, "portable"))
    assert CHECKERS["gemini"](sanitize_tool_schema(raw, "portable"))


def test_a_recursive_schema_is_refused_with_the_cycle_named_in_every_profile() -> None:
    for profile in SCHEMA_PROFILES:
        with pytest.raises(SchemaError, match="recursive model Tree -> Tree"):
            sanitize_tool_schema(Tree.model_json_schema(), profile)


def test_a_root_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(SchemaError, match="JSON object"):
        sanitize_tool_schema({"type": "array", "items": {"type": "string"}}, "gemini")


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown schema profile 'claude'"):
        sanitize_tool_schema({"type": "object"}, "claude")  # type: ignore[arg-type]


def test_the_input_is_never_mutated() -> None:
    schema = Everything.model_json_schema()
    before = copy.deepcopy(schema)
    for profile in SCHEMA_PROFILES:
        sanitize_tool_schema(schema, profile)
    assert schema == before


# -- openai strict -------------------------------------------------------------------


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    return sanitize_tool_schema(schema, "openai_strict")


def test_strict_requires_every_property_and_makes_the_optional_ones_nullable() -> None:
    out = strict(
        {
            "type": "object",
            "properties": {
                "q": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "mode": {"enum": ["a", "b"], "type": "string"},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "fixed": {"const": "x"},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["q"],
        }
    )
    props = out["properties"]
    assert out["required"] == ["q", "limit", "mode", "either", "fixed", "maybe"]
    assert out["additionalProperties"] is False
    assert props["q"] == {"type": "string"}
    assert props["limit"] == {"type": ["integer", "null"], "description": "Default: 10"}
    assert props["mode"] == {"enum": ["a", "b", None], "type": ["string", "null"]}
    assert props["either"]["anyOf"][-1] == {"type": "null"}
    assert props["fixed"] == {"anyOf": [{"const": "x"}, {"type": "null"}]}
    assert props["maybe"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}


def test_strict_closes_nested_objects_in_items_and_branches() -> None:
    out = strict(Everything.model_json_schema())
    home = out["properties"]["home"]["anyOf"][0]
    assert out["properties"]["past"]["type"] == ["array", "null"]
    past = out["properties"]["past"]["items"]
    for node in (home, past):
        assert node["additionalProperties"] is False
        assert node["required"] == ["street", "city"]
        assert node["properties"]["city"]["type"] == ["string", "null"]


def test_strict_notes_what_it_cannot_send_instead_of_losing_it() -> None:
    out = strict(
        {
            "type": "object",
            "properties": {
                "url": {"type": "string", "format": "uri", "description": "Where."},
                "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
                "when": {"type": "string", "format": "date-time"},
            },
            "required": ["url", "ids", "when"],
        }
    )
    assert out["properties"]["url"] == {"type": "string", "description": "Where. (format: uri)"}
    assert out["properties"]["ids"]["description"] == "UniqueItems: true"
    assert "uniqueItems" not in out["properties"]["ids"]
    assert out["properties"]["when"]["format"] == "date-time"


def test_strict_merges_all_of_and_turns_one_of_into_any_of() -> None:
    out = strict(
        {
            "type": "object",
            "properties": {
                "both": {
                    "allOf": [
                        {"type": "object", "properties": {"a": {"type": "string"}}},
                        {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                    ]
                },
                "one": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "required": ["both", "one"],
        }
    )
    both = out["properties"]["both"]
    assert set(both["properties"]) == {"a", "b"} and both["required"] == ["a", "b"]
    assert both["properties"]["a"]["type"] == ["string", "null"]
    assert out["properties"]["one"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (FreeForm.model_json_schema(), "free-form object"),
        ({"type": "object", "properties": {"x": {}}}, "untyped value"),
        ({"type": "object", "properties": {"x": {"type": "array"}}}, "untyped items"),
    ],
)
def test_what_strict_mode_cannot_express_is_a_clear_error(schema: dict[str, Any], why: str) -> None:
    with pytest.raises(SchemaError, match=why):
        strict(schema)


# -- gemini --------------------------------------------------------------------------


def gemini(schema: dict[str, Any]) -> dict[str, Any]:
    return sanitize_tool_schema(schema, "gemini")


def test_gemini_keeps_only_its_fields_and_converts_what_it_can() -> None:
    out = gemini(
        {
            "type": "object",
            "$schema": "http://json-schema.org/draft-07/schema#",
            "additionalProperties": False,
            "properties": {
                "tag": {"const": "fixed"},
                "n": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                "s": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
                "u": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "level": {"type": "integer", "enum": [1, 2]},
                "url": {"type": "string", "format": "uri"},
                "when": {"type": "string", "format": "date-time"},
                "names": {"type": "object", "propertyNames": {"pattern": "^a"}},
            },
            "required": ["tag"],
        }
    )
    props = out["properties"]
    assert "$schema" not in out and "additionalProperties" not in out
    assert props["tag"] == {"enum": ["fixed"], "type": "string"}
    assert props["n"] == {"type": "integer", "nullable": True, "description": "ExclusiveMinimum: 0"}
    assert props["s"] == {"type": "string", "maxLength": 3, "nullable": True}
    assert props["u"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["level"] == {"type": "integer", "description": "One of: 1, 2"}
    assert props["url"] == {"type": "string", "description": "Format: uri"}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["names"] == {"type": "object"}


def test_gemini_never_refuses_a_free_form_object() -> None:
    out = gemini(FreeForm.model_json_schema())
    assert out["properties"]["labels"]["type"] == "object"


# -- null means absent: the inverse of strict -----------------------------------------


def test_nulls_the_model_sends_for_left_out_arguments_are_dropped_before_validation() -> None:
    schema = sanitize_tool_schema(Everything.model_json_schema())
    sent = {
        "name": "ann",
        "age": None,
        "ratio": None,
        "home": {"street": "s", "city": None},
        "past": [{"street": "t", "city": None}],
        "pet": {"kind": "dog", "barks": 2},
    }
    kept = drop_absent_nulls(sent, schema)
    assert kept == {
        "name": "ann",
        "ratio": None,  # `float | None` admits null: it stays
        "home": {"street": "s"},
        "past": [{"street": "t"}],
        "pet": {"kind": "dog", "barks": 2},
    }
    parsed = Everything.model_validate(kept)
    assert parsed.age == 3 and parsed.home == Address(street="s")


async def test_a_strict_tool_gets_its_defaults_when_the_model_sends_nulls() -> None:
    @tool
    async def search(query: str, limit: int = 10, exact: bool = False) -> str:
        """Search."""
        return f"{query}/{limit}/{exact}"

    validated = search.validate({"query": "q", "limit": None, "exact": None})
    assert validated.model_dump(by_alias=True) == {
        "query": "q",
        "limit": 10,
        "exact": False,
    }
    with pytest.raises(ValidationError):  # a required argument may still not be null
        search.validate({"query": None})


# -- where schemas are produced ------------------------------------------------------


async def test_the_describe_activity_sanitizes_for_the_asked_profile() -> None:
    @tool
    async def find(where: Address, limit: int = 5) -> str:
        """Find."""
        return "x"

    @tool
    async def label(labels: dict[str, int]) -> str:
        """Label."""
        return "x"

    activities = ToolActivities(ToolRegistry([find, label]))
    plain = await activities.describe_tools(DescribeToolsInput(names=["find", "label"]))
    strict_result = await activities.describe_tools(
        DescribeToolsInput(names=["find", "label"], schema_profile="openai_strict")
    )
    gemini_result = await activities.describe_tools(
        DescribeToolsInput(names=["find"], schema_profile="gemini")
    )
    assert [t.strict for t in plain.tools] == [False, False]
    # A schema strict mode cannot express is offered without `strict`, not dropped.
    assert [t.strict for t in strict_result.tools] == [True, False]
    found = strict_result.tools[0]
    assert CHECKERS["openai_strict"](found.parameters) == []
    assert found.to_spec().to_wire()["function"]["strict"] is True
    assert "strict" not in plain.tools[0].to_spec().to_wire()["function"]
    assert CHECKERS["gemini"](gemini_result.tools[0].parameters) == []
