"""Which call a tool is answering, and (for resumable tools) what earlier attempts did.

A tool's parameters are what the model chose. What the run knows about the call (its
id, the workflow id, the tenant) is not the model's to choose, so it does not travel as
an argument: the run-tool activity sets it here for the duration of the call, and tool
code reads it with `current_invocation()` (for example to tag a side effect with the
call id, or to scope it to a tenant). Outside a tool call it raises, rather than
returning a made-up invocation.

A tool declared `effect="resumable"` also gets `current_progress()`, the trail that
lets a reclaimed attempt skip what already happened:

    @tool(effect="resumable", heartbeat_timeout=timedelta(seconds=10))
    async def send_batch(recipients: list[str]) -> str:
        progress = current_progress()
        for recipient in recipients:
            if progress.done(recipient):
                continue                        # an earlier attempt sent it
            await send(recipient, idempotency_key=f"{progress.idempotency_key}:{recipient}")
            progress.record(recipient)          # after the effect, never before
        return "sent"

`record(step)` appends `step` to the attempt's list (which starts as the steps every
earlier attempt recorded) and heartbeats the *whole* list, so the last heartbeat
details of any attempt carry every completed sub-operation; the workflow stores them in
the call's receipt when an attempt is lost and hands them back as `previous` on the
attempt that reclaims it. What the obvious version gets wrong, and where this one
prevents it:

- Heartbeating only the new step: the last heartbeat details would hold one step, and
  a reclaim would repeat all the others. `record` always sends the full list.
- A reclaimed attempt that dies before its first `record`: its heartbeat details are
  empty, and the trail of the attempts before it would be lost. The run-tool activity
  heartbeats `previous` as soon as a reclaimed attempt starts.
- A step that is not JSON (a tuple, a set, NaN, an object), that nests deeper than
  `MAX_DEPTH` (64, steadyloop's one depth limit, lists and objects alike), or that
  holds a lone surrogate: the receipt cannot store it when the workflow reads it, long
  after the tool returned, and the reclaim repeats work (a deep one even failed the
  workflow's decoding of the heartbeat). `record` refuses it at once with
  `CanonicalJsonError`, naming where and why, before heartbeating. This is the one
  place the limit is enforced on a trail; the workflow only reads what arrives, and
  ignores (keeps the previous snapshot of) what a foreign worker sent that it cannot
  store.
- A trail larger than the receipt ledger keeps (`DEFAULT_PROGRESS_LIMIT_BYTES`): the
  ledger would keep an older snapshot and the reclaim would repeat steps. `record`
  raises `ProgressTooLarge`; record small identifiers (a recipient, a page number),
  never results.
- `done(step)` compared with `==` on values that crossed JSON twice (the heartbeat and
  the next invocation): `{"a": 1, "b": 2}` and `{"b": 2, "a": 1}` are one step, `1`
  and `1.0` are not. Steps are compared by their canonical JSON text.
- Recording the same step twice grows the trail for nothing: it is a no-op (the list
  is still heartbeated).

What no context can prevent, stated: Temporal's SDK throttles heartbeats (to 80% of the
heartbeat timeout, at most the worker's `max_heartbeat_throttle_interval`), so a worker
killed within that window after a `record` may not have sent it, and the reclaimed
attempt repeats that step. Pass `idempotency_key` (plus the step) to services that
deduplicate, so that window costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic import JsonValue

from steadyloop._receipts.canonical_json import MAX_DEPTH, canonical_json
from steadyloop._receipts.ledger import DEFAULT_PROGRESS_LIMIT_BYTES
from steadyloop.errors import SteadyloopError
from steadyloop.tools._payloads import ToolInvocation

__all__ = [
    "ProgressTooLarge",
    "ToolProgress",
    "current_invocation",
    "current_progress",
    "invocation_scope",
]

Heartbeat = Callable[[list[JsonValue]], None]

_current: ContextVar[ToolInvocation | None] = ContextVar("steadyloop_tool_invocation", default=None)
_progress: ContextVar[ToolProgress | None] = ContextVar("steadyloop_tool_progress", default=None)


class ProgressTooLarge(SteadyloopError, ValueError):
    """The recorded trail would exceed what the receipt ledger keeps for it."""


class ToolProgress:
    """The sub-operations of one resumable call: recorded by earlier attempts, and by this one.

    `heartbeat` receives the full list after every `record` (the run-tool activity passes
    `temporalio.activity.heartbeat`). `limit_bytes` bounds the canonical JSON of the list.
    """

    def __init__(
        self,
        invocation: ToolInvocation,
        heartbeat: Heartbeat,
        *,
        limit_bytes: int = DEFAULT_PROGRESS_LIMIT_BYTES,
    ) -> None:
        self._invocation = invocation
        self._heartbeat = heartbeat
        self._limit_bytes = limit_bytes
        self._previous: tuple[JsonValue, ...] = tuple(invocation.previous_progress)
        self._steps: list[JsonValue] = list(invocation.previous_progress)
        self._texts: set[str] = {canonical_json(step) for step in self._steps}
        self._size = len(canonical_json(self._steps))

    @property
    def attempt(self) -> int:
        """The receipt's attempt number (1 for the first run of this call)."""
        return self._invocation.attempt

    @property
    def idempotency_key(self) -> str | None:
        """A key stable for the receipt across attempts (the loop always sets it)."""
        return self._invocation.idempotency_key

    @property
    def reclaimed(self) -> bool:
        """This attempt took over from one that lost its lease (it may still be running)."""
        return self._invocation.reclaimed

    @property
    def previous(self) -> list[JsonValue]:
        """The steps earlier attempts recorded, oldest first (a copy)."""
        return list(self._previous)

    @property
    def recorded(self) -> list[JsonValue]:
        """Every step recorded so far, by earlier attempts and this one (a copy)."""
        return list(self._steps)

    def done(self, step: JsonValue) -> bool:
        """Whether `step` was recorded, by an earlier attempt or this one."""
        return canonical_json(step) in self._texts

    def record(self, step: JsonValue) -> None:
        """Record `step` as done and heartbeat the full list. Call it after the effect.

        Raises `CanonicalJsonError` for a value the receipt cannot store (not JSON, too
        deep, a lone surrogate) and `ProgressTooLarge` when the list would outgrow what
        the receipt keeps; neither heartbeats.
        """
        # The step sits one level inside the trail: the trail must fit MAX_DEPTH.
        text = canonical_json(step, max_depth=MAX_DEPTH - 1, utf8=True)
        if text not in self._texts:
            # Appending one element to a JSON array adds its text and one comma.
            size = self._size + len(text) + (1 if self._steps else 0)
            if size > self._limit_bytes:
                raise ProgressTooLarge(
                    f"recording {text[:80]!r} would make the progress of this call {size} "
                    f"bytes, over the {self._limit_bytes} a receipt keeps; record short "
                    "identifiers of sub-operations (a recipient, a page number), not results"
                )
            self._steps.append(step)
            self._texts.add(text)
            self._size = size
        self._heartbeat(list(self._steps))

    def keep_alive(self) -> None:
        """Heartbeat the full list without recording anything (during a long step)."""
        self._heartbeat(list(self._steps))


def current_invocation() -> ToolInvocation:
    """The invocation being run. Raises `RuntimeError` when called outside a tool call."""
    invocation = _current.get()
    if invocation is None:
        raise RuntimeError("current_invocation() is only available while a tool call runs")
    return invocation


def current_progress() -> ToolProgress:
    """The progress of the resumable call being run.

    Raises `RuntimeError` outside a tool call, and inside a tool not declared
    `effect="resumable"` (only resumable calls are reclaimed with their progress; for
    any other effect a recorded trail would be ignored).
    """
    progress = _progress.get()
    if progress is not None:
        return progress
    if _current.get() is None:
        raise RuntimeError("current_progress() is only available while a tool call runs")
    raise RuntimeError(
        "current_progress() is only available in tools declared @tool(effect='resumable'): "
        "only a resumable call is reclaimed with the sub-operations it recorded"
    )


@contextmanager
def invocation_scope(
    invocation: ToolInvocation, progress: ToolProgress | None = None
) -> Iterator[None]:
    """Make `invocation` (and, for a resumable tool, `progress`) current for the body."""
    token = _current.set(invocation)
    progress_token = _progress.set(progress)
    try:
        yield
    finally:
        _progress.reset(progress_token)
        _current.reset(token)
