"""Fan-out: one read of a run's log per process, bounded memory, no loss on reconnect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from web_fake_backend import FakeRun, cursor

from steadyloop.web.backend import StreamEvent
from steadyloop.web.fanout import FeedRegistry


def source_of(run: FakeRun) -> object:
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


async def collect(feeds: FeedRegistry, run: FakeRun, after: str | None) -> list[str]:
    got = []
    async for event in feeds.events("run", source_of(run), after):  # type: ignore[arg-type]
        got.append(event.cursor)
    return got


async def test_many_clients_of_one_run_share_one_read_of_its_log() -> None:
    run = FakeRun("r", "hi")
    feeds = FeedRegistry(buffer=64)
    clients = [asyncio.create_task(collect(feeds, run, None)) for _ in range(20)]
    await asyncio.sleep(0.01)
    for n in range(30):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
        await asyncio.sleep(0)
    run.publish("stop", turn=0, reason="final_answer")
    results = await asyncio.gather(*clients)
    assert all(result == [cursor(n) for n in range(31)] for result in results)
    assert run.reads == 1
    assert feeds.feeds == {}  # forgotten once the last client left


async def test_a_client_joining_late_within_the_buffer_reads_from_it() -> None:
    run = FakeRun("r", "hi")
    feeds = FeedRegistry(buffer=64)
    first = asyncio.create_task(collect(feeds, run, None))
    await asyncio.sleep(0.01)
    for n in range(10):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
    await asyncio.sleep(0.01)
    late = asyncio.create_task(collect(feeds, run, cursor(4)))
    await asyncio.sleep(0.01)
    run.publish("stop", turn=0, reason="final_answer")
    assert await first == [cursor(n) for n in range(11)]
    assert await late == [cursor(n) for n in range(5, 11)]
    assert run.reads == 1


async def test_a_cursor_out_of_the_buffers_reach_catches_up_alone_then_joins() -> None:
    run = FakeRun("r", "hi")
    feeds = FeedRegistry(buffer=4)
    first = asyncio.create_task(collect(feeds, run, None))
    await asyncio.sleep(0.01)
    for n in range(12):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
    await asyncio.sleep(0.01)
    behind = asyncio.create_task(collect(feeds, run, cursor(1)))
    await asyncio.sleep(0.01)
    for n in range(12, 20):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
        await asyncio.sleep(0)
    run.publish("stop", turn=0, reason="final_answer")
    assert await first == [cursor(n) for n in range(21)]
    assert await behind == [cursor(n) for n in range(2, 21)]
    assert run.reads == 2  # its own catch-up; nobody else's read
    assert len(feeds.feeds) == 0


async def test_a_client_that_stops_reading_holds_nothing_and_resumes_without_loss() -> None:
    run = FakeRun("r", "hi")
    feeds = FeedRegistry(buffer=8)
    steady = asyncio.create_task(collect(feeds, run, None))
    stalled = feeds.events("run", source_of(run), None)  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    run.publish("text_delta", turn=0, attempt=0, text="0")
    seen = [(await anext(stalled)).cursor]  # it reads one, then stops reading
    for n in range(1, 40):
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
        await asyncio.sleep(0)
    feed = feeds.feeds["run"]
    assert len(feed.events) <= 8  # the run's memory stays bounded, however far it lags
    assert run.reads == 1
    run.publish("stop", turn=0, reason="final_answer")

    async def drain() -> None:
        async for event in stalled:
            seen.append(event.cursor)

    await asyncio.wait_for(drain(), 5)  # it reads on: from the log alone, then the feed
    assert seen == [cursor(n) for n in range(41)]
    assert await steady == [cursor(n) for n in range(41)]
    assert run.reads == 2 and feeds.own_reads == 1


async def test_a_burst_larger_than_the_buffer_loses_nothing_for_any_client() -> None:
    run = FakeRun("r", "hi")
    feeds = FeedRegistry(buffer=4)
    clients = [asyncio.create_task(collect(feeds, run, None)) for _ in range(5)]
    await asyncio.sleep(0.01)
    for n in range(200):  # published with no pause: a poll that brought many events
        run.publish("text_delta", turn=0, attempt=0, text=str(n))
    run.publish("stop", turn=0, reason="final_answer")
    results = await asyncio.wait_for(asyncio.gather(*clients), 10)
    assert all(result == [cursor(n) for n in range(201)] for result in results)
