"""The SSE writer: ids are cursors, pings on idle, a frozen client is cut, not waited for."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from steadyloop._web.backend import StreamEvent
from steadyloop._web.sse import EventStreamResponse, frame


def test_a_frame_carries_the_cursor_as_its_id_and_one_line_of_json() -> None:
    event = StreamEvent(cursor="000000-000000000007", type="text_delta", data={"text": "a\nb"})
    assert frame(event) == (
        b'id: 000000-000000000007\nevent: text_delta\ndata: {"text":"a\\nb"}\n\n'
    )


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
def test_a_cursor_that_would_break_the_id_field_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="line break or NUL"):
        frame(StreamEvent(cursor=bad, type="stop", data={}))


async def never_disconnect() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_an_idle_stream_pings_and_sets_the_no_buffering_header() -> None:
    sent: list[dict[str, Any]] = []
    release = asyncio.Event()

    async def frames() -> AsyncIterator[bytes]:
        await release.wait()
        yield b"data: 1\n\n"

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    response = EventStreamResponse(frames(), ping_s=0.05, send_timeout_s=1)
    task = asyncio.create_task(response({}, never_disconnect, send))  # type: ignore[arg-type]
    await asyncio.sleep(0.18)
    release.set()
    await task
    headers = dict(sent[0]["headers"])
    assert headers[b"x-accel-buffering"] == b"no"
    bodies = [m.get("body") for m in sent[1:]]
    assert bodies.count(b": ping\n\n") >= 2
    assert bodies[-2:] == [b"data: 1\n\n", b""]


async def test_a_client_that_stops_reading_is_cut_after_the_send_timeout() -> None:
    closed = asyncio.Event()

    async def frames() -> AsyncIterator[bytes]:
        while True:
            yield b"data: x\n\n"

    async def send(message: dict[str, Any]) -> None:
        if message.get("more_body"):
            await asyncio.Event().wait()  # the socket is full: this send never completes

    async def on_close() -> None:
        closed.set()

    response = EventStreamResponse(frames(), ping_s=10, send_timeout_s=0.05, on_close=on_close)
    await asyncio.wait_for(response({}, never_disconnect, send), 2)  # type: ignore[arg-type]
    assert response.dropped and closed.is_set()
