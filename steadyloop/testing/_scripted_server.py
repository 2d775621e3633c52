"""A scripted OpenAI-compatible chat-completions server on loopback, over real HTTP/1.1.

The model activity is tested against real sockets, not a mocked transport, because the
failures worth testing live in the transport: a body cut mid-chunk, a connection reset,
a content type that lies, an event split across two TCP writes. This server answers
`POST .../chat/completions` from a script and records every request it received
(method, path, headers, body), so a test can assert what the activity *sent* (the key
in `Authorization`, `stream_options` in the body) as well as what it made of the answer.
The no-API-key demo reuses it as its provider.

A script is a queue of `ScriptedResponse`s (one per request, in order) or a function
from the recorded request to a response (sync or async). A response is a status,
headers and body parts written one socket write each, with `Pause`s between them and
a chosen ending:

- `sse_response(chunks)`: chunk dicts, raw `data:` payloads (str) or raw bytes,
  `[DONE]` by default, optional byte splits (`split_every`, `split_at`) and a cut
  after N bytes (`cut_after_bytes`).
- `raw_response(body)`: any bytes (a malformed stream, an HTML page).
- `error_response(status, message, ...)`: a non-2xx JSON error, with headers such as
  `Retry-After`.
- `json_response(body)`: a 2xx JSON body (a server that ignored `stream: true`).
- `disconnect()`: close the connection without answering.
- `unsupported_parameter_response(name)`: OpenAI's 400 for a parameter the model does
  not support. `ScriptedServer(unsupported_parameters=[...])` answers it, before the
  script, to every request whose body carries one of those parameters, the way a
  provider without that feature does.
- `refused_base_url()`: a loopback address nothing listens on (connection refused).

Framing is `chunked` (what real SSE servers send; one HTTP chunk per part), `close`
(no length, the body ends when the connection closes) or `length`. Endings:
`complete`; `close` (stop writing and close: with chunked framing the client sees an
incomplete body, with close framing a clean but early end); `reset` (TCP RST).

Unscripted requests (queue exhausted) get a 500 naming the request number, and paths
other than a wire's (`/chat/completions`, `/responses`, `/messages`) get a 404, so a
broken test fails loudly; `routes=` narrows what is served (a test of a 404 for a wire's
path). Only loopback is served; this is a test double, not a server
to expose.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Literal

from steadyloop._routing.endpoints import API_PATHS, EndpointConfig
from steadyloop.testing._chunks import Chunk, error_object

# The paths the wires post to (`EndpointConfig.url`); anything else is a 404.
_WIRE_PATHS = tuple(API_PATHS.values())

Framing = Literal["chunked", "close", "length"]
Ending = Literal["complete", "close", "reset"]

_MAX_HEADER_BYTES = 64 * 1024


@dataclass(frozen=True)
class Pause:
    """Wait this many seconds before writing the next part."""

    seconds: float


@dataclass(frozen=True)
class ScriptedResponse:
    """What the server does for one request. Build it with the factories below."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    parts: Sequence[bytes | Pause] = ()
    framing: Framing = "chunked"
    ending: Ending = "complete"
    answer: bool = True  # False: close the connection without sending anything


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of a header, matched case-insensitively."""
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The `messages` of a Chat Completions request, in order: the transcript a
        responder answers from, and what a test asserts the agent sent (the tool answers,
        a person's message).

        Raises ValueError when the body is not a JSON object with a `messages` list, so
        an assertion about what was sent cannot pass on a request that sent none.
        """
        body = self.json
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            raise ValueError(f"not a chat request (no messages list): {self.body[:200]!r}")
        return messages


@dataclass
class Exchange:
    """A request and how its scripted answer went.

    `client_disconnected` is set when the client closed the connection before the
    script was done (seen during a `Pause` or on a write): the way to assert that a
    client gave up on a stalled stream and released the connection. Await `ended`
    before reading it, since the server notices shortly after the client acts.
    """

    request: RecordedRequest
    finished: bool = False  # every part was written and the ending performed
    client_disconnected: bool = False
    ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)


Responder = Callable[[RecordedRequest], "ScriptedResponse | Awaitable[ScriptedResponse]"]


