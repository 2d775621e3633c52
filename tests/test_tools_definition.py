"""`@tool`: the schema a declaration yields, and every declaration it refuses."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, RootModel, ValidationError

from steadyloop.tools import DEFAULT_TOOL_TIMEOUT, ToolDefinition, ToolDefinitionError, tool


class Point(BaseModel):
    x: int
    y: int = 0


class SearchArguments(BaseModel):
    """Search arguments."""

    query: str = Field(description="What to look for.")
    limit: int = 10


def test_hints_become_schema_with_types_defaults_and_required() -> None:
    @tool
    async def search(
        query: Annotated[str, Field(description="What to look for.")],
        limit: int = 10,
        tags: list[str] | None = None,
        near: Point | None = None,
        strict: bool = Field(False, description="Exact matches only."),
    ) -> str:
        return query

    schema = search.parameters
    assert schema["type"] == "object"
    assert list(schema["properties"]) == ["query", "limit", "tags", "near", "strict"]
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["query"] == {"type": "string", "description": "What to look for."}
    assert schema["properties"]["limit"] == {"type": "integer", "default": 10}
    assert schema["properties"]["strict"]["description"] == "Exact matches only."
    assert schema["properties"]["strict"]["default"] is False
    # The nested model is inlined, not referenced.
    near = schema["properties"]["near"]["anyOf"][0]
    assert near["type"] == "object"
    assert near["required"] == ["x"]


async def test_hint_tool_receives_typed_values_by_parameter_name() -> None:
    received: dict[str, Any] = {}

    @tool
    async def place(label: str, at: Point, count: int = 1) -> None:
        received.update(label=label, at=at, count=count)

    validated = place.validate({"label": "a", "at": {"x": 3}})
    await place.invoke(validated)
    assert received == {"label": "a", "at": Point(x=3, y=0), "count": 1}


async def test_parameters_named_like_pydantic_internals_work() -> None:
    @tool
    async def odd(json: str, model_config: int, _private: bool, title: str) -> list[Any]:
        return [json, model_config, _private, title]

    assert sorted(odd.parameters["properties"]) == ["_private", "json", "model_config", "title"]
    validated = odd.validate({"json": "j", "model_config": 2, "_private": True, "title": "t"})
    assert await odd.invoke(validated) == ["j", 2, True, "t"]


async def test_positional_only_and_keyword_only_parameters_are_called_correctly() -> None:
    @tool
    async def mixed(a: int, /, b: int, *, c: int) -> tuple[int, int, int]:
        return (a, b, c)

    assert await mixed.invoke(mixed.validate({"a": 1, "b": 2, "c": 3})) == (1, 2, 3)


def test_hint_schema_refuses_unknown_keys() -> None:
    @tool
    async def one(a: int) -> int:
        return a

    with pytest.raises(ValidationError) as caught:
        one.validate({"a": 1, "b": 2})
    assert [error["type"] for error in caught.value.errors()] == ["extra_forbidden"]


async def test_single_pydantic_model_parameter_is_the_arguments() -> None:
    received: list[SearchArguments] = []

    @tool
    async def search(arguments: SearchArguments) -> str:
        received.append(arguments)
        return arguments.query

    assert search.arguments_model is SearchArguments
    assert list(search.parameters["properties"]) == ["query", "limit"]
    assert search.parameters["required"] == ["query"]
    assert await search.invoke(search.validate({"query": "q"})) == "q"
    assert received == [SearchArguments(query="q", limit=10)]


class Ids(RootModel[list[int]]):
    pass


def test_root_model_parameter_is_a_named_argument_not_the_arguments() -> None:
    @tool
    async def fetch(ids: Ids) -> int:
        return len(ids.root)

    assert fetch.parameters["properties"]["ids"]["type"] == "array"


def test_zero_argument_tool_has_object_schema_with_empty_properties() -> None:
    @tool
    async def ping() -> str:
        return "pong"

    assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert ping.validate({}) is not None


def test_metadata_defaults_and_docstring_first_paragraph() -> None:
    @tool
    async def lookup(key: str) -> str:
        """Look up a key
        in the store.

        Longer explanation the model does not need.
        """
        return key

    assert isinstance(lookup, ToolDefinition)
    assert lookup.name == "lookup"
    assert lookup.description == "Look up a key in the store."
    assert lookup.effect == "opaque"
    assert lookup.timeout == DEFAULT_TOOL_TIMEOUT == timedelta(seconds=30)
    assert lookup.heartbeat_timeout is None
    assert lookup.describe().heartbeat_timeout_s is None


def test_explicit_metadata_wins_and_is_described() -> None:
    @tool(name="kv-get", description="Read a value.", effect="pure", timeout=timedelta(seconds=2))
    async def lookup(key: str) -> str:
        """Ignored."""
        return key

    description = lookup.describe()
    assert (description.name, description.description) == ("kv-get", "Read a value.")
    assert (description.effect, description.timeout_s) == ("pure", 2.0)
    assert description.parameters == lookup.parameters
    assert lookup.to_spec().to_wire()["function"]["name"] == "kv-get"


def test_a_resumable_tool_may_declare_a_heartbeat_timeout() -> None:
    @tool(effect="resumable", timeout=timedelta(minutes=5), heartbeat_timeout=timedelta(seconds=3))
    async def crawl(pages: int) -> int:
        return pages

    assert crawl.heartbeat_timeout == timedelta(seconds=3)
    description = crawl.describe()
    assert (description.timeout_s, description.heartbeat_timeout_s) == (300.0, 3.0)
    assert description.heartbeat_timeout == timedelta(seconds=3)


def test_no_docstring_gives_empty_description() -> None:
    @tool
    async def bare() -> None:
        return None

    assert bare.description == ""


async def test_decorated_tool_is_still_awaitable_directly() -> None:
    @tool
    async def double(n: int) -> int:
        return 2 * n

    assert await double(21) == 42


async def test_async_callable_object_and_partial_are_accepted() -> None:
    class Greeter:
        async def __call__(self, who: str) -> str:
            return f"hi {who}"

    async def scaled(factor: int, n: int) -> int:
        return factor * n

    greet = tool(name="greet")(Greeter())
    triple = tool(name="triple")(functools.partial(scaled, 3))
    assert list(greet.parameters["properties"]) == ["who"]
    assert list(triple.parameters["properties"]) == ["n"]
    assert await triple.invoke(triple.validate({"n": 2})) == 6


# ---------------------------------------------------------------- refusals


def _sync(a: int) -> int:
    return a


async def _agen(a: int) -> AsyncIterator[int]:
    yield a


async def _no_hint(a, b: int) -> int:  # type: ignore[no-untyped-def]
    return int(b)


async def _star_args(*numbers: int) -> int:
    return sum(numbers)


async def _star_kwargs(**options: int) -> int:
    return len(options)


async def _unresolvable(a: UndefinedName) -> int:  # type: ignore[name-defined]  # noqa: F821
    return 0


class _Opaque:
    pass


async def _unsupported(a: _Opaque) -> int:
    return 0


class _Node(BaseModel):
    children: list[_Node] = []


async def _recursive(tree: _Node) -> int:
    return 0


async def _fine(a: int) -> int:
    return a


@pytest.mark.parametrize(
    ("function", "options", "message"),
    [
        (_sync, {}, "must be an `async def` function"),
        (lambda a: a, {"name": "lam"}, "must be an `async def` function"),
        (_agen, {}, "must be an `async def` function"),
        (_no_hint, {}, "parameter 'a' has no type hint"),
        (_star_args, {}, "*numbers cannot be described"),
        (_star_kwargs, {}, "**options cannot be described"),
        (_unresolvable, {}, "cannot read its signature"),
        (_unsupported, {}, "cannot become an arguments model"),
        (_recursive, {}, "recursive model"),
        (_fine, {"timeout": timedelta(0)}, "timeout must be a finite number of seconds above 0"),
        (_fine, {"timeout": timedelta(seconds=-1)}, "timeout must be a finite number of seconds"),
        # Past what the workflow's clock arithmetic is promised: refused by name.
        (_fine, {"timeout": timedelta(days=365 * 11)}, "timeout must be a finite number of sec"),
        (_fine, {"timeout": timedelta.max}, "at most 10 years"),
        (_fine, {"timeout": 30}, "timeout must be a datetime.timedelta"),
        (_fine, {"effect": "idempotent"}, "effect 'idempotent' is not one of"),
        (_fine, {"name": ""}, "is not a valid tool name"),
        (_fine, {"name": "read file"}, "is not a valid tool name"),
        (_fine, {"name": "fs.read"}, "is not a valid tool name"),
        (_fine, {"name": "é"}, "is not a valid tool name"),
        (_fine, {"name": "x" * 65}, "is not a valid tool name"),
        (_fine, {"description": 3}, "description must be a string"),
        (
            _fine,
            {"effect": "resumable", "heartbeat_timeout": timedelta(0)},
            "heartbeat_timeout must be a finite number of seconds above 0",
        ),
        (
            _fine,
            {
                "effect": "resumable",
                "timeout": timedelta(days=3650),
                "heartbeat_timeout": timedelta(days=3651),
            },
            "heartbeat_timeout must be a finite number of seconds above 0, at most 10 years",
        ),
        (
            _fine,
            {"effect": "resumable", "heartbeat_timeout": 5},
            "heartbeat_timeout must be a datetime.timedelta or None",
        ),
        (
            _fine,
            {"heartbeat_timeout": timedelta(seconds=5)},
            "heartbeat_timeout is only for effect='resumable' tools",
        ),
        (
            _fine,
            {"effect": "pure", "heartbeat_timeout": timedelta(seconds=5)},
            "a pure tool never heartbeats",
        ),
        (
            _fine,
            {
                "effect": "resumable",
                "timeout": timedelta(seconds=5),
                "heartbeat_timeout": timedelta(seconds=5),
            },
            "must be shorter than timeout",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_bad_declarations_are_refused_at_decoration(
    function: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        tool(**options)(function)
    assert message in str(caught.value)


def test_longest_valid_name_is_accepted() -> None:
    assert tool(name="a-" + "x" * 62)(_fine).name == "a-" + "x" * 62


def test_positional_string_is_refused_with_a_hint() -> None:
    with pytest.raises(ToolDefinitionError, match="pass options by keyword"):
        tool("add")  # type: ignore[call-overload]


def test_sync_refusal_points_at_to_thread() -> None:
    with pytest.raises(ToolDefinitionError, match=r"asyncio\.to_thread"):
        tool(_sync)  # type: ignore[arg-type]


async def test_hints_may_name_types_local_to_the_declaring_scope() -> None:
    class Local(BaseModel):
        value: int

    @tool
    async def bare(item: Local) -> int:
        return item.value

    @tool(name="called")
    async def with_options(item: Local, scale: int) -> int:
        return item.value * scale

    assert await bare.invoke(bare.validate({"value": 2})) == 2
    assert await with_options.invoke(with_options.validate({"item": {"value": 2}, "scale": 3})) == 6


def test_description_is_a_copy_the_workflow_side_cannot_corrupt() -> None:
    @tool
    async def one(a: int) -> int:
        return a

    described = one.describe()
    described.parameters["properties"]["a"]["type"] = "string"
    assert one.parameters["properties"]["a"]["type"] == "integer"
    assert one.describe().parameters["properties"]["a"]["type"] == "integer"


def test_a_tool_the_model_would_see_undescribed_is_warned_about_where_it_is_declared() -> None:
    import warnings as warnings_module

    from steadyloop.tools import ToolWithoutDescription

    with pytest.warns(ToolWithoutDescription, match="'lookup' has no description") as seen:

        @tool(effect="pure")
        async def lookup(order_id: str) -> str:
            return order_id

    assert seen[0].filename == __file__  # points at the declaration, not the library
    assert lookup.description == ""
    with warnings_module.catch_warnings():
        warnings_module.simplefilter("error")

        @tool(effect="pure")
        async def described(order_id: str) -> str:
            """Look an order up."""
            return order_id

        @tool(effect="pure", description="Look an order up.")
        async def given(order_id: str) -> str:
            return order_id
