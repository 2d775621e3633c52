"""`UpdateBatcher`: callers of one entity share updates, one in flight at a time, each
caller gets its own answer in its order, refusals that mean "not applied" are sent
again, and a batch stays within its bounds. No server: `send` is a stand-in."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._activities.update_batches import UpdateBatcher


class Entity:
    """A stand-in for `send`: answers each request with its double, records each batch,
    and counts how many updates were in flight at once."""

    def __init__(self, refusals: list[RPCStatusCode] | None = None) -> None:
        self.batches: list[tuple[str, list[int]]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.refusals = list(refusals or [])

    async def send(self, key: str, requests: list[int]) -> list[int]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if self.refusals:
                raise RPCError("refused", self.refusals.pop(0), b"")
            self.batches.append((key, list(requests)))
            return [2 * r for r in requests]
        finally:
            self.in_flight -= 1


def batcher(entity: Entity, **options: float) -> UpdateBatcher[int, int]:
    return UpdateBatcher(entity.send, size=lambda _: 10, initial_backoff_s=0.001, **options)  # type: ignore[arg-type]


async def test_many_callers_share_few_updates_one_in_flight_each_answered_in_order() -> None:
    entity = Entity()
    batches = batcher(entity)
    answers = await asyncio.gather(*(batches.call("tenant", i) for i in range(200)))
    assert answers == [2 * i for i in range(200)]
    assert entity.most_in_flight == 1
    sent = [r for _, requests in entity.batches for r in requests]
    assert sent == list(range(200))  # each request once, in the order it was queued
    assert len(entity.batches) <= 1 + 200 // batches.max_batch + 1


async def test_each_key_has_its_own_queue() -> None:
    entity = Entity()
    batches = batcher(entity)
    await asyncio.gather(*(batches.call(f"endpoint-{i % 2}", i) for i in range(20)))
    for key, requests in entity.batches:
        assert all(f"endpoint-{r % 2}" == key for r in requests)
    assert entity.most_in_flight == 2


async def test_a_batch_stays_within_its_count_and_its_bytes() -> None:
    entity = Entity()
    by_count = batcher(entity, max_batch=7)
    await asyncio.gather(*(by_count.call("k", i) for i in range(50)))
    assert max(len(requests) for _, requests in entity.batches) <= 7
    entity.batches.clear()
    by_bytes = batcher(entity, max_bytes=35)  # 10 bytes each: 3 fit
    await asyncio.gather(*(by_bytes.call("k", i) for i in range(50)))
    assert max(len(requests) for _, requests in entity.batches) == 3
    entity.batches.clear()
    alone = batcher(entity, max_bytes=5)  # larger than the bound alone: it travels alone
    assert await asyncio.gather(*(alone.call("k", i) for i in range(3))) == [0, 2, 4]
    assert all(len(requests) == 1 for _, requests in entity.batches)


@pytest.mark.parametrize("status", [RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.UNAVAILABLE])
async def test_a_refusal_that_applied_nothing_is_sent_again(status: RPCStatusCode) -> None:
    entity = Entity(refusals=[status, status])
    batches = batcher(entity)
    assert await asyncio.gather(*(batches.call("k", i) for i in range(5))) == [0, 2, 4, 6, 8]
    assert batches.refusals == 2
    assert sorted(r for _, requests in entity.batches for r in requests) == list(range(5))


async def test_any_other_error_reaches_every_caller_of_the_batch_and_the_next_batch_goes_on() -> (
    None
):
    entity = Entity(refusals=[RPCStatusCode.INVALID_ARGUMENT])
    batches = batcher(entity)
    first = [asyncio.ensure_future(batches.call("k", i)) for i in range(3)]
    results = await asyncio.gather(*first, return_exceptions=True)
    assert all(isinstance(r, RPCError) for r in results)
    assert await batches.call("k", 4) == 8


async def test_refusals_past_the_retry_window_reach_the_callers() -> None:
    entity = Entity(refusals=[RPCStatusCode.RESOURCE_EXHAUSTED] * 100)
    batches = batcher(entity, retry_window_s=0.05)
    with pytest.raises(RPCError):
        await batches.call("k", 1)


async def test_a_caller_that_gave_up_before_its_batch_left_is_not_sent() -> None:
    entity = Entity()
    batches = batcher(entity)
    first = asyncio.ensure_future(batches.call("k", 1))  # in flight
    await asyncio.sleep(0)
    gave_up = asyncio.ensure_future(batches.call("k", 2))  # waits for the next batch
    kept = asyncio.ensure_future(batches.call("k", 3))
    await asyncio.sleep(0)
    gave_up.cancel()
    assert await first == 2 and await kept == 6
    assert [r for _, requests in entity.batches for r in requests] == [1, 3]