def sse_event(data: Chunk | str, *, event: str | None = None, id: str | None = None) -> bytes:
    """One SSE event: a chunk dict as JSON, or a str as the raw data payload."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in payload.split("\n"))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def sse_response(
    chunks: Iterable[Chunk | str | bytes | Pause],
    *,
    done: bool = True,
    split_every: int | None = None,
    split_at: Sequence[int] = (),
    cut_after_bytes: int | None = None,
    content_type: str | None = "text/event-stream",
    headers: Mapping[str, str] | None = None,
    framing: Framing = "chunked",
    ending: Ending | None = None,
    status: int = 200,
) -> ScriptedResponse:
    """A streamed answer: each chunk dict becomes `data: <json>`, each str a raw payload.

    bytes are written verbatim. `done` appends `data: [DONE]`. `split_every`/`split_at`
    cut the body into separate writes at those byte offsets (pauses stay where they
    are). `cut_after_bytes` stops after that many body bytes and closes the connection.
    """
    parts: list[bytes | Pause] = []
    for item in chunks:
        if isinstance(item, Pause | bytes):
            parts.append(item)
        else:
            parts.append(sse_event(item))
    if done:
        parts.append(b"data: [DONE]\n\n")
    parts = _resplit(parts, split_every=split_every, split_at=split_at)
    if cut_after_bytes is not None:
        parts = _cut(parts, cut_after_bytes)
        ending = ending or "close"
    all_headers = dict(headers or {})
    if content_type is not None:
        all_headers.setdefault("Content-Type", content_type)
    all_headers.setdefault("Cache-Control", "no-cache")
    return ScriptedResponse(
        status=status,
        headers=all_headers,
        parts=parts,
        framing=framing,
        ending=ending or "complete",
    )


def raw_response(
    body: bytes | Sequence[bytes | Pause],
    *,
    status: int = 200,
    content_type: str | None = "text/event-stream",
    headers: Mapping[str, str] | None = None,
    framing: Framing = "chunked",
    ending: Ending = "complete",
) -> ScriptedResponse:
    """Arbitrary body bytes, one write per part."""
    parts: list[bytes | Pause] = [body] if isinstance(body, bytes) else list(body)
    all_headers = dict(headers or {})
    if content_type is not None:
        all_headers.setdefault("Content-Type", content_type)
    return ScriptedResponse(
        status=status, headers=all_headers, parts=parts, framing=framing, ending=ending
    )


def json_response(
    body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> ScriptedResponse:
    """A JSON body with a Content-Length."""
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return ScriptedResponse(
        status=status,
        headers=all_headers,
        parts=[json.dumps(body).encode("utf-8")],
        framing="length",
    )


def error_response(
    status: int,
    message: str = "scripted error",
    *,
    type: str | None = "invalid_request_error",
    code: str | int | None = None,
    retry_after: str | float | None = None,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
) -> ScriptedResponse:
    """A non-2xx answer with OpenAI's JSON error body (or `body`, when given)."""
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["Retry-After"] = str(retry_after)
    payload = body if body is not None else error_object(message, type=type, code=code)
    return json_response(payload, status=status, headers=all_headers)


def disconnect() -> ScriptedResponse:
    """Close the connection without sending a status line."""
    return ScriptedResponse(answer=False)


def unsupported_parameter_response(parameter: str) -> ScriptedResponse:
    """OpenAI's answer to a parameter the model does not support."""
    return error_response(
        400,
        f"Unsupported parameter: '{parameter}' is not supported with this model.",
        body={
            "error": {
                "message": f"Unsupported parameter: '{parameter}' is not supported with this "
                "model.",
                "type": "invalid_request_error",
                "param": parameter,
                "code": "unsupported_parameter",
            }
        },
    )


def refused_base_url(host: str = "127.0.0.1") -> str:
    """An API root on a loopback port nothing listens on: connecting is refused.

    The port was free a moment ago; another process could take it, which on loopback
    in a test is unlikely enough to ignore.
    """
    with socket.socket() as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    return f"http://{host}:{port}/v1"


