"""Waiting in real time for what another process does (a server to listen, a worker to
poll, a run to reach a state), for the end-to-end harnesses that start processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout_s: float, what: str, every_s: float = 0.05
) -> T:
    """Poll `probe` until it returns something other than None."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(every_s)
