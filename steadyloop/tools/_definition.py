"""Declaring a tool: `@tool` on an async function, checked when it is decorated.

Everything that can be wrong with a tool's declaration is refused at import time with
a `ToolDefinitionError` naming the function and the fix, never on the first call in
production: a sync function (it would block the worker's event loop), a parameter
without a type hint (no schema), `*args`/`**kwargs` (no named schema), a type pydantic
cannot describe, a recursive model (cannot be inlined for providers), a name the OpenAI
API refuses (`^[a-zA-Z0-9_-]{1,64}$`), an unknown effect, a non-positive timeout, a
heartbeat timeout on a tool that is not resumable or that is not shorter than its timeout,
a plugin name that rule refuses.

The argument schema comes from one of two shapes:

- a single parameter annotated with a pydantic model: the model *is* the arguments
  (its fields are the top-level argument names) and the tool receives one validated
  instance; the model's own config decides, for instance, whether extra keys are
  refused;
- otherwise, each parameter is one argument, typed by its hint (`Annotated[int,
  Field(description=...)]` adds a description), defaulted by its default. steadyloop
  builds the model with `pydantic.create_model` and refuses unknown keys
  (`extra="forbid"`), so a misspelt optional argument is reported to the model instead
  of being silently ignored.

Parameter names are carried as field *aliases*, so a parameter may be called `json`,
`schema`, `model_config` or `_private` without clashing with pydantic's own names.
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model
from pydantic.fields import FieldInfo

from steadyloop._chat import ToolSpec
from steadyloop._run.bounds import seconds_problem
from steadyloop.errors import SteadyloopError
from steadyloop.tools._payloads import EFFECTS, ActivityTarget, Effect, ToolDescription
from steadyloop.tools._schema import SchemaError, arguments_schema
from steadyloop.tools._schema_profiles import SchemaProfile, drop_absent_nulls, sanitize_tool_schema

P = ParamSpec("P")
R = TypeVar("R")

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_TOOL_TIMEOUT = timedelta(seconds=30)

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


class ToolWithoutDescription(SteadyloopError, UserWarning):
    """A tool the model would see with an empty description (no docstring, none given).

    A warning, not a refusal: the tool works, but a model picks tools by their
    descriptions, so one without is rarely called when it should be."""


class ToolDefinitionError(SteadyloopError, ValueError):
    """A tool declaration that cannot work; raised when the function is decorated."""


@dataclass(frozen=True, eq=False)
class ToolDefinition(Generic[P, R]):
    """A declared tool: the function, its checked metadata and its arguments model.

    Calling the definition calls the function unchanged, so a decorated tool can still
    be awaited directly in tests. The run-tool activity uses `validate` then `invoke`.
    """

    fn: Callable[P, Awaitable[R]]
    name: str
    description: str
    effect: Effect
    timeout: timedelta
    heartbeat_timeout: timedelta | None
    approval: bool
    arguments_model: type[BaseModel]
    parameters: dict[str, Any]
    # Model shape: the parameter that receives the whole validated model.
    model_parameter: inspect.Parameter | None
    # Keyword shape: (model field name, parameter) per parameter, in signature order.
    argument_fields: tuple[tuple[str, inspect.Parameter], ...]
    # The plugin it belongs to (`steadyloop.tools._plugins`); None: a registry may still
    # put it in one.
    plugin: str | None = None
    # The MCP server it is served from (`steadyloop._mcp.tools`); None: a Python tool.
    mcp_server: str | None = None
    # The user's own activity the workflow schedules for a call (`activity_as_tool`);
    # None: the tool runs inside `steadyloop.run_tool`.
    activity: ActivityTarget | None = None

    @property
    def function(self) -> Callable[P, Awaitable[R]]:
        """The declared function: for an activity tool, the activity a worker registers."""
        return self.fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        return self.fn(*args, **kwargs)

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Arguments checked against the schema; raises `pydantic.ValidationError`.

        A `null` for an optional argument that cannot be null means "not given" (the
        default applies): it is what a model answering a strict schema sends for an
        argument it leaves out (`steadyloop.tools._schema_profiles`).
        """
        return self.arguments_model.model_validate(drop_absent_nulls(arguments, self.parameters))

    async def invoke(self, validated: BaseModel) -> R:
        """Run the tool on arguments `validate` returned."""
        values: list[tuple[inspect.Parameter, Any]]
        if self.model_parameter is not None:
            values = [(self.model_parameter, validated)]
        else:
            values = [(param, getattr(validated, field)) for field, param in self.argument_fields]
        args = [value for param, value in values if param.kind is param.POSITIONAL_ONLY]
        kwargs = {
            param.name: value for param, value in values if param.kind is not param.POSITIONAL_ONLY
        }
        call: Callable[..., Awaitable[R]] = self.fn
        return await call(*args, **kwargs)

    def describe(self, profile: SchemaProfile = "portable") -> ToolDescription:
        """The tool as a workflow offers it to a model of `profile`'s provider.

        A schema OpenAI's strict mode cannot express (a free-form object, an untyped
        value) is offered without `strict`, rather than not at all.
        """
        strict = profile == "openai_strict"
        try:
            parameters = sanitize_tool_schema(self.parameters, profile)
        except SchemaError:
            if not strict:
                raise
            strict = False
            parameters = copy.deepcopy(self.parameters)
        return ToolDescription(
            name=self.name,
            description=self.description,
            parameters=parameters,
            strict=strict,
            effect=self.effect,
            timeout_s=self.timeout.total_seconds(),
            heartbeat_timeout_s=(
                None if self.heartbeat_timeout is None else self.heartbeat_timeout.total_seconds()
            ),
            approval=self.approval,
            plugin=self.plugin,
            mcp_server=self.mcp_server,
            activity=self.activity,
        )

    def to_spec(self) -> ToolSpec:
        return self.describe().to_spec()


