"""One canonical text per JSON value, or a refusal that names where and why.

A receipt is keyed by a hash of a tool call's arguments, so two argument values get
the same key exactly when they get the same text here. A collision reads as "this call
already ran" and skips a write that never happened; that is the failure this module
exists to prevent. A miss only runs a genuinely new call again, which is the safe way
to fail. The rule that decides every case below: **two values share a text exactly
when a tool would receive equal values of the same types**, i.e. the Python values
`json.loads` hands a tool.

The obvious implementation is `json.dumps(v, sort_keys=True, separators=(",", ":"))`.
It is wrong in these ways, each prevented at the line named:

- NaN and infinities: it writes `NaN` / `Infinity`, which are not JSON, and every
  argument that overflowed to infinity (`1e400`, `1e999`) shares one text. Refused
  in `_scalar` (`math.isfinite`).
- Non-string keys: it silently stringifies them, so `{1: "x"}` and `{"1": "x"}`, or
  `{True: 1}` and `{"true": 1}`, or `{None: 1}` and `{"null": 1}` collide; with mixed key
  types `sort_keys` raises a bare `TypeError`. Refused in `_object` (`type(key) is not
  str`), before sorting.
- `bool` is an `int`: a dispatch on `isinstance(v, int)` spells `True` as `1`. The
  dispatch in `_scalar` is on the exact type, and `bool` is its own case.
- Tuples are written as lists, so `(1, 2)` and `[1, 2]` collide; the usual fixes for
  sets (`default=list`, `default=sorted`) give an order- or type-dependent text; and
  `default=str` makes `Decimal("1.0")`, `datetime` and every object a *string*, which
  collides with the string of the same spelling (or embeds a memory address that
  never matches again). There is no `default`: anything that is not exactly `dict`,
  `list`, `str`, `int`, `float`, `bool` or `None` is refused in `_scalar`, subclasses
  included (an `OrderedDict`, an `IntEnum`, a `str` subclass carrying state). A tuple
  is refused, not read as a list: `json.loads` never produces one, so a tuple means the
  value did not come from parsed arguments.
- Cycles: `check_circular` raises without saying where; without it, recursion blows
  up. `_Walk.open_ids` holds the containers on the current path (not every container
  seen, so a list shared by two keys is fine) and refuses a re-entry.
- Deep nesting: a recursive encoder raises `RecursionError`, and inside a workflow an
  unexpected exception fails the workflow task, which Temporal retries forever. The
  walk is iterative (an explicit stack); `MAX_DEPTH` bounds it with a clear error,
  counted the same way in objects (`_object`) and arrays (`_array`), and low enough
  that pydantic can store whatever passes (see `MAX_DEPTH`).
- `ensure_ascii=False` makes a lone surrogate (`json.loads('"\\ud800"')` produces one)
  unencodable, so hashing raises `UnicodeEncodeError`. Strings are written by
  `json.dumps(s)` with its default `ensure_ascii=True`: the text is pure ASCII, every
  code-point sequence has exactly one spelling, and encoding it cannot fail.

Spelling rules (changing any of them changes every hash, so receipts of runs in
flight would stop matching and their tools would run again):

- Objects: keys sorted by code point (Python's `str` order; RFC 8785 sorts by UTF-16
  unit, which only needs to differ from this for a single fixed order to be chosen),
  no whitespace, `,` and `:` separators.
- Integers: exact decimal, any size (`2**53 + 1` stays itself; a float-based
  canonicalizer, like JavaScript's, rounds it onto `2**53`). An integer too long for
  `int.__repr__` (4300 digits by default, the same limit `json.loads` parses with) is
  refused rather than spelled some other way.
- Floats: `float.__repr__`, the shortest text that reads back to the same double, the
  spelling `json.dumps` uses (`0.1`, `1e+16`, `1.5e-07`). It always contains `.` or
  `e`, so **`1` and `1.0` never collide**: the tool receives `int` 1 in one case and
  `float` 1.0 in the other, and `range(1.0)` raises where `range(1)` does not. RFC 8785
  (JCS) would spell both `1`; it canonicalizes JavaScript numbers, not Python values.
  Floats are identified by their double, so `1e2`, `100.0` and `1.00E+2` are one value
  (the tool cannot tell them apart) and share `100.0`. `-0.0` keeps its sign: it is a
  distinct double that prints differently.
- Strings: exactly their code points, no Unicode normalization (a tool receives the
  code points it was sent), escaped by `json.dumps`'s ASCII rule: `\\"`, `\\\\`, `\\b`,
  `\\f`, `\\n`, `\\r`, `\\t`, other controls, DEL and every non-ASCII code unit as lowercase
  `\\u00xx` / `\\uxxxx` (astral characters as a surrogate pair).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from steadyloop.errors import SteadyloopError

__all__ = ["MAX_DEPTH", "CanonicalJsonError", "canonical_json"]

MAX_DEPTH = 64
"""Containers nested deeper than this are refused: steadyloop's one depth limit.

