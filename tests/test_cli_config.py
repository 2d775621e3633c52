"""Worker and command-line settings: one precedence rule, refusals that name the setting,
and no key ever carried by a setting."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from steadyloop._cli.main import run_cli
from steadyloop._cli.outcome import EXIT_FAILED, EXIT_USAGE
from steadyloop._routing.endpoints import DEFAULT_ENDPOINT_NAME, OPENAI_DEFAULT_BASE_URL
from steadyloop._worker.config import (
    DEFAULT_ADDRESS,
    DEFAULT_NAMESPACE,
    DEFAULT_TASK_QUEUE,
    EXAMPLE_TOOLS,
    ConfigError,
    LoadedConfig,
    describe_endpoint,
    endpoint_settings,
    load_config,
    load_tool_registry,
    parse_endpoint_flag,
    run_endpoint,
    run_model,
    run_prices,
    run_route,
    temporal_settings,
    tools_spec,
)
from steadyloop._worker.dev_server import free_port

SECRET = "sk-test-0123456789abcdef"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def toml_config(tmp_path: Path) -> LoadedConfig:
    path = write(
        tmp_path / "steadyloop.toml",
        """
default_endpoint = "local"
tools = "my_tools:registry"

[temporal]
address = "file-host:7233"
namespace = "file-ns"
task_queue = "file-queue"

[endpoints.local]
base_url = "http://127.0.0.1:11434/v1"
model = "qwen3:8b"