@overload
def tool(fn: Callable[P, Awaitable[R]], /) -> ToolDefinition[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "opaque",
    timeout: timedelta = DEFAULT_TOOL_TIMEOUT,
    heartbeat_timeout: timedelta | None = None,
    approval: bool = False,
    plugin: str | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], ToolDefinition[P, R]]: ...


def tool(
    fn: Callable[P, Awaitable[R]] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "opaque",
    timeout: timedelta = DEFAULT_TOOL_TIMEOUT,
    heartbeat_timeout: timedelta | None = None,
    approval: bool = False,
    plugin: str | None = None,
) -> ToolDefinition[P, R] | Callable[[Callable[P, Awaitable[R]]], ToolDefinition[P, R]]:
    """Declare an async function as a tool. Use as `@tool` or `@tool(...)`.

    - `name`: the name the model calls; defaults to the function's name. Must match
      `^[a-zA-Z0-9_-]{1,64}$` (the OpenAI API's rule).
    - `description`: what the model reads to decide when to call it; defaults to the
      first paragraph of the docstring.
    - `effect`: `"pure"`, `"resumable"` or `"opaque"`. The default is `"opaque"`
      because it is the only wrong answer that costs nothing but a question: a pure
      tool declared opaque at worst has a lost call held for a person to resolve,
      while a side-effecting tool declared pure is silently run again on a retry (a
      second email, a second payment). Declare `"pure"` only for tools with no side
      effect.
    - `timeout`: the longest one call may take; the workflow uses it as the tool
      activity's start-to-close timeout. Must be positive.
    - `heartbeat_timeout` (resumable tools only): the longest an attempt may go without
      recording a sub-operation (`current_progress().record(...)`, or `.keep_alive()`
      during a long one) before Temporal declares it lost. Without it a killed worker is
      noticed only when `timeout` runs out; with it, after this long, and the workflow
      reclaims the call with the progress recorded so far. Must be positive and shorter
      than `timeout`. Refused on pure and opaque tools: nothing in them heartbeats, so
      every call longer than it would be declared lost (for an opaque tool, a spurious
      ambiguous call held for a person).
    - `approval`: every call waits for a person to approve or reject it before it runs
      (`steadyloop approve ID CALL`); a rejection is answered to the model with the
      person's reason. Calls of the same batch that need no approval run meanwhile.
    - `plugin`: the plugin the tool belongs to: a run offers it only once the model
      activates that plugin, or when the run makes the plugin core
      (`steadyloop.tools._plugins`). Same naming rule as `name`.
    """

    def decorate(function: Callable[P, Awaitable[R]]) -> ToolDefinition[P, R]:
        return _define(
            function,
            name=name,
            description=description,
            effect=effect,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            approval=approval,
            plugin=plugin,
            scope=_caller_scope(),
        )

    if fn is None:
        return decorate
    if not callable(fn):
        raise ToolDefinitionError(
            f"@tool expects an async function, got {fn!r}; pass options by keyword, "
            "e.g. @tool(name=...)"
        )
    return _define(
        fn,
        name=name,
        description=description,
        effect=effect,
        timeout=timeout,
        heartbeat_timeout=heartbeat_timeout,
        approval=approval,
        plugin=plugin,
        scope=_caller_scope(),
    )


