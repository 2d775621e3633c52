"""MCP configuration, names, effect classes and result rendering: the pure rules
(`steadyloop._mcp.config`, `.catalog`, `.results`), no server started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import types

from steadyloop._cli.main import run_cli
from steadyloop._mcp.catalog import ListedTool, assign_names, effect_of, safe_name
from steadyloop._mcp.config import (
    McpConfigError,
    McpServerConfig,
    describe_server,
    mcp_servers,
    parse_mcp_flag,
    resolve_env,
    resolve_headers,
)
from steadyloop._mcp.results import render_result
from steadyloop._worker.config import load_config

# -- config ---------------------------------------------------------------------------


def test_a_flag_is_a_stdio_command_line_or_a_url() -> None:
    stdio = parse_mcp_flag('time=mcp-server-time --local-timezone "America/New_York"')
    assert (stdio.transport, stdio.command, stdio.args) == (
        "stdio",
        "mcp-server-time",
        ["--local-timezone", "America/New_York"],
    )
    http = parse_mcp_flag("search=https://mcp.example.com/mcp")
    assert (http.transport, http.url) == ("http", "https://mcp.example.com/mcp")


@pytest.mark.parametrize("spec", ["time", "=x", "time=", "bad name=x", "a.b=x", 'q=cmd "open'])
def test_a_flag_that_cannot_be_read_is_refused_with_the_expected_shape(spec: str) -> None:
    with pytest.raises(McpConfigError, match="--mcp"):
        parse_mcp_flag(spec)


def test_the_file_then_the_flags_a_later_server_of_the_same_name_replaces_it() -> None:
    servers = mcp_servers(
        {
            "db": {"command": "mcp-server-sqlite", "args": ["--db-path", "a.db"]},
            "time": {"command": "mcp-server-time"},
        },
        ["db=mcp-server-sqlite --db-path b.db"],
    )
    assert [(s.name, s.args) for s in servers] == [
        ("db", ["--db-path", "b.db"]),
        ("time", []),
    ]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"url": "https://x/mcp", "headers": {"Authorization": "Bearer sk-live-123"}}, "never"),
        ({"command": "srv", "env_from": {"TOKEN": "not a name"}}, "environment variable"),
        ({"comand": "srv"}, "comand"),
        ({"command": "srv", "url": "https://x/mcp"}, "either"),
        ({}, "either"),
        ({"url": "ftp://x"}, "http"),
        ({"command": "srv", "effects": {"write": "resumable"}}, "effects"),
        ({"command": "srv", "timeout_s": 0}, "timeout_s"),
        ({"url": "https://x/mcp", "args": ["-v"]}, "stdio"),
    ],
)
def test_a_server_that_cannot_work_is_refused_naming_the_server_and_key(
    entry: dict[str, object], problem: str
) -> None:
    with pytest.raises(McpConfigError, match=r"mcp\.s") as error:
        mcp_servers({"s": entry}, [])
    assert problem in str(error.value)


def test_a_secret_written_as_a_header_is_not_echoed_in_the_refusal() -> None:
    with pytest.raises(McpConfigError) as error:
        mcp_servers({"s": {"url": "https://x/mcp", "headers": {"X": "sk-live-1234567890"}}}, [])
    assert "1234567890" not in str(error.value)


def test_headers_and_env_from_read_the_variables_they_name_when_connecting() -> None:
    server = McpServerConfig(name="s", url="https://x/mcp", headers={"Authorization": "S_AUTH"})
    assert resolve_headers(server, {"S_AUTH": "Bearer t"}) == {"Authorization": "Bearer t"}
    with pytest.raises(McpConfigError, match=r"\$S_AUTH, which is not set"):
        resolve_headers(server, {})
    stdio = McpServerConfig(name="d", command="srv", env={"A": "1"}, env_from={"TOKEN": "T"})
    assert resolve_env(stdio, {"T": "secret"}) == {"A": "1", "TOKEN": "secret"}
    # The start-up line names the variable, never its value.
    assert describe_server(server) == "s (http): https://x/mcp (headers from $S_AUTH)"


def test_the_config_file_takes_mcp_tables_and_the_worker_refuses_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        '[mcp.time]\ncommand = "mcp-server-time"\neffects = { convert_time = "opaque" }\n'
    )
    loaded = load_config(good, {})
    (server,) = mcp_servers(loaded.file.mcp, [])
    assert server.effects == {"convert_time": "opaque"}

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcp": {"web": {"url": "https://x", "headers": {"A": "sk-1"}}}}))
    code = run_cli(["worker", "--config", str(bad)])
    assert code == 2
    assert "mcp.web" in capsys.readouterr().err


# -- effect classes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read_only", "idempotent", "override", "effect"),
    [
        (True, None, None, "pure"),
        (True, False, None, "pure"),
        (None, True, None, "pure"),  # may be retried like pure
        (False, False, None, "opaque"),
        (None, None, None, "opaque"),  # a server that says nothing
        (False, None, None, "opaque"),
        (True, True, "opaque", "opaque"),  # the configuration wins, both ways
        (None, None, "pure", "pure"),
    ],
)
def test_the_effect_class_comes_from_the_annotations_unless_configured(
    read_only: bool | None, idempotent: bool | None, override: str | None, effect: str
) -> None:
    tool = ListedTool("t", read_only=read_only, idempotent=idempotent)
    assert effect_of(tool, override) == effect  # type: ignore[arg-type]


# -- names ----------------------------------------------------------------------------


def _server(name: str, **options: object) -> McpServerConfig:
    return McpServerConfig.model_validate({"name": name, "command": "srv", **options})


def test_a_name_is_kept_when_free_and_prefixed_where_it_would_collide() -> None:
    a, b = _server("a"), _server("b")
    names, refusals = assign_names(
        [
            (a, [ListedTool("search"), ListedTool("add"), ListedTool("only_a")]),
            (b, [ListedTool("search")]),
        ],
        taken=["add"],
        assigned={},
    )
    assert names == {
        ("a", "search"): "a__search",  # two servers: both prefixed, whoever listed first
        ("b", "search"): "b__search",
        ("a", "add"): "a__add",  # a Python tool holds the bare name
        ("a", "only_a"): "only_a",
    }
    assert refusals == []


def test_a_name_already_served_stays_with_its_tool_and_a_newcomer_is_prefixed() -> None:
    a, b = _server("a"), _server("b")
    names, _ = assign_names(
        [(a, [ListedTool("search")]), (b, [ListedTool("search")])],
        taken=[],
        assigned={("a", "search"): "search"},
    )
    assert names == {("a", "search"): "search", ("b", "search"): "b__search"}


def test_always_prefix_invalid_characters_and_long_names_become_valid_distinct_names() -> None:
    names, _ = assign_names(
        [
            (
                _server("fs", prefix="always"),
                [ListedTool("read.file"), ListedTool("x" * 70), ListedTool("x" * 71)],
            )
        ],
        taken=[],
        assigned={},
    )
    served = list(names.values())
    assert served[0] == "fs__read_file"
    assert all(len(n) <= 64 for n in served) and served[1] != served[2]
    assert safe_name("ok_name-1") == "ok_name-1"


def test_a_tool_listed_twice_or_whose_prefixed_name_is_taken_is_refused() -> None:
    names, refusals = assign_names(
        [(_server("a"), [ListedTool("x"), ListedTool("x"), ListedTool("add")])],
        taken=["add", "a__add"],
        assigned={},
    )
    assert names == {("a", "x"): "x"}
    assert [(r.key, "twice" in r.reason or "already" in r.reason) for r in refusals] == [
        (("a", "x"), True),
        (("a", "add"), True),
    ]


# -- results --------------------------------------------------------------------------

PNG = "iVBORw0KGgo="  # 8 bytes


def test_every_block_of_a_result_reaches_the_tool_message_in_order() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="rows: 2"),
            types.ImageContent(type="image", data=PNG, mimeType="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///r.txt", mimeType="text/plain", text="inside"
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.bin", blob=PNG),
            ),
            types.ResourceLink(type="resource_link", uri="file:///l", name="log"),
        ],
        structuredContent={"rows": 2},
    )
    rendered = render_result(result)
    lines = rendered.text.splitlines()
    assert lines[0] == "rows: 2"
    assert lines[1].startswith("[steadyloop: image, image/png, 8 bytes, sha256 ")
    assert lines[2:4] == ["[steadyloop: resource file:///r.txt, text/plain]", "inside"]
    assert "file:///b.bin" in lines[4] and "8 bytes" in lines[4]
    assert lines[5] == "[steadyloop: resource link file:///l (log)]"
    assert lines[6] == '{"rows":2}'
    assert not rendered.is_error


def test_structured_content_repeated_as_text_is_not_shown_twice_and_errors_are_flagged() -> None:
    same = types.CallToolResult(
        content=[types.TextContent(type="text", text='{"a": 1}')], structuredContent={"a": 1}
    )
    assert render_result(same).text == '{"a": 1}'
    wrapped = types.CallToolResult(
        content=[types.TextContent(type="text", text="hi")], structuredContent={"result": "hi"}
    )
    assert render_result(wrapped).text == "hi"
    other = types.CallToolResult(
        content=[types.TextContent(type="text", text="hi")], structuredContent={"result": "ho"}
    )
    assert render_result(other).text == 'hi\n{"result":"ho"}'
    only = types.CallToolResult(content=[], structuredContent={"a": [1, 2]})
    assert render_result(only).text == '{"a":[1,2]}'
    error = types.CallToolResult(
        content=[types.TextContent(type="text", text="no such table: t")], isError=True
    )
    assert (render_result(error).text, render_result(error).is_error) == ("no such table: t", True)
    empty = types.CallToolResult(content=[])
    assert render_result(empty).text == "[steadyloop: the MCP tool returned no content]"
