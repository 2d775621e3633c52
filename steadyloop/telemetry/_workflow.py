"""Tracing hooks for workflow code: one call at each place a span or a replay-safe metric
belongs (the turn, each attempt, each tool call and its receipt decisions, a breaker
opening). Deterministic and free when telemetry is off.

How a hook knows: a worker with telemetry registers an extern function under
`EXTERN_KEY` (`WorkflowTelemetryInterceptor`); a hook looks it up (a dict read) and,
absent, runs the work as it is. So a worker, a replayer or a test without telemetry never
imports OpenTelemetry into the sandbox, and nothing here schedules a command, sleeps or
draws randomness, so a history replays the same with telemetry on or off.

Why workflow code at all: a replayed tool call, a call waiting for another attempt's
lease, an ambiguous one and the route's decision after a failed attempt are decided by
the workflow, with no activity to carry a span; the interceptor sees only activities.
What makes these spans deterministic is temporalio's replay-safe tracer provider
(`steadyloop.telemetry._install`): ids from the workflow's seeded random, and no span
exported again when its end is reached while replaying history.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

from temporalio import workflow

EXTERN_KEY = "steadyloop.telemetry"

T = TypeVar("T")


class AttemptTrace(Protocol):
    async def scheduled(self, work: Awaitable[T]) -> T: ...

    def ended(self, entry: Any, turn: Any = None) -> None: ...


class WorkflowTracingHooks(Protocol):
    async def turn(self, number: int, stats: Any, work: Awaitable[T]) -> T: ...

    def attempt(
        self, endpoint: str, model: str, sequence: int, on_candidate: int
    ) -> AttemptTrace: ...

    async def tool(
        self, description: Any, invocation: Any, work: Awaitable[T], decided: str | None
    ) -> T: ...

    def receipt_decision(self, kind: str, tool: str) -> None: ...

    def attempt_lost(self, attempt: int, kind: str, text: str) -> None: ...

    def breaker_opened(self, endpoint: str) -> None: ...


def _hooks() -> WorkflowTracingHooks | None:
    found = workflow.extern_functions().get(EXTERN_KEY)
    if found is None:
        return None
    hooks: WorkflowTracingHooks = found()
    return hooks


class _NoAttempt:
    async def scheduled(self, work: Awaitable[T]) -> T:
        return await work

    def ended(self, entry: Any, turn: Any = None) -> None:
        return None


_NO_ATTEMPT = _NoAttempt()


async def traced_turn(number: int, stats: Any, work: Awaitable[T]) -> T:
    """`work` (one model turn) under the turn's span: its attempts are its children."""
    hooks = _hooks()
    if hooks is None:
        return await work
    return await hooks.turn(number, stats, work)


def attempt_trace(endpoint: str, model: str, sequence: int, on_candidate: int) -> AttemptTrace:
    """A span for one model attempt; `scheduled(...)` runs the activity under it (so the
    activity's spans are its children); `ended(route_attempt, turn)` records the failure
    kind and the route's decision, and ends it."""
    hooks = _hooks()
    if hooks is None:
        return _NO_ATTEMPT
    return hooks.attempt(endpoint, model, sequence, on_candidate)


async def traced_tool(
    description: Any, invocation: Any, work: Awaitable[T], *, decided: str | None = None
) -> T:
    """`work` (one tool call under its receipt) under an `execute_tool` span carrying the
    receipt decisions (`decided`: a call answered without asking the ledger, e.g. a
    repeat within one batch, `replay`)."""
    hooks = _hooks()
    if hooks is None:
        return await work
    return await hooks.tool(description, invocation, work, decided)


def receipt_decision(kind: str, tool: str) -> None:
    """The ledger's decision for the current tool call (`execute`, `replay`, `wait`,
    `ambiguous`): on its span, and counted."""
    hooks = _hooks()
    if hooks is not None:
        hooks.receipt_decision(kind, tool)


def attempt_lost(attempt: int, kind: str, text: str) -> None:
    """A tool attempt of the current call ended with no outcome (`kind`: Temporal's
    timeout type, `start_to_close` or `heartbeat`): an event on its `execute_tool` span.

    The attempt's own activity span lived on its worker; a worker killed with SIGKILL
    never exports it, so without this the trace shows no sign of the attempt."""
    hooks = _hooks()
    if hooks is not None:
        hooks.attempt_lost(attempt, kind, text)


def breaker_opened(endpoint: str) -> None:
    hooks = _hooks()
    if hooks is not None:
        hooks.breaker_opened(endpoint)
