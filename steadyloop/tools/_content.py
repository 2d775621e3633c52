"""Turning a tool's return value into the text of its tool message, within a size cap.

A tool message's content is a string. Tools return whatever is natural to them, so
there is one rule, applied the same way every time (a replayed receipt must read the
same as the first answer):

- a `str` is the content, verbatim (lone surrogates replaced, see below);
- anything else is JSON, encoded by pydantic (`pydantic_core.to_json`): models,
  dataclasses, dicts, lists, numbers, `None` (as `null`), datetimes and dates (ISO
  8601), UUIDs, Decimals, sets (as arrays), bytes (as UTF-8 text); NaN and infinities
  become `null`, because `NaN` is not JSON; a value pydantic cannot encode becomes its
  `str()`.

**Encoding a result never raises.** It runs after the tool already did its work, so an
exception here would fail the activity, the workflow would mark the call's receipt
`failed`, and the model's repeat of the call would perform an opaque effect a second
time. When pydantic refuses the value as a whole, `_Lenient` encodes it node by node and
replaces only what has no faithful text, with a marker the model can read:

- a lone surrogate (`b"\\xff".decode(errors="surrogateescape")`, a `"\\ud83d"` cut
  from its pair) has no UTF-8 spelling and would fail the payload: U+FFFD (a *pair*
  of surrogate code points is joined into its character);
- bytes that are not UTF-8: their `repr` (`b'\\xff'`), lossless and readable;
- a model or dataclass pydantic cannot encode: its fields, each encoded by these rules;
- any other object pydantic cannot encode, or whose `str()` raises: its `repr`, else
  `[steadyloop: unrepresentable T]`;
- a container that contains itself: `[steadyloop: cycle, T contains itself]`;
- nesting deeper than `MAX_DEPTH` (the one depth limit, `steadyloop._receipts.canonical_json`):
  `[steadyloop: nested deeper than N levels]`;
- an integer too long for `int.__repr__`: `[steadyloop: integer of N bits]`.

Failure mode handled: a huge result. Temporal refuses payloads over 2 MB and a
workflow task that schedules one fails forever; a long transcript also costs every
later model call. `cap_content` cuts content at `MAX_TOOL_CONTENT_BYTES` of UTF-8, on a
character boundary, and ends it with a marker that says how much was cut, so the model
knows it saw a part and not the whole.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pydantic_core
from pydantic import BaseModel

from steadyloop._receipts.canonical_json import MAX_DEPTH
from steadyloop._stream.surrogates import rejoin_surrogates

MAX_TOOL_CONTENT_BYTES = 64 * 1024
TRUNCATION_MARKER = "\n[steadyloop: output truncated, {shown} of {total} bytes shown]"


def utf8_text(text: str) -> str:
    """`text` as a plain `str` every UTF-8 encoder accepts: each lone surrogate is U+FFFD.

    A surrogate pair held as two code points is joined into its character rather than
    replaced twice. Text that already encodes is returned unchanged. The rule is the one
    every caller uses (`steadyloop._stream.surrogates`).
    """
    return rejoin_surrogates(text)


def encode_result(value: Any) -> str:
    """The tool-message text for a tool's return value (the rule in the module docstring).

    Never raises for an `Exception` anything in `value` raises; the text always
    encodes as UTF-8.
    """
    if isinstance(value, str):
        return utf8_text(value)
    try:
        encoded = pydantic_core.to_json(value, inf_nan_mode="null", fallback=str)
    except Exception:  # surrogates, non-UTF-8 bytes, cycles, depth, a raising __str__...
        return _Lenient().run(value)
    return encoded.decode("utf-8")


def cap_content(text: str, limit: int = MAX_TOOL_CONTENT_BYTES) -> tuple[str, bool]:
    """`(text, False)` when it fits in `limit` UTF-8 bytes, else a cut copy and True.

    The cut copy, marker included, is at most `limit` bytes and never splits a
    character. Lone surrogates are replaced first (`utf8_text`), so the result always
    encodes. `limit` must leave room for the marker.
    """
    text = utf8_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    # The marker's length depends on the numbers in it; the largest it can be is with
    # `shown` as long as `total`, so reserve that much.
    reserve = len(TRUNCATION_MARKER.format(shown=len(data), total=len(data)).encode("utf-8"))
    if limit < reserve:
        raise ValueError(f"limit {limit} is smaller than the truncation marker ({reserve} bytes)")
    head = data[: limit - reserve].decode("utf-8", errors="ignore")
    shown = len(head.encode("utf-8"))
    return head + TRUNCATION_MARKER.format(shown=shown, total=len(data)), True


def marker(what: str) -> str:
    """The text that stands in for a part of a result that has no faithful encoding."""
    return f"[steadyloop: {what}]"


class _Node(NamedTuple):
    value: object
    depth: int  # containers enclosing this value
    converted: bool  # already through `to_jsonable_python`: never convert again


class _Leave(NamedTuple):
    container_id: int


@dataclass(slots=True)
class _Lenient:
    """An iterative JSON writer that replaces, never raises (see the module docstring)."""

    out: list[str] = field(default_factory=list)
    open_ids: set[int] = field(default_factory=set)
    stack: list[str | _Node | _Leave] = field(default_factory=list)

    def run(self, value: object) -> str:
        self.stack.append(_Node(value, 0, False))
        while self.stack:
            item = self.stack.pop()
            if isinstance(item, str):
                self.out.append(item)
            elif isinstance(item, _Leave):
                self.open_ids.discard(item.container_id)
            else:
                try:
                    self._encode(item)
                except Exception:  # a hostile __iter__, __eq__, __repr__...: mark it, go on
                    self.out.append(_string(marker(f"unrepresentable {_type_name(item.value)}")))
        return "".join(self.out)

    def _encode(self, node: _Node) -> None:
        value = node.value
        if value is None or isinstance(value, bool):
            self.out.append("null" if value is None else "true" if value else "false")
        elif isinstance(value, str):
            self.out.append(_string(value))
        elif isinstance(value, int):
            self.out.append(_integer(value))
        elif isinstance(value, float):
            finite = math.isfinite(value)
            self.out.append(float.__repr__(value) if finite else "null")  # as pydantic does
        elif isinstance(value, bytes | bytearray | memoryview):
            self.out.append(_string(_bytes_text(bytes(value))))
        elif isinstance(value, dict | list | tuple | set | frozenset):
            self._container(node)
        elif node.converted:  # to_jsonable_python handed back something unexpected
            self.out.append(_string(_repr(value)))
        else:
            self._other(node)

    def _container(self, node: _Node) -> None:
        value = node.value
        if node.depth >= MAX_DEPTH:
            self.out.append(_string(marker(f"nested deeper than {MAX_DEPTH} levels")))
            return
        container_id = id(value)
        if container_id in self.open_ids:
            self.out.append(_string(marker(f"cycle, {_type_name(value)} contains itself")))
            return
        work: list[str | _Node | _Leave] = []
        depth = node.depth + 1
        if isinstance(value, dict):
            for position, (key, element) in enumerate(list(value.items())):
                work.append(("," if position else "") + _string(_key_text(key)) + ":")
                work.append(_Node(element, depth, node.converted))
            opening, closing = "{", "}"
        else:
            assert isinstance(value, list | tuple | set | frozenset)
            for position, element in enumerate(list(value)):
                if position:
                    work.append(",")
                work.append(_Node(element, depth, node.converted))
            opening, closing = "[", "]"
        work.append(closing)
        work.append(_Leave(container_id))
        self.open_ids.add(container_id)
        self.out.append(opening)
        self.stack.extend(reversed(work))

    def _other(self, node: _Node) -> None:
        """A model, a dataclass, a datetime...: pydantic's plain form, walked like the rest
        (so a bad string inside is replaced, not the whole object); else its repr."""
        try:
            plain = pydantic_core.to_jsonable_python(node.value, inf_nan_mode="null")
        except Exception:
            fields = _fields(node.value)
            if fields is None:
                self.out.append(_string(_repr(node.value)))
            else:  # a model or dataclass holding something bad: walk its fields
                self.stack.append(_Node(fields, node.depth, False))
            return
        self.stack.append(_Node(plain, node.depth, True))


def _fields(value: object) -> dict[str, object] | None:
    """A pydantic model's or a dataclass's fields, unconverted; None for anything else."""
    if isinstance(value, BaseModel):
        return dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def _string(text: str) -> str:
    return json.dumps(utf8_text(text), ensure_ascii=False)


def _integer(value: int) -> str:
    try:
        return int.__repr__(value)
    except ValueError:  # longer than sys.get_int_max_str_digits()
        return _string(marker(f"integer of {value.bit_length()} bits"))


def _bytes_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return repr(data)


def _key_text(key: object) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return _Lenient().run(key)  # `1` -> "1", `None` -> "null", as JSON encoders do
    return _repr(key)


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return marker(f"unrepresentable {_type_name(value)}")


def _type_name(value: object) -> str:
    try:
        return utf8_text(str(type(value).__name__))
    except Exception:
        return "object"
