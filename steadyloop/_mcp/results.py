"""An MCP `CallToolResult` as the text of one tool message. Pure: no I/O.

A tool message is text, and chat APIs do not take images in tool messages. The obvious
rendering (the first text block, or `str(result)`) drops images, resources, structured
content and the error flag without a trace, so the model believes it saw everything.
`render_result` keeps every block, in order, one per line:

- text: verbatim;
- structured content: its JSON, unless the text blocks already restate it (the spec
  asks servers to repeat it as text; it is not shown twice): a text block that is its
  JSON; the `{"result": value}` wrapper FastMCP servers put around a plain return value;
  or a one-key object whose string value is the text itself, as the reference
  filesystem server answers `read_text_file` (`{"content": "<the file>"}`; sent twice,
  a 42.5 KB file became 87 KB and was cut at the result ceiling). A near miss (another
  text, a second key, a value that is not a string) is still shown: it says something
  the text does not;
- an embedded text resource: its URI and MIME type on a marker line, then its text;
- an image, audio, or a binary resource: a marker naming its type, size and a digest,
  so the model knows it exists and that it did not see it;
- a resource link: a marker with its URI and name;
- `isError: true`: `RenderedResult.is_error`, which the tool turns into a `tool_error`
  outcome (the model reads the server's own message);
- no content at all: a marker saying so, never an empty message.

The same result always renders to the same text, so a replayed receipt reads as the
first answer did.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mcp import types

from steadyloop.tools._content import marker


@dataclass(frozen=True)
class RenderedResult:
    text: str
    is_error: bool


def render_result(result: types.CallToolResult) -> RenderedResult:
    """The tool-message text of `result`, and whether the server flagged it an error."""
    lines = [_block(block) for block in result.content]
    structured = result.structuredContent
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if structured is not None and not _restated(texts, structured):
        lines.append(_json(structured))
    if not lines:
        lines.append(marker("the MCP tool returned no content"))
    return RenderedResult(text="\n".join(lines), is_error=bool(result.isError))


def _block(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return marker(f"image, {block.mimeType}, {_binary(block.data)}; not shown to the model")
    if isinstance(block, types.AudioContent):
        return marker(f"audio, {block.mimeType}, {_binary(block.data)}; not shown to the model")
    if isinstance(block, types.ResourceLink):
        kind = f", {block.mimeType}" if block.mimeType else ""
        return marker(f"resource link {block.uri} ({block.name}{kind})")
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        kind = f", {resource.mimeType}" if resource.mimeType else ""
        if isinstance(resource, types.TextResourceContents):
            return marker(f"resource {resource.uri}{kind}") + "\n" + resource.text
        return marker(
            f"resource {resource.uri}{kind}, {_binary(resource.blob)}; not shown to the model"
        )
    return marker(f"content of type {getattr(block, 'type', '?')!r} not shown to the model")


def _binary(data: str) -> str:
    """Size and digest of base64 `data` (or of the text, when it is not base64)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"{len(data)} characters of invalid base64"
    return f"{len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()[:16]}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _restated(texts: list[str], structured: Any) -> bool:
    """Whether the text blocks already say what `structured` says (see the docstring)."""
    if any(_same_json(text, structured) for text in texts):
        return True
    if not (isinstance(structured, dict) and len(structured) == 1):
        return False
    (value,) = structured.values()
    if not isinstance(value, str) or not texts:
        return False
    return value == "\n".join(texts) or any(
        value == text or _decodes_to(text, value) for text in texts
    )


def _decodes_to(text: str, value: str) -> bool:
    """Whether `text` is the JSON string literal of `value` (`"hello\\n"`)."""
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        return False


def _same_json(text: str, value: Any) -> bool:
    """Whether the text block carries `value`: as its JSON, or as the `{"result": ...}`
    wrapper servers built on the SDK's FastMCP put around a non-object return value."""
    if isinstance(value, dict) and set(value) == {"result"}:
        inner = value["result"]
        if inner == text or _same_json(text, inner):
            return True
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        return False
