"""A real browser for the web page's tests: Debian's Chromium driven by Playwright.

Playwright's own `playwright install` downloads a browser build, which cannot be fetched
here, so the tests launch the system's Chromium by path (`/usr/bin/chromium`, from
`apt-get install -y chromium`, which `.ci/run` does). A missing browser fails the test
with the command that installs it: a browser test that skips when there is no browser
would let CI pass having checked nothing.

Chromium starts headless with its own network probes off (update checks, sync, field
trials, QUIC): left on, they are refused here many at a time and slow every page. Each
launch gets a fresh profile (Playwright's `launch` makes a new user-data-dir per
browser), so no cookie, cache or sessionStorage leaks from one test to the next.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM_ENV = "STEADYLOOP_CHROMIUM"
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = (
    "Chromium is not installed: the web page's tests drive Debian's Chromium by path. "
    "Install it with `apt-get update && apt-get install -y chromium` (as root; .ci/run "
    f"does), or point {CHROMIUM_ENV} at a Chromium or Chrome binary. "
    "`playwright install` is not used: it downloads a browser build of its own."
)


def chromium_path() -> str:
    """The Chromium to launch; fails the calling test, saying how to install one."""
    configured = os.environ.get(CHROMIUM_ENV)
    candidates = [configured] if configured else [*CHROMIUM_PATHS, shutil.which("chromium")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(INSTALL_HINT, pytrace=False)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium with a fresh profile, closed (and its process gone) on exit."""
    path = chromium_path()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=path, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            await browser.close()
