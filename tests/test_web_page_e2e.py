"""The page in Chromium against the whole system: a dev server, a real `steadyloop worker`
and a real `steadyloop serve`, each its own process, killed with SIGKILL where a check
says so (issue 24, section 3).

What decides each outcome is what a person reads and what happened once: the text the
page shows against the run's final answer (read from Temporal, not from the server),
the cursors the page received off the wire, and the lines in the outbox.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from browser_harness import chromium
from playwright.async_api import Page
from web_harness import WebStack, paced_answer, web_stack

from steadyloop.events import parse_cursor
from steadyloop.testing.scripted_server import RecordedRequest, ScriptedResponse

pytestmark = pytest.mark.slow

# Words with multi-byte characters, so "byte for byte" compares more than ASCII.
WORDS = [f"w{n}{'é→日🙂'[n % 4]} " for n in range(40)]
ANSWER = "".join(WORDS)
PACE_S = 0.1  # 40 words: about 4 s of streaming to act in
DONE_GUARD_MS = 60_000  # a hang guard, not a speed assertion


def streaming(request: RecordedRequest) -> ScriptedResponse:
    return paced_answer(WORDS, PACE_S)


async def ask(page: Page, stack: WebStack, prompt: str) -> str:
    """Open the page, send `prompt`, and return the thread id the page created."""
    await page.goto(stack.page_url())
    await page.fill("#composer textarea", prompt)
    await page.click("#composer button[type=submit]")
    await page.locator(".turn .answer").filter(has_text=WORDS[4]).wait_for()
    thread = parse_qs(urlsplit(page.url).query)["thread"][0]
    return thread


async def received(page: Page) -> list[str]:
    ids = await page.evaluate("window.steadyloop.stream.received")
    assert isinstance(ids, list)
    return [str(i) for i in ids]


def assert_strictly_increasing(ids: list[str]) -> None:
    cursors = [parse_cursor(i) for i in ids]
    assert cursors == sorted(set(cursors)), ids


async def final_answer(stack: WebStack, thread: str, run: str = "1") -> str:
    """The run's final answer as Temporal holds it (not as the server relays it)."""
    name = thread.rpartition("~")[0]
    handle = stack.client.get_workflow_handle(f"web/tenant-a/{name}/{run}")
    result = await handle.result()
    answer = result["final_answer"] if isinstance(result, dict) else result.final_answer
    assert isinstance(answer, str)
    return answer


async def shown(page: Page) -> str:
    await page.wait_for_selector("#stop[data-reason]", timeout=DONE_GUARD_MS)
    return await page.locator(".turn .answer").text_content() or ""


async def test_1_a_tab_closed_mid_answer_and_opened_again_shows_the_answer_byte_for_byte(
    tmp_path: Path,
) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            context = await browser.new_context()
            page = await context.new_page()
            thread = await ask(page, stack, "Write forty words.")
            assert await page.locator("#stop").is_hidden(), "the answer ended before the close"
            before = await received(page)
            await page.close()

            again = await context.new_page()
            await again.goto(stack.page_url(thread))
            text = await shown(again)
            assert await again.get_attribute("#stop", "data-reason") == "final_answer"
            answer = await final_answer(stack, thread)
            assert answer == ANSWER
            assert text.encode("utf-8") == answer.encode("utf-8")
            assert await again.text_content("#log .user .said") == "Write forty words."
            assert_strictly_increasing(before)
            after = await received(again)
            assert_strictly_increasing(after)
            assert parse_cursor(after[0]).offset == 0  # a new tab reads the run from its start


async def test_1_a_reload_mid_answer_continues_after_its_cursor(tmp_path: Path) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            thread = await ask(page, stack, "Write forty words.")
            assert await page.locator("#stop").is_hidden(), "the answer ended before the reload"
            before = await received(page)
            await page.wait_for_timeout(300)  # past the page's save interval
            await page.reload()
            text = await shown(page)
            answer = await final_answer(stack, thread)
            assert text.encode("utf-8") == answer.encode("utf-8") == ANSWER.encode("utf-8")
            # The reloaded tab rendered what it had saved, then read on after the saved
            # cursor: every event applied once, in order, and only the rest off the wire.
            applied = await page.evaluate("window.steadyloop.stream.applied.map(a => a[0])")
            after = await received(page)
            assert_strictly_increasing(applied)
            assert 0 < len(after) < len(applied) and applied[-len(after) :] == after
            assert_strictly_increasing(before)
