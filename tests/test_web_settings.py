"""The server's settings: tokens kept as hashes, secrets from the environment, every
mistake refused by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyloop._cli.main import run_cli
from steadyloop._web.settings import token_sha256, web_settings
from steadyloop._worker.config import ConfigError, load_config


def test_tokens_are_kept_as_hashes_and_map_to_their_tenant() -> None:
    settings = web_settings(
        {"tenants": {"acme": {"token_sha256": [token_sha256("from-file")]}}},
        {"STEADYLOOP_WEB_TOKENS": "globex=from-env"},
    )
    assert settings.tenant_for("from-file") == "acme"
    assert settings.tenant_for("from-env") == "globex"
    assert settings.tenant_for("from-fil") is None and settings.tenant_for("") is None
    assert "from-env" not in repr(settings) and "from-env" not in str(settings.hashes)


def test_a_token_env_is_read_from_the_environment_and_must_be_set() -> None:
    section = {"tenants": {"acme": {"token_env": "ACME_TOKEN", "max_active_runs": 3}}}
    settings = web_settings(section, {"ACME_TOKEN": "s3cret"})
    assert settings.tenant_for("s3cret") == "acme"
    assert settings.limits("acme").max_active_runs == 3
    with pytest.raises(ConfigError, match=r"web\.tenants\.acme\.token_env.*ACME_TOKEN"):
        web_settings(section, {})


@pytest.mark.parametrize(
    ("section", "environ", "named"),
    [
        ({}, {}, "no bearer tokens are configured"),
        ({"tenants": {"acme": {"token_sha256": ["abc"]}}}, {}, "web.tenants.acme.token_sha256"),
        ({"tenant": {}}, {}, "web.tenant"),
        ({"cors_origins": ["app.example"]}, {"STEADYLOOP_WEB_TOKENS": "a=b"}, "cors_origins"),
        ({}, {"STEADYLOOP_WEB_TOKENS": "acme"}, "STEADYLOOP_WEB_TOKENS"),
        ({}, {"STEADYLOOP_WEB_TOKENS": "acme=t,globex=t"}, "one token is given to tenants"),
        ({}, {"STEADYLOOP_WEB_TOKENS": "ac\x00me=t"}, "control character"),
        (
            {"tenants": {"acme": {"max_streams": 0}}},
            {"STEADYLOOP_WEB_TOKENS": "a=b"},
            "max_streams",
        ),
    ],
)
def test_every_mistake_is_refused_by_its_key(
    section: dict[str, object], environ: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        web_settings(section, environ)


def test_dev_without_tokens_is_open_access_as_the_default_tenant() -> None:
    settings = web_settings({}, {}, dev=True)
    assert settings.open_access
    assert not web_settings({}, {"STEADYLOOP_WEB_TOKENS": "a=b"}, dev=True).open_access


def test_the_config_file_takes_a_web_table(tmp_path: Path) -> None:
    config = tmp_path / "steadyloop.toml"
    config.write_text("[web]\ncors_origins = ['https://app.example']\n")
    loaded = load_config(config, {})
    assert web_settings(loaded.file.web, {"STEADYLOOP_WEB_TOKENS": "a=b"}).cors_origins == [
        "https://app.example"
    ]


def test_serve_without_tokens_outside_dev_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEADYLOOP_WEB_TOKENS", raising=False)
    monkeypatch.delenv("STEADYLOOP_CONFIG", raising=False)
    assert run_cli(["serve", "--port", "0"]) == 2
    assert "no bearer tokens are configured" in capsys.readouterr().err


def test_open_access_refuses_to_listen_beyond_this_machine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEADYLOOP_WEB_TOKENS", raising=False)
    monkeypatch.delenv("STEADYLOOP_CONFIG", raising=False)
    assert run_cli(["serve", "--dev", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "serves this machine only" in capsys.readouterr().err
