"""The `RunBackend` the server runs on: the client API (`steadyloop.client`) and the run's
event log reader (`steadyloop.client._event_log`), with tenancy on top.

Nothing here is kept between requests but the serving worker's description (the run
defaults it answers, asked once). Tenancy is by construction, not by lookup:

- A tenant's thread `T` is the client thread `web/<tenant>/T`, so its runs are
  workflows `web/<tenant>/T/<n>`: a request of another tenant names other workflows and
  finds nothing.
- A thread id the server hands out carries a tag, `name~<12 hex>`, the sha256 of the
  tenant and the name. Another tenant's id fails the tag on every route, starting a
  run included, so it answers 404 rather than opening a thread of the same name in the
  asking tenant's space (which would leak nothing, but would not be "not found").
- The run's `tenant_id` is the token's tenant, so receipts and chain admission count
  per tenant.

Root runs started here are admitted by the tenant's chain admission entity under the
tenant's `tenant_rate` and `tenant_ceiling` (`steadyloop._web.admission`) before they
start; a refusal is 429 with the rule's retry time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._receipts.ledger import AmbiguityResolution
from steadyloop._run.steering import PendingApproval
from steadyloop._serving import WorkerDescription
from steadyloop._web.admission import RootAdmission
from steadyloop._web.backend import (
    BackendError,
    BadCursor,
    CursorTooOld,
    Decision,
    NotTheCall,
    NoWorkerToRead,
    RunClosed,
    RunInFlight,
    RunRequest,
    Started,
    StreamEvent,
    ThreadNotFound,
    UnknownCall,
    UnknownRun,
    WaitingForWorker,
)
from steadyloop._web.thread_ids import THREAD_PREFIX, thread_tag, web_thread_id
from steadyloop.client import (
    NotTheCallReviewed,
    NoWorkerAnswered,
    RequestRefused,
    RunEnded,
    RunFailed,
    RunHandle,
    RunOptions,
    SteadyloopClient,
    StopUnread,
    TemporalLost,
    Thread,
    ThreadBusy,
    ThreadCannotContinue,
    ToolsNotServed,
)
from steadyloop.client._event_log import run_events
from steadyloop.events import ApprovalWaitingEvent, CursorExpired, InvalidCursor

__all__ = ["ClientBackend", "RunDefaults", "thread_tag"]

# How long an approval waits for the run's log to answer, per event, when it looks the
# call up there.
LOG_READ_S = 2.0
# Runs whose first execution this process remembers (`ClientBackend._handle`).
KNOWN_RUNS = 4_096
_RESOLUTION: TypeAdapter[Any] = TypeAdapter(AmbiguityResolution)


@dataclass
class RunDefaults:
    """What a first run asks for when the request names nothing: the server's flags and
    config (`endpoint`, `model`, `tools`), else what the serving worker serves."""

    endpoint: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    served: WorkerDescription | None = field(default=None, repr=False)


class ClientBackend:
    """Threads and runs of every tenant, on one `SteadyloopClient`."""

    def __init__(
        self,
        client: SteadyloopClient,
        *,
        defaults: RunDefaults | None = None,
        admission: RootAdmission | None = None,
        describe: Callable[[], Awaitable[WorkerDescription]] | None = None,
    ) -> None:
        self.client = client
        self.defaults = defaults or RunDefaults()
        self.admission = admission
        self._describe = describe  # what the serving worker serves, asked once when needed
        # (tenant, thread, run) -> the run's first execution run id, once Temporal named it.
        self._known: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    @property
    def temporal(self) -> Client:
        return self.client.temporal

    # -- ids -------------------------------------------------------------------------

    def _thread(self, tenant: str, thread_id: str) -> Thread:
        name, sep, tag = thread_id.rpartition("~")
        if not sep or not name or tag != thread_tag(tenant, name):
            raise ThreadNotFound(f"no thread {thread_id!r}")
        return self.client.thread(f"{THREAD_PREFIX}/{tenant}/{name}")

    def _number(self, run_id: str) -> int:
        if not run_id.isdigit() or len(run_id) > 9 or int(run_id) < 1:
            raise UnknownRun(f"no run {run_id!r}: a run id is its number on the thread")
        return int(run_id)

    async def _handle(self, tenant: str, thread_id: str, run_id: str) -> tuple[RunHandle, str]:
        """The run's handle and its first execution run id (its event log's key).

        The run is described once per process, not once per request: every client of a
        run asks (the tenancy check of each connection, each reader of its log), and
        the answer cannot change. The workflow id names the tenant and is never used
        again (`REJECT_DUPLICATE`), so its first execution is fixed once it exists; a
        run not found is not remembered, so it is found once it starts."""
        thread = self._thread(tenant, thread_id)
        number = self._number(run_id)
        key = (tenant, thread_id, run_id)
        first = self._known.get(key)
        if first is not None:
            self._known.move_to_end(key)
            return thread.run(number, first_execution_run_id=first), first
        handle = thread.run(number)
        try:
            described = await handle.temporal_handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise UnknownRun(f"no run {run_id!r} on thread {thread_id!r}") from None
            raise
        first = described.raw_description.workflow_execution_info.first_run_id
        self._known[key] = first
        while len(self._known) > KNOWN_RUNS:
            self._known.popitem(last=False)
        return thread.run(number, first_execution_run_id=first), first

    # -- the backend ---------------------------------------------------------------

    async def create_thread(self, tenant: str, thread_id: str | None) -> str:
        name = thread_id or self.client.thread().id
        if "~" in name:
            raise BadName(f"a thread name must not contain '~': {name!r}")
        return web_thread_id(tenant, name)

    async def thread(self, tenant: str, thread_id: str) -> dict[str, Any]:
        latest = await self._thread(tenant, thread_id).latest()
        count = 0 if latest is None or latest.number is None else latest.number
        return {
            "thread_id": thread_id,
            "runs": [str(n) for n in range(1, count + 1)],
            "last_run_id": str(count) if count else None,
        }

    async def start(
        self, tenant: str, thread_id: str, request: RunRequest, idempotency_key: str | None
    ) -> Started:
        thread = self._thread(tenant, thread_id)
        latest = await thread.latest()
        options = None
        if latest is None or request.model or request.endpoint or request.max_turns:
            options = await self._options(tenant, request)
        if self.admission is not None and (latest is None or await latest.status() != "running"):
            # Only a start that may begin a run asks; one in flight answers a retry, a
            # steer or 409 without starting anything.
            await self.admission.admit(tenant, thread.id, latest)
        try:
            handle = await thread.start(
                request.prompt, options=options, key=idempotency_key, steer=request.steer
            )
        except ThreadBusy as busy:
            raise RunInFlight(str(busy), busy.workflow_id.rpartition("/")[2]) from None
        except ThreadCannotContinue as stuck:
            raise RunClosed(str(stuck)) from None
        except NoWorkerAnswered as waiting:
            raise WaitingForWorker(str(waiting)) from None
        except ToolsNotServed as unserved:
            raise BadName(str(unserved)) from None
        except ValueError as exc:
            raise BadName(str(exc)) from None
        assert handle.number is not None
        outcome = handle.origin if handle.origin != "opened" else "attached"
        return Started(thread_id=thread_id, run_id=str(handle.number), outcome=outcome)

    async def _options(self, tenant: str, request: RunRequest) -> RunOptions:
        defaults = self.defaults
        endpoint = request.endpoint or defaults.endpoint
        model = request.model or defaults.model
        tools = defaults.tools
        if (model is None or tools is None) and self._describe is not None:
            if defaults.served is None:
                defaults.served = await self._describe()
            served = defaults.served
            if endpoint is None and len(served.endpoints) == 1:
                endpoint = served.endpoints[0].name
            found = served.endpoint(endpoint or "default")
            model = model or (found.model if found else None)
            tools = list(served.unplugged_tools) if tools is None else tools
        fields: dict[str, Any] = {
            "endpoint": endpoint or "default",
            "model": model or "",
            "tools": tools or [],
            "tenant_id": tenant,
        }
        if request.max_turns is not None:
            fields["limits"] = {"max_turns": request.max_turns}
        try:
            return RunOptions.model_validate(fields)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise BadName(f"the run could not be configured: {first['msg']}") from None

    async def check_run(self, tenant: str, thread_id: str, run_id: str) -> None:
        await self._handle(tenant, thread_id, run_id)

    async def events(
        self, tenant: str, thread_id: str, run_id: str, after: str | None
    ) -> AsyncGenerator[StreamEvent, None]:
        handle, _ = await self._handle(tenant, thread_id, run_id)
        try:
            async for event in handle.events(after):
                yield StreamEvent(
                    cursor=event.cursor, type=event.type, data=event.model_dump(mode="json")
                )
        except InvalidCursor as exc:
            raise BadCursor(str(exc)) from None
        except CursorExpired as exc:
            raise CursorTooOld(str(exc), exc.oldest) from None
        except StopUnread as exc:  # a cut: the client reconnects after its last cursor
            raise NoWorkerToRead(str(exc)) from None
        except RunFailed as exc:  # its log ends without a stop: say why it ended
            raise RunClosed(str(exc)) from None
        except TemporalLost as exc:  # a cut too (503): the message says Temporal is gone
            raise NoWorkerToRead(str(exc)) from None

    async def snapshot(self, tenant: str, thread_id: str, run_id: str) -> dict[str, Any]:
        handle, _ = await self._handle(tenant, thread_id, run_id)
        try:
            snapshot = await handle.snapshot()
        except NoWorkerAnswered as waiting:  # a running run's queries need a worker
            raise NoWorkerToRead(str(waiting)) from None
        return snapshot.model_dump(mode="json")

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
    ) -> Decision:
        handle, first = await self._handle(tenant, thread_id, run_id)
        # The call as the person saw it, bound to its tool, SHA and turn, without asking
        # a worker first (the update then waits for one: 202): from the request, or as
        # the run announced it on its log.
        if tool is not None and turn is not None:
            waiting = [_pending(call_id, tool, sha256, turn)]
        else:
            waiting, readable = await self._announced(handle.workflow_id, first, call_id)
            if not waiting and not readable:
                raise NoWorkerToRead(
                    f"run {run_id}'s log did not answer within {LOG_READ_S:g}s (is a worker "
                    "running?), so the call could not be looked up; nothing was decided. "
                    "Send the call's tool and turn (its approval_waiting event) to record "
                    "the decision without a worker"
                )
        if not waiting:
            raise UnknownCall(f"no call {call_id!r} of run {run_id} waited for approval")
        call = next((c for c in waiting if c.arguments_sha256 == sha256), None)
        if call is None:
            call = waiting[-1]
            raise NotTheCall(
                f"call {call_id!r} waits with other arguments (sha {call.arguments_sha256[:12]}"
                f", turn {call.turn}); nothing was decided",
                [_listed(call)],
            )
        try:
            if approved:
                said = await handle.approve(call, key=idempotency_key)
            else:
                said = await handle.reject(
                    call, reason=reason or "rejected from the web", key=idempotency_key
                )
        except NotTheCallReviewed as refused:
            raise NotTheCall(str(refused), [_listed(c) for c in refused.waiting]) from None
        except BaseException as exc:
            raise _steering_error(exc) from None
        return Decision(status="recorded", detail=said)

    async def _announced(
        self, workflow_id: str, first: str, call_id: str
    ) -> tuple[list[PendingApproval], bool]:
        """Every approval the run's log announced under `call_id`, oldest first, and
        whether the log answered at all (no worker: a live run's log is silent)."""
        found: list[PendingApproval] = []
        readable = False
        stream = run_events(self.temporal, workflow_id, first, None)
        try:
            async for event in _until_caught_up(stream):
                readable = True
                if isinstance(event, ApprovalWaitingEvent) and event.call_id == call_id:
                    found.append(_pending(event.call_id, event.tool, event.sha, event.turn))
        except CursorExpired:
            readable = True  # what is left of the log is read; an older one is gone
        return found, readable

    async def steer(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        action: Literal["interrupt", "pause", "unpause", "send"],
        text: str | None,
        idempotency_key: str | None,
    ) -> Decision:
        handle, _ = await self._handle(tenant, thread_id, run_id)
        try:
            if action == "interrupt":
                await handle.interrupt(text or "interrupted")
                said = "interrupt sent"
            elif action == "pause":
                said = await handle.pause(key=idempotency_key)
            elif action == "unpause":
                said = await handle.unpause(key=idempotency_key)
            else:
                said = await handle.send(text or "", key=idempotency_key)
        except BaseException as exc:
            raise _steering_error(exc) from None
        return Decision(status="recorded", detail=said)

    async def resolve_receipt(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        key: str,
        resolution: dict[str, Any],
        idempotency_key: str | None,
    ) -> Decision:
        handle, _ = await self._handle(tenant, thread_id, run_id)
        try:
            parsed = _RESOLUTION.validate_python(resolution)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise BadName(f"body.resolution.{where}: {first['msg']}") from None
        try:
            said = await handle.resolve_receipt(key, parsed, key=idempotency_key)
        except BaseException as exc:
            raise _steering_error(exc) from None
        return Decision(status="recorded", detail=said)


class BadName(BackendError):
    """A value the client API refused (a name it cannot carry, options no run takes)."""


def _listed(call: PendingApproval) -> dict[str, Any]:
    return {
        "call_id": call.call_id,
        "tool": call.tool,
        "sha256": call.arguments_sha256,
        "turn": call.turn,
    }


def _steering_error(exc: BaseException) -> BaseException:
    """The backend error for what the client API raised (anything else is re-raised)."""
    if isinstance(exc, RunEnded):
        return RunClosed(str(exc))
    if isinstance(exc, NoWorkerAnswered):
        return WaitingForWorker(str(exc))
    if isinstance(exc, RequestRefused):
        return UnknownCall(str(exc))
    if isinstance(exc, ValueError):
        return BadName(str(exc))
    return exc


def _pending(call_id: str, tool: str, sha256: str, turn: int) -> PendingApproval:
    return PendingApproval(
        call_id=call_id,
        tool=tool,
        arguments={},
        turn=turn,
        requested_at="",
        arguments_sha256=sha256,
    )


async def _until_caught_up(stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The log's events until it has nothing more right now (a live run's reader would
    wait for more): read with a short idle bound, since only what was announced counts."""
    iterator = aiter(stream)
    while True:
        try:
            event = await asyncio.wait_for(anext(iterator), timeout=LOG_READ_S)
        except (StopAsyncIteration, TimeoutError):
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()
            return
        yield event
