"""The tool the shared-nothing end-to-end tests' workers serve (`steadyloop worker
--tools blob_e2e_tools:registry`): `read_page(n)` answers 4 KB that depend only on `n`,
after `PAGE_DELAY_S`, so a test can kill the worker in the middle of one.

Each call appends `<n> <pid>` to `tool-calls.log` in the worker's own working directory
(the workers share no directory), which is how a test learns which worker runs a page.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from datetime import timedelta
from pathlib import Path

from steadyloop.tools import ToolRegistry, tool

PAGE_BYTES = 4096
PAGE_DELAY_S = 0.4
CALLS_LOG = "tool-calls.log"


def page_text(n: int) -> str:
    """4 KB that depend only on `n` (so a test can check every answer came back whole)."""
    seed = hashlib.sha256(f"page {n}".encode()).hexdigest()
    return (f"page {n}: " + seed * (PAGE_BYTES // len(seed) + 1))[:PAGE_BYTES]


# A killed worker's attempt is retried elsewhere once this runs out.
@tool(effect="pure", timeout=timedelta(seconds=6))
async def read_page(n: int) -> str:
    """Read page n of the document."""
    fd = os.open(Path.cwd() / CALLS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{n} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(PAGE_DELAY_S)
    return page_text(n)


registry = ToolRegistry([read_page])
