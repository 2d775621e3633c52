"""Tool schemas reach every wire sanitized for the run's provider profile.

Where it happens: the run names a profile (`RunInput.provider_profile`); the workflow asks
the describe-tools activity for schemas sanitized for it (`tool_disclosure.disclose_tools`
-> `ToolDefinition.describe` -> `sanitize_tool_schema`), and every turn's request carries
those `ToolSpec`s. The chat, responses and anthropic request builders only re-spell a
spec (nested `function`, flat, `input_schema`); none of them sees the tool's own schema.
A provider refuses the whole request over one keyword its profile strips (Gemini:
'Unknown name "additionalProperties"'; OpenAI strict: "'default' is not permitted"), so
what decides the outcome is the schema in each wire's request body, asserted here:

- `gemini`: `additionalProperties` and `exclusiveMinimum` (which the tool's own schema
  has) are not in the body, whichever wire carries it;
- `openai_strict`: `default` is not, every property is required, and the tool is sent
  `strict` where the wire has the field (chat, responses).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from pydantic import Field
from wire_loop_harness import Provider, text_answer, wire_loop

from steadyloop._routing.provider_profiles import ProviderProfile
from steadyloop._run.bounds import WireApi
from steadyloop._run.models import RunInput
from steadyloop.tools import ToolRegistry, sanitize_tool_schema, tool

pytestmark = pytest.mark.slow


@tool(effect="pure")
async def tally(count: Annotated[int, Field(gt=0)], limit: int = 10) -> str:
    """Count up to a limit."""
    return f"{count}/{limit}"


# What each profile removes, and the tool's own schema has (checked below, so the test
# cannot pass on a schema that never held them).
STRIPPED: dict[ProviderProfile, set[str]] = {
    "gemini": {"additionalProperties", "exclusiveMinimum"},
    "openai_strict": {"default"},
}


def keys(schema: Any) -> Iterator[str]:
    """Every key anywhere in `schema` (a property's name included: none here is a keyword)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key
            yield from keys(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from keys(value)


def sent_tool(api: WireApi, body: Any) -> dict[str, Any]:
    """`tally` as the wire spelled it in the request body."""
    if api == "chat":
        [spec] = [t["function"] for t in body["tools"] if t["function"]["name"] == "tally"]
    else:
        [spec] = [t for t in body["tools"] if t["name"] == "tally"]
    found: dict[str, Any] = spec
    return found


def sent_schema(api: WireApi, spec: dict[str, Any]) -> Any:
    return spec["input_schema"] if api == "anthropic" else spec["parameters"]


@pytest.mark.parametrize("profile", sorted(STRIPPED))
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
async def test_each_wire_sends_the_schema_sanitized_for_the_runs_profile(
    api: WireApi, profile: ProviderProfile
) -> None:
    """The body's schema is the profile's, stripped of what the profile strips."""
    own = tally.parameters
    assert STRIPPED[profile] <= set(keys(own)), "the tool's own schema lacks the construct"
    run = RunInput(
        endpoint="m", model="some-model", prompt="hi", tools=["tally"], provider_profile=profile
    )
    async with wire_loop(
        {"m": Provider(api, [text_answer(api, "done")])}, ToolRegistry([tally])
    ) as loop:
        result = await loop.run(run)
    assert result.stop_reason == "final_answer", result.detail
    [request] = loop.servers["m"].requests
    spec = sent_tool(api, request.json)
    schema = sent_schema(api, spec)

    assert schema == sanitize_tool_schema(own, profile)
    assert not STRIPPED[profile] & set(keys(schema)), schema
    if profile == "openai_strict":
        assert schema["required"] == ["count", "limit"]
        assert schema["properties"]["limit"]["type"] == ["integer", "null"]
    # `strict` where the wire has it: chat sends it only when on, responses always.
    if api == "chat":
        assert spec.get("strict") is (True if profile == "openai_strict" else None)
    elif api == "responses":
        assert spec["strict"] is (profile == "openai_strict")
    else:
        assert "strict" not in spec
