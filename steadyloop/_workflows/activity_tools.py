"""Scheduling a user's own activity for a tool call (`steadyloop.tools.activity_as_tool`).

`ToolAttempt` claims the receipt and settles it; this module only turns a call into the
activity's arguments, schedules it by its own type, and turns what came back into the
call's `ToolOutcome`. What the obvious version gets wrong, and where it is handled:

- `arguments[p] for p in params` raises on a missing argument, and fails the workflow
  task forever: `call_arguments` answers a missing or unknown argument with a reason
  (an `invalid_arguments` outcome, nothing scheduled), fills JSON defaults, and reads a
  `null` for an optional argument that cannot be null as "not given".
- Decoding the result with the workflow's converter inside the SDK fails the workflow
  task when the payload cannot be decoded (an encoding this converter does not know):
  the result is taken raw (`RawValue`) and decoded here, a failure becoming a marker.
- A result the model cannot read whole (NaN, a lone surrogate, NUL, 50 MB) is encoded
  by the rule every tool result follows (`encode_result`, `cap_content`).
- A result the activity's worker could not encode (a lone surrogate in a string) fails
  the activity *after* its effect: it is answered with a marker, as a result, so the
  receipt completes and an opaque effect is not performed again.
- An opaque tool gets exactly one attempt, whatever its description says
  (`retry_policy`): a retry of an effect with no trail could perform it twice.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from steadyloop.tools._content import cap_content, encode_result, marker
    from steadyloop.tools._payloads import (
        ActivityParameter,
        ActivityTarget,
        ToolDescription,
        ToolOutcome,
    )

# The error type the activity's worker reports when the pydantic converter could not
# encode the activity's result (`pydantic_core.PydanticSerializationError`).
UNENCODABLE_RESULT = "PydanticSerializationError"


def call_arguments(target: ActivityTarget, arguments: dict[str, Any]) -> list[Any] | str:
    """The activity's positional arguments for a call, or why the call cannot be made."""
    if target.parameters is None:  # one pydantic model: the arguments are the model
        absent = {field.name for field in target.fields if field.null_is_absent}
        return [{k: v for k, v in arguments.items() if not (v is None and k in absent)}]
    known = [parameter.name for parameter in target.parameters]
    unknown = [name for name in arguments if name not in known]
    if unknown:
        return (
            f"unknown argument(s) {', '.join(map(repr, unknown))}; "
            f"the arguments are {', '.join(map(repr, known)) or 'none'}"
        )
    return _positional(target.parameters, arguments)


def _positional(parameters: list[ActivityParameter], arguments: dict[str, Any]) -> list[Any] | str:
    """Each parameter's value in order: given, else its JSON default, else left to the
    function (only a trailing one can be: arguments go by position)."""
    values: list[Any] = []
    omitted: str | None = None  # an argument left to the function's own default
    for parameter in parameters:
        given = _given(parameter, arguments)
        if given and omitted is not None:
            return f"argument {omitted!r} must be given when {parameter.name!r} is"
        if given:
            wrong = _wrong_type(parameter.types, arguments[parameter.name])
            if wrong is not None:
                return f"argument {parameter.name!r} must be {wrong}"
            values.append(arguments[parameter.name])
        elif parameter.required:
            return f"missing required argument {parameter.name!r}"
        elif parameter.has_default and omitted is None:
            values.append(parameter.default)
        elif omitted is None:
            omitted = parameter.name
    return values


def _given(parameter: ActivityParameter, arguments: dict[str, Any]) -> bool:
    """Whether the call gives the argument (a `null` that means "not given" does not)."""
    if parameter.name not in arguments:
        return False
    return not (arguments[parameter.name] is None and parameter.null_is_absent)


def retry_policy(effect: str, target: ActivityTarget) -> RetryPolicy:
    """One attempt for an opaque tool whatever the target says; else the target's."""
    if effect == "opaque" or target.maximum_attempts == 1:
        return RetryPolicy(maximum_attempts=1)
    return RetryPolicy(
        initial_interval=timedelta(seconds=target.initial_interval_s),
        backoff_coefficient=target.backoff_coefficient,
        maximum_interval=(
            None
            if target.maximum_interval_s is None
            else timedelta(seconds=target.maximum_interval_s)
        ),
        maximum_attempts=target.maximum_attempts,
        non_retryable_error_types=list(target.non_retryable_error_types) or None,
    )


async def run_activity_tool(
    description: ToolDescription,
    target: ActivityTarget,
    arguments: dict[str, Any],
    timeout: timedelta,
) -> ToolOutcome:
    """Schedule the activity for one call; its outcome. Raises `ActivityError` for an
    attempt that ended without one (it raised, timed out, was cancelled), as the
    run-tool activity's caller expects. `timeout` bounds the whole call (the run's
    deadline applied)."""
    args = call_arguments(target, arguments)
    if isinstance(args, str):
        text, truncated = cap_content(f"Invalid arguments for {description.name!r}: {args}")
        return ToolOutcome(
            status="invalid_arguments",
            content=text,
            error_type="ValidationError",
            truncated=truncated,
        )
    start_to_close = min(timedelta(seconds=target.start_to_close_s), timeout)
    try:
        raw = await workflow.execute_activity(
            target.activity_type,
            args=args,
            task_queue=target.task_queue,
            start_to_close_timeout=start_to_close,
            schedule_to_close_timeout=None if target.schedule_to_close_s is None else timeout,
            heartbeat_timeout=(
                None
                if target.heartbeat_timeout_s is None
                else timedelta(seconds=target.heartbeat_timeout_s)
            ),
            retry_policy=retry_policy(description.effect, target),
            result_type=RawValue,
        )
    except ActivityError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type == UNENCODABLE_RESULT:
            return _answer(marker(f"the activity's worker could not encode its result: {cause}"))
        raise
    return result_outcome(raw)


def result_outcome(raw: Any) -> ToolOutcome:
    """The call's answer from the activity's raw result: a str as is, anything else as
    JSON, what cannot be decoded or encoded a marker. Never raises."""
    try:
        payload = raw.payload
        value = workflow.payload_converter().from_payload(payload)
    except Exception as error:
        why = f"({_encoding(raw)}) could not be decoded: {type(error).__name__}"
        return _answer(marker(f"the activity's result {why}"))
    return _answer(encode_result(value))


def _answer(content: str) -> ToolOutcome:
    text, truncated = cap_content(content)
    return ToolOutcome(status="ok", content=text, truncated=truncated)


def _encoding(raw: Any) -> str:
    try:
        return str(raw.payload.metadata.get("encoding", b"").decode("utf-8", "replace"))
    except Exception:
        return "unknown encoding"


def _wrong_type(types: list[str], value: Any) -> str | None:
    """What `value` should have been, when its JSON type is none of `types` (empty:
    unchecked); None when it fits. An integer is a number; a bool is neither."""
    if not types:
        return None
    kinds = {
        bool: ("boolean",),
        int: ("integer", "number"),
        float: ("number",),
        str: ("string",),
        list: ("array",),
        dict: ("object",),
        type(None): ("null",),
    }.get(type(value), ())
    if any(kind in types for kind in kinds):
        return None
    return f"{' or '.join(types)}, not {json_kind(value)}"


def json_kind(value: Any) -> str:
    """The JSON name of a value's type, for a message."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({list: "an array", dict: "an object", type(None): "null"})
    return names.get(type(value), type(value).__name__)
