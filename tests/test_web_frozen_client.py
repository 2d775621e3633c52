"""A frozen client over real HTTP (uvicorn): the server stops waiting on it after the
send timeout, lets go of its stream, and the client reconnecting with its last id reads
the rest: nothing missed, nothing twice."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import httpx
import uvicorn
from web_fake_backend import FakeBackend

from steadyloop._web.app import create_app
from steadyloop._web.settings import web_settings

TOKEN = "acme-token"
EVENTS = 3000
TEXT = "x" * 4000  # 12 MB in all: far past what socket buffers hold


def last_id(raw: bytes) -> str | None:
    """The id of the last complete frame in what a client read."""
    complete = raw.decode("utf-8", "replace").rsplit("\n\n", 1)[0]
    ids = [line[4:] for line in complete.splitlines() if line.startswith("id: ")]
    return ids[-1] if ids else None


async def test_a_frozen_client_is_let_go_and_resumes_without_loss() -> None:
    backend = FakeBackend()
    backend.threads[("acme", "t1")] = []
    settings = web_settings(
        {"send_timeout_s": 0.5, "run_buffer": 64},
        {"STEADYLOOP_WEB_TOKENS": f"acme={TOKEN}"},
    )
    app = create_app(backend, settings)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as http:
            await http.post("/v1/threads", json={"thread_id": "t1"})
            run_id = (await http.post("/v1/threads/t1/runs", json={"prompt": "go"})).json()[
                "run_id"
            ]
            run = backend.run("acme", "t1", run_id)
            for n in range(EVENTS - 1):
                run.publish("text_delta", turn=0, attempt=0, text=f"{n} {TEXT}")
            run.publish("stop", turn=0, reason="final_answer")

            # The frozen client: a small receive buffer, one read, then nothing.
            loop = asyncio.get_running_loop()
            frozen = socket.socket()
            frozen.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            frozen.setblocking(False)
            await loop.sock_connect(frozen, ("127.0.0.1", port))
            request = (
                f"GET /v1/threads/t1/runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {TOKEN}\r\n\r\n"
            )
            await loop.sock_sendall(frozen, request.encode())
            got = b""
            while b"\n\n" not in got.partition(b"\r\n\r\n")[2]:
                got += await loop.sock_recv(frozen, 4096)
            deadline = time.monotonic() + 20
            while app.state.slots.open and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert app.state.slots.open == {}  # its stream was let go
            # and its read of the log closed: nothing of it is held
            assert backend.open_reads == 0
            body = got.partition(b"\r\n\r\n")[2]
            cursor = last_id(body)
            assert cursor is not None
            frozen.close()

            seen = [
                line[4:]
                for line in body.decode("utf-8", "replace").rsplit("\n\n", 1)[0].splitlines()
                if line.startswith("id: ")
            ]
            rest = await http.get(
                f"/v1/threads/t1/runs/{run_id}/events",
                headers={"Last-Event-ID": cursor},
                timeout=60,
            )
            seen += [line[4:] for line in rest.text.splitlines() if line.startswith("id: ")]
            assert seen == [e.cursor for e in run.events]
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving
