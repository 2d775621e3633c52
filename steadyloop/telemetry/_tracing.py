"""The workflow side of telemetry, when it is on: the run span (an interceptor) and the
hooks `steadyloop.telemetry._workflow` calls. Loaded outside the sandbox (by
`Installed.worker_plugins`) and reached from workflow code through an extern function,
so the sandbox never imports OpenTelemetry itself.

Replay safety, point by point:
- Spans come from temporalio's `ReplaySafeTracerProvider`: ids drawn inside a workflow
  come from its seeded random, so a span restarted while a new worker replays the
  history gets the id the first worker gave it (its activities' spans already name it as
  their parent), and `end()` reached while replaying history exports nothing.
- A span is ended only on a normal return, an `Exception`, a cancellation or a
  continue-as-new. Any other `BaseException` is the SDK tearing the workflow down
  (eviction, `GeneratorExit`): the span is left unended, so it is neither exported
  truncated nor twice.
- Metrics recorded from workflow code are skipped while replaying history, so each
  decision is counted once, by the worker that made it.
- Nothing here schedules a command, sleeps or draws from `workflow.random()`; the
  `opentelemetry` context is attached and detached inside one coroutine (a contextvar of
  the workflow task), and a detach from a foreign context is ignored, as temporalio does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import opentelemetry.context
import temporalio.worker
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context
from opentelemetry.util.types import AttributeValue
from temporalio import workflow
from temporalio.workflow import ContinueAsNewError

from steadyloop.telemetry import _attributes as a
from steadyloop.telemetry._install import Installed
from steadyloop.telemetry._workflow import EXTERN_KEY, AttemptTrace

T = TypeVar("T")

RUN_WORKFLOW_TYPE = "ToolLoopWorkflow"
CONTENT_CHARS = 8192
DECISION_NAMES = {
    "execute": "executed",
    "replay": "replayed",
    "wait": "waited",
    "ambiguous": "ambiguous",
}


@dataclass
class _TurnNote:
    endpoint: str | None = None
    model: str | None = None
    attempts: int = 0


@dataclass
class _ToolNote:
    span: Span
    decisions: list[str] = field(default_factory=list)
    lost: int = 0


_TURN: contextvars.ContextVar[_TurnNote | None] = contextvars.ContextVar(
    "steadyloop_turn", default=None
)
_TOOL: contextvars.ContextVar[_ToolNote | None] = contextvars.ContextVar(
    "steadyloop_tool", default=None
)


@contextmanager
def _attached(span: Span) -> Iterator[None]:
    context = set_span_in_context(span)
    token = opentelemetry.context.attach(context)
    try:
        yield
    finally:
        if opentelemetry.context.get_current() is context:
            # A token of another contextvars.Context (GC, eviction) cannot be reset.
            with contextlib.suppress(ValueError):
                token.var.reset(token)


def _live() -> bool:
    return not workflow.unsafe.is_replaying_history_events()


def _bounded(text: str) -> str:
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"


def _ended_by(span: Span, error: BaseException) -> bool:
    """Set the span's status for `error`; whether the span should be ended."""
    if isinstance(error, ContinueAsNewError):
        return True
    if isinstance(error, asyncio.CancelledError):
        span.set_status(Status(StatusCode.ERROR, "cancelled"))
        span.set_attribute(a.ERROR_TYPE, "cancelled")
        return True
    if isinstance(error, Exception):
        # The type only: a message can quote a prompt or a provider's echo of it.
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.set_attribute(a.ERROR_TYPE, type(error).__name__)
        return True
    return False  # the SDK tearing the workflow down: leave it unended