Every value that gets a canonical text here is also *stored* somewhere (a tool call's
arguments in the run-tool activity's input, a progress trail in a receipt, in the
ledger, in the continue-as-new input), so the limit must sit below the shallowest
limit of everything that stores it, envelope included. Measured with pydantic-core
2.x and `temporalio.contrib.pydantic`: decoding a payload (jiter) refuses JSON nested
200 levels or deeper; `JsonValue` validation and `to_json` refuse 256; the standard
`json` module raises `RecursionError` near 994. A progress step sits about 8 levels
inside the continue-as-new input (input, carried state, ledger, receipts, receipt,
trail). 64 leaves room under 200 for any envelope steadyloop puts around a value, and
is far deeper than any tool's arguments or a resumable tool's step identifiers need.
The walk is iterative, so a value of any depth (dicts and lists alike) is refused with
`CanonicalJsonError`, never `RecursionError`. `steadyloop.tools._content` replaces a
tool *result* deeper than this with a marker instead."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH_ENDS = 8  # a refusal's path shows this many segments at each end


class CanonicalJsonError(SteadyloopError, ValueError):
    """A value has no faithful canonical text. `path` says where (`$.a[2]`)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class _Path(NamedTuple):
    """A linked path, formatted only when a refusal needs it (no string work per node)."""

    parent: _Path | None
    segment: str | int

    def text(self) -> str:
        segments: list[str | int] = []
        node: _Path | None = self
        while node is not None:
            segments.append(node.segment)
            node = node.parent
        segments.reverse()
        if len(segments) > 2 * _PATH_ENDS:  # a path 1000 levels deep is unreadable
            elided = len(segments) - 2 * _PATH_ENDS
            head = "".join(_segment_text(s) for s in segments[:_PATH_ENDS])
            tail = "".join(_segment_text(s) for s in segments[-_PATH_ENDS:])
            return f"${head}...({elided} more levels)...{tail}"
        return "$" + "".join(_segment_text(s) for s in segments)


def _segment_text(segment: str | int) -> str:
    if isinstance(segment, int):
        return f"[{segment}]"
    if _IDENTIFIER.fullmatch(segment):
        return f".{segment}"
    return f"[{json.dumps(segment)}]"


def _path_text(path: _Path | None) -> str:
    return "$" if path is None else path.text()


class _Node(NamedTuple):
    value: object
    path: _Path | None
    depth: int  # containers enclosing this value


class _Leave(NamedTuple):
    container_id: int


@dataclass(slots=True)
class _Walk:
    max_depth: int
    utf8: bool = False  # refuse strings UTF-8 cannot encode (lone surrogates)
    out: list[str] = field(default_factory=list)
    open_ids: set[int] = field(default_factory=set)
    # Work items: text to emit, a value to encode, or the end of a container.
    stack: list[str | _Node | _Leave] = field(default_factory=list)

    def run(self, value: object) -> str:
        self.stack.append(_Node(value, None, 0))
        while self.stack:
            item = self.stack.pop()
            if isinstance(item, str):
                self.out.append(item)
            elif isinstance(item, _Leave):
                self.open_ids.discard(item.container_id)
            else:
                self._encode(item)
        return "".join(self.out)

    def _encode(self, node: _Node) -> None:
        value = node.value
        kind = type(value)
        if kind is dict or kind is list:
            self._enter(node)
            if kind is dict:
                assert isinstance(value, dict)
                self._object(value, node)
            else:
                assert isinstance(value, list)
                self._array(value, node)
            return
        if self.utf8 and isinstance(value, str):
            _require_utf8(value, node.path)
        self.out.append(_scalar(value, node.path))

    def _enter(self, node: _Node) -> None:
        depth = node.depth + 1
        if depth > self.max_depth:
            raise CanonicalJsonError(
                _path_text(node.path), f"nesting deeper than {self.max_depth} levels"
            )
        container_id = id(node.value)
        if container_id in self.open_ids:
            raise CanonicalJsonError(
                _path_text(node.path), "a cycle: this container contains itself"
            )
        self.open_ids.add(container_id)

    def _object(self, value: dict[object, object], node: _Node) -> None:
        for key in value:
            if type(key) is not str:
                raise CanonicalJsonError(
                    _path_text(node.path),
                    f"an object key must be a string, got {key!r} ({type(key).__name__}); "
                    "JSON would silently turn it into a string and collide",
                )
            if self.utf8:
                _require_utf8(key, _Path(node.path, key))
        keys: list[str] = sorted(value)  # type: ignore[arg-type]  # every key is str
        work: list[str | _Node | _Leave] = []
        for position, key in enumerate(keys):
            prefix = "," if position else ""
            work.append(prefix + json.dumps(key) + ":")
            work.append(_Node(value[key], _Path(node.path, key), node.depth + 1))
        work.append("}")
        work.append(_Leave(id(value)))
        self.out.append("{")
        self.stack.extend(reversed(work))

    def _array(self, value: list[object], node: _Node) -> None:
        work: list[str | _Node | _Leave] = []
        for index, element in enumerate(value):
            if index:
                work.append(",")
            work.append(_Node(element, _Path(node.path, index), node.depth + 1))
        work.append("]")
        work.append(_Leave(id(value)))
        self.out.append("[")
        self.stack.extend(reversed(work))


def _require_utf8(text: str, path: _Path | None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise CanonicalJsonError(
            _path_text(path),
            f"a lone surrogate ({text[error.start]!r}) has no UTF-8 spelling, so this value "
            "cannot be stored",
        ) from None


def _scalar(value: object, path: _Path | None) -> str:
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:  # before int: True is an int, and must not be spelled 1
        return "true" if value else "false"
    if kind is str:
        return json.dumps(value)  # ensure_ascii=True: one ASCII spelling, always encodable
    if kind is int:
        try:
            return int.__repr__(value)
        except ValueError as error:  # longer than sys.get_int_max_str_digits()
            raise CanonicalJsonError(
                _path_text(path), f"an integer too long to spell: {error}"
            ) from None
    if kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            raise CanonicalJsonError(
                _path_text(path), f"{value!r} is not a JSON number (NaN and infinities are refused)"
            )
        return float.__repr__(value)
    raise CanonicalJsonError(_path_text(path), _not_json(value))


def _not_json(value: object) -> str:
    kind = type(value)
    if kind is tuple:
        return "a tuple is not a JSON value (a JSON array is a list); refused, not guessed"
    if isinstance(value, set | frozenset):
        return f"a {kind.__name__} is not a JSON value (it has no order and no JSON spelling)"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{kind.__name__} is not a JSON value (decode it to a string first)"
    for base in (dict, list, str, int, float):
        if isinstance(value, base):
            return (
                f"{kind.__qualname__} is a subclass of {base.__name__}, not a plain JSON "
                f"value; convert it to {base.__name__} first"
            )
    return f"{kind.__module__}.{kind.__qualname__} is not a JSON value"


def canonical_json(value: object, *, max_depth: int = MAX_DEPTH, utf8: bool = False) -> str:
    """The canonical JSON text of `value`, pure ASCII; raises `CanonicalJsonError`.

    `value` must be built only from `dict` (string keys), `list`, `str`, `int`, `float`
    (finite), `bool` and `None`, exact types, no cycles, at most `max_depth` containers
    deep. See the module docstring for the spelling and why each refusal exists.

    `utf8=True` also refuses a string (or key) holding a lone surrogate: it has a
    canonical text (an escape), which is enough to hash arguments, but no UTF-8
    spelling, so pydantic cannot store it. Pass it for a value that will be stored and
    replayed exactly, such as a resumable tool's progress.
    """
    return _Walk(max_depth=max_depth, utf8=utf8).run(value)
