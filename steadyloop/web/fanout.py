"""One subscription per run per process, fanned out to every client of the run.

N browsers following one run must not cost N subscriptions to Temporal (each one polls
the run's log with its own updates and queries). A `RunFeed` reads the run's log once,
from the cursor of the client that opened it, keeps the last `buffer` events, and hands
each event to every attached client's queue. Bounded everywhere:

- the feed keeps at most `buffer` events (a deque), indexed by cursor so a client that
  reconnects with a recent cursor joins from the buffer;
- each client has a queue of at most `client_queue` events. A client whose queue is
  full is dropped, not waited for: one frozen tab must not stall the others or grow
  the server's memory. It reconnects with its last cursor and loses nothing.
- A client whose cursor is not in the buffer (older, or from a window this process
  never read) reads its own catch-up from the log until it reaches an event the feed
  holds, then joins the feed. Cursors are opaque, so "in the buffer" is the only
  ordering the fan-out relies on.

When the last client leaves, the feed stops reading and is forgotten: the server keeps
no state a restart would lose (the log is the state).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field

from steadyloop.web.backend import StreamEvent

__all__ = ["ClientDropped", "FeedRegistry", "RunFeed"]

Source = Callable[[str | None], AsyncIterator[StreamEvent]]
_END = object()


class ClientDropped(Exception):
    """The client fell `client_queue` events behind and was dropped; reconnect."""


@dataclass(eq=False)
class _Client:
    queue: asyncio.Queue[StreamEvent | object]
    dropped: bool = False


@dataclass(eq=False)
class RunFeed:
    """The shared reader of one run's log in this process."""

    source: Source
    after: str | None  # the cursor the feed started after (None: the log's beginning)
    buffer: int
    client_queue: int
    events: deque[tuple[int, StreamEvent]] = field(default_factory=deque)
    index: dict[str, int] = field(default_factory=dict)
    clients: set[_Client] = field(default_factory=set)
    ended: bool = False
    failure: BaseException | None = None
    next_seq: int = 0
    task: asyncio.Task[None] | None = None
    subscriptions: int = 0  # reads of the log this feed made (one, unless restarted)

    def start(self) -> None:
        self.task = asyncio.create_task(self._read())

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _read(self) -> None:
        self.subscriptions += 1
        try:
            async for event in self.source(self.after):
                self._publish(event)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # given to every client; each reconnects on its own
            self.failure = exc
        self.ended = True
        for client in list(self.clients):
            self._offer(client, _END)

    def _publish(self, event: StreamEvent) -> None:
        seq = self.next_seq
        self.next_seq += 1
        self.events.append((seq, event))
        self.index[event.cursor] = seq
        while len(self.events) > self.buffer:
            _, old = self.events.popleft()
            self.index.pop(old.cursor, None)
        for client in list(self.clients):
            self._offer(client, event)

    def _offer(self, client: _Client, item: StreamEvent | object) -> None:
        try:
            client.queue.put_nowait(item)
        except asyncio.QueueFull:
            client.dropped = True
            self.clients.discard(client)

    def backlog(self, after: str | None) -> list[StreamEvent] | None:
        """The buffered events after `after`, or None when `after` is not in reach."""
        if after == self.after and (not self.events or self.events[0][0] == 0):
            return [event for _, event in self.events]
        if after is None or after not in self.index:
            return None
        seq = self.index[after]
        return [event for s, event in self.events if s > seq]

    def attach(self, after: str | None) -> tuple[list[StreamEvent], _Client] | None:
        """Join from `after`: the backlog and a queue for what follows (no await between
        them, so nothing published in between is missed), or None when out of reach."""
        backlog = self.backlog(after)
        if backlog is None:
            return None
        client = _Client(asyncio.Queue(maxsize=self.client_queue))
        if self.ended:
            client.queue.put_nowait(_END)
        else:
            self.clients.add(client)
        return backlog, client

    async def follow(self, client: _Client) -> AsyncIterator[StreamEvent]:
        try:
            while True:
                item = await client.queue.get()
                if item is _END:
                    if self.failure is not None:
                        raise self.failure
                    return
                if client.dropped and client.queue.empty():
                    raise ClientDropped("the client fell too far behind; reconnect")
                assert isinstance(item, StreamEvent)
                yield item
                if client.dropped and client.queue.empty():
                    raise ClientDropped("the client fell too far behind; reconnect")
        finally:
            self.clients.discard(client)


class FeedRegistry:
    """The feeds of this process, one per run, each alive while a client reads it."""

    def __init__(self, *, buffer: int, client_queue: int) -> None:
        self.buffer = buffer
        self.client_queue = client_queue
        self.feeds: dict[Hashable, RunFeed] = {}
        self.readers: dict[Hashable, int] = {}

    async def events(
        self, key: Hashable, source: Source, after: str | None
    ) -> AsyncGenerator[StreamEvent, None]:
        """The run's events after `after`, served from the run's shared feed."""
        feed = self.feeds.get(key)
        if feed is None or (feed.ended and feed.failure is not None):
            feed = RunFeed(source, after, self.buffer, self.client_queue)
            self.feeds[key] = feed
            feed.start()
        self.readers[key] = self.readers.get(key, 0) + 1
        try:
            joined = feed.attach(after)
            cursor = after
            if joined is None:  # out of the buffer's reach: catch up from the log alone
                async for event in source(after):
                    yield event
                    cursor = event.cursor
                    joined = feed.attach(cursor)
                    if joined is not None:
                        break
                else:
                    return
            assert joined is not None
            backlog, client = joined
            for event in backlog:
                yield event
            async for event in feed.follow(client):
                yield event
        finally:
            self.readers[key] -= 1
            if self.readers[key] == 0:
                del self.readers[key]
                if self.feeds.get(key) is feed:
                    del self.feeds[key]
                await feed.stop()
