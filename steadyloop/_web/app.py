"""`steadyloop serve`: runs on threads over HTTP, their events as SSE, steering by POST.

The server keeps no state of its own: every route is a call on the client API (through
a `RunBackend`), so any number of server processes can sit behind a load balancer, and
a stream cut by a restart resumes on another process from its cursor.

Routes (all JSON; the OpenAPI spec is at `/openapi.json`, a page listing it at `/docs`):

- `GET /healthz`: 200 `{"ok": true}` (no token needed).
- `GET /`: the page (`?thread=ID`; `steadyloop._web.page_routes`; no token needed).
- `POST /v1/threads` `{"thread_id"?: str}`: 201 `{"thread_id"}` (chosen, or minted).
- `GET /v1/threads/{thread_id}`: 200 `{"thread_id", "runs": [...], "last_run_id"}`.
- `POST /v1/threads/{thread_id}/runs` `{"prompt", "steer"?: false, "model"?,
  "endpoint"?, "max_turns"?}`: the thread's first run or the follow-up of its last.
  Answers `{"thread_id", "run_id", "outcome"}`: 201 `started`, 200 `attached` (the same
  `Idempotency-Key` started it already), 202 `steered` (`steer: true` while a run is in
  flight: the message goes to it at its next turn boundary). 409 `run_in_flight` with
  `run_id` when a run is in flight and `steer` is false; 429 + `Retry-After` when the
  tenant's run rate or ceiling refuses.
- `GET /v1/threads/{thread_id}/runs/{run_id}/events` (`?after=CURSOR` or
  `Last-Event-ID`): 200 `text/event-stream`; 204 when nothing follows the cursor (the
  run ended there); 410 `cursor_expired` with `oldest`, the oldest cursor still held
  (read the snapshot, then follow after its cursor); 429 too many streams.
- `GET /v1/threads/{thread_id}/runs/{run_id}`: 200 the snapshot: `transcript`,
  `progress`, `pending_approvals`, `ambiguous_receipts`, `cursor`, `result`; 503
  `no_worker` while the run runs with no worker to answer its queries.
- `POST /v1/threads/{thread_id}/runs/{run_id}/approvals/{call_id}` `{"approve": bool,
  "sha256": str, "reason"?: str, "tool"?: str, "turn"?: int}`: 200 `{"status":
  "recorded"}`; 202 `{"status": "waiting_for_worker"}` (kept, applied once a worker
  accepts it); 404 `call_not_found`; 409 `not_the_call` with `waiting` (what waits
  now), or `run_ended`. With `tool` and `turn` (as the `approval_waiting` event names
  them) the decision needs no read of the run's log; without them, and no worker to
  read it, 503 `no_worker` (nothing decided).
- `POST .../runs/{run_id}/interrupt` `{"reason"?: str}`, `POST .../pause` `{}`,
  `POST .../unpause` `{}`, `POST .../messages` `{"content": str}`, and
  `POST .../receipts/{key}` `{"resolution": {...}}` (an ambiguous receipt's
  `happened` with its result, `did_not_happen` or `give_up`): 200 / 202 / 409 as above.
- `POST /ag-ui`: an AG-UI `RunAgentInput`; 200 AG-UI events as SSE
  (`steadyloop._web.agui`).

**Auth.** `Authorization: Bearer TOKEN` on every route but `/healthz`, `/docs` and
`/openapi.json`; the token's tenant is the run's `tenant_id` (a `tenant_id` in a body is
never read). A thread of another tenant answers 404 on every route, the event stream
included. 401 without a known token. A request without an `Authorization` header may
carry the token in the `steadyloop_token` cookie instead: the page's `EventSource`
cannot send headers. The page sets it `SameSite=Strict`, so another site's form or
script never sends it.

**Idempotency.** Starting and steering take an `Idempotency-Key` header, the Temporal
update id of the request: a retried POST records one decision, and a retried start
attaches to the run it started.

**SSE format.** Each event is

    id: <cursor>
    event: <type>
    data: <the event as one line of JSON>

with `: ping` every 15 s. The stream ends after the run's stop event; reconnecting with
the last cursor then answers 204. A stream may also end early (this process restarted,
or the client stopped reading for `send_timeout_s`); the client reconnects with `Last-Event-ID` (an
`EventSource` does so by itself) or `?after=` and misses nothing.

**Errors.** `{"error": {"code", "message", "field"?, ...}}` with a 4xx status: the
field is `body.prompt`, `path.thread_id`, `query.after`, `header.Idempotency-Key`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from steadyloop._web.backend import (
    BackendError,
    Decision,
    RunBackend,
    RunRequest,
    StreamEvent,
    WaitingForWorker,
)
from steadyloop._web.errors import ApiError, from_backend, install_error_handlers
from steadyloop._web.openapi_page import openapi_page
from steadyloop._web.page_routes import install_page
from steadyloop._web.requests import checked_id, idempotency_key, read_model
from steadyloop._web.settings import DEV_TENANT, WebSettings
from steadyloop._web.sse import EventStreamResponse, frame

__all__ = ["create_app"]

# How long the events route waits for the first event before answering 200 anyway:
# long enough to answer 204 or 410 instead of an empty stream, short enough that a
# live run's stream opens at once.
FIRST_EVENT_WAIT_S = 0.5
# The cookie the page keeps its bearer token in (read only when no Authorization header).
TOKEN_COOKIE = "steadyloop_token"


class NewThread(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    thread_id: str | None = Field(default=None, max_length=200)


class ApprovalBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    approve: bool
    sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-fA-F]{64}$")
    reason: str | None = Field(default=None, max_length=10_000)
    # The call's tool and turn as its `approval_waiting` event named them: with both,
    # the decision is bound without reading the run's log, so it is kept even while no
    # worker runs (202). Without them the server reads the log for them.
    tool: str | None = Field(default=None, min_length=1, max_length=200)
    turn: int | None = Field(default=None, ge=0)


class InterruptBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(default="interrupted from the web", max_length=10_000)


class Empty(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MessageBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str = Field(min_length=1, max_length=256 * 1024)


class ResolveBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    resolution: dict[str, Any]


@dataclass
class StreamSlots:
    """Streams open per tenant on this process (a limit per connection, so per process)."""

    open: dict[str, int] = field(default_factory=dict)

    def take(self, tenant: str, limit: int) -> None:
        if self.open.get(tenant, 0) >= limit:
            raise ApiError(
                429,
                "too_many_streams",
                f"tenant {tenant!r} has {limit} event streams open on this server; close one",
                headers={"Retry-After": "5"},
            )
        self.open[tenant] = self.open.get(tenant, 0) + 1

    def give(self, tenant: str) -> None:
        self.open[tenant] -= 1
        if self.open[tenant] <= 0:
            del self.open[tenant]


def _body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a body read by hand (`read_model`), so the spec still shows it."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "a field is invalid (`error.field` names it)"},
    401: {"description": "no known bearer token"},
    404: {"description": "no such thread, run or call for this tenant"},
    413: {"description": "the body is over the size limit"},
}


def create_app(backend: RunBackend, settings: WebSettings) -> FastAPI:
    """The ASGI app serving `backend` under `settings` (the routes in the module docstring)."""
    app = FastAPI(
        title="steadyloop",
        summary="Durable agent runs over HTTP: threads, runs, resumable event streams.",
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
        )
    slots = StreamSlots()
    app.state.backend = backend
    app.state.settings = settings
    app.state.slots = slots
    limit = settings.max_body_bytes

    def tenant_of(request: Request) -> str:
        if settings.open_access:
            return DEV_TENANT
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if not scheme and TOKEN_COOKIE in request.cookies:
            # The page's token: an EventSource cannot send a header (see the docstring).
            scheme, token = "bearer", request.cookies[TOKEN_COOKIE]
        tenant = settings.tenant_for(token.strip()) if scheme.lower() == "bearer" else None
        if tenant is None:
            raise ApiError(
                401,
                "unauthorized",
                "send `Authorization: Bearer TOKEN` with a token configured for a tenant",
                field="header.Authorization",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return tenant

    def ids(thread_id: str, run_id: str | None = None) -> tuple[str, str]:
        checked_id(thread_id, "path.thread_id")
        if run_id is not None:
            checked_id(run_id, "path.run_id")
        return thread_id, run_id or ""

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(openapi_page(app.openapi()))

    @app.post("/v1/threads", status_code=201, openapi_extra=_body(NewThread), responses=ERRORS)
    async def create_thread(request: Request) -> JSONResponse:
        """Create a thread (a conversation); its id is yours to choose, or minted."""
        tenant = tenant_of(request)
        body = await read_model(request, NewThread, limit)
        chosen = checked_id(body.thread_id, "body.thread_id") if body.thread_id else None
        thread_id = await backend.create_thread(tenant, chosen)
        return JSONResponse({"thread_id": thread_id}, status_code=201)

    @app.get("/v1/threads/{thread_id}", responses=ERRORS)
    async def thread(request: Request, thread_id: str) -> dict[str, Any]:
        """A thread's runs, oldest first, and its last run's id."""
        tenant = tenant_of(request)
        ids(thread_id)
        return await backend.thread(tenant, thread_id)

    @app.post(
        "/v1/threads/{thread_id}/runs",
        status_code=201,
        openapi_extra=_body(RunRequest),
        responses={
            **ERRORS,
            200: {"description": "attached: this Idempotency-Key already started a run"},
            202: {"description": "steered: the message goes to the running run"},
            409: {"description": "a run of the thread is in flight (`error.run_id`)"},
            429: {"description": "the tenant's run rate or ceiling; see Retry-After"},
        },
    )
    async def start(request: Request, thread_id: str) -> JSONResponse:
        """Start the thread's first run, or the follow-up of its last one."""
        tenant = tenant_of(request)
        ids(thread_id)
        key = idempotency_key(request)
        body = await read_model(request, RunRequest, limit)
        started = await backend.start(tenant, thread_id, body, key)
        status = {"started": 201, "attached": 200, "steered": 202}[started.outcome]
        return JSONResponse(started.model_dump(), status_code=status)

    @app.get(
        "/v1/threads/{thread_id}/runs/{run_id}/events",
        responses={
            **ERRORS,
            200: {"description": "the events, as SSE", "content": {"text/event-stream": {}}},
            204: {"description": "nothing more: the run ended at this cursor"},
            410: {"description": "the cursor is older than the log keeps (`error.oldest`)"},
            429: {"description": "too many streams open for the tenant; see Retry-After"},
        },
    )
    async def events(request: Request, thread_id: str, run_id: str) -> Response:
        """The run's events after `?after=` or `Last-Event-ID` (the cursor), as SSE."""
        tenant = tenant_of(request)
        ids(thread_id, run_id)
        after = request.query_params.get("after") or request.headers.get("last-event-id")
        if after is not None:
            checked_id(after, "query.after")
        await backend.check_run(tenant, thread_id, run_id)
        slots.take(tenant, settings.limits(tenant).max_streams)
        # Clients of one run share one read of its log: the backend's (a
        # `SteadyloopClient`'s `EventFanout`), not one per connection.
        stream = backend.events(tenant, thread_id, run_id, after)

        first: asyncio.Future[StreamEvent] | None = None

        async def close() -> None:
            if first is not None and not first.done():
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
            await stream.aclose()
            slots.give(tenant)

        try:
            first = await _first_event(stream)
        except BaseException:
            await close()
            raise
        if first is None:
            await close()
            return Response(status_code=204)
        opening = first

        async def frames() -> AsyncIterator[bytes]:
            try:
                yield frame(await opening)
                async for event in stream:
                    yield frame(event)
            except (StopAsyncIteration, BackendError):
                return  # ended, or cut: the client reconnects with its cursor

        return _StreamResponse(
            frames(), ping_s=settings.ping_s, send_timeout_s=settings.send_timeout_s, on_close=close
        )

    @app.get("/v1/threads/{thread_id}/runs/{run_id}", responses=ERRORS)
    async def snapshot(request: Request, thread_id: str, run_id: str) -> dict[str, Any]:
        """Transcript, progress, pending approvals, ambiguous receipts, cursor, stop."""
        tenant = tenant_of(request)
        ids(thread_id, run_id)
        return await backend.snapshot(tenant, thread_id, run_id)

    steering_responses: dict[int | str, dict[str, Any]] = {
        **ERRORS,
        202: {"description": "no worker accepted it yet: kept, applied when one does"},
        409: {"description": "the run ended, or it is not the call reviewed"},
    }

    @app.post(
        "/v1/threads/{thread_id}/runs/{run_id}/approvals/{call_id}",
        openapi_extra=_body(ApprovalBody),
        responses=steering_responses,
    )
    async def approve(request: Request, thread_id: str, run_id: str, call_id: str) -> Response:
        """Approve or reject the call waiting under `call_id`, bound to its arguments' SHA."""
        tenant = tenant_of(request)
        ids(thread_id, run_id)
        checked_id(call_id, "path.call_id")
        key = idempotency_key(request)
        body = await read_model(request, ApprovalBody, limit)
        return await _decided(
            backend.decide(
                tenant,
                thread_id,
                run_id,
                call_id,
                approved=body.approve,
                sha256=body.sha256.lower(),
                reason=body.reason,
                idempotency_key=key,
                tool=body.tool,
                turn=body.turn,
            )
        )

    def steering_route(
        action: Literal["interrupt", "pause", "unpause", "send"],
        path: str,
        model: type[BaseModel],
        summary: str,
    ) -> None:
        async def steer(request: Request, thread_id: str, run_id: str) -> Response:
            tenant = tenant_of(request)
            ids(thread_id, run_id)
            key = idempotency_key(request)
            body = await read_model(request, model, limit)
            text = getattr(body, "reason", None) or getattr(body, "content", None)
            return await _decided(backend.steer(tenant, thread_id, run_id, action, text, key))

        app.post(
            f"/v1/threads/{{thread_id}}/runs/{{run_id}}/{path}",
            openapi_extra=_body(model),
            responses=steering_responses,
            summary=summary,
            name=action,
        )(steer)

    steering_route("interrupt", "interrupt", InterruptBody, "Interrupt the run")
    steering_route("pause", "pause", Empty, "Pause the run at its next turn boundary")
    steering_route("unpause", "unpause", Empty, "Let a paused run go on")
    steering_route("send", "messages", MessageBody, "Send a message (read at the next turn)")

    @app.post(
        "/v1/threads/{thread_id}/runs/{run_id}/receipts/{key}",
        openapi_extra=_body(ResolveBody),
        responses=steering_responses,
    )
    async def resolve(request: Request, thread_id: str, run_id: str, key: str) -> Response:
        """Say what happened to an ambiguous call (`happened`, `did_not_happen`, `give_up`)."""
        tenant = tenant_of(request)
        ids(thread_id, run_id)
        checked_id(key, "path.key")
        idem = idempotency_key(request)
        body = await read_model(request, ResolveBody, limit)
        return await _decided(
            backend.resolve_receipt(tenant, thread_id, run_id, key, body.resolution, idem)
        )

    from steadyloop._web.agui import install_agui  # the AG-UI route, on the same runs

    install_agui(app, backend, settings, tenant_of, _StreamResponse)
    app.state.tenant_of = tenant_of
    install_page(app)
    return app


