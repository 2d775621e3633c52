"""Structured content that restates the text is sent once (`steadyloop._mcp.results`).

The reference filesystem server answers `read_text_file` with the file as text and again
as `structuredContent: {"content": "<the file>"}`; rendered twice, a 42.5 KB file went
past the tool-result ceiling and was cut. The near misses must still be sent: they say
something the text does not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import types

from steadyloop._mcp.results import render_result

FILE = "hello from fsroot\n"


def rendered(texts: list[str], structured: Any) -> str:
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text) for text in texts],
        structuredContent=structured,
    )
    return render_result(result).text


@pytest.mark.parametrize(
    ("texts", "structured"),
    [
        ([FILE], {"content": FILE}),  # the filesystem server's read_text_file
        ([FILE], {"text": FILE}),  # any one key
        ([json.dumps(FILE)], {"content": FILE}),  # the text is the value's JSON literal
        (["part one", "part two"], {"content": "part one\npart two"}),  # the blocks, as sent
        (["a header", FILE], {"content": FILE}),  # one of the blocks
        ([FILE], {"result": FILE}),  # FastMCP's wrapper around a plain return value
        (["42"], {"result": 42}),
        (['{"a": 1}'], {"a": 1}),  # the text is its JSON
        ([""], {"content": ""}),
    ],
)
def test_structured_content_that_restates_the_text_is_sent_once(
    texts: list[str], structured: Any
) -> None:
    assert rendered(texts, structured) == "\n".join(texts)


@pytest.mark.parametrize(
    ("texts", "structured"),
    [
        ([FILE], {"content": "hello from elsewhere\n"}),  # a different text
        ([FILE], {"content": FILE, "size": 18}),  # a second key
        ([FILE], {"content": FILE, "path": FILE}),  # two keys, both the text
        (["42"], {"content": 42}),  # not a string (only FastMCP's `result` unwraps one)
        (["[1]"], {"content": [1]}),
        (["null"], {"content": None}),
        ([json.dumps(FILE)], {"content": json.dumps(FILE) + " "}),
        ([], {"content": ""}),  # no text at all: the structured content is all there is
        (["part one", "part two"], {"content": "part onepart two"}),
    ],
)
def test_structured_content_that_says_more_is_still_sent(texts: list[str], structured: Any) -> None:
    expected = "\n".join(
        [*texts, json.dumps(structured, ensure_ascii=False, separators=(",", ":"), sort_keys=True)]
    )
    assert rendered(texts, structured) == expected


def test_a_large_file_read_is_its_bytes_once() -> None:
    text = "".join(f"line {n:05d} of the file, with some words on it\n" for n in range(950))
    assert len(text.encode()) > 43_000
    assert rendered([text], {"content": text}) == text


def test_a_text_nested_too_deep_to_decode_is_text_not_a_crash() -> None:
    deep = "[" * 100_000
    assert rendered([deep], {"content": "x"}) == deep + '\n{"content":"x"}'
    assert rendered([deep], {"a": 1}) == deep + '\n{"a":1}'
