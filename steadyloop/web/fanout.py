"""One subscription per run per process, fanned out to every client of the run.

N browsers following one run must not cost N subscriptions to Temporal (each one polls
the run's log with its own updates). A `RunFeed` reads the run's log once, from the
cursor of the client that opened it, keeps the last `buffer` events, and every client
of the run reads that buffer from its own position. Bounded everywhere:

- the feed keeps at most `buffer` events (a deque, indexed by cursor), however many
  clients read it and however long the run is;
- a client holds only its position in the buffer: its backlog is the buffer's events
  after it, so it is bounded by the buffer, with no copy per client. A client that
  falls further behind than the buffer reaches (a slow reader in a burst) is not
  dropped and loses nothing: it reads on from the log by itself, from its own cursor,
  until it catches up with an event the feed holds, and joins it again;
- a client whose socket stops taking bytes is cut by the SSE writer's send timeout
  (`steadyloop.web.sse`), which ends its reading here; it reconnects with its last id.
- A client whose cursor is not in the buffer (older, or from a window this process
  never read) starts the same way: its own catch-up, then the feed.

Cursors are opaque: "in the buffer" is the only ordering the fan-out relies on. When
the last client leaves, the feed stops reading and is forgotten: the server keeps no
state a restart would lose (the log is the state).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field

from steadyloop.errors import SteadyloopError
from steadyloop.web.backend import StreamEvent

__all__ = ["FeedRegistry", "FellBehind", "RunFeed"]

Source = Callable[[str | None], AsyncIterator[StreamEvent]]


class FellBehind(SteadyloopError):
    """The client's next event left the feed's buffer before it was read."""


@dataclass(eq=False)
class RunFeed:
    """The shared reader of one run's log in this process."""

    source: Source
    after: str | None  # the cursor the feed started after (None: the log's beginning)
    buffer: int
    events: deque[tuple[int, StreamEvent]] = field(default_factory=deque)
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
                await asyncio.sleep(0)  # let the clients read between events of a burst
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # given to every client; each reconnects on its own
            self.failure = exc
        self.ended = True
        self._wake()

    def _publish(self, event: StreamEvent) -> None:
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
        """The sequence number a client after `after` reads from the feed next, or None
        when `after` is not within the buffer's reach."""
        if after == self.after and (not self.events or self.events[0][0] == 0):
            return 0
        if after is None or after not in self.index:
            return None
        return self.index[after] + 1

    async def follow(self, seq: int) -> AsyncIterator[StreamEvent]:
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


class FeedRegistry:
    """The feeds of this process, one per run, each alive while a client reads it."""

    def __init__(self, *, buffer: int) -> None:
        self.buffer = buffer
        self.feeds: dict[Hashable, RunFeed] = {}
        self.readers: dict[Hashable, int] = {}
        self.own_reads = 0  # catch-ups a client read from the log by itself

    async def events(
        self, key: Hashable, source: Source, after: str | None
    ) -> AsyncGenerator[StreamEvent, None]:
        """The run's events after `after`, from the run's shared feed where it can."""
        feed = self.feeds.get(key)
        if feed is None or (feed.ended and feed.failure is not None):
            feed = RunFeed(source, after, self.buffer)
            self.feeds[key] = feed
            feed.start()
        self.readers[key] = self.readers.get(key, 0) + 1
        cursor = after
        try:
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
        finally:
            self.readers[key] -= 1
            if self.readers[key] == 0:
                del self.readers[key]
                if self.feeds.get(key) is feed:
                    del self.feeds[key]
                await feed.stop()
