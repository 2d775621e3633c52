"""What the workflow and the tool activities say to each other, as pydantic payloads.

The workflow never imports user tool code: it learns what tools exist from the
`steadyloop.describe_tools` activity and asks for one to run through
`steadyloop.run_tool`. This module is everything both sides share, with no I/O and no
Temporal import, so workflow code can import it through the sandbox.

Failure modes made values here, so every call still ends in one tool message:

- A tool name the workflow asked about but the worker does not know: reported in
  `DescribeToolsResult.unknown`, not raised, so the run can tell the model.
- A call to an unknown tool, arguments the schema refuses, a tool that raised: a
  `ToolOutcome` with its own `status` and text written for the model.
- A result too large for a Temporal payload (2 MB hard limit): `ToolOutcome.content`
  is capped at `MAX_TOOL_CONTENT_BYTES` with a marker (see `steadyloop.tools._content`).

The activity names are constants here so the registering side (the worker) and the
scheduling side (the workflow) cannot drift apart.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from steadyloop._chat import ChatMessage, ToolSpec
from steadyloop._run.bounds import Seconds
from steadyloop.tools._schema_profiles import SchemaProfile

DESCRIBE_TOOLS_ACTIVITY = "steadyloop.describe_tools"
RUN_TOOL_ACTIVITY = "steadyloop.run_tool"
# The signal a tool activity sends its run when the tool returned after the attempt's
# timeout: Temporal no longer accepts that attempt's completion (`LateToolResult`).
LATE_TOOL_RESULT_SIGNAL = "tool_result_after_timeout"
# `ToolOutcome.error_type` of a late result for an attempt the worker cancelled after
# its timeout (the SDK does, about 5 s on), before the tool returned.
CANCELLED_AFTER_TIMEOUT = "CancelledAfterTimeout"

Effect = Literal["pure", "resumable", "opaque"]
"""What running a tool again would do (see shared/DESIGN.md, *effect*):

- `pure`: no side effect; running it again is harmless.
- `resumable`: records each sub-operation, so a reclaimed attempt skips what happened.
- `opaque`: one indivisible effect with no trail; a lost attempt may or may not have
  happened, and only a person can say which.
"""

EFFECTS: tuple[Effect, ...] = ("pure", "resumable", "opaque")

ToolOutcomeStatus = Literal["ok", "tool_error", "invalid_arguments", "unknown_tool"]


class ActivityParameter(BaseModel):
    """One argument of an activity tool, as the workflow needs it to build the call.

    `required`: the schema requires it. `default`: its default when it has one JSON can
    carry (`has_default`); a missing argument with a default JSON cannot carry is left
    for the function to fill, which only a trailing argument can be. `null_is_absent`: it
    is optional and its type does not admit `null`, so a `null` (what a model answering a
    strict schema sends for an omission) means "not given". `types`: the JSON types the
    schema names for it (empty: not a plain type, nothing checked before the call), so a
    wrong one is told to the model by name instead of as the activity's decoding error.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    required: bool = False
    has_default: bool = False
    default: JsonValue = None
    null_is_absent: bool = False
    types: list[str] = Field(default_factory=list)


class ActivityTarget(BaseModel):
    """Where and how an activity tool runs: the user's own activity, scheduled by the
    workflow under its own type name (`steadyloop.tools.activity_as_tool`).

    `task_queue` None: the run's own task queue. Timeouts are Temporal's, in seconds.
    The retry fields are the activity's `RetryPolicy` as plain values (`maximum_attempts`
    0: unlimited, bounded by `schedule_to_close_s`); an opaque tool always has 1.
    `parameters`: the function's arguments in signature order, sent positionally; None
    when the function takes one pydantic model (the call's arguments are that model),
    and then `fields` lists the model's fields for the same null rule.
    """

    model_config = ConfigDict(frozen=True)

    activity_type: str
    task_queue: str | None = None
    start_to_close_s: Seconds
    schedule_to_close_s: Seconds | None = None
    heartbeat_timeout_s: Seconds | None = None
    maximum_attempts: int = Field(default=1, ge=0)
    initial_interval_s: Seconds = 1.0
    backoff_coefficient: float = Field(default=2.0, ge=1.0, le=1e6, allow_inf_nan=False)
    maximum_interval_s: Seconds | None = None
    non_retryable_error_types: list[str] = Field(default_factory=list)
    parameters: list[ActivityParameter] | None = None
    fields: list[ActivityParameter] = Field(default_factory=list)


class ToolDescription(BaseModel):
    """One tool as the workflow sees it: enough to offer it to a model and schedule it.

    `parameters` is the sanitized JSON schema (no `$ref`/`$defs`, no `title`, top level
    `{"type": "object", "properties": ...}`). `timeout_s` is the tool's declared timeout;
    the workflow uses it as the run-tool activity's `start_to_close_timeout`.
    `heartbeat_timeout_s` (resumable tools only, else None) is the activity's
    `heartbeat_timeout`: how long an attempt may go without recording a sub-operation
    before Temporal declares it lost, so a killed worker is noticed in seconds rather
    than at `timeout_s`. `strict`: `parameters` is shaped for OpenAI's strict mode and
    the spec asks for it. `plugin`: the plugin the tool belongs to (None: no plugin),
    see `steadyloop.tools._plugins`. `approval`: each call waits for a person's approval
    before it runs (`@tool(approval=True)`). `mcp_server`: the configured MCP server the
    tool is served from (None: a Python tool), so a trace can name it. `activity`: the
    user's own activity the workflow schedules for a call (None: `steadyloop.run_tool`);
    its `timeout_s` is the whole call's bound (schedule-to-close, else start-to-close).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]
    effect: Effect
    timeout_s: Seconds
    heartbeat_timeout_s: Seconds | None = None
    strict: bool = False
    approval: bool = False
    plugin: str | None = None
    mcp_server: str | None = None
    activity: ActivityTarget | None = None

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=self.timeout_s)

    @property
    def heartbeat_timeout(self) -> timedelta | None:
        if self.heartbeat_timeout_s is None:
            return None
        return timedelta(seconds=self.heartbeat_timeout_s)

    def to_spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            strict=self.strict,
        )


class PluginDescription(BaseModel):
    """A named group of tools, as the activation tool offers it: its one-line description
    (may be empty) and its tools' names, in registration order."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    tools: list[str]


