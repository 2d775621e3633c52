"""Stopping a test's subprocess (a worker, a server) the two ways the e2e tests need."""

from __future__ import annotations

import asyncio
import signal


async def kill_process(process: asyncio.subprocess.Process, guard_s: float) -> None:
    """SIGKILL: no cleanup, no graceful shutdown, exactly a lost machine."""
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
    await asyncio.wait_for(process.wait(), guard_s)


async def stop_process(process: asyncio.subprocess.Process, guard_s: float) -> None:
    """SIGTERM, then SIGKILL if it does not exit within `guard_s`."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), guard_s)
        except TimeoutError:
            await kill_process(process, guard_s)
