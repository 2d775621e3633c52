"""The shipped `steadyloop.example.toml` loads, names every key the config file takes, and
states each endpoint default as the code has it, so the example cannot drift from the
schema the configuration page (docs/configuration.md) points to."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from docs_pages import section as docs_section

from steadyloop._mcp.config import McpServerConfig, mcp_servers
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._routing.pricing import Price
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._worker.config import (
    ConfigFile,
    TemporalSection,
    endpoint_settings,
    load_config,
    load_tool_registry,
    temporal_settings,
    tools_spec,
)

EXAMPLE = Path(__file__).parent.parent / "steadyloop.example.toml"


def test_the_example_config_loads_as_a_worker_and_a_run_would_read_it() -> None:
    config = load_config(EXAMPLE, {})
    settings = endpoint_settings(flags=[], config=config, environ={})
    assert settings.registry.names == ["default", "openrouter"]
    assert settings.models == {"default": "smollm2", "openrouter": "openai/gpt-4.1-mini"}
    default = settings.registry.get("default")
    assert default.extra_body == {"cache_prompt": True}
    assert settings.registry.get("openrouter").header_variables == ["GATEWAY_KEY"]
    temporal = temporal_settings(
        address=None, namespace=None, task_queue=None, config=config, environ={}
    )
    assert (temporal.address, temporal.namespace, temporal.task_queue) == (
        "localhost:7233",
        "default",
        "steadyloop",
    )
    assert load_tool_registry(tools_spec(None, config, {})).names()


def _keys(table: dict[str, Any]) -> set[str]:
    return set(table)


def test_the_example_names_every_key_of_the_schema() -> None:
    data = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    text = EXAMPLE.read_text(encoding="utf-8")
    assert _keys(data) == set(ConfigFile.model_fields)
    assert _keys(data["temporal"]) == set(TemporalSection.model_fields)
    endpoint = data["endpoints"]["default"]
    # `name` is the table's name; `api_key_env` is shown commented (a key-less default).
    written = _keys(endpoint) | {"name"}
    assert "# api_key_env = " in text
    assert written | {"api_key_env"} == set(EndpointConfig.model_fields)
    assert _keys(endpoint["argument_limits"]) == set(ArgumentLimits.model_fields)
    assert _keys(data["prices"]["openrouter"]) == set(Price.model_fields)
    # `name` is the table's name; stdio and HTTP servers between them show every key.
    servers = data["mcp"]
    shown = _keys(servers["sqlite"]) | _keys(servers["search"]) | {"name"}
    assert shown == set(McpServerConfig.model_fields)
    assert [s.name for s in mcp_servers(data["mcp"], [])] == ["sqlite", "search"]


def test_the_example_states_the_defaults_the_code_has() -> None:
    data = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    written = data["endpoints"]["default"]
    stated = EndpointConfig.model_validate(
        {"name": "default", **{k: v for k, v in written.items() if k not in ("model",)}}
    )
    bare = EndpointConfig(name="default", base_url=written["base_url"])
    for field in EndpointConfig.model_fields:
        if field in ("extra_body", "headers"):  # examples, not defaults (default: none)
            continue
        assert getattr(stated, field) == getattr(bare, field), field


def test_the_readme_configuration_table_names_every_key() -> None:
    section = docs_section("configuration.md", "Configuration")
    for key in (*ConfigFile.model_fields, *TemporalSection.model_fields, *Price.model_fields):
        assert f"`{key}" in section or f"{key}`" in section or f".{key}`" in section, key
    for key in EndpointConfig.model_fields:
        if key != "name":
            assert key in section, key
    assert "steadyloop.example.toml" in section


def test_the_example_web_table_loads_as_steadyloop_serve_reads_it() -> None:
    from steadyloop._web.settings import web_settings

    config = load_config(EXAMPLE, {})
    web = web_settings(config.file.web, {"ACME_WEB_TOKEN": "s3cret"})
    assert web.cors_origins == ["https://app.example.com"]
    assert web.tenant_for("s3cret") == "acme" and web.tenant_for("other") is None
    assert web.limits("acme").max_active_runs == 8
