"""`EventFanout`: followers of one run in one process share one reader of its log, and
each still reads every event after its own cursor, in order, once, with bounded memory
and no loss for a follower that falls behind or reconnects. No server: the reader is a
stand-in fed by the test (the run's log, or a web backend's stream of it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from web_fake_backend import FakeRun
from web_fake_backend import cursor as web_cursor

from steadyloop._web.backend import StreamEvent
from steadyloop.client._fanout import EventFanout
from steadyloop.events import (
    Cursor,
    CursorExpired,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    format_cursor,
)


def delta(offset: int) -> TextDeltaEvent:
    return TextDeltaEvent(turn=1, attempt=1, text=f"t{offset} ", cursor=cursor(offset))


def cursor(offset: int) -> str:
    return format_cursor(Cursor(0, offset))


class Log:
    """A stand-in for the run's log: what the test has published, read after a cursor."""

    def __init__(self) -> None:
        self.items: list[RunEventItem] = []
        self.grew = asyncio.Event()
        self.opened: list[str | None] = []
        self.closed = 0
        self.fail: BaseException | None = None

    def publish(self, *items: RunEventItem) -> None:
        self.items.extend(items)
        self.grew.set()
        self.grew = asyncio.Event()

    async def read(self, after: str | None) -> AsyncIterator[RunEventItem]:
        self.opened.append(after)
        index = 0 if after is None else int(after.split("-")[1]) + 1
        try:
            while True:
                while index < len(self.items):
                    item = self.items[index]
                    index += 1
                    yield item
                    if isinstance(item, StopEvent):
                        return
                if self.fail is not None:
                    raise self.fail
                await self.grew.wait()
        finally:
            self.closed += 1


async def collect(events: AsyncIterator[RunEventItem], into: list[RunEventItem]) -> None:
    async for event in events:
        into.append(event)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_followers_share_one_reader_and_each_reads_every_event_once() -> None:
    log, fanout = Log(), EventFanout()
    first: list[RunEventItem] = []
    second: list[RunEventItem] = []
    late: list[RunEventItem] = []
    tasks = [
        asyncio.create_task(collect(fanout.follow("run", "r1", None, log.read), first)),
        asyncio.create_task(collect(fanout.follow("run", "r1", None, log.read), second)),
    ]
    log.publish(delta(0), delta(1), delta(2))
    await settle()
    # A follower that read up to event 1 elsewhere comes back with its cursor.
    tasks.append(
        asyncio.create_task(collect(fanout.follow("run", "r1", cursor(1), log.read), late))
    )
    await settle()
    stop = StopEvent(turn=1, reason="final_answer", cursor=cursor(3))
    log.publish(stop)
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    everything = [delta(0), delta(1), delta(2), stop]
    assert first == everything and second == everything
    assert late == everything[2:]
    assert log.opened == [None]  # one reader for the three of them
    assert fanout.readers("run", "r1") == 0  # finished and left: nothing held


async def test_a_cursor_older_than_the_shared_reader_gets_a_reader_of_its_own() -> None:
    log, fanout = Log(), EventFanout()
    log.publish(delta(0), delta(1), delta(2))
    recent: list[RunEventItem] = []
    older: list[RunEventItem] = []
    a = asyncio.create_task(collect(fanout.follow("run", "r1", cursor(1), log.read), recent))
    await settle()
    b = asyncio.create_task(collect(fanout.follow("run", "r1", cursor(0), log.read), older))
    await settle()
    log.publish(StopEvent(turn=1, reason="final_answer", cursor=cursor(3)))
    await asyncio.wait_for(asyncio.gather(a, b), 5)
    assert [e.cursor for e in recent] == [cursor(2), cursor(3)]
    assert [e.cursor for e in older] == [cursor(1), cursor(2), cursor(3)]
    assert log.opened == [cursor(1), cursor(0)]


async def test_the_readers_error_reaches_every_follower() -> None:
    log, fanout = Log(), EventFanout()
    outcomes: list[list[RunEventItem]] = [[], []]
    tasks = [
        asyncio.create_task(collect(fanout.follow("run", "r1", None, log.read), into))
        for into in outcomes
    ]
    log.publish(delta(0))
    await settle()
    log.fail = CursorExpired(cursor(0), cursor(5), "the host dropped older items")
    log.publish()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
    assert all(isinstance(r, CursorExpired) for r in results)
    assert outcomes == [[delta(0)], [delta(0)]]
    # A follower that comes after the failure reads for itself.
    log.fail = None
    log.publish(StopEvent(turn=1, reason="final_answer", cursor=cursor(1)))
    again = [e async for e in fanout.follow("run", "r1", cursor(0), log.read)]
    assert [e.cursor for e in again] == [cursor(1)] and log.opened == [None, cursor(0)]


async def test_a_reader_nobody_follows_any_more_is_stopped() -> None:
    log, fanout = Log(), EventFanout()
    log.publish(delta(0), delta(1))
    seen: list[RunEventItem] = []
    async for event in fanout.follow("run", "r1", None, log.read):
        seen.append(event)
        break  # the only follower leaves mid-run
    await settle()
    assert seen == [delta(0)]
    assert log.closed == 1 and fanout.readers("run", "r1") == 0


