"""An HTTP/1.1 proxy in front of the object store that can be slow or answer 503.

The workers' `AWS_ENDPOINT_URL` points here; each request is read whole (head and
`Content-Length` body), then either answered `503 Slow Down` (while `failing` is set,
the way S3 throttles) or sent upstream after `delay_s` and the response relayed whole
(`Content-Length` or chunked); a PutObject's `Expect: 100-continue` is answered here.
Requests are parsed, not bytes piped, because a client
keeps its connections open: a TCP-level fault would only touch new connections.
`served` and `refused` count requests, and `paths` keeps each request's path in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


async def _read_body(reader: asyncio.StreamReader, head: bytes) -> bytes:
    """The body that follows `head` (already read): by Content-Length, or chunked."""
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            body += size_line + await reader.readexactly(size + 2)
            if size == 0:
                return body
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


def _without_expect(head: bytes) -> bytes:
    lines = head.split(b"\r\n")
    return b"\r\n".join(ln for ln in lines if not ln.lower().startswith(b"expect:"))


def _no_body(request: bytes, response_head: bytes) -> bool:
    status = response_head.split(b" ", 2)[1]
    return request.startswith(b"HEAD ") or status in (b"204", b"304")


@dataclass
class FaultProxy:
    upstream_host: str
    upstream_port: int
    delay_s: float = 0.0
    failing: bool = False
    served: int = 0
    refused: int = 0
    paths: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    request_head = await reader.readuntil(b"\r\n\r\n")
                    if b"\r\nexpect: 100-continue" in request_head.lower():
                        # botocore asks before sending a PutObject body: say go on here,
                        # and forward the request without the question.
                        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                        await writer.drain()
                        request_head = _without_expect(request_head)
                    request = request_head + await _read_body(reader, request_head)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.paths.append(request_head.split(b" ", 2)[1].decode("latin-1"))
                if self.failing:
                    self.refused += 1
                    body = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                    writer.write(
                        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                    await writer.drain()
                    continue
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if upstream is None:
                    upstream = await asyncio.open_connection(self.upstream_host, self.upstream_port)
                up_reader, up_writer = upstream
                up_writer.write(request)
                await up_writer.drain()
                head = await up_reader.readuntil(b"\r\n\r\n")
                response = (
                    head if _no_body(request, head) else head + await _read_body(up_reader, head)
                )
                self.served += 1
                writer.write(response)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        finally:
            self._tasks.discard(task)
            if upstream is not None:
                upstream[1].close()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
