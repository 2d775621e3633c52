"""Endpoint configuration: bad input is refused when the configuration is built, by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from steadyloop._routing.endpoints import (
    DEFAULT_ENDPOINT_NAME,
    ENDPOINTS_ENV,
    OPENAI_DEFAULT_BASE_URL,
    EndpointConfig,
    EndpointConfigError,
    EndpointRegistry,
    MissingApiKeyError,
    UnknownEndpointError,
)


def test_base_url_is_normalized_and_the_path_appended() -> None:
    endpoint = EndpointConfig(name="local", base_url="  http://127.0.0.1:11434/v1/  ")
    assert endpoint.base_url == "http://127.0.0.1:11434/v1"
    assert endpoint.chat_completions_url == "http://127.0.0.1:11434/v1/chat/completions"


@pytest.mark.parametrize(
    ("base_url", "complaint"),
    [
        ("", "must not be blank"),
        ("api.openai.com/v1", "must start with http:// or https://"),
        ("ftp://example.com/v1", "must start with http:// or https://"),
        ("http:///v1", "has no host"),
        ("http://example.com:99999/v1", "not a valid URL"),
        ("http://example.com:port/v1", "not a valid URL"),
        ("https://user:sk-secret@example.com/v1", "must not carry credentials"),
        ("https://example.com/v1?key=sk-q", "query string or fragment"),
        ("https://example.com/v1#top", "query string or fragment"),
        ("https://example.com/v1/chat/completions", "already ends with /chat/completions"),
    ],
)
def test_bad_base_urls_are_refused_with_the_reason(base_url: str, complaint: str) -> None:
    with pytest.raises(ValidationError, match=complaint):
        EndpointConfig(name="x", base_url=base_url)


@pytest.mark.parametrize(
    "base_url", ["https://user:sk-secret@example.com/v1", "https://example.com/v1?key=sk-secret"]
)
def test_secrets_in_a_refused_base_url_are_not_echoed(base_url: str) -> None:
    with pytest.raises(ValidationError) as info:
        EndpointConfig(name="x", base_url=base_url)
    assert "sk-secret" not in str(info.value)


def test_api_key_env_must_be_a_variable_name_and_a_pasted_key_is_not_echoed() -> None:
    with pytest.raises(ValidationError, match="name\\* of an environment variable") as info:
        EndpointConfig(name="x", base_url="http://h/v1", api_key_env="sk-proj-abc123")
    assert "sk-proj-abc123" not in str(info.value)
    with pytest.raises(ValidationError, match="must not be blank"):
        EndpointConfig(name="x", base_url="http://h/v1", api_key_env="  ")
    assert EndpointConfig(name="x", base_url="http://h/v1", api_key_env="MY_KEY_2").api_key_env


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf")])
def test_timeouts_must_be_finite_and_positive(timeout: float) -> None:
    with pytest.raises(ValidationError, match="finite number of seconds above 0"):
        EndpointConfig(name="x", base_url="http://h/v1", read_timeout_s=timeout)


def test_headers_are_validated() -> None:
    with pytest.raises(ValidationError, match="not a valid HTTP header name"):
        EndpointConfig(name="x", base_url="http://h/v1", headers={"Bad Header": "v"})
    for bad in ("v\r\nInjected: 1", "caf\u00e9"):
        with pytest.raises(ValidationError, match="printable ASCII"):
            EndpointConfig(name="x", base_url="http://h/v1", headers={"X-A": bad})
    with pytest.raises(ValidationError, match="set by steadyloop"):
        EndpointConfig(name="x", base_url="http://h/v1", headers={"Content-Type": "text/plain"})
    with pytest.raises(ValidationError, match="both api_key_env and an Authorization header"):
        EndpointConfig(
            name="x",
            base_url="http://h/v1",
            api_key_env="K",
            headers={"authorization": "Bearer x"},
        )


def test_unknown_fields_and_blank_names_are_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        EndpointConfig.model_validate({"name": "x", "base_url": "http://h/v1", "api_key": "k"})
    with pytest.raises(ValidationError, match="must not be blank"):
        EndpointConfig(name="   ", base_url="http://h/v1")


def test_api_key_is_read_from_the_environment_at_call_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = EndpointConfig(name="x", base_url="http://h/v1", api_key_env="STEADYLOOP_TEST_KEY")
    monkeypatch.delenv("STEADYLOOP_TEST_KEY", raising=False)
    with pytest.raises(MissingApiKeyError, match="STEADYLOOP_TEST_KEY"):
        endpoint.api_key()
    monkeypatch.setenv("STEADYLOOP_TEST_KEY", "  ")
    with pytest.raises(MissingApiKeyError):
        endpoint.api_key()
    monkeypatch.setenv("STEADYLOOP_TEST_KEY", "sk-first")
    assert endpoint.api_key() == "sk-first"
    monkeypatch.setenv("STEADYLOOP_TEST_KEY", "sk-rotated")
    assert endpoint.api_key() == "sk-rotated"
    assert endpoint.api_key({"STEADYLOOP_TEST_KEY": "sk-given"}) == "sk-given"
    with pytest.raises(MissingApiKeyError, match="printable ASCII") as info:
        endpoint.api_key({"STEADYLOOP_TEST_KEY": "sk-\u2013pasted"})
    assert "pasted" not in str(info.value)
    assert EndpointConfig(name="y", base_url="http://h/v1").api_key() is None


def test_registry_lookup_names_the_known_endpoints() -> None:
    registry = EndpointRegistry(
        [
            EndpointConfig(name="openai", base_url="https://api.openai.com/v1"),
            EndpointConfig(name="local", base_url="http://127.0.0.1:11434/v1"),
        ]
    )
    assert registry.get("local").base_url == "http://127.0.0.1:11434/v1"
    assert "openai" in registry and len(registry) == 2
    with pytest.raises(UnknownEndpointError, match="'local', 'openai'") as info:
        registry.get("anthropic")
    assert info.value.name == "anthropic"
    with pytest.raises(UnknownEndpointError, match="none are configured"):
        EndpointRegistry().get("x")
    with pytest.raises(EndpointConfigError, match="configured twice"):
        registry.add(EndpointConfig(name="local", base_url="http://other/v1"))


def test_registry_from_json_list_and_mapping() -> None:
    as_list = EndpointRegistry.from_json(
        json.dumps([{"name": "a", "base_url": "http://a/v1", "include_usage": False}])
    )
    assert as_list.get("a").include_usage is False
    as_mapping = EndpointRegistry.from_json(
        json.dumps({"b": {"base_url": "http://b/v1", "api_key_env": "B_KEY"}})
    )
    assert as_mapping.get("b").api_key_env == "B_KEY"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{not json", "not valid JSON"),
        ('"a string"', "must be a JSON list of endpoints or an object"),
        ('[{"name": "a", "base_url": "nope"}]', r"STEADYLOOP_ENDPOINTS\[0\]: base_url"),
        ('{"a": {"base_url": "http://a/v1", "timeout": 3}}', r"\['a'\]: timeout"),
        ('{"a": {"name": "b", "base_url": "http://a/v1"}}', "different name inside"),
        ('{"a": "http://a/v1"}', "must be an object"),
        (
            '[{"name": "a", "base_url": "http://a/v1"}, {"name": "a", "base_url": "http://b/v1"}]',
            "configured twice",
        ),
    ],
)
def test_registry_from_bad_json_names_the_entry(text: str, complaint: str) -> None:
    with pytest.raises(EndpointConfigError, match=complaint):
        EndpointRegistry.from_json(text)


def test_registry_from_env_reads_steadyloop_endpoints_and_the_openai_convention() -> None:
    configured = EndpointRegistry.from_env(
        {ENDPOINTS_ENV: json.dumps({"local": {"base_url": "http://127.0.0.1:8080/v1"}})}
    )
    assert configured.names == ["local"]

    with_openai = EndpointRegistry.from_env(
        {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_API_KEY": "sk-x"}
    )
    default = with_openai.get(DEFAULT_ENDPOINT_NAME)
    assert default.base_url == "http://127.0.0.1:11434/v1"
    assert default.api_key_env == "OPENAI_API_KEY"
    assert "sk-x" not in default.model_dump_json()

    key_only = EndpointRegistry.from_env({"OPENAI_API_KEY": "sk-x"}).get(DEFAULT_ENDPOINT_NAME)
    assert key_only.base_url == OPENAI_DEFAULT_BASE_URL
    url_only = EndpointRegistry.from_env({"OPENAI_BASE_URL": "http://h/v1"}).get("default")
    assert url_only.api_key_env is None

    assert len(EndpointRegistry.from_env({})) == 0
    assert len(EndpointRegistry.from_env({"OPENAI_API_KEY": "k"}, openai_convention=False)) == 0
    with pytest.raises(EndpointConfigError, match="OPENAI_BASE_URL"):
        EndpointRegistry.from_env({"OPENAI_BASE_URL": "localhost:11434"})


def test_an_explicit_default_endpoint_wins_over_the_openai_convention() -> None:
    registry = EndpointRegistry.from_env(
        {
            ENDPOINTS_ENV: json.dumps([{"name": "default", "base_url": "http://mine/v1"}]),
            "OPENAI_BASE_URL": "http://theirs/v1",
        }
    )
    assert registry.get("default").base_url == "http://mine/v1"


def test_registry_from_file(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    path.write_text(json.dumps({"f": {"base_url": "http://f/v1"}}), encoding="utf-8")
    assert EndpointRegistry.from_file(path).get("f").base_url == "http://f/v1"
    with pytest.raises(EndpointConfigError, match="cannot read"):
        EndpointRegistry.from_file(tmp_path / "missing.json")
    path.write_text('[{"base_url": "http://f/v1"}]', encoding="utf-8")
    with pytest.raises(EndpointConfigError, match=r"endpoints.json\[0\]: name: Field required"):
        EndpointRegistry.from_file(path)