class WorkflowTracing:
    """The hooks of `steadyloop.telemetry._workflow.WorkflowTracingHooks`, live."""

    def __init__(self, installed: Installed) -> None:
        self.tracer = installed.tracer
        self.instruments = installed.instruments
        self.content = installed.settings.capture_content

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        info = workflow.info()
        attributes: dict[str, AttributeValue] = {
            a.OPERATION: "invoke_agent",
            a.AGENT_NAME: "steadyloop",
            a.CONVERSATION_ID: info.workflow_id,
            a.WORKFLOW_ID: info.workflow_id,
            a.RUN_ID: info.run_id,
        }
        if info.parent is not None:
            attributes[a.PARENT_WORKFLOW_ID] = info.parent.workflow_id
        if info.continued_run_id is not None:
            attributes["steadyloop.continued_from_run_id"] = info.continued_run_id
        span = self.tracer.start_span(a.RUN_SPAN, attributes=attributes)
        with _attached(span):
            try:
                result = await work()
            except BaseException as error:
                if isinstance(error, ContinueAsNewError):
                    span.set_attribute(a.RUN_OUTCOME, "continued_as_new")
                if _ended_by(span, error):
                    span.end()
                raise
        span.set_attribute(a.RUN_OUTCOME, str(getattr(result, "stop_reason", "completed")))
        span.end()
        return result

    async def turn(self, number: int, stats: Any, work: Awaitable[T]) -> T:
        before = (stats.prompt_tokens, stats.completion_tokens, stats.cost_usd)
        note = _TurnNote()
        token = _TURN.set(note)
        span = self.tracer.start_span(a.TURN_SPAN, attributes={a.TURN: number})
        try:
            with _attached(span):
                result = await work
        except BaseException as error:
            if _ended_by(span, error):
                span.set_attribute("steadyloop.turn.attempts", note.attempts)
                span.end()
            raise
        finally:
            _TURN.reset(token)
        cost = stats.cost_usd - before[2]
        finish = getattr(result, "finish_reason", None)
        span.set_attributes(
            {
                a.INPUT_TOKENS: stats.prompt_tokens - before[0],
                a.OUTPUT_TOKENS: stats.completion_tokens - before[1],
                a.COST_USD: cost,
                "steadyloop.turn.attempts": note.attempts,
            }
        )
        if finish:
            span.set_attribute(a.FINISH_REASONS, [finish])
        if note.endpoint is not None:
            span.set_attribute(a.ENDPOINT, note.endpoint)
        if note.model is not None:
            span.set_attribute(a.REQUEST_MODEL, note.model)
        span.end()
        if cost > 0 and _live():
            self.instruments.cost.add(
                cost, {a.ENDPOINT: note.endpoint or "", a.REQUEST_MODEL: note.model or ""}
            )
        return result

    def attempt(self, endpoint: str, model: str, sequence: int, on_candidate: int) -> AttemptTrace:
        return _Attempt(self, endpoint, model, sequence, on_candidate)

    async def tool(
        self, description: Any, invocation: Any, work: Awaitable[T], decided: str | None
    ) -> T:
        name = str(description.name)
        attributes: dict[str, AttributeValue] = {
            a.OPERATION: "execute_tool",
            a.TOOL_NAME: name,
            a.TOOL_CALL_ID: str(invocation.call_id),
            a.TOOL_EFFECT: str(description.effect),
        }
        server = getattr(description, "mcp_server", None)
        if server is not None:
            attributes[a.MCP_SERVER] = str(server)
            attributes[a.MCP_METHOD] = "tools/call"
        if self.content:
            attributes[a.CONTENT_TOOL_ARGUMENTS] = _bounded(
                json.dumps(invocation.arguments, default=str, ensure_ascii=False)
            )
        span = self.tracer.start_span(f"execute_tool {name}", attributes=attributes)
        note = _ToolNote(span)
        token = _TOOL.set(note)
        try:
            if decided is not None:
                self.receipt_decision(decided, name)
            with _attached(span):
                outcome = await work
        except BaseException as error:
            if _ended_by(span, error):
                self._decisions(note)
                span.end()
            raise
        finally:
            _TOOL.reset(token)
        self._decisions(note)
        status = str(getattr(outcome, "status", "ok"))
        span.set_attribute(a.TOOL_STATUS, status)
        if status != "ok":
            span.set_attribute(a.ERROR_TYPE, str(getattr(outcome, "error_type", None) or status))
        if self.content:
            result = str(getattr(outcome, "content", ""))
            span.set_attribute(a.CONTENT_TOOL_RESULT, _bounded(result))
        span.end()
        return outcome

    @staticmethod
    def _decisions(note: _ToolNote) -> None:
        if note.decisions:
            note.span.set_attribute(a.RECEIPT_DECISION, note.decisions[-1])
            note.span.set_attribute(a.RECEIPT_DECISIONS, note.decisions)

    def receipt_decision(self, kind: str, tool: str) -> None:
        decision = DECISION_NAMES.get(kind, kind)
        note = _TOOL.get()
        if note is not None:
            note.decisions.append(decision)
        if _live():
            self.instruments.receipt_decisions.add(
                1, {a.RECEIPT_DECISION: decision, a.TOOL_NAME: tool}
            )
            if decision == "replayed":
                self.instruments.replays.add(1, {a.TOOL_NAME: tool})

    def attempt_lost(self, attempt: int, kind: str, text: str) -> None:
        note = _TOOL.get()
        if note is None:
            return
        note.lost += 1
        note.span.add_event(
            a.TOOL_ATTEMPT_LOST_EVENT,
            {a.TOOL_ATTEMPT: attempt, a.TOOL_LOST_KIND: kind, a.TOOL_LOST_REASON: text},
        )
        note.span.set_attribute(a.TOOL_ATTEMPTS_LOST, note.lost)

    def breaker_opened(self, endpoint: str) -> None:
        if _live():
            self.instruments.breaker_openings.add(1, {a.ENDPOINT: endpoint})


