"""Many callers, few updates: coalesce what one process sends to one entity workflow.

The admission and health entities are single workflows every run talks to, through an
update each. What the obvious version (one update per caller) gets wrong, and where it
is prevented:

- **The in-flight ceiling.** Temporal admits at most 10 updates in flight per workflow
  (the dev server's `history.maxInFlightUpdates`); past that it refuses
  (RESOURCE_EXHAUSTED), and 100 runs reporting an outage at once are refused, retried
  by the client, aborted and retried again until the entity wedges. Here
  each process sends at most one update per entity at a time (`UpdateBatcher`): callers
  that arrive meanwhile wait in a queue, and the next update carries all of them (up to
  `max_batch` and `max_bytes`), so 500 callers cost a handful of updates, not 500.
- **Refusals past one process.** Many worker processes can still exceed the ceiling
  together, and an update in flight is aborted when the entity continues as new. Both
  refusals (RESOURCE_EXHAUSTED; UNAVAILABLE "update was aborted"; FAILED_PRECONDITION
  while the entity's workflow task is retried; an update RPC that timed out) say the
  update was not applied, so the batch is sent again after a jittered
  backoff (`retry_window_s` at most), then the callers see the last error.
- **Order and exactness.** The entity decides a batch's requests one at a time, in the
  order they were queued, exactly as it decided the same requests sent one by one: a
  batch changes how requests travel, never how they are counted.
- **A caller that gave up.** A caller cancelled while it waited (its activity timed
  out, and will be retried) is dropped from the queue before its batch is sent, so the
  retry does not find its first attempt counted already.
- **A hostile payload.** A batch stays under `max_bytes` (Temporal refuses a payload over
  2 MB and warns at 256 KB), and a request larger than that alone travels alone.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_MAX_BYTES", "UpdateBatcher", "refused_not_applied"]

Req = TypeVar("Req")
Ans = TypeVar("Ans")

DEFAULT_MAX_BATCH = 50
DEFAULT_MAX_BYTES = 200_000
# Refusals that mean "not applied, send again": the in-flight ceiling and an aborted update.
# FAILED_PRECONDITION: "Workflow Task in failed state", an entity whose task is retried
# (a worker too slow for its task timeout): the update was not admitted.
NOT_APPLIED = (
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.FAILED_PRECONDITION,
)


def refused_not_applied(error: BaseException) -> bool:
    """True for a refusal after which the update is known not to have been applied (or,
    for a timed-out RPC, is safe to send again: the entities' requests are idempotent)."""
    if isinstance(error, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    return isinstance(error, RPCError) and error.status in NOT_APPLIED


@dataclass
class _Queue(Generic[Req, Ans]):
    waiting: list[tuple[Req, int, asyncio.Future[Ans]]] = field(default_factory=list)
    sender: asyncio.Task[None] | None = None


class UpdateBatcher(Generic[Req, Ans]):
    """Queue `call(key, request)` and send the queue of each `key` as one batch at a time.

    `send(key, requests)` sends one update and returns one answer per request, in order.
    `size(request)` is its serialized size in bytes (for `max_bytes`).
    """

    def __init__(
        self,
        send: Callable[[str, list[Req]], Awaitable[list[Ans]]],
        *,
        size: Callable[[Req], int],
        max_batch: int = DEFAULT_MAX_BATCH,
        max_bytes: int = DEFAULT_MAX_BYTES,
        retry_window_s: float = 20.0,
        initial_backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
    ) -> None:
        if max_batch < 1 or max_bytes < 1:
            raise ValueError(f"max_batch and max_bytes must be 1 or more: {max_batch}, {max_bytes}")
        self._send = send
        self._size = size
        self.max_batch = max_batch
        self.max_bytes = max_bytes
        self.retry_window_s = retry_window_s
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._queues: dict[str, _Queue[Req, Ans]] = {}
        # What happened, for tests and benchmarks.
        self.updates_sent = 0
        self.refusals = 0

    async def call(self, key: str, request: Req) -> Ans:
        """The answer to `request`, sent in the next batch of `key`."""
        queue = self._queues.setdefault(key, _Queue())
        answered: asyncio.Future[Ans] = asyncio.get_running_loop().create_future()
        queue.waiting.append((request, self._size(request), answered))
        if queue.sender is None or queue.sender.done():
            queue.sender = asyncio.create_task(self._drain(key, queue))
        # Cancelled while queued: `_take` drops the request. Cancelled once its batch
        # left: the entity decides it anyway (the batch is one update).
        return await answered

    def _take(self, queue: _Queue[Req, Ans]) -> list[tuple[Req, int, asyncio.Future[Ans]]]:
        """The next batch: at least one request, then as many as fit (callers that gave
        up are dropped). Empty when every caller waiting gave up."""
        queue.waiting = [item for item in queue.waiting if not item[2].done()]
        if not queue.waiting:
            return []
        taken = [queue.waiting[0]]
        total = taken[0][1]
        for item in queue.waiting[1:]:
            if len(taken) >= self.max_batch or total + item[1] > self.max_bytes:
                break
            taken.append(item)
            total += item[1]
        del queue.waiting[: len(taken)]
        return taken

    async def _drain(self, key: str, queue: _Queue[Req, Ans]) -> None:
        while queue.waiting:
            batch = self._take(queue)
            if not batch:
                return
            try:
                answers = await self._send_again_when_refused(key, [r for r, _, _ in batch])
                if len(answers) != len(batch):
                    raise RuntimeError(
                        f"the entity {key!r} answered {len(answers)} of {len(batch)} requests"
                    )
            except BaseException as error:  # every caller of the batch learns it
                for _, _, answered in batch:
                    if not answered.done():
                        answered.set_exception(error)
                if isinstance(error, asyncio.CancelledError):
                    raise
                continue
            for (_, _, answered), one in zip(batch, answers, strict=True):
                if not answered.done():
                    answered.set_result(one)

    async def _send_again_when_refused(self, key: str, requests: list[Req]) -> list[Ans]:
        give_up = time.monotonic() + self.retry_window_s
        backoff = self.initial_backoff_s
        while True:
            self.updates_sent += 1
            try:
                return await self._send(key, requests)
            except Exception as error:
                if not refused_not_applied(error) or time.monotonic() + backoff > give_up:
                    raise
                self.refusals += 1
            await asyncio.sleep(backoff * (0.5 + random.random()))  # jitter spreads workers
            backoff = min(backoff * 2, self.max_backoff_s)