[endpoints.default]
base_url = "http://gateway.internal/v1"
api_key_env = "GATEWAY_KEY"
""",
    )
    return load_config(path, {})


# -- Temporal ---------------------------------------------------------------------------


def test_temporal_defaults_without_any_setting() -> None:
    settings = temporal_settings(
        address=None, namespace=None, task_queue=None, config=LoadedConfig(), environ={}
    )
    assert (settings.address, settings.namespace, settings.task_queue) == (
        DEFAULT_ADDRESS,
        DEFAULT_NAMESPACE,
        DEFAULT_TASK_QUEUE,
    )


def test_temporal_precedence_is_flag_then_environment_then_file(
    toml_config: LoadedConfig,
) -> None:
    from_file = temporal_settings(
        address=None, namespace=None, task_queue=None, config=toml_config, environ={}
    )
    assert (from_file.address, from_file.namespace, from_file.task_queue) == (
        "file-host:7233",
        "file-ns",
        "file-queue",
    )
    environ = {
        "TEMPORAL_ADDRESS": "env-host:7233",
        "TEMPORAL_NAMESPACE": "env-ns",
        "STEADYLOOP_TASK_QUEUE": "env-queue",
    }
    from_env = temporal_settings(
        address=None, namespace=None, task_queue=None, config=toml_config, environ=environ
    )
    assert (from_env.address, from_env.namespace, from_env.task_queue) == (
        "env-host:7233",
        "env-ns",
        "env-queue",
    )
    from_flags = temporal_settings(
        address="flag-host:7233",
        namespace="flag-ns",
        task_queue="flag-queue",
        config=toml_config,
        environ=environ,
    )
    assert (from_flags.address, from_flags.namespace, from_flags.task_queue) == (
        "flag-host:7233",
        "flag-ns",
        "flag-queue",
    )


def test_temporal_cloud_settings_pass_through_but_are_never_shown() -> None:
    settings = temporal_settings(
        address=None,
        namespace=None,
        task_queue=None,
        config=LoadedConfig(),
        environ={"TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233", "TEMPORAL_API_KEY": SECRET},
    )
    assert settings.extra["api_key"] == SECRET
    assert settings.extra["tls"]  # an API key implies TLS, as Temporal's own config says
    assert SECRET not in repr(settings)


# -- the config file ---------------------------------------------------------------------


def test_json_and_toml_files_read_the_same(tmp_path: Path, toml_config: LoadedConfig) -> None:
    as_json = write(
        tmp_path / "steadyloop.json",
        json.dumps(toml_config.file.model_dump(mode="json", exclude_defaults=True)),
    )
    assert load_config(as_json, {}).file == toml_config.file


def test_the_config_file_can_come_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[temporal]\naddress = "x:1"\n')
    loaded = load_config(None, {"STEADYLOOP_CONFIG": str(path)})
    assert loaded.file.temporal.address == "x:1"
    assert loaded.source == str(path)


@pytest.mark.parametrize(
    ("name", "text", "complaint"),
    [
        ("typo.toml", "[temporall]\naddress = 'x'\n", "temporall"),
        ("typo2.toml", "[temporal]\nadress = 'x'\n", "temporal.adress"),
        ("bad.toml", "[temporal\n", "not valid TOML"),
        ("bad.json", "{", "not valid JSON"),
        ("price.toml", "[prices.local]\ninput = 1\noutptu = 2\n", "prices.local.outptu"),
        ("nan.toml", "[prices.local]\ninput = nan\noutput = 2\n", "prices.local.input"),
    ],
)
def test_config_file_mistakes_are_refused_naming_file_and_key(
    tmp_path: Path, name: str, text: str, complaint: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    assert str(path) in str(raised.value)
    assert complaint in str(raised.value)


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(tmp_path / "nope.toml", {})


# -- endpoints -----------------------------------------------------------------------


def test_file_endpoints_carry_a_default_model_for_runs(toml_config: LoadedConfig) -> None:
    settings = endpoint_settings(flags=[], config=toml_config, environ={})
    assert settings.registry.names == ["local", "default"]
    assert settings.registry.get("local").base_url == "http://127.0.0.1:11434/v1"
    assert settings.models == {"local": "qwen3:8b"}
    assert run_model(None, "local", settings, {}) == "qwen3:8b"


def test_endpoint_precedence_is_flag_then_environment_then_file(
    toml_config: LoadedConfig,
) -> None:
    environ = {
        "STEADYLOOP_ENDPOINTS": json.dumps(
            {"local": {"base_url": "http://env-host/v1", "model": "env-model"}}
        )
    }
    from_env = endpoint_settings(flags=[], config=toml_config, environ=environ)
    assert from_env.registry.get("local").base_url == "http://env-host/v1"
    assert from_env.models["local"] == "env-model"
    assert from_env.sources["local"] == "STEADYLOOP_ENDPOINTS"

    from_flag = endpoint_settings(
        flags=["local=http://flag-host/v1,api_key_env=LOCAL_KEY"],
        config=toml_config,
        environ=environ,
    )
    local = from_flag.registry.get("local")
    assert (local.base_url, local.api_key_env) == ("http://flag-host/v1", "LOCAL_KEY")
    # The flag redefined the endpoint without a model: the older model does not linger.
    assert "local" not in from_flag.models


def test_openai_variables_fill_default_only_when_nothing_defines_it(
    toml_config: LoadedConfig,
) -> None:
    environ = {"OPENAI_API_KEY": SECRET}
    with_file_default = endpoint_settings(flags=[], config=toml_config, environ=environ)
    assert with_file_default.registry.get(DEFAULT_ENDPOINT_NAME).base_url == (
        "http://gateway.internal/v1"
    )

    without = endpoint_settings(flags=[], config=LoadedConfig(), environ=environ)
    default = without.registry.get(DEFAULT_ENDPOINT_NAME)
    assert (default.base_url, default.api_key_env) == (OPENAI_DEFAULT_BASE_URL, "OPENAI_API_KEY")


def test_no_setting_holds_a_key_only_its_variable_name() -> None:
    settings = endpoint_settings(
        flags=["openai=https://api.openai.com/v1,api_key_env=OPENAI_API_KEY"],
        config=LoadedConfig(),
        environ={"OPENAI_API_KEY": SECRET},
    )
    endpoint = settings.registry.get("openai")
    assert SECRET not in endpoint.model_dump_json()
    line = describe_endpoint(endpoint, {"OPENAI_API_KEY": SECRET})
    assert SECRET not in line
    assert "$OPENAI_API_KEY" in line
    assert "NOT set" in describe_endpoint(endpoint, {})


def test_a_key_pasted_where_its_variable_name_goes_is_refused_and_not_echoed() -> None:
    with pytest.raises(ConfigError) as raised:
        endpoint_settings(
            flags=[f"openai=https://api.openai.com/v1,api_key_env={SECRET}"],
            config=LoadedConfig(),
            environ={},
        )
    assert SECRET not in str(raised.value)
    assert "api_key_env" in str(raised.value)


@pytest.mark.parametrize(
    "spec",
    ["local", "=http://h/v1", "local=", "local=http://h/v1,api_key_env", "x=http://h/v1,headers=a"],
)
def test_malformed_endpoint_flags_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_endpoint_flag(spec)


def test_endpoint_flag_fields_are_converted_by_the_endpoint_model() -> None:
    settings = endpoint_settings(
        flags=["vllm=http://10.0.0.5:8000/v1,include_usage=false,read_timeout_s=600,model=m"],
        config=LoadedConfig(),
        environ={},
    )
    endpoint = settings.registry.get("vllm")
    assert endpoint.include_usage is False
    assert endpoint.read_timeout_s == 600.0
    assert settings.models == {"vllm": "m"}


def test_a_malformed_endpoints_variable_is_named() -> None:
    with pytest.raises(ConfigError, match="STEADYLOOP_ENDPOINTS"):
        endpoint_settings(flags=[], config=LoadedConfig(), environ={"STEADYLOOP_ENDPOINTS": "{"})


# -- what a run asks for ---------------------------------------------------------------


def test_run_endpoint_and_model_precedence(toml_config: LoadedConfig) -> None:
    settings = endpoint_settings(flags=[], config=toml_config, environ={})
    assert run_endpoint(None, LoadedConfig(), {}) == DEFAULT_ENDPOINT_NAME
    assert run_endpoint(None, toml_config, {}) == "local"
    assert run_endpoint(None, toml_config, {"STEADYLOOP_ENDPOINT": "env"}) == "env"
    assert run_endpoint("flag", toml_config, {"STEADYLOOP_ENDPOINT": "env"}) == "flag"
    assert run_model(None, "local", settings, {"STEADYLOOP_MODEL": "env-m"}) == "env-m"
    assert run_model("flag-m", "local", settings, {"STEADYLOOP_MODEL": "env-m"}) == "flag-m"
    with pytest.raises(ConfigError, match="--model"):
        run_model(None, "default", settings, {})


# -- tools ---------------------------------------------------------------------------


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module in the current directory, as a user's `my_tools.py` next to their shell."""
    write(
        tmp_path / "sl_user_tools.py",
        '''
from steadyloop.tools import ToolRegistry, tool

@tool(effect="pure")
async def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()

@tool(effect="pure")
async def whisper(text: str) -> str:
    """Lower-case the text."""
    return text.lower()

registry = ToolRegistry([shout])
def build():
    return ToolRegistry([shout, whisper])
tools = [shout, whisper]
twice = [shout, shout]
def plain(x: int) -> int:
    return x
mixed = [shout, plain]
def builds_nothing():
    return 42
not_tools = 42
''',
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield "sl_user_tools"
    sys.modules.pop("sl_user_tools", None)


def test_tool_registries_load_from_a_registry_a_function_or_a_list(user_module: str) -> None:
    assert load_tool_registry(f"{user_module}:registry").names() == ["shout"]
    assert load_tool_registry(f"{user_module}:build").names() == ["shout", "whisper"]
    assert load_tool_registry(f"{user_module}:tools").names() == ["shout", "whisper"]
    assert load_tool_registry(f"{user_module}:shout").names() == ["shout"]


@pytest.mark.parametrize(
    ("attribute", "complaint"),
    [
        ("twice", "already registered"),
        ("mixed", "not a tool"),
        ("plain", "needs arguments"),
        ("builds_nothing", "is a int"),
        ("not_tools", "is a int"),
        ("missing", "has no 'missing'"),
    ],
)
def test_tool_registry_mistakes_are_named(user_module: str, attribute: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        load_tool_registry(f"{user_module}:{attribute}")


@pytest.mark.parametrize("spec", ["no_colon", ":registry", "module:", "no_such_module_xyz:r"])
def test_unloadable_tool_specs_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError):
        load_tool_registry(spec)


def test_the_example_tools_are_the_default(toml_config: LoadedConfig) -> None:
    assert tools_spec(None, LoadedConfig(), {}) == EXAMPLE_TOOLS
    assert "append_note" in load_tool_registry(EXAMPLE_TOOLS).names()
    assert tools_spec(None, toml_config, {}) == "my_tools:registry"
    assert tools_spec(None, toml_config, {"STEADYLOOP_TOOLS": "env:r"}) == "env:r"
    assert tools_spec("flag:r", toml_config, {"STEADYLOOP_TOOLS": "env:r"}) == "flag:r"


# -- the command line refuses before it connects ------------------------------------------


def test_commands_exit_2_with_the_setting_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("STEADYLOOP_MODEL", "STEADYLOOP_CONFIG", "STEADYLOOP_TOOLS"):
        monkeypatch.delenv(name, raising=False)
    assert run_cli(["run", "hello", "--temperature", "-1"]) == EXIT_USAGE
    assert "--temperature: temperature must be a number from 0 to 2 on any endpoint; got -1" in (
        capsys.readouterr().err
    )
    assert run_cli(["worker", "--tools", "no_such_module_xyz:r"]) == EXIT_USAGE
    assert "no_such_module_xyz" in capsys.readouterr().err
    assert run_cli(["run", "hi", "--model", "m", "--max-turns", "0"]) == EXIT_USAGE
    assert "--max-turns: must be at least 1 (got 0)" in capsys.readouterr().err


def test_an_unreachable_temporal_is_named_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there
    code = run_cli(["run", "hi", "--model", "m", "--address", f"127.0.0.1:{port}"])
    assert code == EXIT_FAILED
    assert f"cannot reach Temporal at 127.0.0.1:{port}" in capsys.readouterr().err


def test_a_run_carries_the_prices_of_its_endpoint_and_of_its_models_only(tmp_path: Path) -> None:
    path = write(
        tmp_path / "prices.toml",
        """
[prices.openai]
input = 2.0
cached_input = 0.5
output = 8.0

[prices."openai/gpt-mini"]
input = 0.1
output = 0.4

[prices.local]
input = 0
output = 0

[prices.claude]
input = 3.0
cached_input = 0.3
cache_write_input = 3.75
output = 15.0
""",
    )
    config = load_config(path, {})
    assert run_prices("claude", config)["claude"].cache_write_input == 3.75
    prices = run_prices("openai", config)
    assert sorted(prices) == ["openai", "openai/gpt-mini"]
    assert prices["openai"].cached_input == 0.5 and prices["openai/gpt-mini"].output == 0.4
    assert run_prices("elsewhere", config) == {}
    # A routed run: every endpoint of its route.
    assert sorted(run_prices(["openai", "local"], config)) == ["local", "openai", "openai/gpt-mini"]


def test_a_route_flag_lists_endpoints_in_order_with_their_models(
    toml_config: LoadedConfig,
) -> None:
    settings = endpoint_settings(flags=[], config=toml_config, environ={})
    route = run_route(["default=gpt-x", "local"], settings)
    assert route is not None
    assert [(c.endpoint, c.model) for c in route.candidates] == [
        ("default", "gpt-x"),
        ("local", "qwen3:8b"),  # the endpoint's configured model
    ]
    assert run_route([], settings) is None


@pytest.mark.parametrize(
    ("specs", "complaint"),
    [
        (["=m"], "expected NAME or NAME=MODEL"),
        (["local="], "expected NAME or NAME=MODEL"),
        (["default"], "no model for endpoint 'default'"),
        (["local", "local=qwen3:8b"], "listed twice"),
    ],
)
def test_route_flag_mistakes_are_named(
    toml_config: LoadedConfig, specs: list[str], complaint: str
) -> None:
    settings = endpoint_settings(flags=[], config=toml_config, environ={})
    with pytest.raises(ConfigError, match=complaint):
        run_route(specs, settings)


def test_a_route_is_given_instead_of_an_endpoint_and_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["run", "hi", "--route", "a=m", "--endpoint", "b"]) == EXIT_USAGE
    assert "leave out --endpoint and --model" in capsys.readouterr().err


def test_an_endpoint_problem_names_the_table_as_written_and_the_key_meant(
    tmp_path: Path,
) -> None:
    path = tmp_path / "steadyloop.toml"
    path.write_text('[endpoints.default]\nbase_url = "http://127.0.0.1:9/v1"\nmodle = "m"\n')
    with pytest.raises(ConfigError) as refused:
        endpoint_settings(flags=[], config=load_config(path, {}), environ={})
    assert str(refused.value) == (
        f"{path}: endpoints.default: modle: not an endpoint setting (did you mean 'model'?)"
    )
    path.write_text("[endpoints.default]\nbase_url = 3\n")
    with pytest.raises(ConfigError, match=r": endpoints\.default: base_url: Input should be"):
        endpoint_settings(flags=[], config=load_config(path, {}), environ={})
