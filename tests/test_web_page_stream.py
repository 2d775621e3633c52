"""The page's reading of a run's events, in a real browser, against a scripted route.

Playwright answers the page's requests here (`page.route`), so each test decides
exactly what the wire carries: an event sent again after a reconnect, a connection cut
between two events, a reload mid-answer. The page's own files are the package's. What
decides the outcome is the text a person reads: each delta once, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from browser_harness import chromium
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Route

ORIGIN = "http://page.test"
RUN = "run-1"
THREAD = "thread-1"

pytestmark = pytest.mark.slow

# What the event route answers to a request after a cursor: SSE text, a status, or None
# for 204 (nothing more).
Answer = Callable[[str | None], Awaitable[str | int | None]]


def cursor(n: int) -> str:
    return f"{0:06d}-{n:012d}"


def text_event(n: int, text: str) -> tuple[str, dict[str, Any]]:
    return cursor(n), {"type": "text_delta", "turn": 1, "attempt": 0, "text": text}


def stop_event(n: int, answer: str) -> tuple[str, dict[str, Any]]:
    return cursor(n), {
        "type": "stop",
        "turn": 1,
        "reason": "final_answer",
        "final_answer": answer,
        "partial": None,
        "shown": False,
        "detail": "",
    }


def sse(events: list[tuple[str, dict[str, Any]]]) -> str:
    # `retry: 50` makes EventSource reconnect quickly after the body ends.
    body = "retry: 50\n\n"
    for cursor_text, event in events:
        data = json.dumps({**event, "cursor": cursor_text})
        body += f"id: {cursor_text}\nevent: {event['type']}\ndata: {data}\n\n"
    return body


class Script:
    """What the event route answers, request by request, and what it was asked."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.asked: list[str | None] = []

    async def handle(self, route: Route) -> None:
        request = route.request
        path = urlsplit(request.url).path
        if path == "/":
            await route.fulfill(body=_page_file("index.html"), content_type="text/html")
        elif path.startswith("/page/"):
            name = path.removeprefix("/page/")
            kind = "text/css" if name.endswith(".css") else "text/javascript"
            await route.fulfill(body=_page_file(name), content_type=kind)
        elif path == f"/v1/threads/{THREAD}":
            await route.fulfill(json={"thread_id": THREAD, "runs": [RUN], "last_run_id": RUN})
        elif path == f"/v1/threads/{THREAD}/runs/{RUN}":
            await route.fulfill(json={"transcript": [{"role": "user", "content": "say it"}]})
        elif path == f"/v1/threads/{THREAD}/runs/{RUN}/events":
            after = await request.header_value("last-event-id") or _after(request.url)
            self.asked.append(after)
            body = await self.answers[min(len(self.asked), len(self.answers)) - 1](after)
            with contextlib.suppress(PlaywrightError):  # the page went away meanwhile
                if body is None:
                    await route.fulfill(status=204, body="")
                elif isinstance(body, int):
                    await route.fulfill(status=body, body="")
                else:
                    await route.fulfill(body=body, content_type="text/event-stream")
        else:
            await route.fulfill(status=404, json={"error": f"no route {path}"})


def _after(url: str) -> str | None:
    values = parse_qs(urlsplit(url).query).get("after")
    return values[0] if values else None


def _page_file(name: str) -> str:
    return (resources.files("steadyloop._web") / "page" / name).read_text(encoding="utf-8")


async def _open(page: Page, script: Script) -> None:
    await page.route(f"{ORIGIN}/**", script.handle)
    await page.goto(f"{ORIGIN}/?thread={THREAD}")


async def _answer(page: Page) -> str:
    return await page.locator(".turn .answer").text_content() or ""


