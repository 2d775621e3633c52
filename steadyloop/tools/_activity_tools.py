"""Your own Temporal activities as tools: `activity_as_tool(charge_card)`.

The workflow schedules the activity itself, by its own type name (the history shows
`charge_card`, not `steadyloop.run_tool`), on its own task queue or the run's, with its
own timeouts and retry policy, and under the receipt path like any tool: the receipt is
claimed before the activity is scheduled and completed on its result, so a retried or
redelivered turn answers from the receipt without scheduling the activity again.

What is refused here, when the tool is declared, with the function named:

- a function that is not an `@activity.defn` (or a dynamic activity, which has no name
  to schedule): the workflow can only schedule a registered activity type;
- an opaque tool with a retry policy of more than one attempt (or unlimited): an opaque
  effect has no trail, so Temporal retrying it behind the receipt's back could perform
  it twice; a lost attempt goes to a person instead;
- more than one attempt without `schedule_to_close_timeout`: the receipt's lease must
  end, and only that timeout bounds a call that Temporal may retry;
- a heartbeat timeout not shorter than the start-to-close one; a parameter Temporal
  cannot pass by position (keyword-only, `*args`, `**kwargs`);
- everything `@tool` refuses about names, types and schemas.

Effects, as for `@tool`: `opaque` (the default) gets exactly one attempt and a lost one
(timed out) is ambiguous until a person says whether it happened; `pure` may be retried
by Temporal under your policy; `resumable` may be too: each Temporal retry hands the
last heartbeat details (`activity.info().heartbeat_details`) to the next attempt, which
is how an activity resumes, and a receipt lost after its retries fails after one
heartbeat period, as a resumable `@tool`'s does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.common import RetryPolicy

from steadyloop.tools._definition import (
    TOOL_NAME_PATTERN,
    ToolDefinition,
    ToolDefinitionError,
    _arguments_model,
    checked_seconds,
    tool_description,
)
from steadyloop.tools._payloads import EFFECTS, ActivityParameter, ActivityTarget, Effect
from steadyloop.tools._schema import arguments_schema
from steadyloop.tools._schema_profiles import admits_null

DEFAULT_ACTIVITY_TIMEOUT = timedelta(seconds=30)


def activity_as_tool(
    fn: Callable[..., Any],
    *,
    effect: Effect = "opaque",
    name: str | None = None,
    description: str | None = None,
    task_queue: str | None = None,
    start_to_close_timeout: timedelta = DEFAULT_ACTIVITY_TIMEOUT,
    schedule_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    approval: bool = False,
) -> ToolDefinition[..., Any]:
    """Your `@activity.defn` function as a tool a `ToolRegistry` serves beside `@tool`s.

    - `name`: the name the model calls; defaults to the activity's type name (which must
      then match `^[a-zA-Z0-9_-]{1,64}$`). The activity is always scheduled by its type.
    - `description`: defaults to the docstring's first paragraph; the schema comes from
      the signature as for `@tool` (one pydantic-model parameter: its fields are the
      arguments).
    - `effect`: `"opaque"` (default), `"pure"` or `"resumable"`; see the module docs.
    - `task_queue`: the queue of the worker that runs it; None: the run's own, where
      `ToolRegistry.activity_functions()` lists it for that worker to register.
    - `start_to_close_timeout`, `schedule_to_close_timeout`, `heartbeat_timeout`,
      `retry_policy`: Temporal's, as you would pass them to `execute_activity`. Without
      a policy a call gets one attempt; an opaque tool always gets exactly one.
    - `approval`: each call waits for a person's approval before it is scheduled.

    The function stays on the tool (`.function`) so your worker can register it.
    """
    found = activity._Definition.from_callable(fn)
    label = getattr(fn, "__qualname__", None) or repr(fn)
    if found is None or not found.name:
        raise ToolDefinitionError(
            f"activity_as_tool: {label} is not a named activity definition; decorate it "
            "with @temporalio.activity.defn (a dynamic activity has no type to schedule), "
            "or declare a plain async function with @steadyloop.tools.tool"
        )
    tool_name = name if name is not None else found.name
    if not isinstance(tool_name, str) or not TOOL_NAME_PATTERN.fullmatch(tool_name):
        raise ToolDefinitionError(
            f"activity {found.name!r}: {tool_name!r} is not a valid tool name; it must match "
            f"{TOOL_NAME_PATTERN.pattern}; pass name=..."
        )
    if effect not in EFFECTS:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: effect {effect!r} is not one of {', '.join(EFFECTS)}"
        )
    if not isinstance(approval, bool):
        raise ToolDefinitionError(f"tool {tool_name!r}: approval must be True or False")
    if task_queue is not None and (not isinstance(task_queue, str) or not task_queue.strip()):
        raise ToolDefinitionError(f"tool {tool_name!r}: task_queue must be a non-blank string")
    text = tool_description(tool_name, fn, description, "activity", stacklevel=3).strip()
    timeouts = _timeouts(
        tool_name, start_to_close_timeout, schedule_to_close_timeout, heartbeat_timeout
    )
    retry = _retry_fields(tool_name, effect, retry_policy, schedule_to_close_timeout)
    scope = dict(sys._getframe(1).f_locals)
    model, model_parameter, fields = _arguments_model(fn, tool_name, scope)
    _check_positional(tool_name, [param for _, param in fields])
    try:
        parameters = arguments_schema(model)
    except Exception as error:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot derive a JSON schema for its arguments: {error}"
        ) from error
    described = _parameters(parameters)
    try:
        target = ActivityTarget(
            activity_type=found.name,
            task_queue=task_queue,
            **timeouts,
            **retry,
            parameters=None if model_parameter is not None else described,
            fields=described if model_parameter is not None else [],
        )
    except ValidationError as error:  # a backoff below 1, negative attempts...
        raise ToolDefinitionError(f"tool {tool_name!r}: {error}") from error
    return ToolDefinition(
        fn=fn,
        name=tool_name,
        description=text,
        effect=effect,
        timeout=schedule_to_close_timeout or start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        approval=approval,
        arguments_model=model,
        parameters=parameters,
        model_parameter=model_parameter,
        argument_fields=fields,
        activity=target,
    )


def _optional_seconds(tool_name: str, label: str, value: Any) -> float | None:
    return None if value is None else checked_seconds(tool_name, label, value)


def _timeouts(tool_name: str, start: Any, schedule: Any, heartbeat: Any) -> dict[str, float | None]:
    start_s = checked_seconds(tool_name, "start_to_close_timeout", start)
    schedule_s = _optional_seconds(tool_name, "schedule_to_close_timeout", schedule)
    heartbeat_s = _optional_seconds(tool_name, "heartbeat_timeout", heartbeat)
    if heartbeat_s is not None and heartbeat_s >= start_s:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: heartbeat_timeout ({heartbeat}) must be shorter than "
            f"start_to_close_timeout ({start}); otherwise it never ends a lost attempt first"
        )
    return {
        "start_to_close_s": start_s,
        "schedule_to_close_s": schedule_s,
        "heartbeat_timeout_s": heartbeat_s,
    }


def _retry_fields(
    tool_name: str, effect: Effect, policy: Any, schedule: timedelta | None
) -> dict[str, Any]:
    if policy is None:
        return {"maximum_attempts": 1}
    if not isinstance(policy, RetryPolicy):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: retry_policy must be a temporalio.common.RetryPolicy"
        )
    attempts = policy.maximum_attempts
    if effect == "opaque" and attempts != 1:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: an opaque tool gets exactly one attempt, and this "
            f"retry_policy allows {attempts or 'unlimited'}: its effect has no trail, so a "
            "retry could perform it twice; a lost attempt goes to a person instead. Drop "
            "the policy (or use maximum_attempts=1), or declare effect='pure' or "
            "'resumable' if running it again is safe"
        )
    if attempts != 1 and schedule is None:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: a retry_policy of {attempts or 'unlimited'} attempts needs "
            "schedule_to_close_timeout, the bound of the whole call: the call's receipt "
            "must know when it is lost"
        )
    return {
        "maximum_attempts": attempts,
        "initial_interval_s": checked_seconds(
            tool_name, "initial_interval", policy.initial_interval
        ),
        "backoff_coefficient": policy.backoff_coefficient,
        "maximum_interval_s": _optional_seconds(
            tool_name, "maximum_interval", policy.maximum_interval
        ),
        "non_retryable_error_types": list(policy.non_retryable_error_types or ()),
    }


def _check_positional(tool_name: str, params: list[Any]) -> None:
    for param in params:
        if param.kind is param.KEYWORD_ONLY:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is keyword-only, and Temporal "
                "passes an activity's arguments by position; make it positional"
            )


def _parameters(schema: Mapping[str, Any]) -> list[ActivityParameter]:
    """Each top-level property of the (portable) schema, in order, with what the
    workflow needs to fill it in: required, its JSON default, whether null means absent."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    described = []
    for name, node in properties.items():
        has_default = isinstance(node, Mapping) and "default" in node
        described.append(
            ActivityParameter(
                name=name,
                required=name in required,
                has_default=has_default,
                default=node.get("default") if has_default else None,
                null_is_absent=name not in required and not admits_null(node),
                types=_types(node),
            )
        )
    return described


def _types(node: Any) -> list[str]:
    kind = node.get("type") if isinstance(node, Mapping) else None
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return list(kind)
    return []
