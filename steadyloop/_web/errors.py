"""Every refusal as one JSON shape, and the one table from a backend error to a status.

A refusal is `{"error": {"code": ..., "message": ..., "field": ...}}` with a 4xx status
(5xx only for what no request could fix), never a traceback: a handler for every
exception turns an unexpected one into a 500 with a generic message and logs the rest,
and the server keeps serving. `field` names the request part at fault in the dotted
form `body.prompt`, `header.Idempotency-Key`, `query.after`, `path.thread_id`.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from steadyloop._web.backend import (
    BackendError,
    BadCursor,
    CursorTooOld,
    NotTheCall,
    NoWorkerToRead,
    RunClosed,
    RunInFlight,
    ThreadNotFound,
    TooManyRuns,
    UnknownCall,
    UnknownRun,
    WaitingForWorker,
)
from steadyloop.errors import SteadyloopError

logger = logging.getLogger(__name__)


class ApiError(SteadyloopError):
    """A refusal: status, a stable code, a message a person can act on, the field at fault."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers or {}
        self.extra = extra or {}

    def response(self) -> JSONResponse:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        error.update(self.extra)
        return JSONResponse({"error": error}, status_code=self.status, headers=self.headers)


def from_backend(exc: BackendError) -> ApiError:
    """The status and code of each typed backend outcome (one table, used everywhere)."""
    message = str(exc)
    if isinstance(exc, ThreadNotFound):
        return ApiError(404, "thread_not_found", message, field="path.thread_id")
    if isinstance(exc, UnknownRun):
        return ApiError(404, "run_not_found", message, field="path.run_id")
    if isinstance(exc, UnknownCall):
        return ApiError(404, "call_not_found", message, field="path.call_id")
    if isinstance(exc, RunInFlight):
        return ApiError(409, "run_in_flight", message, extra={"run_id": exc.run_id})
    if isinstance(exc, NotTheCall):
        return ApiError(
            409, "not_the_call", message, field="body.sha256", extra={"waiting": exc.waiting}
        )
    if isinstance(exc, RunClosed):
        return ApiError(409, "run_ended", message)
    if isinstance(exc, CursorTooOld):
        return ApiError(
            410, "cursor_expired", message, field="query.after", extra={"oldest": exc.oldest}
        )
    if isinstance(exc, BadCursor):
        return ApiError(400, "bad_cursor", message, field="query.after")
    if isinstance(exc, TooManyRuns):
        seconds = max(1, round(exc.retry_after_s))
        return ApiError(429, "too_many_runs", message, headers={"Retry-After": str(seconds)})
    if isinstance(exc, NoWorkerToRead):
        return ApiError(503, "no_worker", message, headers={"Retry-After": "5"})
    if isinstance(exc, WaitingForWorker):
        return ApiError(202, "waiting_for_worker", message)
    return ApiError(400, "refused", message)


def install_error_handlers(app: FastAPI) -> None:
    """JSON for every error, FastAPI's and Starlette's own included; no traceback leaves."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def backend_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BackendError)
        return from_backend(exc).response()

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(part) for part in first.get("loc", ()))
        return ApiError(400, "invalid", str(first.get("msg", "invalid")), field=field).response()

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return ApiError(exc.status_code, code, str(exc.detail)).response()

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s %s", request.method, request.url.path)
        return ApiError(500, "internal", "the server could not answer; it logged why").response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(BackendError, backend_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
