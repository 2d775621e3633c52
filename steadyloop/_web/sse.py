"""The SSE writer: every event framed with its cursor as `id:`, pings, a send timeout.

What a plain `StreamingResponse` gets wrong for a run's events, and what this does:

- **No `id:`.** A browser's `EventSource` resumes with `Last-Event-ID` only if the
  server wrote one (AG-UI's Python encoder writes none). Every frame here carries the
  event's cursor, and a cursor is checked to hold no line break or NUL, which would end
  the field early and resume from a cursor that was never written.
- **A proxy buffering the stream.** nginx holds a response until its buffer fills:
  `X-Accel-Buffering: no` and `Cache-Control: no-cache` on every stream.
- **An idle stream cut.** Load balancers close a connection silent for 60 s: a comment
  line (`: ping`) every `ping_s` (15 s) keeps it open and tells the client it is alive.
- **A frozen client holding memory.** A client that stops reading fills the socket and
  then the server's write buffer; an unbounded wait on `send` would keep its queue and
  buffers forever. Each send has `send_timeout_s`; past it the stream ends, the
  client's queue is released, and the client reconnects with its last cursor and loses
  nothing (the cursor addresses the run's durable log, not this process).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.types import Receive, Scope, Send

from steadyloop._web.backend import StreamEvent

__all__ = ["STREAM_HEADERS", "EventStreamResponse", "frame", "ping_frame"]

STREAM_HEADERS: Mapping[str, str] = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


def _field(value: str, what: str) -> str:
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"an SSE {what} holds a line break or NUL: {value[:40]!r}")
    return value


def frame(event: StreamEvent | None = None, **explicit: Any) -> bytes:
    """One SSE frame: `id:` (the cursor), `event:` (the type), `data:` (one line of JSON).

    `explicit` (`cursor`, `type`, `data`) frames what is not a `StreamEvent` (AG-UI).
    """
    cursor = explicit.get("cursor", event.cursor if event else None)
    kind = explicit.get("type", event.type if event else None)
    data = explicit.get("data", event.data if event else None)
    lines = []
    if cursor is not None:
        lines.append(f"id: {_field(cursor, 'id')}")
    if kind is not None:
        lines.append(f"event: {_field(kind, 'event')}")
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    # json.dumps escapes line breaks inside strings; a pre-encoded payload is checked.
    lines.append(f"data: {_field(payload, 'data')}")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def ping_frame() -> bytes:
    return b": ping\n\n"


class EventStreamResponse:
    """An ASGI response writing `frames` (already encoded) with pings and a send timeout.

    `on_close` runs however the stream ends (it frees the tenant's stream slot).
    """

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        *,
        ping_s: float,
        send_timeout_s: float,
        headers: Mapping[str, str] | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.frames = frames
        self.ping_s = ping_s
        self.send_timeout_s = send_timeout_s
        self.on_close = on_close
        self.headers = {**STREAM_HEADERS, **(headers or {})}
        self.dropped = False  # a send did not complete in time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    return

        watcher = asyncio.create_task(watch())
        try:
            await self._send(
                send,
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(k.encode(), v.encode()) for k, v in self.headers.items()],
                },
            )
            await self._pump(send, disconnected)
            if not disconnected.is_set():
                await self._send(send, {"type": "http.response.body", "body": b""})
        except (TimeoutError, OSError):
            self.dropped = True  # frozen or gone: the client reconnects with its cursor
        finally:
            watcher.cancel()
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                await aclose()
            if self.on_close is not None:
                await self.on_close()

    async def _pump(self, send: Send, disconnected: asyncio.Event) -> None:
        frames = aiter(self.frames)
        pending: asyncio.Task[bytes] | None = None
        try:
            while not disconnected.is_set():
                if pending is None:
                    pending = asyncio.ensure_future(anext(frames))
                gone = asyncio.ensure_future(disconnected.wait())
                done, _ = await asyncio.wait(
                    {pending, gone}, timeout=self.ping_s, return_when=asyncio.FIRST_COMPLETED
                )
                gone.cancel()
                if pending in done:
                    try:
                        chunk = pending.result()
                    except StopAsyncIteration:
                        return
                    pending = None
                    await self._body(send, chunk)
                elif not done:
                    await self._body(send, ping_frame())
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)

    async def _body(self, send: Send, chunk: bytes) -> None:
        await self._send(send, {"type": "http.response.body", "body": chunk, "more_body": True})

    async def _send(self, send: Send, message: dict[str, Any]) -> None:
        await asyncio.wait_for(send(message), timeout=self.send_timeout_s)
