"""The wire an endpoint speaks: configured per endpoint, chosen by the model activity,
and pass-back items that go back only to the endpoint that issued them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities import ModelActivities
from steadyloop._chat import ChatMessage, PassbackItem, ToolCall
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointConfig, EndpointConfigError, EndpointRegistry
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.passback import foreign_passback, passback_for
from steadyloop._stream.wire import CHAT_WIRE, UnsupportedWireError, wire_for
from steadyloop._worker.config import ConfigError, LoadedConfig, endpoint_settings, load_config
from steadyloop._workflows.run_timeline import passback_dropped_text
from steadyloop.errors import UNSUPPORTED_WIRE
from steadyloop.testing import ScriptedServer, sse_response, text_chunks


def item(
    endpoint: str, raw: str = '{"type":"reasoning","id":"rs_1"}', **fields: str
) -> PassbackItem:
    return PassbackItem(endpoint=endpoint, wire="responses", kind="reasoning", raw=raw, **fields)


# -- configuration ------------------------------------------------------------------


def test_api_defaults_to_chat_and_names_the_url_each_wire_posts_to() -> None:
    base = "http://127.0.0.1:8080/v1"
    assert EndpointConfig(name="a", base_url=base).api == "chat"
    urls = {
        api: EndpointConfig(name="a", base_url=base, api=api).url
        for api in ("chat", "responses", "anthropic")
    }
    assert urls == {
        "chat": f"{base}/chat/completions",
        "responses": f"{base}/responses",
        "anthropic": f"{base}/messages",
    }
    assert EndpointConfig(name="a", base_url=base).anthropic_version == "2023-06-01"


def test_an_unknown_api_is_refused_naming_the_endpoint_and_the_three_choices() -> None:
    with pytest.raises(EndpointConfigError) as info:
        EndpointRegistry.from_data({"gpt": {"base_url": "http://h/v1", "api": "respones"}})
    message = str(info.value)
    assert "'gpt'" in message
    for choice in ('"chat"', '"responses"', '"anthropic"', "respones"):
        assert choice in message


def test_a_base_url_ending_with_its_wires_path_is_refused() -> None:
    with pytest.raises(ValueError, match="already ends with /responses"):
        EndpointConfig(name="a", base_url="http://h/v1/responses", api="responses")
    # Another wire's path is only a path.
    assert EndpointConfig(name="a", base_url="http://h/responses").api == "chat"


def test_api_comes_from_the_file_the_variable_and_the_flag() -> None:
    environ = {
        "STEADYLOOP_ENDPOINTS": json.dumps(
            {"env": {"base_url": "http://env/v1", "api": "anthropic"}}
        )
    }
    settings = endpoint_settings(
        flags=["flag=http://flag/v1,api=responses"], config=LoadedConfig(), environ=environ
    )
    assert settings.registry.get("flag").api == "responses"
    assert settings.registry.get("env").api == "anthropic"
    with pytest.raises(ConfigError, match=r"flag.*api must be one of"):
        endpoint_settings(flags=["flag=http://flag/v1,api=soap"], config=LoadedConfig(), environ={})


def test_the_responses_transcript_field_is_not_settable_from_extra_body() -> None:
    with pytest.raises(ValueError, match="extra_body may not set input"):
        EndpointConfig(name="a", base_url="http://h/v1", api="responses", extra_body={"input": []})


# -- the wire -------------------------------------------------------------------------


def test_the_chat_wire_is_todays_request_unchanged() -> None:
    endpoint = EndpointConfig(name="a", base_url="http://h/v1")
    assert wire_for(endpoint) is CHAT_WIRE
    assert CHAT_WIRE.url(endpoint) == "http://h/v1/chat/completions"
    request = CompletionRequest(
        endpoint="a",
        model="m",
        messages=[
            ChatMessage(role="user", content="hi"),
            ChatMessage(role="assistant", content="ok", passback=[item("a")]),
        ],
    )
    body = CHAT_WIRE.body(request, endpoint)
    # No pass-back item is ever sent on the chat wire.
    assert body["messages"][1] == {"role": "assistant", "content": "ok"}


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


# An `api` no wire speaks, as each entry can carry it: text, the empty string, a wire's
# long name, a lone surrogate (JSON escapes, or undecodable argv bytes), a number, null,
# and a value too long to quote whole.
BAD_APIS: list[object] = ["soap", "", "Chat Completions", "\ud800", 3, None, "x" * 1000]
FLAG_APIS = ["soap", "", "SOAP", "\udcff", "x" * 1000]


def refused_naming(value: object, run: Callable[[], object], *where: str) -> None:
    """`run` raises a ConfigError naming `where`, the three choices and the value."""
    with pytest.raises(ConfigError) as info:
        run()
    message = str(info.value)
    for part in (*where, '"chat"', '"responses"', '"anthropic"', f"got {repr(value)[:40]}"):
        assert part in message, (part, message)
    message.encode("utf-8", "surrogatepass")  # text, whatever the value held
    assert len(message) < 400


@pytest.mark.parametrize("value", BAD_APIS, ids=repr)
def test_an_unknown_api_in_the_config_file_is_refused_naming_it(
    value: object, tmp_path: Path
) -> None:
    file = tmp_path / "steadyloop.json"  # JSON: TOML has no null and no lone surrogate
    file.write_text(json.dumps({"endpoints": {"gpt": {"base_url": "http://h/v1", "api": value}}}))

    def run() -> object:
        return endpoint_settings(flags=[], config=load_config(file, {}), environ={})

    refused_naming(value, run, str(file), "endpoints.gpt")


def test_an_unknown_api_in_a_toml_config_file_is_refused_naming_it(tmp_path: Path) -> None:
    file = tmp_path / "steadyloop.toml"
    file.write_text('[endpoints.gpt]\nbase_url = "http://h/v1"\napi = "respones"\n')

    def run() -> object:
        return endpoint_settings(flags=[], config=load_config(file, {}), environ={})

    refused_naming("respones", run, str(file), "endpoints.gpt")


@pytest.mark.parametrize("value", BAD_APIS, ids=repr)
@pytest.mark.parametrize("shape", ["object", "list"])
def test_an_unknown_api_in_steadyloop_endpoints_is_refused_naming_it(
    value: object, shape: str
) -> None:
    entry = {"base_url": "http://h/v1", "api": value}
    data = {"gpt": entry} if shape == "object" else [{"name": "gpt", **entry}]
    environ = {"STEADYLOOP_ENDPOINTS": json.dumps(data)}

    def run() -> object:
        return endpoint_settings(flags=[], config=LoadedConfig(), environ=environ)

    where = "STEADYLOOP_ENDPOINTS['gpt']" if shape == "object" else "STEADYLOOP_ENDPOINTS[0]"
    refused_naming(value, run, where)


@pytest.mark.parametrize("value", FLAG_APIS, ids=repr)
def test_an_unknown_api_in_an_endpoint_flag_is_refused_naming_it(value: str) -> None:
    flag = f"gpt=http://h/v1,api={value}"

    def run() -> object:
        return endpoint_settings(flags=[flag], config=LoadedConfig(), environ={})

    refused_naming(value, run, "--endpoint gpt:")


def test_the_api_is_read_without_regard_to_case_or_spaces() -> None:
    settings = endpoint_settings(
        flags=["gpt=http://h/v1,api= Responses "], config=LoadedConfig(), environ={}
    )
    assert settings.registry.get("gpt").api == "responses"


def test_an_api_whose_repr_cannot_be_made_is_refused_naming_its_type() -> None:
    """Python refuses to print an int of more than 4,300 digits (a ValueError of its
    own): the refusal names the type instead of raising that."""
    with pytest.raises(EndpointConfigError, match=r"got int$"):
        EndpointRegistry.from_data({"gpt": {"base_url": "http://h/v1", "api": 10**5000}})


async def test_a_wire_the_worker_does_not_speak_is_refused_before_any_request(
    server: ScriptedServer,
) -> None:
    """Every entry validates `api`, and no payload carries one: the model activity takes an
    endpoint's *name* and reads its configuration from the worker's registry. The guard
    in the activity is for code that builds a configuration without validating it
    (`model_construct`); it refuses, non-retryable, and sends nothing."""
    server.enqueue(sse_response(text_chunks("hi")))
    fields: dict[str, Any] = {**server.endpoint("claude").model_dump(), "api": "soap"}
    unchecked = EndpointConfig.model_construct(**fields)
    with pytest.raises(UnsupportedWireError, match=r"'claude'.*api='soap'"):
        wire_for(unchecked)
    async with ModelActivities(EndpointRegistry([unchecked])) as model:
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(
                model.stream_completion,
                CompletionRequest(
                    endpoint="claude", model="m", messages=[ChatMessage(role="user", content="x")]
                ),
            )
    assert info.value.type == UNSUPPORTED_WIRE
    assert info.value.non_retryable
    assert "'claude'" in str(info.value) and "api='soap'" in str(info.value)
    assert "'chat', 'responses', 'anthropic'" in str(info.value)
    assert server.requests == []


# -- pass-back items ------------------------------------------------------------------


def test_passback_goes_only_to_the_endpoint_and_wire_that_issued_it() -> None:
    mine, theirs = item("a", before_call="call_1"), item("b")
    other_wire = PassbackItem(endpoint="a", wire="anthropic", kind="thinking", raw="{}")
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="call_1", name="f", arguments="{}")],
            passback=[theirs, mine, other_wire],
        ),
    ]
    kept = passback_for(messages, "a", "responses")
    assert kept[1].passback == [mine]
    assert messages[1].passback == [theirs, mine, other_wire]  # the transcript keeps all
    assert kept[0] is messages[0]
    assert foreign_passback(messages, "a", "responses") == 2
    assert foreign_passback(messages, "a", None) == 1
    assert foreign_passback(messages, "b", None) == 2


def test_passback_rides_from_the_turn_into_the_transcript_byte_exact() -> None:
    raw = '{"type": "reasoning","id":"rs_1", "encrypted_content":"gAAA\\u00e9=","summary":[]}'
    turn = AssembledTurn(text="", passback=[item("a", raw)])
    message = turn.to_message()
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([message])
    back = converter.from_payloads([payload], [ChatMessage])[0]
    assert back.passback[0].raw == raw


def test_an_empty_passback_costs_no_history_bytes() -> None:
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([ChatMessage(role="assistant", content="x")])
    assert b"passback" not in payload.data
    (turn,) = converter.to_payloads([AssembledTurn()])
    assert b"passback" not in turn.data and b"notes" not in turn.data


def test_a_fallback_says_how_many_passback_items_it_left_out() -> None:
    transcript = [
        ChatMessage(role="user", content="q"),
        ChatMessage(role="assistant", content="a", passback=[item("gpt"), item("gpt")]),
    ]
    line = passback_dropped_text(transcript, "backup")
    assert line is not None
    assert line.startswith("2 reasoning item(s) issued by endpoint 'gpt'")
    assert "'backup'" in line
    assert passback_dropped_text(transcript, "gpt") is None


async def test_passback_items_leave_history_through_blob_storage(tmp_path: Path) -> None:
    """A reasoning item of 1 MB costs history what one of 10 KB does: the claim of a
    blob, as every large transcript does; it comes back byte-exact."""
    converter = steadyloop_data_converter(tmp_path, threshold_bytes=4_000)

    def transcript(size: int) -> list[ChatMessage]:
        raw = '{"type":"reasoning","id":"rs_1","encrypted_content":"' + "A" * size + '"}'
        return [
            ChatMessage(role="user", content="q"),
            ChatMessage(role="assistant", content="a", passback=[item("gpt", raw)]),
        ]

    small, large = transcript(10_000), transcript(1_000_000)
    encoded = await converter.encode([small, large])
    assert all(payload.external_payloads for payload in encoded)
    assert abs(encoded[0].ByteSize() - encoded[1].ByteSize()) < 16
    assert encoded[1].ByteSize() < 1_000
    back = await converter.decode(encoded, [list[ChatMessage], list[ChatMessage]])
    assert back[1][1].passback[0].raw == large[1].passback[0].raw
