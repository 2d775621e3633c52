"""Many followers of one run in one process, one reader of its log, bounded memory.

Each reader of a run's log polls the run's output host (or its history): a web server
with fifty browser tabs on one run, or fifty `RunHandle.events()` loops, would pay fifty
times for the same events. So the followers of a run share one reader per process
(`EventFanout`, which `SteadyloopClient` holds and the web server reads through): a
`_Feed` reads the run's log once, from the cursor of the follower that opened it, keeps
the last `buffer` events, and every follower reads that buffer from its own position.

What a follower can rely on is the reader's (`steadyloop.client._event_log`): every event
after its cursor, in run order, once, and the reader's error (a cursor expired) raised
in every follower of the feed. Bounded everywhere:

- the feed keeps at most `buffer` events (a deque, indexed by cursor), however many
  followers read it and however long the run is;
- a follower holds only its position in the buffer, so its backlog is bounded by the
  buffer, with no copy per follower. A follower that falls further behind than the
  buffer reaches (a slow reader in a burst) is not dropped and loses nothing: it reads
  on from the log by itself, from its own cursor, until it reaches an event the feed
  holds, and joins it again;
- a follower whose cursor is not in the buffer (older, or from a window this process
  never read) starts the same way: its own catch-up, then the feed.

Cursors are opaque here: "in the buffer" is the only ordering relied on. When the last
follower leaves, the feed stops reading and is forgotten, so a finished run holds no
memory and a restart loses nothing (the log is the state). A feed that failed serves
no one new: the next follower opens a feed of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from steadyloop.errors import SteadyloopError
from steadyloop.events import parse_cursor

__all__ = ["DEFAULT_BUFFER", "EventFanout", "EventSource", "FellBehind"]

# Events a feed keeps for its followers.
DEFAULT_BUFFER = 1024


class _Cursored(Protocol):
    @property
    def cursor(self) -> str: ...


E = TypeVar("E", bound=_Cursored)

# Opens the run's event log after a cursor (the reader, `run_events`).
EventSource = Callable[[str | None], AsyncIterator[E]]


class FellBehind(SteadyloopError):
    """The follower's next event left the feed's buffer before it was read."""


@dataclass(eq=False)
class _Feed(Generic[E]):
    """The shared reader of one run's log in this process."""

    source: EventSource[E]
    after: str | None  # the cursor the feed started after (None: the log's beginning)
    buffer: int
    events: deque[tuple[int, E]] = field(default_factory=deque)
    index: dict[str, int] = field(default_factory=dict)
    ended: bool = False
    failure: BaseException | None = None
    next_seq: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._read())

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _read(self) -> None:
        try:
            async for event in self.source(self.after):
                self._publish(event)
                await asyncio.sleep(0)  # let the followers read between events of a burst
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # given to every follower; each reads again on its own
            self.failure = exc
        self.ended = True
        self._wake()

    def _publish(self, event: E) -> None:
        seq = self.next_seq
        self.next_seq += 1
        self.events.append((seq, event))
        self.index[event.cursor] = seq
        while len(self.events) > self.buffer:
            _, old = self.events.popleft()
            self.index.pop(old.cursor, None)
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def position(self, after: str | None) -> int | None:
        """The sequence number a follower after `after` reads from the feed next, or None
        when `after` is not within the buffer's reach."""
        if after == self.after and (not self.events or self.events[0][0] == 0):
            return 0
        if after is None or after not in self.index:
            return None
        return self.index[after] + 1

    async def follow(self, seq: int) -> AsyncIterator[E]:
        """The feed's events from sequence number `seq` on; `FellBehind` when the next one
        was evicted before it was read."""
        while True:
            first = self.events[0][0] if self.events else self.next_seq
            if seq < first:
                raise FellBehind(f"event {seq} left the buffer (it starts at {first})")
            if seq < self.next_seq:
                _, event = self.events[seq - first]
                seq += 1
                yield event
                continue
            if self.ended:
                if self.failure is not None:
                    raise self.failure
                return
            await self.changed.wait()


class EventFanout:
    """The shared feeds of one process, one per run (workflow id, first execution run id),
    each alive while a follower reads it."""

    def __init__(self, *, buffer: int = DEFAULT_BUFFER) -> None:
        self.buffer = buffer
        self._feeds: dict[tuple[str, str], _Feed[Any]] = {}
        self._followers: dict[tuple[str, str], int] = {}
        self.own_reads = 0  # catch-ups a follower read from the log by itself

    def readers(self, workflow_id: str, run_id: str) -> int:
        """How many shared readers of the run are open (for tests and benchmarks)."""
        return int((workflow_id, run_id) in self._feeds)

    async def follow(
        self, workflow_id: str, run_id: str, after: str | None, source: EventSource[E]
    ) -> AsyncGenerator[E, None]:
        """The run's events after `after`, from the run's shared feed where it can."""
        if after is not None:
            parse_cursor(after)  # `InvalidCursor` before anything is read
        key = (workflow_id, run_id)
        shared: _Feed[E] | None = self._feeds.get(key)
        if shared is None or (shared.ended and shared.failure is not None):
            shared = _Feed(source, after, self.buffer)
            self._feeds[key] = shared
            shared.start()
        feed = shared
        self._followers[key] = self._followers.get(key, 0) + 1
        try:
            async for event in self._follow(feed, source, after):
                yield event
        finally:
            self._followers[key] -= 1
            if self._followers[key] == 0:
                del self._followers[key]
                if self._feeds.get(key) is feed:
                    del self._feeds[key]
                await feed.stop()

    async def _follow(
        self, feed: _Feed[E], source: EventSource[E], cursor: str | None
    ) -> AsyncGenerator[E, None]:
        """From the feed while `cursor` is within its reach; from the log alone (then the
        feed again) while it is not."""
        while True:
            seq = feed.position(cursor)
            if seq is None:  # out of the buffer's reach: read the log alone, then join
                self.own_reads += 1
                own = aiter(source(cursor))
                try:
                    async for event in own:
                        yield event
                        cursor = event.cursor
                        if feed.position(cursor) is not None:
                            break
                    else:
                        return  # the log ended before the feed's window
                finally:
                    aclose = getattr(own, "aclose", None)
                    if aclose is not None:
                        await aclose()
                continue
            try:
                async for event in feed.follow(seq):
                    yield event
                    cursor = event.cursor
                return
            except FellBehind:
                continue  # from its own cursor, by itself, until it catches up