class DescribeToolsInput(BaseModel):
    """Which tools to describe (`None`: every registered tool; `[]`: none), which plugins
    (each plugin's tools are described too), and for which provider's schema rules
    (`steadyloop.tools._schema_profiles`)."""

    model_config = ConfigDict(frozen=True)

    names: list[str] | None = None
    plugins: list[str] = Field(default_factory=list)
    schema_profile: SchemaProfile = "portable"


class DescribeToolsResult(BaseModel):
    """The described tools, in the order asked for, and the names the worker lacks.

    `tools` holds the named tools, then the tools of the named plugins not already
    among them. `available` (`available_plugins`) lists every tool (plugin) the worker
    has, so the run can tell the person who configured it what it could have asked for.

    `payload_limit_bytes` is the largest activity input the worker's data converter can
    hand Temporal (`steadyloop._history.payload_storage.payload_limit`): far above 2 MB when its
    external storage takes every large payload out of history.
    """

    model_config = ConfigDict(frozen=True)

    tools: list[ToolDescription]
    unknown: list[str] = Field(default_factory=list)
    available: list[str] = Field(default_factory=list)
    plugins: list[PluginDescription] = Field(default_factory=list)
    unknown_plugins: list[str] = Field(default_factory=list)
    available_plugins: list[str] = Field(default_factory=list)
    payload_limit_bytes: int


class ToolInvocation(BaseModel):
    """One tool call for the run-tool activity.

    `arguments` were already read by the workflow (`steadyloop.parse_tool_call_arguments`);
    the activity validates them against the tool's schema. `workflow_id` is the run's
    workflow id (stable across continue-as-new), not Temporal's run id. When
    `allowed_tools` is set, a name outside it is answered as an unknown tool even if the
    worker has it, so a model cannot reach a tool its run was not given.
    """

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str
    workflow_id: str
    tenant_id: str
    allowed_tools: list[str] | None = None
    # The receipt's attempt number, and a key stable for the receipt: hand it to APIs
    # that deduplicate (an `Idempotency-Key` header), so a repeat is a no-op there too.
    attempt: int = Field(default=1, ge=1)
    idempotency_key: str | None = None
    # Resumable tools: the sub-operations earlier attempts recorded (the receipt's
    # progress snapshot, from the last heartbeat details of the attempt before), so
    # this attempt skips them; and whether this attempt took over from one that lost
    # its lease (that attempt may still be running somewhere as a zombie).
    previous_progress: list[JsonValue] = Field(default_factory=list)
    reclaimed: bool = False


class ToolOutcome(BaseModel):
    """How one call ended, with the text the workflow puts in the call's tool message.

    - `ok`: the tool returned; `content` is its result (strings verbatim, anything
      else JSON, see `steadyloop.tools._content.encode_result`).
    - `tool_error`: the tool raised; `content` is the error text for the model and
      `error_type` the exception's class name. The run goes on.
    - `invalid_arguments`: the arguments failed the schema; no tool code ran;
      `content` names each failing field and why.
    - `unknown_tool`: no such tool (or not allowed for this run); `content` lists the
      available ones.

    `truncated` is True when `content` was capped at `MAX_TOOL_CONTENT_BYTES`.
    """

    model_config = ConfigDict(frozen=True)

    status: ToolOutcomeStatus
    content: str
    error_type: str | None = None
    truncated: bool = False

    def to_message(self, call_id: str) -> ChatMessage:
        """The tool message answering the assistant call `call_id`."""
        return ChatMessage(role="tool", content=self.content, tool_call_id=call_id)


class LateToolResult(BaseModel):
    """What a tool returned after its attempt had timed out, sent to the run as a signal.

    Temporal refuses a timed-out attempt's completion (the SDK logs "Activity not found
    on completion"), so without this the result of an opaque call that did finish,
    only late, would be thrown away while a person is asked whether it happened.
    `key` and `attempt` name the receipt row; the run keeps the result only while that
    attempt still owns it and has timed out. `overrun_s`: how long after the timeout
    the tool returned, as the worker measured it.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    attempt: int = Field(ge=1)
    call_id: str
    outcome: ToolOutcome
    overrun_s: float = Field(ge=0, le=1e9, allow_inf_nan=False)


def unknown_tool_outcome(name: str, available: list[str]) -> ToolOutcome:
    """The answer to a call naming a tool that does not exist (or is not allowed).

    Pure, so the workflow can answer without scheduling an activity when it already
    knows the name is not among the run's tools; the activity uses the same words.
    """
    if available:
        listing = "Available tools: " + ", ".join(available) + "."
    else:
        listing = "No tools are available in this run."
    return ToolOutcome(
        status="unknown_tool",
        content=f"Unknown tool {name!r}. {listing}",
        error_type="UnknownTool",
    )
