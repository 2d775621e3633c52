"""An incremental `text/event-stream` decoder (WHATWG HTML 9.2.5-9.2.6), fast on the usual shape.

Every streamed completion passes through here one network read at a time, so the
decoder must be exact about the format and cheap on the shape every OpenAI-compatible
server sends, `data: {...}\\n\\n`. The obvious implementations are wrong in ways that
each lose or corrupt a chunk:

- Splitting each network read on `\\n\\n`: an event is split across reads whenever the
  server's writes and the client's reads disagree, which they do under load. Here the
  bytes after the last blank line are carried to the next read, and nothing is parsed
  until the blank line that ends its event has arrived.
- Decoding each read as UTF-8 on its own: a multi-byte character split across reads
  becomes two U+FFFD. Here only complete lines are ever decoded (a line end is ASCII,
  so it never falls inside a character); invalid bytes become U+FFFD, as the spec says.
- Handling only `\\n`: the spec allows CRLF, LF and a lone CR. A CR that ends one read
  with the LF starting the next is one line end, not a line end and a blank line
  (which would dispatch a half-built event): `_after_cr` remembers the CR.
- `line.split(":")` or `strip()`: a value may contain colons, and only one space after
  the colon is removed (`data:  x` is ` x`). A line with no colon is a field with an
  empty value (`data` alone appends an empty line to the data).
- Dispatching at end of input: the spec discards an event not terminated by a blank
  line. A truncated body yields no half event here; `flush` says whether something was
  discarded (`incomplete_tail`), so the caller can classify the stream as truncated.
- An event with no `data:` line (a lone `event:`, `id:` or `retry:` block) is not
  dispatched, and its event type does not leak onto the next event.
- `id` containing U+0000 is ignored; the last event id is sticky across events, as the
  browser's `lastEventId` is. `retry` is honoured only when it is ASCII digits
  (`str.isdigit` alone takes `"\\u00b2"`). A BOM is stripped at stream start only, even
  when its three bytes arrive in separate reads.

Speed. Each read is searched for its last blank line from the end (`rfind`), and the
complete region before it is handled at once. When that region is nothing but
single-line `data: ` events (the shape every chat-completions server sends), one
`split(b"\\n\\ndata: ")` yields the payloads directly, so no line is looked at twice in
Python; with `event_names=False`, a region of `event: NAME` + `data: P` blocks (the
Responses and Anthropic streams) is read the same way, by strides (`_named_payloads`).
Anything else goes through the line interpreter, which the fast path must agree with
(the tests compare both with a reference written from the spec). Bytes after the last
blank line are kept as a list of pieces until a blank line arrives, so
an event spread over many reads is joined once, not copied on every read. Building a
`ServerSentEvent` per token costs about as much as all of that, and so does decoding
the payloads only for the JSON parser to encode them back to UTF-8: `feed_data`
returns the payloads as `MessageData`, their raw bytes behind a sequence of strings,
when every event of the read is a plain message, and `TurnAssembler.feed_events`
parses the bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

__all__ = ["MessageData", "SSEDecoder", "ServerSentEvent"]

_BOM = b"\xef\xbb\xbf"
_DATA_PREFIX = b"data: "
_FAST_SEPARATOR = b"\n\ndata: "


@dataclass(slots=True)
class ServerSentEvent:
    """One dispatched event.

    `id` is the stream's last event id when this event was dispatched (sticky, as the
    browser's `lastEventId`; None when the stream never set one). `retry` is the
    reconnection time given in this event's own block, if any (the decoder's `retry`
    keeps the latest one the stream set, dispatched or not).
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class MessageData(Sequence[str]):
    """The data of one read's plain message events, kept as the UTF-8 bytes that arrived.

    Read as a sequence it is the events' data strings (invalid UTF-8 becomes U+FFFD, as
    the spec says), decoded on access. `TurnAssembler.feed_events` reads `raw` instead
    and hands the bytes to the JSON parser, which reads UTF-8 itself. Decoding first
    costs twice for text outside ASCII, once to decode and once more when the parser
    encodes the string back to UTF-8: on a stream whose every token is outside ASCII
    that was 40% on top of split-and-parse.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: list[bytes]) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    @overload
    def __getitem__(self, position: int) -> str: ...

    @overload
    def __getitem__(self, position: slice) -> list[str]: ...

    def __getitem__(self, position: int | slice) -> str | list[str]:
        if isinstance(position, slice):
            return [data.decode("utf-8", "replace") for data in self.raw[position]]
        return self.raw[position].decode("utf-8", "replace")

    def __iter__(self) -> Iterator[str]:
        for data in self.raw:
            yield data.decode("utf-8", "replace")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageData):
            return self.raw == other.raw
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageData({self.raw!r})"


# A region of one-line events, each `event: NAME` + `data: P` or a bare `data: P`,
# separated by blank lines (no comments, ids or multi-line data), and its payloads: the
# reading for a region that mixes the two shapes (`_named_payloads` takes the usual one).
_NAMED_BLOCK = rb"(?:event: [^\n]*\ndata: [^\n]*|data: [^\n]*)"
_NAMED_REGION = re.compile(_NAMED_BLOCK + rb"(?:\n\n" + _NAMED_BLOCK + rb")*")
_NAMED_PAYLOAD = re.compile(rb"(?:^|\n)data: ([^\n]*)")
# The boundary before each block of the usual shape, `event: NAME` + `data: P` (NAME not
# `error`), with the blank line that ends the block before it (`_named_payloads`).
_NAMED_BOUNDARY = re.compile(rb"\n\nevent: (?!error\n)[^\n]*\ndata: ")


def _named_payloads(region: bytes) -> list[bytes] | None:
    """The payloads of `region` when every block is `event: NAME\ndata: P` or `data: P`,
    one line each, and no event is named `error`; None for any other shape (which the
    full reading handles).

    The usual shape, every block `event: NAME\ndata: P` (OpenAI Responses, Anthropic),
    is read without a Python step per event: after a leading blank line, the region is
    `_NAMED_BOUNDARY` then a payload, over and over, so splitting on the boundary leaves
    an empty first piece and the payloads. When no piece holds a line end, nothing else
    was there: a payload is one line, and a block that is not a boundary and its payload
    (a second data line, a comment, an id, an event named `error`) leaves a line end in
    a piece. A region of any other shape goes to the regular expression."""
    payloads = _NAMED_BOUNDARY.split(b"\n\n" + region)
    if not payloads[0] and b"\n" not in b"".join(payloads):
        del payloads[0]
        return payloads
    if b"event: error" in region or _NAMED_REGION.fullmatch(region) is None:
        return None
    found: list[bytes] = _NAMED_PAYLOAD.findall(region)
    return found


class SSEDecoder:
    """Feed raw body bytes as they arrive; get back the events they complete.

    `feed` returns the events completed by this read (possibly none); `feed_data` is
    the same with plain message events given as their data strings. `flush` ends the
    stream: it never dispatches (the spec discards an unterminated event) but sets
    `incomplete_tail` when something other than comments and blank lines was left
    after the last complete event, and keeps that text in `discarded_tail`.

    Counters for stream stats: `bytes_fed`, `events` (dispatched), `comments`.
    """

    __slots__ = (
        "_after_cr",
        "_at_start",
        "_closed",
        "_event_names",
        "_parts",
        "_tail",
        "bytes_fed",
        "comments",
        "discarded_tail",
        "events",
        "incomplete_tail",
        "last_event_id",
        "retry",
    )

    def __init__(self, *, event_names: bool = True) -> None:
        # False: the reader dispatches on each payload's own `type` and reads an event's
        # name only for `error` (the OpenAI Responses and Anthropic streams), so
        # `feed_data` may hand `event: NAME` + `data: P` blocks over as plain data.
        self._event_names = event_names
        # Bytes after the last blank line: complete lines of an unfinished event and a
        # partial line (LF-only). It never contains b"\n\n" and never starts with b"\n".
        self._tail = b""
        # Further pieces of that unfinished event, joined only when a blank line arrives.
        self._parts: list[bytes] = []
        self._after_cr = False
        self._at_start = True
        self._closed = False
        self.bytes_fed = 0
        self.events = 0
        self.comments = 0
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self.incomplete_tail = False
        self.discarded_tail = ""

    # -- input ---------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Take one network read; return the events it completed, in order."""
        items = self.feed_data(chunk)
        if items.__class__ is MessageData:
            return list(map(ServerSentEvent, items))
        return items  # type: ignore[return-value]

    def feed_data(self, chunk: bytes) -> MessageData | list[ServerSentEvent]:
        """`feed`, sparing an object per token where it can.

        When every event this read completes is a plain message (type `message`, no
        event id ever set, no `retry`), which is what chat-completion servers send, the
        result is their data as a `MessageData` (a sequence of the data strings, kept
        as bytes); otherwise it is the list of `ServerSentEvent`s, exactly as `feed`
        returns them. `TurnAssembler.feed_events` takes either. Building an event object
        or a string per token costs about as much as everything else the decoder does,
        so the model activity's loop uses this.
        """
        if self._closed:
            raise ValueError("SSEDecoder.feed called after flush")
        if not chunk:
            return []
        if chunk.__class__ is not bytes:
            chunk = bytes(chunk)  # a bytearray or memoryview: split pieces must be bytes
        self.bytes_fed += len(chunk)
        if self._at_start:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        if self._after_cr:
            self._after_cr = False
            if chunk[0] == 10:  # the LF of a CRLF split across reads
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            self._after_cr = chunk[-1] == 13
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._take(chunk)

    def _strip_bom(self, chunk: bytes) -> bytes:
        """Drop a UTF-8 BOM at stream start, even when it arrives split across reads."""
        head = self._tail + chunk
        if len(head) < 3 and _BOM.startswith(head):
            self._tail = head  # could still be a BOM: wait for more
            return b""
        self._tail = b""
        self._at_start = False
        return head[3:] if head.startswith(_BOM) else head

    def _take(self, chunk: bytes) -> MessageData | list[ServerSentEvent]:
        parts = self._parts
        # rfind: the last blank line of a read is near its end, so this is cheap.
        pos = chunk.rfind(b"\n\n")
        if pos < 0:
            previous = parts[-1] if parts else self._tail
            if chunk[0] != 10 or previous[-1:] != b"\n":
                # No event ends in this read: keep it without copying what came before.
                if previous:
                    parts.append(chunk)
                else:
                    # Nothing pending: leading blank lines dispatch nothing.
                    self._tail = chunk.lstrip(b"\n") if chunk[0] == 10 else chunk
                return []
        if parts:
            prefix = self._tail + b"".join(parts)
            self._parts = []
        else:
            prefix = self._tail
        if prefix:
            # pos == -1: the blank line is the LF ending the prefix and this read's first.
            end = len(prefix) + pos
            buffer = prefix + chunk
        else:
            end = pos
            buffer = chunk
        tail = buffer[end + 2 :]
        if tail[:1] == b"\n":
            tail = tail.lstrip(b"\n")  # blank lines with nothing pending
        self._tail = tail
        if buffer[:6] == _DATA_PREFIX and self.last_event_id is None:
            # Fast path: b"data: P1\n\ndata: P2 ... Pn" holding no other line end is n
            # single-line data events, and one split yields their payloads directly.
            region = buffer[6:end]
            payloads = region.split(_FAST_SEPARATOR)
            # Each separator holds the only two LFs it may; any other LF is another shape.
            if b"\n" not in b"".join(payloads):
                self.events += len(payloads)
                return MessageData(payloads)
        if not self._event_names and self.last_event_id is None:
            named = _named_payloads(buffer[:end])
            if named is not None:
                self.events += len(named)
                return MessageData(named)
        out: list[ServerSentEvent] = []
        for block in buffer[:end].decode("utf-8", "replace").split("\n\n"):
            event = self._interpret(block)
            if event is not None:
                out.append(event)
        self.events += len(out)
        return out

    def _interpret(self, block: str) -> ServerSentEvent | None:
        """Apply the spec's line rules to one block: its lines, then one dispatch."""
        data: list[str] | None = None
        event_type = ""
        retry: int | None = None
        for line in block.split("\n"):
            if not line:
                # A blank line inside a block only occurs as its leading lines, after a
                # dispatch: nothing is pending, so nothing is dispatched.
                continue
            if line[0] == ":":
                self.comments += 1
                continue
            colon = line.find(":")
            if colon < 0:
                field, value = line, ""
            else:
                field = line[:colon]
                value = line[colon + 1 :]
                if value[:1] == " ":
                    value = value[1:]
            if field == "data":
                if data is None:
                    data = [value]
                else:
                    data.append(value)
            elif field == "event":
                event_type = value
            elif field == "id" and "\0" not in value:  # an id with NUL is ignored
                self.last_event_id = value
            elif field == "retry" and value.isascii() and value.isdigit():
                retry = int(value)  # ASCII digits only; any other value is ignored
                self.retry = retry
            # Any other field, and an `id` or `retry` refused above, is ignored.
        if data is None:
            return None  # empty data buffer: not dispatched, and the event type resets
        return ServerSentEvent("\n".join(data), event_type or "message", self.last_event_id, retry)

    # -- end of input ----------------------------------------------------------------

    def flush(self, *, dispatch_incomplete: bool = False) -> list[ServerSentEvent]:
        """End the stream. Returns the events the end of input completes: none, per spec.

        The text after the last blank line is an unterminated event, and the spec
        discards it; its complete `id:` and `retry:` lines still take effect (the spec
        applies each line as it arrives). `incomplete_tail` is True when that text held
        anything but comments and blank lines, and `discarded_tail` keeps the text for a
        failure excerpt. `dispatch_incomplete=True` is a lenient mode for servers known
        to omit the final blank line: the tail's complete lines are dispatched as one
        event (a last line with no line end is still discarded).
        """
        if self._closed:
            return []
        self._closed = True
        raw = self._tail + b"".join(self._parts)
        self._tail = b""
        self._parts = []
        if self._at_start and raw.startswith(_BOM):
            raw = raw[3:]
        # An unfinished UTF-8 sequence at the very end becomes U+FFFD.
        tail = raw.decode("utf-8", "replace")
        self.discarded_tail = tail
        self.incomplete_tail = any(line and line[0] != ":" for line in tail.split("\n"))
        complete = tail.rpartition("\n")[0]
        event = self._interpret(complete) if complete else None
        if event is None or not dispatch_incomplete:
            return []
        self.discarded_tail = tail.rpartition("\n")[2]
        self.events += 1
        return [event]
