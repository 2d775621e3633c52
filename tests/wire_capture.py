"""Record one HTTP exchange at the transport, byte for byte, and serve it back later.

`RecordingTransport` wraps httpx's own transport: the model activity reads the
response exactly as it would without it, while every network read is kept with its
arrival time, and so is how the body ended: at its end (`eof`), cut by the server
(`cut`, with the transport error), or left by the reader before its end
(`client_closed`: `[DONE]` arrived, or the watchdog or the runaway guard hung up).

`Exchange.save` writes two files per case: `NAME.body`, the raw bytes as they arrived
(readable: SSE is text), and `NAME.json`, the request that was sent, the status, the
headers, where each read ended and when, and the ending. `ReplayTransport` serves a
saved exchange back through the same activity code: the same reads in the same
pieces, with their recorded pauses when asked (`timed=True`, for the cases whose
outcome depends on time), then the same ending; after a `client_closed` ending it
sends nothing more and never closes, like the server that stalled. So every parsing
test also runs without the servers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel

Ending = Literal["eof", "cut", "client_closed"]

# Headers that describe this one transfer, not the answer: a replayed body is not chunked.
_TRANSFER_HEADERS = frozenset({"transfer-encoding", "content-length", "connection", "keep-alive"})


class Exchange(BaseModel):
    """One request and the response as it arrived on the wire."""

    source: str = ""
    request: dict[str, Any] = {}
    status: int
    headers: dict[str, str]
    headers_at_s: float = 0.0
    reads: list[tuple[float, int]] = []  # (seconds after the request, end offset)
    ending: Ending = "eof"
    error: str | None = None
    body: bytes = b""

    def save(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.body").write_bytes(self.body)
        meta = json.dumps(self.model_dump(mode="json", exclude={"body", "reads"}), indent=1)
        reads = ",\n  ".join(json.dumps(read) for read in self.reads)  # one read a line
        text = meta[: meta.rindex("}")].rstrip() + f',\n "reads": [\n  {reads}\n ]\n}}\n'
        (folder / f"{name}.json").write_text(text, encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, name: str) -> Exchange:
        meta = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        return cls.model_validate({**meta, "body": (folder / f"{name}.body").read_bytes()})

    def pieces(self) -> list[tuple[float, bytes]]:
        """The body in the reads it arrived in, each with its arrival time."""
        out: list[tuple[float, bytes]] = []
        start = 0
        for at, end in self.reads:
            out.append((at, self.body[start:end]))
            start = end
        return out


class _RecordingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, exchange: Exchange, started: float) -> None:
        self._inner = inner
        self._exchange = exchange
        self._started = started
        self._body = bytearray()
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._inner:
                self._body += piece
                at = round(time.monotonic() - self._started, 4)
                self._exchange.reads.append((at, len(self._body)))
                self._exchange.body = bytes(self._body)
                yield piece
        except httpx.TransportError as exc:
            self._ended = True
            self._exchange.ending = "cut"
            self._exchange.error = f"{type(exc).__name__}: {exc}"
            raise
        self._ended = True
        self._exchange.ending = "eof"

    async def aclose(self) -> None:
        if not self._ended:
            self._exchange.ending = "client_closed"
        await self._inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """httpx's transport, keeping every exchange in `exchanges` as it happens."""

    def __init__(self, source: str = "") -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.source = source
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        sent = json.loads(request.content) if request.content else {}
        response = await self._inner.handle_async_request(request)
        exchange = Exchange(
            source=self.source,
            request=sent,
            status=response.status_code,
            headers={k.lower(): v for k, v in response.headers.items()},
            headers_at_s=round(time.monotonic() - started, 4),
            ending="client_closed",
        )
        self.exchanges.append(exchange)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_RecordingStream(response.stream, exchange, started),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def last(self) -> Exchange:
        assert self.exchanges, "no request went through the recording transport"
        return self.exchanges[-1]


class _ReplayStream(httpx.AsyncByteStream):
    def __init__(self, exchange: Exchange, timed: bool) -> None:
        self._exchange = exchange
        self._timed = timed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        clock = exchange.headers_at_s
        for at, piece in exchange.pieces():
            if self._timed and at > clock:
                await asyncio.sleep(at - clock)
            clock = at
            yield piece
        if exchange.ending == "cut":
            raise httpx.RemoteProtocolError(exchange.error or "the server cut the body")
        if exchange.ending == "client_closed":
            await asyncio.Event().wait()  # the server went silent; the reader must hang up


class ReplayTransport(httpx.AsyncBaseTransport):
    """Serves a recorded exchange to every request, as the server sent it."""

    def __init__(self, exchange: Exchange, *, timed: bool = False) -> None:
        self.exchange = exchange
        self.timed = timed
        self.requests: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content) if request.content else {})
        exchange = self.exchange
        if self.timed and exchange.headers_at_s > 0:
            await asyncio.sleep(exchange.headers_at_s)
        headers = {k: v for k, v in exchange.headers.items() if k not in _TRANSFER_HEADERS}
        return httpx.Response(
            status_code=exchange.status,
            headers=headers,
            stream=_ReplayStream(exchange, self.timed),
            request=request,
        )