async def test_runs_do_not_share_readers_and_a_garbled_cursor_is_refused() -> None:
    log, fanout = Log(), EventFanout()
    log.publish(StopEvent(turn=1, reason="final_answer", cursor=cursor(0)))
    one = [e async for e in fanout.follow("run", "r1", None, log.read)]
    other = [e async for e in fanout.follow("run", "r2", None, log.read)]
    assert one == other and log.opened == [None, None]
    with pytest.raises(ValueError, match="EPOCH-OFFSET"):
        async for _ in fanout.follow("run", "r1", "not-a-cursor", log.read):
            pass


# -- bounded: one feed per run, a buffer, catch-up alone -------------------------------


def source_of(run: FakeRun) -> Callable[[str | None], AsyncIterator[StreamEvent]]:
    async def source(after: str | None) -> AsyncIterator[StreamEvent]:
        run.reads += 1
        index = 0 if after is None else int(after[7:]) + 1
        while True:
            while index < len(run.events):
                yield run.events[index]
                index += 1
            if run.ended:
                return
            run.changed.clear()
            await run.changed.wait()

    return source


async def cursors(fanout: EventFanout, run: FakeRun, after: str | None) -> list[str]:
    got = []
    async for event in fanout.follow("run", "r1", after, source_of(run)):
        got.append(event.cursor)
    return got


async def test_many_clients_of_one_run_share_one_read_of_its_log() -> None:
    run = FakeRun("r", "hi")
    fanout = EventFanout(buffer=64)
    clients = [asyncio.create_task(cursors(fanout, run, None)) for _ in range(20)]
    await asyncio.sleep(0.01)
    for n in range(30):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
        await asyncio.sleep(0)
    run.publish("stop", turn=0, reason="final_answer")
    results = await asyncio.gather(*clients)
    assert all(result == [web_cursor(n) for n in range(31)] for result in results)
    assert run.reads == 1
    assert fanout.readers("run", "r1") == 0  # forgotten once the last client left


async def test_a_client_joining_late_within_the_buffer_reads_from_it() -> None:
    run = FakeRun("r", "hi")
    fanout = EventFanout(buffer=64)
    first = asyncio.create_task(cursors(fanout, run, None))
    await asyncio.sleep(0.01)
    for n in range(10):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
    await asyncio.sleep(0.01)
    late = asyncio.create_task(cursors(fanout, run, web_cursor(4)))
    await asyncio.sleep(0.01)
    run.publish("stop", turn=0, reason="final_answer")
    assert await first == [web_cursor(n) for n in range(11)]
    assert await late == [web_cursor(n) for n in range(5, 11)]
    assert run.reads == 1


async def test_a_cursor_out_of_the_buffers_reach_catches_up_alone_then_joins() -> None:
    run = FakeRun("r", "hi")
    fanout = EventFanout(buffer=4)
    first = asyncio.create_task(cursors(fanout, run, None))
    await asyncio.sleep(0.01)
    for n in range(12):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
    await asyncio.sleep(0.01)
    behind = asyncio.create_task(cursors(fanout, run, web_cursor(1)))
    await asyncio.sleep(0.01)
    for n in range(12, 20):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
        await asyncio.sleep(0)
    run.publish("stop", turn=0, reason="final_answer")
    assert await first == [web_cursor(n) for n in range(21)]
    assert await behind == [web_cursor(n) for n in range(2, 21)]
    assert run.reads == 2  # its own catch-up; nobody else's read
    assert fanout.readers("run", "r1") == 0


async def test_a_client_that_stops_reading_holds_nothing_and_resumes_without_loss() -> None:
    run = FakeRun("r", "hi")
    fanout = EventFanout(buffer=8)
    steady = asyncio.create_task(cursors(fanout, run, None))
    stalled = fanout.follow("run", "r1", None, source_of(run))
    await asyncio.sleep(0.01)
    run.publish("text_delta", turn=0, attempt=0, text="0")
    seen = [(await anext(stalled)).cursor]  # it reads one, then stops reading
    for n in range(1, 40):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
        await asyncio.sleep(0)
    (feed,) = fanout._feeds.values()
    assert len(feed.events) <= 8  # the run's memory stays bounded, however far it lags
    assert run.reads == 1
    run.publish("stop", turn=0, reason="final_answer")

    async def drain() -> None:
        async for event in stalled:
            seen.append(event.cursor)

    await asyncio.wait_for(drain(), 5)  # it reads on: from the log alone, then the feed
    assert seen == [web_cursor(n) for n in range(41)]
    assert await steady == [web_cursor(n) for n in range(41)]
    assert run.reads == 2 and fanout.own_reads == 1


async def test_a_burst_larger_than_the_buffer_loses_nothing_for_any_client() -> None:
    run = FakeRun("r", "hi")
    fanout = EventFanout(buffer=4)
    clients = [asyncio.create_task(cursors(fanout, run, None)) for _ in range(5)]
    await asyncio.sleep(0.01)
    for n in range(200):  # published with no pause: a poll that brought many events
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
    run.publish("stop", turn=0, reason="final_answer")
    results = await asyncio.wait_for(asyncio.gather(*clients), 10)
    assert all(result == [web_cursor(n) for n in range(201)] for result in results)
