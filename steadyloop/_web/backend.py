"""What the HTTP layer asks of runs: one protocol, so routes never touch Temporal directly.

The server keeps no state of its own. Every route is a call on a `RunBackend`, and the
backend reaches Temporal through the client API (`steadyloop._web.client_backend`); the
tests drive the same routes over an in-memory backend. Every call names the tenant the
request's token belongs to, never one from a body: a backend answers `ThreadNotFound`
for a thread of another tenant exactly as for one that does not exist, so no route can
tell a foreign id from an unknown one.

The errors here are the typed outcomes a route turns into a status (`steadyloop._web.
errors` holds the mapping), so the raising site and the answering site cannot drift.
They are the HTTP layer's own refusals, not the client API's errors under another
name: each carries a message safe to show the tenant (thread ids and run numbers, never
a workflow id or a namespace) and maps to one status, and one may stand for several
client errors (`RunClosed` is both `RunEnded` and `ThreadCannotContinue`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from steadyloop.errors import SteadyloopError

__all__ = [
    "CursorTooOld",
    "Decision",
    "NoWorkerToRead",
    "NotTheCall",
    "RunBackend",
    "RunClosed",
    "RunInFlight",
    "Started",
    "StreamEvent",
    "ThreadNotFound",
    "TooManyRuns",
    "UnknownCall",
    "UnknownRun",
    "WaitingForWorker",
]


class StreamEvent(BaseModel):
    """One event of a run's log as the HTTP layer sends it.

    `cursor` is the SSE `id:`, opaque and safe in an SSE field (no line break, no NUL);
    `type` is the SSE `event:`; `data` is the event's JSON.
    """

    model_config = ConfigDict(frozen=True)

    cursor: str
    type: str
    data: dict[str, Any]


class Started(BaseModel):
    """What starting (or steering) a thread's run did."""

    model_config = ConfigDict(frozen=True)

    thread_id: str
    run_id: str
    # started: a new run; attached: the idempotency key's run, already started;
    # steered: the message goes to the running run at its next turn boundary.
    outcome: Literal["started", "attached", "steered"]


class Decision(BaseModel):
    """A steering request's answer: recorded now, or accepted and waiting for a worker."""

    model_config = ConfigDict(frozen=True)

    status: Literal["recorded", "waiting_for_worker"]
    detail: str = ""


class BackendError(SteadyloopError):
    """A request the backend refused; the message is safe to show the caller."""


class ThreadNotFound(BackendError):
    """No such thread for this tenant (another tenant's thread included)."""


class UnknownRun(BackendError):
    """No such run on this thread (404 `run_not_found`; the client API's `RunNotFound`
    names a workflow id and a namespace, which a tenant is not shown)."""


class RunInFlight(BackendError):
    """A run of the thread is in flight; `run_id` names it."""

    def __init__(self, message: str, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class RunClosed(BackendError):
    """The run the request needs has ended and can change nothing (409 `run_ended`): the
    client API's `RunEnded` for a decision, `ThreadCannotContinue` for a new message."""


class UnknownCall(BackendError):
    """No call of that id waits for a decision (or no receipt of that key is ambiguous)."""


class NotTheCall(BackendError):
    """The call waiting under that id is not the one reviewed; `waiting` is what waits."""

    def __init__(self, message: str, waiting: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.waiting = waiting


class WaitingForWorker(BackendError):
    """No worker accepted the request within the bound; it is kept and applied later."""


class NoWorkerToRead(BackendError):
    """What the request needs from the run could not be read in time (no worker answers
    its queries or its log's host); nothing was changed. A decision naming its tool and
    turn needs no read, and is kept for a worker."""


class CursorTooOld(BackendError):
    """The cursor is older than what the log retains; `oldest` is the oldest held (410
    `cursor_expired`: the event log's `CursorExpired`, as a route answers it)."""

    def __init__(self, message: str, oldest: str | None) -> None:
        super().__init__(message)
        self.oldest = oldest  # None: the log holds nothing of the run any more


class BadCursor(BackendError):
    """The cursor is not one this log could have written."""


class TooManyRuns(BackendError):
    """The tenant's rate or ceiling refused a new run; retry after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RunRequest(BaseModel):
    """What a person asks a thread for: a message, and the run's few public options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: str = Field(min_length=1)
    steer: bool = False
    model: str | None = None
    endpoint: str | None = None
    max_turns: int | None = Field(default=None, ge=1, le=1000)
    # Ignored: the tenant is the bearer token's, never the body's. Accepted (not refused
    # as an unknown field) so a client that sends it still works, and is never read.
    tenant_id: SkipJsonSchema[Any] = Field(default=None, exclude=True)


class RunBackend(Protocol):
    """Runs on threads, for one tenant per call. Every method may raise a `BackendError`."""

    async def create_thread(self, tenant: str, thread_id: str | None) -> str: ...

    async def thread(self, tenant: str, thread_id: str) -> dict[str, Any]: ...

    async def start(
        self, tenant: str, thread_id: str, request: RunRequest, idempotency_key: str | None
    ) -> Started: ...

    def events(
        self, tenant: str, thread_id: str, run_id: str, after: str | None
    ) -> AsyncGenerator[StreamEvent, None]: ...

    async def check_run(self, tenant: str, thread_id: str, run_id: str) -> None: ...

    async def snapshot(self, tenant: str, thread_id: str, run_id: str) -> dict[str, Any]: ...

    async def decide(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        call_id: str,
        *,
        approved: bool,
        sha256: str,
        reason: str | None,
        idempotency_key: str | None,
        tool: str | None = None,
        turn: int | None = None,
    ) -> Decision: ...

    async def steer(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        action: Literal["interrupt", "pause", "unpause", "send"],
        text: str | None,
        idempotency_key: str | None,
    ) -> Decision: ...

    async def resolve_receipt(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        key: str,
        resolution: dict[str, Any],
        idempotency_key: str | None,
    ) -> Decision: ...