class ScriptedServer:
    """A loopback OpenAI-compatible server answering from a script; an async context manager.

    >>> async with ScriptedServer([sse_response(text_chunks("hi"))]) as server:
    ...     ...  # point an endpoint at server.base_url; then assert on server.requests
    """

    def __init__(
        self,
        script: Iterable[ScriptedResponse] | Responder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        unsupported_parameters: Iterable[str] = (),
        routes: Iterable[str] = _WIRE_PATHS,
    ) -> None:
        self._routes = tuple(routes)
        self._responder: Responder | None = None
        self.unsupported_parameters = set(unsupported_parameters)
        self._queue: deque[ScriptedResponse] = deque()
        if callable(script):
            self._responder = script
        elif script is not None:
            self._queue.extend(script)
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.exchanges: list[Exchange] = []
        self.errors: list[BaseException] = []

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> ScriptedServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- what tests use --------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        """The API root to configure (`http://127.0.0.1:<port>/v1`)."""
        return f"http://{self._host}:{self._port}/v1"

    def endpoint(self, name: str = "scripted", **config: Any) -> EndpointConfig:
        """An `EndpointConfig` pointing at this server."""
        return EndpointConfig(name=name, base_url=self.base_url, **config)

    @property
    def requests(self) -> list[RecordedRequest]:
        return [exchange.request for exchange in self.exchanges]

    def enqueue(self, *responses: ScriptedResponse) -> None:
        self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Scripted responses not yet consumed."""
        return len(self._queue)

    # -- HTTP ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            keep_alive = True
            while keep_alive:
                request = await self._read_request(reader)
                if request is None:
                    break
                exchange = Exchange(request)
                self.exchanges.append(exchange)
                try:
                    response = await self._respond_to(request, len(self.exchanges))
                    keep_alive = await self._write(reader, writer, response, exchange)
                finally:
                    exchange.ended.set()
                if (request.header("connection") or "").lower() == "close":
                    keep_alive = False
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # Only `stop()` cancels a connection; end quietly (asyncio's stream callback
            # would otherwise log the cancelled task as an error on Python 3.11).
            pass
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None  # the client closed an idle connection
        if len(head) > _MAX_HEADER_BYTES:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        lowered = {k.lower(): v for k, v in headers}
        if lowered.get("transfer-encoding", "").lower() == "chunked":
            body = await _read_chunked(reader)
        else:
            body = await reader.readexactly(int(lowered.get("content-length", "0") or 0))
        return RecordedRequest(method=method, path=path, headers=tuple(headers), body=body)

    async def _respond_to(self, request: RecordedRequest, number: int) -> ScriptedResponse:
        route = request.path.split("?", 1)[0]
        if request.method != "POST" or not route.endswith(self._routes):
            return error_response(
                404, f"scripted server: no route for {request.method} {request.path}"
            )
        body = request.json if self.unsupported_parameters else None
        if isinstance(body, dict):
            refused = sorted(self.unsupported_parameters.intersection(body))
            if refused:
                return unsupported_parameter_response(refused[0])
        try:
            if self._responder is not None:
                produced = self._responder(request)
                if inspect.isawaitable(produced):
                    produced = await produced
                assert isinstance(produced, ScriptedResponse)
                return produced
            if self._queue:
                return self._queue.popleft()
        except Exception as exc:
            self.errors.append(exc)
            return error_response(500, f"scripted server: responder raised {exc!r}")
        return error_response(
            500, f"scripted server: no response scripted for request #{number}", type="unscripted"
        )

    async def _write(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        response: ScriptedResponse,
        exchange: Exchange,
    ) -> bool:
        """Write one response; True when the connection can serve another request."""
        if not response.answer:
            exchange.finished = True
            writer.close()
            return False
        try:
            writer.write(_head(response))
            await writer.drain()
            for part in response.parts:
                if isinstance(part, Pause):
                    if not await _pause(reader, writer, part.seconds):
                        exchange.client_disconnected = True
                        return False
                    continue
                if not part:
                    continue
                if response.framing == "chunked":
                    writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                else:
                    writer.write(part)
                await writer.drain()
            if response.ending == "reset":
                _reset(writer)
                exchange.finished = True
                return False
            if response.ending == "close":
                writer.close()
                exchange.finished = True
                return False
            if response.framing == "chunked":
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            exchange.finished = True
        except ConnectionError:
            exchange.client_disconnected = True
            return False
        return response.framing != "close"


async def _pause(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float
) -> bool:
    """Sleep, watching the connection; False as soon as the client has closed it.

    The client sends nothing while it waits for a response, so end of input (FIN) or a
    closed transport (RST) during a pause means it gave up.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        if reader.at_eof() or reader.exception() is not None or writer.transport.is_closing():
            return False
        left = deadline - loop.time()
        if left <= 0:
            return True
        await asyncio.sleep(min(left, 0.01))


def _head(response: ScriptedResponse) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = "Scripted"
    headers = dict(response.headers)
    if response.framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
    elif response.framing == "length":
        length = sum(len(p) for p in response.parts if isinstance(p, bytes))
        headers["Content-Length"] = str(length)
    else:
        headers["Connection"] = "close"
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _reset(writer: asyncio.StreamWriter) -> None:
    """Abort with a TCP RST (SO_LINGER 0) instead of an orderly FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # the blank line after the last chunk
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


def _resplit(
    parts: list[bytes | Pause], *, split_every: int | None, split_at: Sequence[int]
) -> list[bytes | Pause]:
    """Re-cut the byte parts at global body offsets; pauses keep their positions."""
    if not split_every and not split_at:
        return parts
    total = sum(len(p) for p in parts if isinstance(p, bytes))
    cuts = set(split_at)
    if split_every:
        cuts.update(range(split_every, total, split_every))
    out: list[bytes | Pause] = []
    offset = 0
    for part in parts:
        if isinstance(part, Pause):
            out.append(part)
            continue
        start = 0
        for cut in sorted(c - offset for c in cuts if offset < c < offset + len(part)):
            out.append(part[start:cut])
            start = cut
        out.append(part[start:])
        offset += len(part)
    return out


def _cut(parts: list[bytes | Pause], limit: int) -> list[bytes | Pause]:
    out: list[bytes | Pause] = []
    left = limit
    for part in parts:
        if isinstance(part, Pause):
            out.append(part)
            continue
        if left <= 0:
            break
        out.append(part[:left])
        left -= len(part[:left])
    return out