def _define(
    fn: Callable[P, Awaitable[R]],
    *,
    name: str | None,
    description: str | None,
    effect: Any,
    timeout: Any,
    heartbeat_timeout: Any,
    approval: Any,
    plugin: Any,
    scope: dict[str, Any],
) -> ToolDefinition[P, R]:
    label = getattr(fn, "__qualname__", None) or repr(fn)
    if not (inspect.iscoroutinefunction(fn) or _has_async_call(fn)):
        raise ToolDefinitionError(
            f"tool {label} must be an `async def` function: a sync function would block "
            "the worker's event loop (wrap blocking work in `await asyncio.to_thread(...)`)"
        )
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str) or not TOOL_NAME_PATTERN.fullmatch(tool_name):
        raise ToolDefinitionError(
            f"tool {label}: name {tool_name!r} is not a valid tool name; it must match "
            f"{TOOL_NAME_PATTERN.pattern} (letters, digits, '_' and '-', at most 64); "
            "pass name=..."
        )
    if effect not in EFFECTS:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: effect {effect!r} is not one of {', '.join(EFFECTS)}"
        )
    checked_seconds(tool_name, "timeout", timeout)
    _check_heartbeat_timeout(tool_name, effect, timeout, heartbeat_timeout)
    if not isinstance(approval, bool):
        raise ToolDefinitionError(f"tool {tool_name!r}: approval must be True or False")
    if plugin is not None and (
        not isinstance(plugin, str) or not TOOL_NAME_PATTERN.fullmatch(plugin)
    ):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: plugin {plugin!r} is not a valid plugin name; it must match "
            f"{TOOL_NAME_PATTERN.pattern}"
        )
    description = tool_description(tool_name, fn, description, "function", stacklevel=4)

    model, model_parameter, fields = _arguments_model(fn, tool_name, scope)
    try:
        parameters = arguments_schema(model)
    except Exception as error:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot derive a JSON schema for its arguments: {error}"
        ) from error
    return ToolDefinition(
        fn=fn,
        name=tool_name,
        description=description.strip(),
        effect=effect,
        timeout=timeout,
        heartbeat_timeout=heartbeat_timeout,
        approval=approval,
        arguments_model=model,
        parameters=parameters,
        model_parameter=model_parameter,
        argument_fields=fields,
        plugin=plugin,
    )


def _check_heartbeat_timeout(
    tool_name: str, effect: Effect, timeout: timedelta, heartbeat_timeout: Any
) -> None:
    if heartbeat_timeout is None:
        return
    if not isinstance(heartbeat_timeout, timedelta):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: heartbeat_timeout must be a datetime.timedelta or None, "
            f"got {heartbeat_timeout!r}"
        )
    problem = seconds_problem(heartbeat_timeout.total_seconds())
    if problem is not None:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: heartbeat_timeout {problem} (got {heartbeat_timeout})"
        )
    if effect != "resumable":
        raise ToolDefinitionError(
            f"tool {tool_name!r}: heartbeat_timeout is only for effect='resumable' tools, "
            f"which heartbeat each sub-operation they record; a {effect} tool never "
            "heartbeats, so every call longer than the heartbeat timeout would be declared "
            "lost. Drop heartbeat_timeout, or declare the tool resumable and record its "
            "sub-operations with steadyloop.tools.current_progress()"
        )
    if heartbeat_timeout >= timeout:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: heartbeat_timeout ({heartbeat_timeout}) must be shorter "
            f"than timeout ({timeout}); otherwise the timeout always ends a lost attempt first"
        )


