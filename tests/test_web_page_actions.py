"""What a person does on the page, in a real browser, through the real app and routes.

The app runs under uvicorn here over the in-memory backend of the routes' tests
(`web_fake_backend`), so each test decides what a run has published and reads what the
page asked for: one decision for a double click, the 202 of a decision no worker has
taken, the 409 of a second message, a steer, an interrupt. The dev-server flow, with a
real worker, is `test_web_page_e2e.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import pytest
import uvicorn
from browser_harness import chromium
from playwright.async_api import Page, Request
from web_fake_backend import FakeBackend, FakeRun

from steadyloop._web.app import create_app
from steadyloop._web.backend import Decision, RunRequest
from steadyloop._web.page_routes import PAGE_POLICY
from steadyloop._web.settings import web_settings

pytestmark = pytest.mark.slow

TENANT = "default"
ARGUMENTS = '{"order_id":"A-17","cents":3450}'
SHA = hashlib.sha256(ARGUMENTS.encode()).hexdigest()


@asynccontextmanager
async def serving(backend: FakeBackend) -> AsyncIterator[str]:
    """The app on a port the OS picks, stopped on exit."""
    app = create_app(backend, web_settings({}, {}, dev=True))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
        if task.done():
            task.result()
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


class SteeringRecorded(FakeBackend):
    """The in-memory backend, keeping each steering action it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.steered: list[str] = []

    async def steer(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        action: Literal["interrupt", "pause", "unpause", "send"],
        text: str | None,
        idempotency_key: str | None,
    ) -> Decision:
        self.steered.append(action)
        return await super().steer(tenant, thread_id, run_id, action, text, idempotency_key)


async def waiting_run(backend: FakeBackend) -> tuple[str, FakeRun]:
    """A thread whose run asked for a refund that waits for approval."""
    thread = await backend.create_thread(TENANT, "t-approve")
    await backend.start(TENANT, thread, RunRequest(prompt="refund A-17"), None)
    run = backend.threads[(TENANT, thread)][-1]
    run.publish("text_delta", turn=1, attempt=0, text="Refunding it.")
    run.publish("tool_call", turn=1, call_id="call_0", name="refund", arguments=ARGUMENTS, sha=SHA)
    run.publish("approval_waiting", turn=1, call_id="call_0", tool="refund", sha=SHA)
    run.pending["call_0"] = SHA
    return thread, run


async def _approval_card(page: Page) -> None:
    await page.wait_for_selector(".approval button.approve")


async def test_the_page_is_served_whole_from_the_package_under_its_own_policy() -> None:
    async with serving(FakeBackend()) as url, chromium() as browser:
        page = await browser.new_page()
        failed: list[str] = []
        page.on("requestfailed", lambda request: failed.append(request.url))
        outside: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(url) else outside.append(r.url))
        response = await page.goto(url + "/")
        assert response is not None and response.status == 200
        assert response.headers["content-security-policy"] == PAGE_POLICY
        await page.wait_for_selector("#composer")
        assert await page.text_content("#where") == "no thread yet"
        assert failed == [] and outside == []
        head = await page.request.head(url + "/")
        assert head.status == 200 and head.headers["content-security-policy"] == PAGE_POLICY


async def test_a_waiting_call_shows_tool_arguments_and_sha_and_a_double_click_decides_once() -> (
    None
):
    backend = FakeBackend()
    thread, run = await waiting_run(backend)
    async with serving(backend) as url, chromium() as browser:
        page = await browser.new_page()
        await page.goto(f"{url}/?thread={thread}")
        await _approval_card(page)
        card = page.locator(".approval")
        assert await card.locator(".approval-head").text_content() == (
            "refund waits for approval (turn 1)"
        )
        assert await card.locator(".arguments").text_content() == ARGUMENTS
        assert SHA in (await card.locator(".sha").text_content() or "")
        sent: list[str | None] = []

        async def record(request: Request) -> None:
            if "/approvals/" in request.url:
                sent.append(await request.header_value("idempotency-key"))

        page.on("request", record)
        await card.locator("button.approve").dblclick()
        await card.locator(".outcome").filter(has_text="approve").wait_for()
        await page.wait_for_timeout(300)  # let a second request land, if one was sent
        assert len(sent) == 2 and sent[0] == sent[1] and sent[0]
        assert run.decided == [("call_0", True)]
        assert await card.locator(".outcome").text_content() == "approve: recorded"


async def test_a_decision_no_worker_has_taken_says_so() -> None:
    backend = FakeBackend(worker_up=False)
    thread, run = await waiting_run(backend)
    async with serving(backend) as url, chromium() as browser:
        page = await browser.new_page()
        await page.goto(f"{url}/?thread={thread}")
        await _approval_card(page)
        await page.click(".approval button.approve")
        outcome = page.locator(".approval .outcome")
        await outcome.filter(has_text="no worker").wait_for()
        assert run.decided == []


async def test_a_second_message_is_refused_naming_the_run_and_a_steer_is_sent_to_it() -> None:
    backend = FakeBackend()
    thread, run = await waiting_run(backend)
    async with serving(backend) as url, chromium() as browser:
        page = await browser.new_page()
        await page.goto(f"{url}/?thread={thread}")
        await _approval_card(page)
        await page.fill("#composer textarea", "and ship it")
        await page.click("#composer button[type=submit]")
        problem = page.locator("#problem")
        await problem.filter(has_text="409").wait_for()
        assert run.run_id in (await problem.text_content() or "")
        assert run.messages == []

        await page.check("#composer input[name=steer]")
        await page.click("#composer button[type=submit]")
        await page.locator(".said-note").wait_for()
        assert run.messages == ["and ship it"]
        assert await page.text_content("#problem") == ""


async def test_interrupt_asks_the_run_to_stop_and_the_stop_shows_the_partial_answer() -> None:
    backend = SteeringRecorded()
    thread, run = await waiting_run(backend)
    steered = backend.steered
    async with serving(backend) as url, chromium() as browser:
        page = await browser.new_page()
        await page.goto(f"{url}/?thread={thread}")
        await _approval_card(page)
        await page.click("#interrupt")
        while not steered:
            await asyncio.sleep(0.02)
        assert steered == ["interrupt"]
        run.publish(
            "stop",
            turn=1,
            reason="interrupted",
            final_answer=None,
            partial="Refunding it.",
            shown=True,
            detail="interrupted from the page",
        )
        await page.wait_for_selector('#stop[data-reason="interrupted"]')
        assert await page.text_content("#stop .partial") == "Refunding it."
        assert await page.text_content(".turn .answer") == "Refunding it."
        assert await page.is_disabled("#interrupt")
        assert await page.is_disabled(".approval button.approve")
