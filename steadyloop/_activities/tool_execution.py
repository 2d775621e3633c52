"""The activities that describe and run a worker's tools.

Register both methods of one `ToolActivities(registry)` with the worker:
`worker = Worker(..., activities=[*ToolActivities(registry).activities()])`.

Why an activity answers with a value where the obvious version would raise: every
assistant tool call must be answered by exactly one tool message, and a raised
activity error is an infrastructure failure the workflow retries or gives up on, not
something the model can read and correct. So:

- unknown tool (or one outside `allowed_tools`): `unknown_tool`, listing what exists;
- arguments the schema refuses: `invalid_arguments`, each failing field with its path
  and pydantic's message, and no tool code runs;
- the tool raised an `Exception`: `tool_error` with `TypeName: message`, logged with
  its traceback on the worker; the run goes on;
- the tool returned something huge: content capped at `MAX_TOOL_CONTENT_BYTES` with a
  marker, so no result can hit Temporal's 2 MB payload limit.

Once the tool function has returned, its effect has happened: nothing after that may
raise, or the workflow would see a failed activity, mark the receipt `failed`, and run
an opaque effect again when the model repeats the call. So the result is encoded by
`encode_result`, which replaces what has no JSON or UTF-8 spelling (lone surrogates,
non-UTF-8 bytes, cycles, objects) with a marker instead of raising; every outcome's
text (an error message, a validator's complaint, an unknown name the model sent) goes
through `cap_content`, which also replaces lone surrogates, so the outcome always
serializes. The same holds for a tool's exception: one whose message holds lone
surrogates, or whose `str()` raises, is still a clean `tool_error`.

What is *not* turned into a value, on purpose:

- `asyncio.CancelledError` (and every other `BaseException`) propagates: swallowing it
  would report a cancelled call as answered and leave the activity running.
- `temporalio.exceptions.ApplicationError` raised by a tool propagates: it is a tool
  author's explicit request for Temporal's failure handling (for example
  `non_retryable=True`), the one way a tool can fail its activity on purpose.
- Timeouts: the workflow enforces the tool's declared timeout as the activity's
  `start_to_close_timeout` (from `ToolDescription.timeout_s`); the activity does not
  race its own clock against it, and does not heartbeat on a timer (a timer
  heartbeat would overwrite the progress details a resumable tool records, and would
  prove only that the worker is alive, not that the tool is getting anywhere). A tool
  that returns after its timeout is logged by name, and an opaque one's result is sent
  to the run (`_report_if_late`), where Temporal would drop it. The SDK cancels an
  attempt about 5 s after its timeout; an opaque tool cancelled so is reported the same
  way, as never having returned.

Resumable tools (`effect="resumable"`) run with a `ToolProgress`
(`steadyloop.tools.current_progress()`) built from the invocation's attempt,
idempotency key and `previous_progress`; each `record` heartbeats the full list of
sub-operations, so the heartbeat details the workflow reads from a lost attempt carry
all of them. When `previous_progress` is not empty the activity heartbeats it before
the tool starts, so an attempt that dies before recording anything still hands the
trail on. Pure and opaque tools never heartbeat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._history.payload_storage import MAX_STORED_PAYLOAD_BYTES, payload_limit
from steadyloop.events._publishing import activity_input
from steadyloop.tools._content import (
    MAX_TOOL_CONTENT_BYTES,
    cap_content,
    encode_result,
    marker,
    utf8_text,
)
from steadyloop.tools._context import ToolProgress, invocation_scope
from steadyloop.tools._payloads import (
    CANCELLED_AFTER_TIMEOUT,
    DESCRIBE_TOOLS_ACTIVITY,
    LATE_TOOL_RESULT_SIGNAL,
    RUN_TOOL_ACTIVITY,
    DescribeToolsInput,
    DescribeToolsResult,
    LateToolResult,
    ToolInvocation,
    ToolOutcome,
    ToolOutcomeStatus,
    unknown_tool_outcome,
)
from steadyloop.tools._registry import AnyTool, ToolRegistry

INPUT_EXCERPT_CHARS = 120
# Room left in a payload for its metadata and the outcome's other fields.
PAYLOAD_ENVELOPE_BYTES = 4096
# The cap never shrinks below this (room for the truncation marker and some text).
MIN_CONTENT_BYTES = 1024
# A tool that returns this close to its timeout is reported as late too: the server's
# clock started before the worker's, so it may already have timed the attempt out.
LATE_MARGIN_S = 0.5


class ToolActivities:
    """The tool activities of one worker, bound to its registry."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        max_content_bytes: int = MAX_TOOL_CONTENT_BYTES,
        max_stored_payload_bytes: int = MAX_STORED_PAYLOAD_BYTES,
    ) -> None:
        self.registry = registry
        self.max_content_bytes = max_content_bytes
        self.max_stored_payload_bytes = max_stored_payload_bytes

    def activities(self) -> Sequence[Any]:
        """Both activities, for `Worker(activities=...)`."""
        return [self.describe_tools, self.run_tool]

    @activity.defn(name=DESCRIBE_TOOLS_ACTIVITY)
    async def describe_tools(self, request: DescribeToolsInput) -> DescribeToolsResult:
        """Describe the named tools and plugins (with their tools); names the worker lacks
        are listed, not raised. Also the largest activity input this worker's data
        converter can hand Temporal, so the run learns it through history
        (`_worker_payload_limit`)."""
        registry = self.registry
        wanted = registry.names() if request.names is None else request.names
        known = [name for name in dict.fromkeys(wanted) if name in registry]
        unknown = [name for name in dict.fromkeys(wanted) if name not in registry]
        plugins = registry.describe_plugins(request.plugins)
        members = [name for plugin in plugins for name in plugin.tools]
        return DescribeToolsResult(
            tools=registry.describe([*known, *members], request.schema_profile),
            unknown=unknown,
            available=registry.names(),
            plugins=plugins,
            unknown_plugins=[
                name
                for name in dict.fromkeys(request.plugins)
                if name not in registry.plugin_names()
            ],
            available_plugins=registry.plugin_names(),
            payload_limit_bytes=self._worker_payload_limit(),
        )

    def _worker_payload_limit(self) -> int:
        """From the data converter of the client this worker runs on: a worker without
        external storage (or outside a worker) reports Temporal's inline limit."""
        try:
            converter = activity.client().data_converter
        except RuntimeError:
            return MAX_INLINE_PAYLOAD_BYTES
        return payload_limit(converter, stored_max=self.max_stored_payload_bytes)

    @activity.defn(name=RUN_TOOL_ACTIVITY)
    async def run_tool(
        self, invocation: ToolInvocation, log_events: list[JsonValue] | None = None
    ) -> ToolOutcome:
        """Validate the arguments and run the tool; every tool-level outcome is a value.

        `log_events`: the run's events riding with the call for its followers
        (`steadyloop.events._publishing`), ignored here."""
        invocation = activity_input(ToolInvocation, invocation)
        available = self.registry.names()
        if invocation.allowed_tools is not None:
            available = [name for name in available if name in invocation.allowed_tools]
        if invocation.tool not in available:
            return self._capped(unknown_tool_outcome(invocation.tool, available))
        definition = self.registry.get(invocation.tool)

        try:
            validated = definition.validate(invocation.arguments)
        except ValidationError as error:
            try:
                detail = invalid_arguments_detail(definition, error)
            except Exception as unreadable:  # a validator's message that cannot be read
                return self._tool_error(definition, invocation, unreadable)
            return self._outcome("invalid_arguments", detail, error_type="ValidationError")
        except Exception as error:  # a validator in the tool's own model raised
            return self._tool_error(definition, invocation, error)

        progress: ToolProgress | None = None
        if definition.effect == "resumable":
            progress = ToolProgress(invocation, _heartbeat)
            if invocation.previous_progress:
                progress.keep_alive()
        started = time.monotonic()
        try:
            with invocation_scope(invocation, progress):
                result = await definition.invoke(validated)
        except ApplicationError:
            raise
        except asyncio.CancelledError:
            await _report_cancelled_after_timeout(definition, invocation, started)
            raise
        except Exception as error:
            outcome = self._tool_error(definition, invocation, error)
        else:
            # The effect happened: from here on nothing may raise (see the module docstring).
            try:
                content = encode_result(result)
            except Exception:  # encode_result replaces; this is the backstop
                content = marker(
                    f"the tool returned a {_type_name(result)} that could not be encoded"
                )
            outcome = self._outcome("ok", content)
        await _report_if_late(definition, invocation, outcome, started)
        return outcome

    def _tool_error(
        self, definition: AnyTool, invocation: ToolInvocation, error: Exception
    ) -> ToolOutcome:
        activity.logger.warning(
            "tool %r raised for call %s of %s",
            definition.name,
            invocation.call_id,
            invocation.workflow_id,
            exc_info=error,
        )
        kind = _type_name(error)
        message = _message(error)
        text = f"{kind}: {message}" if message else kind
        return self._outcome(
            "tool_error", f"Tool {definition.name!r} failed: {text}", error_type=kind
        )

    def _outcome(
        self, status: ToolOutcomeStatus, content: str, *, error_type: str | None = None
    ) -> ToolOutcome:
        return self._capped(ToolOutcome(status=status, content=content, error_type=error_type))

    def _capped(self, outcome: ToolOutcome) -> ToolOutcome:
        """The outcome with its text bounded and encodable (lone surrogates replaced),
        and its payload within what this worker can hand Temporal.

        `max_content_bytes` counts the text's UTF-8 bytes, but the payload is JSON, where
        a NUL or a quote takes up to 6 bytes: a worker configured with a large cap could
        return an outcome Temporal refuses, which fails the activity *after* the effect.
        So the encoded size is measured, and the cap shrinks until it fits.
        """
        error_type = None if outcome.error_type is None else utf8_text(outcome.error_type)
        ceiling = self._worker_payload_limit() - PAYLOAD_ENVELOPE_BYTES
        limit = self.max_content_bytes
        while True:
            content, truncated = cap_content(outcome.content, limit)
            capped = outcome.model_copy(
                update={
                    "content": content,
                    "truncated": truncated or outcome.truncated,
                    "error_type": error_type,
                }
            )
            size = len(ToolOutcome.__pydantic_serializer__.to_json(capped))
            if size <= ceiling or limit <= MIN_CONTENT_BYTES:
                return capped
            limit = max(MIN_CONTENT_BYTES, min(limit, len(content.encode("utf-8"))) // 2)


async def _report_cancelled_after_timeout(
    definition: AnyTool, invocation: ToolInvocation, started: float
) -> None:
    """The SDK cancels an attempt a few seconds after its timeout (Temporal no longer
    waits for it): an opaque tool cancelled that way is reported to the run like a late
    result, so the person asked about the call learns it never returned. Any other
    cancellation (an interrupt, a worker shutdown) is the workflow's to report."""
    try:
        details = activity.cancellation_details()
    except Exception:
        return
    if details is None or not details.timed_out:
        return
    outcome = ToolOutcome(
        status="tool_error",
        content=(
            f"Tool {definition.name!r} was cancelled after its timeout, before it "
            "returned: it may have taken part of its effect."
        ),
        error_type=CANCELLED_AFTER_TIMEOUT,
    )
    await _report_if_late(definition, invocation, outcome, started, cancelled=True)


async def _report_if_late(
    definition: AnyTool,
    invocation: ToolInvocation,
    outcome: ToolOutcome,
    started: float,
    *,
    cancelled: bool = False,
) -> None:
    """Say so when the tool returned after its attempt's timeout, and keep an opaque
    call's result.

    Temporal has then already timed the attempt out and will refuse its completion (the
    SDK logs "Activity not found on completion", without the tool's name): this warning
    names the tool beside it. An opaque call's outcome is sent to the run
    (`LATE_TOOL_RESULT_SIGNAL`), which keeps it for the person asked whether the call
    happened; a pure or resumable call is run again by the table, so nothing is sent.
    Late means past the timeout by the worker's own clock or by the server's start
    time; a call that finished just in time may be sent too, and the run ignores it
    once its completion arrives. Never raises: the effect has happened.
    """
    try:
        info = activity.info()
        timeout = info.start_to_close_timeout
        if timeout is None or not timeout:
            return
        limit = timeout.total_seconds()
        overrun = max(
            time.monotonic() - started - limit,
            (datetime.now(UTC) - info.started_time).total_seconds() - limit,
        )
    except Exception:  # outside a worker (a direct call in a test): nothing to report
        return
    if overrun < -LATE_MARGIN_S and not cancelled:
        return
    overrun = max(overrun, 0.0)
    sent = definition.effect == "opaque"
    activity.logger.warning(
        "tool %r %s %.1f s after its %g s timeout (call %s of %s, attempt %d): "
        "Temporal no longer waits for this attempt, so its completion is refused "
        "('Activity not found on completion'); %s",
        definition.name,
        "was cancelled by the SDK, before it returned," if cancelled else "finished",
        overrun,
        limit,
        invocation.call_id,
        invocation.workflow_id,
        invocation.attempt,
        "its result is sent to the run, for the person who resolves the call"
        if sent
        else f"the run runs a {definition.effect} tool again",
    )
    if not sent or invocation.idempotency_key is None:
        return
    late = LateToolResult(
        key=invocation.idempotency_key,
        attempt=invocation.attempt,
        call_id=invocation.call_id,
        outcome=outcome,
        overrun_s=min(overrun, 1e9),
    )
    try:
        run = activity.client().get_workflow_handle(
            invocation.workflow_id, run_id=info.workflow_run_id
        )
        await run.signal(LATE_TOOL_RESULT_SIGNAL, late)
    except Exception as error:  # the run ended meanwhile, the server is gone: say so
        activity.logger.warning(
            "the late result of tool %r (call %s) could not be sent to its run: %s",
            definition.name,
            invocation.call_id,
            error,
        )


def _heartbeat(steps: list[JsonValue]) -> None:
    activity.heartbeat(steps)


def _type_name(value: object) -> str:
    """The class name, as text that encodes (a class can be named anything)."""
    try:
        return utf8_text(str(type(value).__name__))
    except Exception:
        return "object"


def _message(error: BaseException) -> str:
    """`str(error)` stripped, or a marker when `__str__` raises or returns a non-string."""
    try:
        text = str(error)
    except Exception as unreadable:
        return marker(f"the exception's message could not be read: {_type_name(unreadable)}")
    return utf8_text(text).strip()


def invalid_arguments_detail(definition: AnyTool, error: ValidationError) -> str:
    """What the model needs to fix its arguments: each failing field, path and reason."""
    lines = [f"Invalid arguments for tool {definition.name!r}; the tool did not run."]
    for item in error.errors(include_url=False):
        path = _path(item["loc"])
        line = f"- {path}: {item['msg']}"
        if item["type"] not in ("missing", "extra_forbidden"):
            line += f" (got {_input_excerpt(item.get('input'))})"
        lines.append(line)
    lines.append(_expected(definition.parameters))
    return "\n".join(lines)


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(arguments)"


def _input_excerpt(value: Any) -> str:
    text = encode_result(value) if not isinstance(value, str) else repr(value)
    if len(text) > INPUT_EXCERPT_CHARS:
        return text[:INPUT_EXCERPT_CHARS] + "..."
    return text


def _expected(parameters: dict[str, Any]) -> str:
    properties = parameters.get("properties", {})
    if not properties:
        return "The tool takes no arguments: send {}."
    required = set(parameters.get("required", []))
    described = [
        f"{name} ({_type_of(schema)}{', required' if name in required else ''})"
        for name, schema in properties.items()
    ]
    extra = parameters.get("additionalProperties")
    tail = " No other arguments are accepted." if extra is False else ""
    return "Expected arguments: " + ", ".join(described) + "." + tail


def _type_of(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("type"), str):
        return str(schema["type"])
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " or ".join(_type_of(option) for option in options)
    return "any"
