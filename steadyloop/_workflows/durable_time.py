"""Time in workflow code that reads the same live and on every replay.

`workflow.now()` is the start time of the workflow task the code runs in. Which task
that is can differ live and on replay: after a local activity, live code can resume
one task later than the replay of the same history does (the task was split while
the activity ran: a query, or a workflow-task heartbeat), so a reading taken there
differs. A branch on such a reading (stop at the deadline or go on, sleep out a lease
or not, plan around an open breaker or probe it) then takes another path on replay:
a nondeterminism error, and Temporal retries that workflow task forever. The run is
wedged, and so are its queries.

Two constructions here make every time-dependent branch the same on replay:

- `Deadline`: one durable timer per execution ends the run's deadline. Code asks
  `passed` (set in the activation where the timer's `TimerFired` lands) or waits on it
  (`wait`), never compares a clock with the deadline. `remaining` gives a timeout's
  length, which replay does not compare.
- `DurableClock`: the time that decisions read (route plans, health freshness, chain
  rules). It moves only at `woke()`, called synchronously right after awaiting a
  regular activity, a child or a timer: the activation an event of history resolves
  is the same live and on replay. Tool calls of a batch run side by side, so a call's
  `woke()` is staged and reaches `now` at `settle()`, which the loop calls once the
  whole batch is done: which call woke first cannot change what any reader sees.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

__all__ = ["Deadline", "DurableClock"]

# A timer must be longer than zero; a deadline already past ends at the next task.
_SHORTEST_TIMER = timedelta(milliseconds=1)


class DurableClock:
    """Workflow time as of the last durable wake (see the module docstring)."""

    def __init__(self) -> None:
        # Built synchronously at the start of `run`: the execution's first activation.
        self._now = workflow.now()
        self._seen = self._now

    @property
    def now(self) -> datetime:
        return self._now

    def woke(self) -> None:
        """Note the time right after an activity, child or timer resolved (never after a
        local activity or a condition: those can resume in another task on replay)."""
        self._seen = max(self._seen, workflow.now())

    def settle(self) -> None:
        """Let readers see what `woke` noted: at once in sequential code, after the batch
        in a batch of concurrent calls."""
        self._now = max(self._now, self._seen)

    def advance(self) -> None:
        """`woke` then `settle`: for the loop's own sequential steps."""
        self.woke()
        self.settle()


class Deadline:
    """The run's deadline, ended by one durable timer (see the module docstring)."""

    def __init__(self, at: datetime | None) -> None:
        self.at = at
        self.passed = False
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the timer that ends the deadline, in the execution's first activation
        (before any await: the one reading of the clock that is the same on replay); a
        run continued as new starts its own for what is left, and one already past its
        deadline starts none."""
        if self.at is None or self._timer is not None:
            return
        left = self.at - workflow.now()
        if left <= timedelta(0):
            self.passed = True
            return
        self._timer = asyncio.create_task(self._expire(left))

    async def _expire(self, left: timedelta) -> None:
        # Replay checks that a timer was started, not its length; the flag is set by the
        # event that fires it.
        await workflow.sleep(max(left, _SHORTEST_TIMER))
        self.passed = True

    def remaining(self, cap: timedelta, slack: timedelta = timedelta(0)) -> timedelta:
        """`cap`, shortened so it ends by the deadline (plus `slack`), at least a second:
        an activity's timeout. A length only: never branch on it."""
        if self.at is None:
            return cap
        left = self.at + slack - workflow.now()
        return max(min(cap, left), timedelta(seconds=1))

    async def wait(self, condition: Callable[[], bool]) -> bool:
        """Wait until `condition()` holds (True) or the deadline passes (False)."""
        if self.at is None:
            await workflow.wait_condition(condition)
            return True
        await workflow.wait_condition(lambda: condition() or self.passed)
        return condition()

    async def sleep(self, duration: timedelta) -> bool:
        """Sleep `duration` unless the deadline passes first; True when it passed."""
        if self.passed:
            return True
        if self.at is None:
            await workflow.sleep(duration)
            return False
        try:
            await workflow.wait_condition(lambda: self.passed, timeout=duration)
        except builtins.TimeoutError:
            return False
        return True
