"""`POST /ag-ui`: the server as an AG-UI 1.0 agent, for stock clients (`@ag-ui/client`'s
`HttpAgent`, CopilotKit), on the same runs as the rest of the API.

- The body is a `RunAgentInput`. Its `threadId` is a thread of the token's tenant; its
  `runId` is the idempotency key of the start, so the same input posted again (a
  retry, a reload) attaches to the run it started and streams it again, and never
  starts a second one. The prompt is the input's last user message.
- The answer is AG-UI events as SSE (`data:` lines, no `event:`, so an `EventSource`
  sees them as messages), each with an `id:` (`steadyloop._web.agui_mapping`): with
  `Last-Event-ID` the stream continues after that event, opening with RUN_STARTED, a
  MESSAGES_SNAPSHOT and the constructs that were open.
- A call waiting for approval ends the AG-UI run with an `interrupt` outcome
  (`reason: "tool_call"`, the `toolCallId`, and the tool, SHA and turn in its
  metadata). A `RunAgentInput` with `resume[]` decides it on the *same* workflow
  (`status: "resolved"` approves unless `payload` is `false` or `{"approved": false,
  "reason": ...}`; `"cancelled"` rejects), idempotently under `runId`, and streams
  what the run did next. No second run is started.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, RunAgentInput, UserMessage
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import ValidationError

from steadyloop._web.agui_mapping import (
    Position,
    Tracker,
    frame_id,
    parse_frame_id,
    parse_interrupt_id,
)
from steadyloop._web.backend import (
    BackendError,
    NoWorkerToRead,
    RunBackend,
    RunRequest,
    StreamEvent,
    WaitingForWorker,
)
from steadyloop._web.errors import ApiError
from steadyloop._web.requests import checked_id, read_json
from steadyloop._web.settings import WebSettings
from steadyloop._web.sse import frame
from steadyloop.events import ApprovalWaitingEvent, parse_event

__all__ = ["install_agui"]

# Past every frame of a run event: "continue after this whole event".
WHOLE_EVENT = 1 << 30


def install_agui(
    app: FastAPI,
    backend: RunBackend,
    settings: WebSettings,
    tenant_of: Callable[[Request], str],
    stream_response: Callable[..., Response],
) -> None:
    @app.post(
        "/ag-ui",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"title": "RunAgentInput"}}},
            }
        },
        responses={
            200: {"description": "AG-UI events as SSE", "content": {"text/event-stream": {}}},
            400: {"description": "not a RunAgentInput (`error.field` names the field)"},
            404: {"description": "an interrupt of a run this thread does not have"},
            409: {"description": "another run of the thread is in flight, or not the call"},
        },
    )
    async def agui(request: Request) -> Response:
        """Run (or resume) an agent turn the AG-UI way, streaming AG-UI events."""
        tenant = tenant_of(request)
        raw = await read_json(request, settings.max_body_bytes)
        try:
            given = RunAgentInput.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = ".".join(["body", *(str(p) for p in first["loc"])])
            raise ApiError(400, "invalid", first["msg"], field=field) from None
        checked_id(given.thread_id, "body.threadId")
        checked_id(given.run_id, "body.runId")
        try:
            thread = await backend.create_thread(tenant, given.thread_id)
        except BackendError as exc:
            raise ApiError(400, "invalid_id", str(exc), field="body.threadId") from None
        resumed_from = _last_event_id(request)
        position: Position | None
        if given.resume:
            run_id, after = await _decide(backend, tenant, thread, given)
            position = resumed_from or after
        else:
            prompt = _prompt(given)
            started = await backend.start(
                tenant, thread, RunRequest(prompt=prompt), f"ag-ui-{given.run_id}"
            )
            run_id = started.run_id
            position = resumed_from
        await backend.check_run(tenant, thread, run_id)
        slots = app.state.slots
        slots.take(tenant, settings.limits(tenant).max_streams)
        stream = backend.events(tenant, thread, run_id, None)
        tracker = Tracker(thread_id=given.thread_id, run_id=given.run_id)

        async def waiting(event: ApprovalWaitingEvent) -> bool:
            return await _still_waiting(backend, tenant, thread, run_id, event)

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for chunk in _agui_frames(stream, tracker, run_id, position, waiting):
                    yield chunk
            except BackendError:
                return

        async def close() -> None:
            await stream.aclose()
            slots.give(tenant)

        return stream_response(
            frames(), ping_s=settings.ping_s, send_timeout_s=settings.send_timeout_s, on_close=close
        )


def _last_event_id(request: Request) -> Position | None:
    value = request.headers.get("last-event-id")
    if value is None:
        return None
    position = parse_frame_id(value)
    if position is None:
        raise ApiError(
            400, "bad_cursor", f"{value[:80]!r} is not an id this stream wrote", field="header"
        )
    return position


def _prompt(given: RunAgentInput) -> str:
    for message in reversed(given.messages):
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str) and content.strip():
                return content
            raise ApiError(
                400, "invalid", "the last user message has no text", field="body.messages"
            )
    raise ApiError(400, "invalid", "no user message to answer", field="body.messages")


async def _decide(
    backend: RunBackend, tenant: str, thread: str, given: RunAgentInput
) -> tuple[str, Position]:
    """Decide every `resume[]` entry; the run they belong to and where to go on from."""
    assert given.resume
    run_id: str | None = None
    after: Position | None = None
    for index, entry in enumerate(given.resume):
        where = f"body.resume[{index}].interruptId"
        ref = parse_interrupt_id(entry.interrupt_id)
        if ref is None or (run_id is not None and ref.run_id != run_id):
            raise ApiError(400, "invalid", "not an interrupt this server sent", field=where)
        run_id = ref.run_id
        approved, reason = _verdict(entry.status, entry.payload)
        # No worker yet: the decision is kept on the server, and the stream shows what
        # the run does once one applies it.
        with contextlib.suppress(WaitingForWorker):
            await backend.decide(
                tenant,
                thread,
                ref.run_id,
                ref.call_id,
                approved=approved,
                sha256=ref.sha256,
                reason=reason,
                idempotency_key=f"ag-ui-{given.run_id}-{index}",
                tool=ref.tool,
                turn=ref.turn,
            )
        if after is None or (ref.cursor > (after.cursor or "")):
            after = Position(ref.cursor, WHOLE_EVENT)
    assert run_id is not None and after is not None
    return run_id, after


def _verdict(status: str, payload: Any) -> tuple[bool, str | None]:
    if status == "cancelled":
        return False, "cancelled from the AG-UI client"
    if payload is False:
        return False, "rejected from the AG-UI client"
    if isinstance(payload, dict) and payload.get("approved") is False:
        reason = payload.get("reason")
        return False, reason if isinstance(reason, str) and reason.strip() else "rejected"
    return True, None


async def _still_waiting(
    backend: RunBackend, tenant: str, thread: str, run_id: str, event: ApprovalWaitingEvent
) -> bool:
    """Whether the call an `approval_waiting` event announced waits for a person now.

    The run says so itself (its pending approvals, bound to the call and its SHA), not
    the log's next events: a log read again after the decision may deliver the decision
    any time later, so an interrupt shown for it would be one nobody can answer. With no
    worker to ask, a running run's call is taken to wait: a decision sent then is only
    kept (202) until a worker records it, so the call does still wait."""
    try:
        snapshot = await backend.snapshot(tenant, thread, run_id)
    except NoWorkerToRead:
        return True
    pending = snapshot.get("pending_approvals") or []
    return any(
        isinstance(call, dict)
        and call.get("call_id") == event.call_id
        and call.get("arguments_sha256") == event.sha
        for call in pending
    )


async def _agui_frames(
    stream: AsyncIterator[StreamEvent],
    tracker: Tracker,
    run_id: str,
    position: Position | None,
    waiting: Callable[[ApprovalWaitingEvent], Awaitable[bool]],
) -> AsyncIterator[bytes]:
    """The AG-UI frames of the run's log, from its start or after `position`."""
    if position is None or position.cursor is None:
        yield _frame(tracker.started(), frame_id(None, 0, opening=0))
        position = None
    async for item in stream:
        event = parse_event(item.data).model_copy(update={"cursor": item.cursor})
        if isinstance(event, ApprovalWaitingEvent) and not await waiting(event):
            # Decided already: a stream read again after the decision must not stop at
            # an interrupt nobody can answer any more.
            made: list[BaseEvent] = [
                CustomEvent(name="steadyloop.approval_waiting", value=item.data)
            ]
        else:
            made = tracker.make(event, steadyloop_run=run_id)
        if position is not None:
            if item.cursor != position.cursor:  # before the resume point: state only
                for agui in made:
                    tracker.apply(agui)
                continue
            for agui in made[: position.frame + 1]:
                tracker.apply(agui)
            tracker.finished = False
            for p, agui in enumerate(tracker.opening()):
                yield _frame(agui, frame_id(item.cursor, position.frame, opening=p))
            first = min(position.frame + 1, WHOLE_EVENT)
            made = made[first:]
            position = None
        else:
            first = 0
        for k, agui in enumerate(made, start=first):
            tracker.apply(agui)
            yield _frame(agui, frame_id(item.cursor, k))
            if tracker.finished:
                return


def _frame(event: BaseEvent, sse_id: str) -> bytes:
    return frame(cursor=sse_id, type=None, data=event.model_dump_json(by_alias=True))
