"""Steering a running run: messages from a person, pause and unpause, interrupt.

Deterministic workflow code. `ToolLoopWorkflow`'s handlers write the requests into one
`Steering`; the loop acts on them at safe points. What the obvious version gets wrong,
and where this one prevents it:

- A message appended the moment it arrives can land between an assistant's tool calls
  and their answers, a transcript every provider refuses. Messages wait in `state`
  and are appended at a turn boundary (`take_messages`); one that arrives while the
  model gives its final answer makes the run go on for another turn rather than being
  dropped (the loop asks `messages_waiting`).
- An interrupt checked only at turn boundaries waits out a model stream or a slow tool.
  `unless_interrupted` races the model turn against the interrupt and cancels it (the
  activity's cancellation closes the stream at its next heartbeat); `settle` does the
  same for a tool batch and answers every call it cancelled, so no call is left
  without its tool message.
- Text a person was reading when they interrupted would be lost to a resumed run. For
  a model turn that forwards output, the loop waits (bounded, `settle_within`) for the
  cancelled activity to end, so its last batch is on the run's output host, and keeps
  what the host retained as the run's partial output.
- A pause that cancels work would lose it. A pause takes effect at the next boundary
  (`hold_while_paused`), when nothing is in flight, and the deadline still runs: a run
  paused past its deadline stops with `deadline`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow

from steadyloop._workflows.durable_time import Deadline

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._run.steering import SteeringState, UserMessage

T = TypeVar("T")


@dataclass(frozen=True)
class Cut:
    """Work an interrupt cancelled; `settled`: its cancellation finished within the bound."""

    settled: bool = True


class Steering:
    """A person's requests to one run, and the waits that honour them."""

    def __init__(self, state: SteeringState | None = None) -> None:
        self.state = state if state is not None else SteeringState()

    # -- what handlers write ---------------------------------------------------------

    def send(self, message: UserMessage) -> int:
        """Queue a user message for the next boundary; how many now wait."""
        self.state.messages.append(ChatMessage(role="user", content=message.content))
        return len(self.state.messages)

    def pause(self) -> bool:
        """Ask for a pause at the next boundary; False when already asked."""
        if self.state.paused:
            return False
        self.state.paused = True
        return True

    def unpause(self) -> bool:
        """Let a paused run go on; False when it was not paused."""
        if not self.state.paused:
            return False
        self.state.paused = False
        return True

    def interrupt(self, reason: str) -> None:
        """Stop the run: the first reason given is the one reported."""
        if self.state.interrupt is None:
            self.state.interrupt = reason.strip() or "interrupted"

    # -- what the loop reads ---------------------------------------------------------

    @property
    def interrupted(self) -> str | None:
        return self.state.interrupt

    @property
    def paused(self) -> bool:
        return self.state.paused

    @property
    def messages_waiting(self) -> int:
        return len(self.state.messages)

    def take_messages(self) -> list[ChatMessage]:
        """The queued messages, oldest first, to append now; the queue is emptied."""
        taken, self.state.messages = self.state.messages, []
        return taken

    async def hold_while_paused(self, deadline: Deadline) -> None:
        """At a boundary: wait while paused, until unpaused, interrupted or the deadline
        (whose passing the loop's bounds then say)."""
        if not self.state.paused:
            return
        await deadline.wait(lambda: not self.state.paused or self.state.interrupt is not None)

    async def unless_interrupted(
        self, work: Awaitable[T], *, settle_within: timedelta | None = None
    ) -> T | Cut:
        """`work`'s result, or `Cut` when an interrupt came first: `work` is cancelled and
        its cancellation waited for, at most `settle_within` when given (`Cut.settled`
        says whether it ended in time; work that waits for an activity to confirm its
        cancel would otherwise wait on a dead worker until the heartbeat timeout). Without
        a bound the wait starts no timer. `work`'s own exceptions propagate."""
        task = asyncio.ensure_future(work)
        try:
            await workflow.wait_condition(lambda: task.done() or self.state.interrupt is not None)
        except asyncio.CancelledError:
            await _cancelled(task)
            raise
        if task.done():
            return task.result()
        return Cut(settled=await _cancelled(task, within=settle_within))

    async def settle(self, tasks: list[asyncio.Task[T]], unfinished: Callable[[], T]) -> list[T]:
        """Every task's result, in order; on an interrupt, the unfinished ones are
        cancelled and answered by `unfinished()` (a task may itself turn its cancellation
        into a result, e.g. a tool whose activity was cancelled mid-run)."""
        if tasks:
            try:
                await workflow.wait_condition(
                    lambda: all(t.done() for t in tasks) or self.state.interrupt is not None
                )
            except asyncio.CancelledError:
                for task in tasks:
                    task.cancel()
                await workflow.wait(tasks)
                raise
        if not all(task.done() for task in tasks):
            for task in tasks:
                task.cancel()
            await workflow.wait(tasks)
        return [unfinished() if task.cancelled() else task.result() for task in tasks]


async def _cancelled(task: asyncio.Task[T], within: timedelta | None = None) -> bool:
    """Cancel `task` and wait until it has ended, whatever it ended with, or `within`
    has passed (then it is left to end on its own); whether it ended."""
    task.cancel()
    await workflow.wait([task], timeout=None if within is None else within.total_seconds())
    if not task.done():
        return False
    if not task.cancelled():
        task.exception()  # retrieved: an error of cancelled work is not reported twice
    return True