def _caller_scope() -> dict[str, Any]:
    """Local names of the scope that applied the decorator (two frames up).

    Hints are resolved at decoration time; with `from __future__ import annotations`
    they are strings, and a type defined in the enclosing function is visible only
    through that function's frame.
    """
    return dict(sys._getframe(2).f_locals)


def _has_async_call(fn: object) -> bool:
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object with `async def __call__`
    )


def checked_seconds(tool_name: str, label: str, value: Any) -> float:
    """`value` (a `timedelta`) in seconds, bounded like every duration that reaches the
    workflow (`steadyloop._run.bounds`): 50 years would pass `> 0` and overflow Temporal's
    timeout arithmetic. `ToolDefinitionError` naming `label` otherwise."""
    if not isinstance(value, timedelta):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: {label} must be a datetime.timedelta, got {value!r}"
        )
    problem = seconds_problem(value.total_seconds())
    if problem is not None:
        raise ToolDefinitionError(f"tool {tool_name!r}: {label} {problem} (got {value})")
    return value.total_seconds()


def tool_description(
    tool_name: str, fn: Callable[..., Any], given: Any, what: str, *, stacklevel: int
) -> str:
    """`given`, else the first paragraph of `fn`'s docstring; `ToolWithoutDescription`
    (raised `stacklevel` frames up: the user's own declaration) when that is empty, since
    the model cannot tell when to call a tool it sees undescribed."""
    if given is None:
        given = _first_paragraph(inspect.getdoc(fn))
    elif not isinstance(given, str):
        raise ToolDefinitionError(f"tool {tool_name!r}: description must be a string")
    if not given.strip():
        warnings.warn(
            f"tool {tool_name!r} has no description: the model reads an empty one and cannot "
            f"tell when to call it; give the {what} a docstring, or pass description=",
            ToolWithoutDescription,
            stacklevel=stacklevel,
        )
    return str(given)


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    first = _PARAGRAPH_BREAK.split(doc.strip(), maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines())


def _arguments_model(
    fn: Callable[..., Any], tool_name: str, scope: dict[str, Any]
) -> tuple[type[BaseModel], inspect.Parameter | None, tuple[tuple[str, inspect.Parameter], ...]]:
    try:
        signature = inspect.signature(fn, eval_str=True, locals=scope)
    except Exception as error:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot read its signature and type hints ({error}); "
            "hints are resolved when the tool is decorated, so every type they name must "
            "be defined (or imported) before the decorated function"
        ) from error
    params = list(signature.parameters.values())
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"tool {tool_name!r}: {star}{param.name} cannot be described to a model; "
                "declare each argument as a named, typed parameter (or take one pydantic model)"
            )
        if param.annotation is param.empty:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type hint; every "
                "parameter needs one, it is the argument's schema"
            )

    if len(params) == 1 and _is_arguments_model(params[0].annotation):
        model: type[BaseModel] = params[0].annotation
        return model, params[0], ()

    definitions: dict[str, Any] = {}
    fields: list[tuple[str, inspect.Parameter]] = []
    for index, param in enumerate(params):
        field = f"p{index}"
        if isinstance(param.default, FieldInfo):
            # `x: int = Field(5, description=...)`: the FieldInfo carries the default.
            annotation: Any = Annotated[param.annotation, param.default]
            definitions[field] = (annotation, Field(alias=param.name))
        else:
            default = ... if param.default is param.empty else param.default
            definitions[field] = (param.annotation, Field(default, alias=param.name))
        fields.append((field, param))
    try:
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **definitions,
        )
    except Exception as error:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: its type hints cannot become an arguments model: {error}"
        ) from error
    return model, None, tuple(fields)


def _is_arguments_model(annotation: Any) -> bool:
    return (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and not issubclass(annotation, RootModel)
    )
