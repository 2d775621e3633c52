"""Reading a request: a bounded body, JSON, text that can be stored, a model, each refusal
naming the field.

A JSON body may carry what no run can hold: a lone surrogate escaped as `"\\ud800"`
(valid JSON, not encodable as UTF-8: the obvious handler fails later, inside Temporal's
payload converter, with a traceback), NUL, a number beyond a float, a body of 50 MB.
Each is refused here with a 4xx and the path of the value (`body.prompt`), before any
backend call, so nothing starts.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from steadyloop._run.bounds import identity_problem, text_problem
from steadyloop._web.errors import ApiError

__all__ = ["MAX_ID_CHARS", "checked_id", "idempotency_key", "read_json", "read_model"]

Model = TypeVar("Model", bound=BaseModel)
MAX_ID_CHARS = 200


async def read_body(request: Request, limit: int) -> bytes:
    """The body, or 413 as soon as it is known to exceed `limit` (declared or streamed)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "invalid", "Content-Length is not a number", field="header")
        if int(declared) > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "too_large", f"the body is over the {limit:,}-byte limit", field="body")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def read_json(request: Request, limit: int) -> Any:
    """The body's JSON value (an empty body is `{}`), every string checked for storability."""
    raw = await read_body(request, limit)
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "invalid_json", f"the body is not UTF-8 (byte {exc.start})", field="body"
        ) from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "invalid_json", f"the body is not JSON: {exc}", field="body") from None
    _check_value(value, "body")
    return value


def _check_value(value: Any, path: str) -> None:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ApiError(400, "invalid", "is not a finite number", field=where)
        elif isinstance(item, dict):
            for key, inner in item.items():
                _check_text(key, f"{where}.{key!r}")
                stack.append((inner, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{where}[{i}]") for i, inner in enumerate(item))


def _check_text(text: str, where: str) -> None:
    problem = text_problem(text)
    if problem is None and "\0" in text:
        problem = "contains NUL, which no run can store"
    if problem is not None:
        raise ApiError(400, "invalid_text", problem, field=_printable(where))


def _printable(where: str) -> str:
    return where.encode("utf-8", "backslashreplace").decode("utf-8")


async def read_model(request: Request, model: type[Model], limit: int) -> Model:
    """The body as `model`, or 400 naming the first field at fault."""
    value = await read_json(request, limit)
    if not isinstance(value, dict):
        raise ApiError(400, "invalid", "the body must be a JSON object", field="body")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(["body", *(str(p) for p in first["loc"])])
        raise ApiError(400, "invalid", first["msg"], field=_printable(field)) from None


def checked_id(value: str, field: str) -> str:
    """A path or header id that a workflow id can hold, or 400 naming it."""
    problem = identity_problem(value, max_chars=MAX_ID_CHARS)
    if problem is None and any(c in value for c in "/\\"):
        problem = "must not contain a slash"
    if problem is not None:
        raise ApiError(400, "invalid_id", f"the id {problem}", field=_printable(field))
    return value


def idempotency_key(request: Request) -> str | None:
    """The `Idempotency-Key` header (the Temporal update id of the decision), or None."""
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    return checked_id(key, "header.Idempotency-Key")