class _StreamResponse(Response):
    """`EventStreamResponse` as a Starlette response (FastAPI returns it unchanged)."""

    def __init__(self, frames: AsyncIterator[bytes], **options: Any) -> None:
        super().__init__(status_code=200)
        self.stream = EventStreamResponse(frames, **options)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.stream(scope, receive, send)


async def _first_event(stream: AsyncIterator[StreamEvent]) -> asyncio.Future[StreamEvent] | None:
    """The stream's first event, being awaited; None when the stream ended at once (204).

    Waits up to `FIRST_EVENT_WAIT_S`, so an ended run answers 204 and an expired cursor
    410 (raised here) rather than an empty 200; a live run's stream opens at once.
    """
    pending = asyncio.ensure_future(anext(aiter(stream)))
    done, _ = await asyncio.wait({pending}, timeout=FIRST_EVENT_WAIT_S)
    if done:
        try:
            pending.result()
        except StopAsyncIteration:
            return None
        except BackendError as exc:
            raise from_backend(exc) from None
    return pending


async def _decided(decision: Awaitable[Decision]) -> JSONResponse:
    """200 recorded; 202 when no worker accepted it yet (kept, applied when one does)."""
    try:
        answer = await decision
    except WaitingForWorker as waiting:
        return JSONResponse(
            {"status": "waiting_for_worker", "detail": str(waiting)}, status_code=202
        )
    status = 202 if answer.status == "waiting_for_worker" else 200
    return JSONResponse(answer.model_dump(), status_code=status)
