"""Schema sanitization: what a provider that rejects `$ref` and `title` receives."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from steadyloop.tools import SchemaError, arguments_schema, tool
from steadyloop.tools._schema import sanitize_schema


class Address(BaseModel):
    """Where."""

    street: str
    city: str = "Paris"


class Person(BaseModel):
    name: str
    home: Address = Field(description="Their home.")
    past: list[Address] = []
    work: Address | None = None
    by_label: dict[str, Address] = {}


class Cat(BaseModel):
    kind: Literal["cat"]
    meows: bool


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class Pets(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    owner: Person


class Tree(BaseModel):
    children: list[Tree] = []


def _keys(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every (path, key) where `key` is a schema keyword (not a property name)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if path.endswith("/properties"):
                yield from _keys(value, f"{path}/{key}")
            else:
                yield path, key
                if key not in ("default", "enum", "const", "examples"):
                    yield from _keys(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _keys(value, f"{path}/{index}")


def test_pydantic_emits_refs_that_sanitizing_removes() -> None:
    raw = Pets.model_json_schema()
    assert "$defs" in raw  # the premise: pydantic references nested models

    clean = arguments_schema(Pets)
    keywords = {key for _, key in _keys(clean)}
    assert not keywords & {"$ref", "$defs", "definitions", "title", "discriminator"}


def test_nested_models_are_inlined_at_every_position() -> None:
    clean = arguments_schema(Person)
    props = clean["properties"]
    address_fields = {"street", "city"}
    assert set(props["home"]["properties"]) == address_fields
    assert props["home"]["required"] == ["street"]
    assert set(props["past"]["items"]["properties"]) == address_fields
    assert set(props["work"]["anyOf"][0]["properties"]) == address_fields
    assert props["work"]["anyOf"][1] == {"type": "null"}
    assert set(props["by_label"]["additionalProperties"]["properties"]) == address_fields


def test_ref_siblings_are_merged_and_win() -> None:
    home = arguments_schema(Person)["properties"]["home"]
    # The field's own description beats the model's docstring.
    assert home["description"] == "Their home."
    assert home["type"] == "object"


def test_discriminated_union_keeps_its_tags_without_discriminator() -> None:
    pet = arguments_schema(Pets)["properties"]["pet"]
    assert "discriminator" not in pet
    tags = [option["properties"]["kind"]["const"] for option in pet["oneOf"]]
    assert tags == ["cat", "dog"]


def test_top_level_is_object_with_properties_and_required() -> None:
    clean = arguments_schema(Person)
    assert list(clean)[:3] == ["type", "properties", "required"]
    assert clean["type"] == "object"
    assert clean["required"] == ["name", "home"]


def test_property_named_title_and_data_values_are_kept() -> None:
    @tool
    async def post(
        title: str,
        meta: dict[str, str] = {"title": "kept"},  # noqa: B006
    ) -> str:
        return title

    schema = post.parameters
    assert "title" in schema["properties"]
    assert schema["properties"]["title"] == {"type": "string"}
    assert schema["properties"]["meta"]["default"] == {"title": "kept"}


def test_recursive_model_is_refused() -> None:
    with pytest.raises(SchemaError, match="recursive model Tree -> Tree"):
        arguments_schema(Tree)


def test_external_and_dangling_refs_are_refused() -> None:
    with pytest.raises(SchemaError, match="only local"):
        sanitize_schema({"type": "object", "properties": {"a": {"$ref": "http://x/y.json"}}})
    with pytest.raises(SchemaError, match="does not have"):
        sanitize_schema({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}})


def test_non_object_top_level_is_refused() -> None:
    with pytest.raises(SchemaError, match="must be a JSON object"):
        sanitize_schema({"type": "array", "items": {"type": "integer"}})


def test_missing_type_and_properties_are_filled_in() -> None:
    assert sanitize_schema({"properties": {}}) == {"type": "object", "properties": {}}
    assert sanitize_schema({"type": "object"}) == {"type": "object", "properties": {}}


def test_single_all_of_wrapper_is_flattened() -> None:
    schema = {
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "type": "object",
        "properties": {"a": {"allOf": [{"$ref": "#/$defs/A"}], "description": "An A."}},
    }
    assert sanitize_schema(schema)["properties"]["a"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "description": "An A.",
    }


def test_input_is_not_mutated() -> None:
    raw = Pets.model_json_schema()
    before = copy.deepcopy(raw)
    clean = sanitize_schema(raw)
    assert raw == before
    clean["properties"]["owner"]["properties"]["name"]["type"] = "mutated"
    assert Pets.model_json_schema() == before