class _Attempt:
    """One model attempt's span, from scheduling to the route's decision about it."""

    def __init__(
        self, tracing: WorkflowTracing, endpoint: str, model: str, sequence: int, on_candidate: int
    ) -> None:
        self.tracing = tracing
        self.endpoint = endpoint
        self.model = model
        self.span = tracing.tracer.start_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            attributes={
                a.OPERATION: "chat",
                a.REQUEST_MODEL: model,
                a.ENDPOINT: endpoint,
                a.ATTEMPT_SEQUENCE: sequence,
                a.ATTEMPT_ON_CANDIDATE: on_candidate,
            },
        )
        note = _TURN.get()
        if note is not None:
            note.attempts += 1

    async def scheduled(self, work: Awaitable[T]) -> T:
        """Await the activity with this span current. A failed attempt comes back to the
        route, which calls `ended`; a cancellation that escapes the route ends it here."""
        try:
            with _attached(self.span):
                return await work
        except asyncio.CancelledError as error:
            _ended_by(self.span, error)
            self.span.end()
            raise

    def ended(self, entry: Any, turn: Any = None) -> None:
        span = self.span
        outcome = str(entry.outcome)
        span.set_attribute(a.ATTEMPT_OUTCOME, outcome)
        failure = entry.failure
        if failure is not None:
            # In the route's words (a cut body is `network`), as the timeline says it.
            span.set_status(Status(StatusCode.ERROR, str(failure.route_kind)))
            span.set_attribute(a.ERROR_TYPE, str(failure.route_kind))
            if failure.stall_phase is not None:
                span.set_attribute(a.STALL_PHASE, str(failure.stall_phase))
        elif outcome == "failed":  # cancelled by the caller: no facts
            span.set_attribute(a.ERROR_TYPE, str(entry.error_type or "cancelled"))
        if entry.action is not None:
            span.set_attributes(
                {
                    a.ROUTE_ACTION: str(entry.action),
                    a.ROUTE_RULE: str(entry.rule),
                    a.ROUTE_DELAY_S: float(entry.delay_s),
                    a.BREAKER_RECORDED: bool(entry.breaker_recorded),
                }
            )
        if turn is not None:
            usage = turn.usage
            if usage is not None:
                span.set_attribute(a.INPUT_TOKENS, int(usage.prompt_tokens))
                span.set_attribute(a.OUTPUT_TOKENS, int(usage.completion_tokens))
            if turn.finish_reason:
                span.set_attribute(a.FINISH_REASONS, [str(turn.finish_reason)])
            if turn.model:
                span.set_attribute(a.RESPONSE_MODEL, str(turn.model))
            if turn.defects:  # the turn asks for a fresh completion, or stops, for it
                span.set_attribute("steadyloop.stream.completion.defect", str(turn.defects[0].kind))
            note = _TURN.get()
            if note is not None:
                note.endpoint, note.model = self.endpoint, self.model
        span.end()
        if (
            outcome == "failed"
            and entry.action is not None
            and entry.action != "stop"
            and failure is not None
            and _live()
        ):
            self.tracing.instruments.retries.add(
                1,
                {
                    a.RETRY_REASON: str(failure.kind),
                    a.ROUTE_ACTION: str(entry.action),
                    a.ENDPOINT: self.endpoint,
                    a.REQUEST_MODEL: self.model,
                },
            )


class _RunSpanInbound(temporalio.worker.WorkflowInboundInterceptor):
    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        if workflow.info().workflow_type != RUN_WORKFLOW_TYPE:
            return await self.next.execute_workflow(input)
        tracing: WorkflowTracing = workflow.extern_functions()[EXTERN_KEY]()
        return await tracing.run(lambda: self.next.execute_workflow(input))


class WorkflowTelemetryInterceptor(temporalio.worker.Interceptor):
    """Registers the workflow hooks (an extern function) and the run span on a worker."""

    def __init__(self, installed: Installed) -> None:
        self._tracing = WorkflowTracing(installed)

    def workflow_interceptor_class(
        self, input: temporalio.worker.WorkflowInterceptorClassInput
    ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
        tracing = self._tracing
        input.unsafe_extern_functions[EXTERN_KEY] = lambda: tracing
        return _RunSpanInbound
