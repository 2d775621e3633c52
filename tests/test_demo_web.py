"""`steadyloop demo --web`, used as a person would: start it, open the address it prints
in Chromium, read the run there, stop it with Ctrl-C (SIGINT).

The test also makes the web page's picture (`docs/screenshots/page.png`, on docs/web.md), so
the picture is always of the page as it is.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from browser_harness import chromium

from steadyloop._cli.demo_conversation import PROMPT

SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "screenshots" / "page.png"
START_GUARD_S = 60.0
DONE_GUARD_MS = 60_000  # a hang guard, not a speed assertion
URL = re.compile(r"^Open the page: (http://127\.0\.0\.1:\d+/\?thread=\S+)$")


@pytest.mark.slow
async def test_the_web_demo_prints_an_address_where_the_run_is_read_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    environment["PYTHONUNBUFFERED"] = "1"
    demo = subprocess.Popen(
        [sys.executable, "-m", "steadyloop", "demo", "--web", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    try:
        give_up = time.monotonic() + START_GUARD_S
        url = None
        while url is None:
            line = lines.get(timeout=max(0.1, give_up - time.monotonic()))
            assert line is not None, "\n".join(seen)
            seen.append(line)
            found = URL.match(line)
            url = found.group(1) if found else None

        async with chromium() as browser:
            page = await browser.new_page(viewport={"width": 1100, "height": 900})
            await page.goto(url)
            await page.wait_for_selector('#stop[data-reason="final_answer"]', timeout=DONE_GUARD_MS)
            assert await page.text_content("#log .user .said") == PROMPT
            tools = await page.locator(".call .tool").all_text_contents()
            assert tools == ["read_file", "current_time", "calculate", "append_note"]
            answer = await page.locator(".turn .answer").last.text_content() or ""
            assert answer.startswith("The March order comes to ")
            notes = (tmp_path / "outbox" / "notes.txt").read_text(encoding="utf-8")
            assert notes.count("March order total") == 1
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOT), full_page=True)

        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=30)
        while (line := lines.get(timeout=5)) is not None:
            seen.append(line)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    out = "\n".join(seen)
    assert code == 0, out
    assert seen[-1] == "steadyloop demo --web: stopped", out
