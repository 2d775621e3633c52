"""Many followers of one run in one process, one reader of its event log.

Each reader of a run's log polls the run's output host with updates; a web server
with fifty browser tabs on one run would pay fifty times for the same events. So the
followers of a run share one reader per process (`EventFanout`): it keeps the events it
read, in order, and each follower walks that list from its own cursor, then waits for
more. What a follower can rely on is the reader's (`steadyloop.client.event_log`):
every event after its cursor, in run order, once; the reader's error (a cursor
expired) is raised in every follower.

A follower shares a reader that started at or before its cursor; one whose cursor is
older than every reader's start gets a reader of its own (shared from then on). A
reader no follower uses any more is stopped, and one that reached the run's stop is
forgotten once its last follower leaves, so a finished run holds no memory.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from steadyloop.events import Cursor, RunEventItem, parse_cursor

__all__ = ["EventFanout", "EventSource"]

# Opens the run's event log after a cursor (the reader, `run_events`).
EventSource = Callable[[str | None], AsyncIterator[RunEventItem]]


@dataclass(eq=False)
class _SharedReader:
    """One reader of a run's log, the events it read, and the followers it serves."""

    start: Cursor | None  # it read what follows this (None: the log's first event)
    events: list[RunEventItem] = field(default_factory=list)
    positions: list[Cursor] = field(default_factory=list)  # each event's parsed cursor
    followers: int = 0
    done: bool = False
    error: BaseException | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def serves(self, after: Cursor | None) -> bool:
        """Whether a follower after `after` can be served from here: the reader started at
        or before it, and did not fail (its error was about where it read, and a later
        cursor may still be held: that follower reads for itself)."""
        if self.done and self.error is not None:
            return False
        return self.start is None or (after is not None and after >= self.start)

    def _changed(self) -> None:
        self.wake.set()
        self.wake = asyncio.Event()

    async def pump(self, events: AsyncIterator[RunEventItem]) -> None:
        try:
            async for event in events:
                self.events.append(event)
                self.positions.append(parse_cursor(event.cursor))
                self._changed()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # handed to every follower
            self.error = error
        finally:
            self.done = True
            self._changed()

    async def follow(self, after: Cursor | None) -> AsyncIterator[RunEventItem]:
        index = 0 if after is None else bisect.bisect_right(self.positions, after)
        while True:
            while index < len(self.events):
                yield self.events[index]
                index += 1
            if self.done:
                if self.error is not None:
                    raise self.error
                return
            await self.wake.wait()


class EventFanout:
    """The shared readers of one process, by run (workflow id, first execution run id)."""

    def __init__(self) -> None:
        self._readers: dict[tuple[str, str], list[_SharedReader]] = {}

    def readers(self, workflow_id: str, run_id: str) -> int:
        """How many readers of the run are open (for tests and benchmarks)."""
        return len(self._readers.get((workflow_id, run_id), []))

    async def follow(
        self, workflow_id: str, run_id: str, after: str | None, source: EventSource
    ) -> AsyncIterator[RunEventItem]:
        """The run's events after `after`, read by the reader this process shares."""
        position = None if after is None else parse_cursor(after)  # InvalidCursor first
        key = (workflow_id, run_id)
        readers = self._readers.setdefault(key, [])
        reader = next((r for r in readers if r.serves(position)), None)
        if reader is None:
            reader = _SharedReader(start=position)
            reader.task = asyncio.create_task(reader.pump(source(after)))
            readers.append(reader)
        reader.followers += 1
        try:
            async for event in reader.follow(position):
                yield event
        finally:
            reader.followers -= 1
            if reader.followers == 0:
                self._close(key, reader)

    def _close(self, key: tuple[str, str], reader: _SharedReader) -> None:
        """Forget a reader no follower uses; stop it if it still reads."""
        readers = self._readers.get(key, [])
        with contextlib.suppress(ValueError):
            readers.remove(reader)
        if not readers:
            self._readers.pop(key, None)
        if reader.task is not None and not reader.task.done():
            reader.task.cancel()
