"""`ToolRegistry`: one tool per name, in registration order."""

from __future__ import annotations

from datetime import timedelta

import pytest

from steadyloop._chat import ToolSpec
from steadyloop.tools import DuplicateToolError, ToolRegistry, UnknownToolError, tool


@tool(effect="pure", timeout=timedelta(seconds=5))
async def alpha(x: int) -> int:
    """First."""
    return x


@tool
async def beta() -> str:
    """Second."""
    return "b"


def test_duplicate_names_are_refused_and_the_first_tool_kept() -> None:
    @tool(name="alpha")
    async def impostor() -> str:
        return "not alpha"

    registry = ToolRegistry([alpha])
    with pytest.raises(DuplicateToolError, match="'alpha' is already registered"):
        registry.register(impostor)
    assert registry.get("alpha") is alpha
    with pytest.raises(DuplicateToolError):
        ToolRegistry([alpha, alpha])


def test_plain_function_is_refused() -> None:
    async def undecorated() -> None:
        return None

    with pytest.raises(TypeError, match=r"decorate it with @steadyloop\.tools\.tool"):
        ToolRegistry().register(undecorated)  # type: ignore[arg-type]


def test_get_unknown_lists_registered_names() -> None:
    registry = ToolRegistry([alpha, beta])
    with pytest.raises(UnknownToolError) as caught:
        registry.get("gamma")
    assert caught.value.available == ["alpha", "beta"]
    assert "alpha, beta" in str(caught.value)


def test_names_contains_len_and_iteration_follow_registration_order() -> None:
    registry = ToolRegistry([beta, alpha])
    assert registry.names() == ["beta", "alpha"]
    assert [definition.name for definition in registry] == ["beta", "alpha"]
    assert "alpha" in registry
    assert "gamma" not in registry
    assert len(registry) == 2


def test_describe_in_requested_order_without_repeats() -> None:
    registry = ToolRegistry([alpha, beta])
    assert [d.name for d in registry.describe()] == ["alpha", "beta"]
    assert [d.name for d in registry.describe(["beta", "alpha", "beta"])] == ["beta", "alpha"]
    assert registry.describe([]) == []
    with pytest.raises(UnknownToolError):
        registry.describe(["alpha", "gamma"])


def test_description_carries_schema_effect_and_timeout() -> None:
    (description,) = ToolRegistry([alpha]).describe(["alpha"])
    assert description.description == "First."
    assert description.effect == "pure"
    assert description.timeout_s == 5.0
    assert description.timeout == timedelta(seconds=5)
    assert description.parameters["required"] == ["x"]


def test_specs_are_chat_tool_specs_with_the_wire_shape() -> None:
    (spec,) = ToolRegistry([alpha]).specs(["alpha"])
    assert isinstance(spec, ToolSpec)
    assert spec.to_wire() == {
        "type": "function",
        "function": {
            "name": "alpha",
            "description": "First.",
            "parameters": alpha.parameters,
        },
    }
