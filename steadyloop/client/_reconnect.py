"""Riding out a Temporal server that stops answering while a run is followed.

A follower reads what Temporal keeps (the run's event log, its result), so a server that
restarts (`steadyloop worker --dev` runs its Temporal in the worker's process, and a
killed worker takes it down) loses the follower nothing: the run's state is on the
server, and the follower's cursor says where it was. What the obvious follower does
instead is end with the transport error, which reads as a failed run although the run
is fine.

So a read that fails because nothing answers (`unreachable`: the SDK's `UNAVAILABLE`,
its word for "no connection", or a connection that broke mid-call) is tried again, with
backoff, from the follower's cursor: `Reconnect` counts how long the server has been
gone, tells its `on_lost` callback once per outage (the command line prints one line),
and after `bound_s` without an answer raises `TemporalLost`, which names the cursor to
follow again after. Every other error is the read's own and passes through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from temporalio.service import RPCError, RPCStatusCode

from steadyloop.client._errors import TemporalLost

__all__ = ["DEFAULT_RECONNECT_BOUND", "Reconnect", "unreachable"]

T = TypeVar("T")

# How long a follower waits for Temporal to answer again before `TemporalLost`: long
# enough for a restarted dev server or a rolling upgrade of a cluster.
DEFAULT_RECONNECT_BOUND = timedelta(minutes=5)
FIRST_WAIT_S = 0.5
MAX_WAIT_S = 5.0


# How the SDK words a call whose connection broke under it (status UNKNOWN): the server
# went away mid-call, which is the same news as UNAVAILABLE.
_BROKEN_CONNECTION = ("transport error", "tcp connect error", "connection refused", "reset")


def unreachable(error: BaseException) -> bool:
    """Whether `error` says no Temporal server answered (not that one refused)."""
    if not isinstance(error, RPCError):
        return False
    if error.status == RPCStatusCode.UNAVAILABLE:
        return True
    text = str(error).lower()
    return error.status == RPCStatusCode.UNKNOWN and any(w in text for w in _BROKEN_CONNECTION)


@dataclass
class Reconnect:
    """One follower's patience with an unreachable server.

    `down(error, cursor)` after a read failed because nothing answered: the first call of
    an outage calls `on_lost(error)`; it sleeps before the caller reads again, or raises
    `TemporalLost` once the server has been gone for `bound_s`. `up()` after any read
    that succeeded ends the outage."""

    workflow_id: str
    bound_s: float = DEFAULT_RECONNECT_BOUND.total_seconds()
    on_lost: Callable[[BaseException], None] | None = None
    _since: float | None = field(default=None, init=False)
    _wait_s: float = field(default=FIRST_WAIT_S, init=False)

    @property
    def lost(self) -> bool:
        """Whether the server is unreachable now (an outage not yet over)."""
        return self._since is not None

    def up(self) -> None:
        self._since = None
        self._wait_s = FIRST_WAIT_S

    async def down(self, error: BaseException, cursor: str | None) -> None:
        now = asyncio.get_running_loop().time()
        if self._since is None:
            self._since = now
            if self.on_lost is not None:
                self.on_lost(error)
        gone_s = now - self._since
        if gone_s >= self.bound_s:
            raise TemporalLost(self.workflow_id, cursor, gone_s, str(error)) from None
        await asyncio.sleep(min(self._wait_s, self.bound_s - gone_s))
        self._wait_s = min(self._wait_s * 2, MAX_WAIT_S)

    async def call(self, read: Callable[[], Awaitable[T]], cursor: str | None = None) -> T:
        """`read()`, tried again while the server is unreachable, within the bound."""
        while True:
            try:
                value = await read()
            except RPCError as error:
                if not unreachable(error):
                    raise
                await self.down(error, cursor)
                continue
            self.up()
            return value