async def test_an_event_sent_again_after_a_reconnect_is_shown_once() -> None:
    first = [text_event(1, "one "), text_event(2, "two ")]
    # The server (wrongly) repeats the last event before continuing: the page must not.
    again = [text_event(2, "two "), text_event(3, "three"), stop_event(4, "one two three")]

    async def first_answer(after: str | None) -> str:
        return sse(first)

    async def second_answer(after: str | None) -> str:
        return sse(again)

    script = Script([first_answer, second_answer])
    async with chromium() as browser:
        page = await browser.new_page()
        await _open(page, script)
        await page.wait_for_selector('#stop[data-reason="final_answer"]')
        assert await _answer(page) == "one two three"
        # EventSource reconnected by itself (its Last-Event-ID is added below what
        # Playwright's routing sees; the end-to-end tests check it on a real server).
        assert len(script.asked) == 2
        received = await page.evaluate("window.steadyloop.stream.received")
        assert received == [cursor(1), cursor(2), cursor(2), cursor(3), cursor(4)]


async def test_a_reload_mid_answer_continues_after_its_cursor_with_nothing_twice() -> None:
    reloaded = asyncio.Event()

    async def events(after: str | None) -> str | None:
        if after is None:
            return sse([text_event(1, "one "), text_event(2, "two ")])
        if not reloaded.is_set():
            await reloaded.wait()  # held: the reconnect before the reload never answers
            return None
        return sse([text_event(3, "three"), stop_event(4, "one two three")])

    script = Script([events])
    async with chromium() as browser:
        page = await browser.new_page()
        await _open(page, script)
        await page.wait_for_function(
            "document.querySelector('.turn .answer')?.textContent === 'one two '"
        )
        await page.wait_for_timeout(400)  # past the page's save interval
        reloaded.set()
        await page.reload()
        await page.wait_for_selector('#stop[data-reason="final_answer"]')
        assert await _answer(page) == "one two three"
        # The reloaded page asked only for what followed the cursor it had saved.
        assert script.asked[-1] == cursor(2)
        assert await page.evaluate("window.steadyloop.stream.received") == [cursor(3), cursor(4)]


async def test_a_server_answering_an_error_is_asked_again_after_the_last_cursor() -> None:
    async def events(after: str | None) -> str | int | None:
        if len(script.asked) == 1:
            return sse([text_event(1, "one ")])
        if after == cursor(1) and len(script.asked) > 3:
            return sse([text_event(2, "two"), stop_event(3, "one two")])
        return 502  # a proxy in front of a server that is restarting

    script = Script([events])
    async with chromium() as browser:
        page = await browser.new_page()
        await _open(page, script)
        await page.wait_for_selector('#stop[data-reason="final_answer"]')
        assert await _answer(page) == "one two"
        # EventSource gave up on the 502; the page asked again itself, after its cursor.
        assert script.asked[0] is None
        assert script.asked[-1] == cursor(1)


async def test_a_cursor_behind_retention_shows_the_snapshot_and_reads_on_after_its_cursor() -> None:
    """A reload whose saved cursor the log no longer holds: 410, never a silent skip."""
    snapshot = {
        "transcript": [
            {"role": "user", "content": "say it"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [{"id": "call_0", "name": "add", "arguments": '{"a":1}'}],
            },
            {"role": "tool", "content": "2", "tool_call_id": "call_0"},
        ],
        "cursor": cursor(40),
    }

    async def events(after: str | None) -> str | int | None:
        if after is None and len(script.asked) == 1:
            return sse([text_event(1, "one ")])
        if after == cursor(40):
            return sse([text_event(41, "done"), stop_event(42, "done")])
        return 410

    script = Script([events])
    async with chromium() as browser:
        page = await browser.new_page()

        async def handle(route: Route) -> None:
            if urlsplit(route.request.url).path == f"/v1/threads/{THREAD}/runs/{RUN}":
                await route.fulfill(json=snapshot)
            else:
                await script.handle(route)

        await page.route(f"{ORIGIN}/**", handle)
        await page.goto(f"{ORIGIN}/?thread={THREAD}")
        await page.wait_for_selector('#stop[data-reason="final_answer"]')
        answers = await page.locator(".turn .answer").all_text_contents()
        # The run drawn again from its snapshot, then what followed the snapshot's cursor.
        assert answers == ["Checking.", "done"]
        assert await page.locator(".call .output").all_text_contents() == ["2"]
        assert "no longer kept" in (await page.locator("#log").text_content() or "")
        assert script.asked[-1] == cursor(40)
