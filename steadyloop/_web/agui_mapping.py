"""A run's events as AG-UI 1.0 events, and what a stream resumed mid-run must re-open.

Pure: run events (`steadyloop.events`) in, `ag_ui.core` models out. The mapping:

| run event          | AG-UI events                                                    |
| ------------------ | --------------------------------------------------------------- |
| `text_delta`       | TEXT_MESSAGE_START (once per turn and attempt), _CONTENT         |
| `reasoning_delta`  | REASONING_START, REASONING_MESSAGE_START (once), _CONTENT       |
| `tool_call`        | TOOL_CALL_START, TOOL_CALL_ARGS, TOOL_CALL_END                  |
| `tool_result`      | TOOL_CALL_RESULT                                                |
| `approval_waiting` | RUN_FINISHED, outcome `interrupt` (`reason: "tool_call"`)       |
| `stop`             | RUN_FINISHED `success` (`final_answer`; other stops: in         |
|                    | `result`), `cancelled` (`interrupted`), or RUN_ERROR (`failed`) |
| anything else      | CUSTOM `steadyloop.<type>` with the event as its value          |

Open constructs are closed (…_END) before anything else starts, so the stream nests as
AG-UI requires. A tool call's AG-UI id is `t<turn>-<call id>`: providers reuse `call_0`
every turn, and AG-UI needs one id per call in a run.

**Ids.** Frame `k` of the run event at cursor `c` has the SSE id `c.k`, so a client
that reconnects with `Last-Event-ID: c.k` continues with frame `k+1` of that event.
The frames that re-open a resumed stream (`opening`) have ids `c.k~p`, which resume at
the same place. `~p` alone is the first RUN_STARTED, before any run event.

**Resuming mid-message.** A stock client accepts a stream only if it opens with
RUN_STARTED; a client that reconnects mid-message also lost the open message. So a
resumed stream opens with RUN_STARTED, a MESSAGES_SNAPSHOT of every message closed so
far, and each open construct started again with what it held (`Tracker.opening`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)

from steadyloop.events import (
    ApprovalWaitingEvent,
    ReasoningDeltaEvent,
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = [
    "INTERRUPT_REASON",
    "InterruptRef",
    "Position",
    "Tracker",
    "agui_tool_call_id",
    "frame_id",
    "interrupt_id",
    "parse_frame_id",
    "parse_interrupt_id",
]

INTERRUPT_REASON = "tool_call"


def agui_tool_call_id(turn: int, call_id: str) -> str:
    return f"t{turn}-{call_id}"


@dataclass(frozen=True)
class InterruptRef:
    """What an approval's interrupt id names: the run, the cursor the stream goes on
    after, and the call it binds (arguments' SHA, turn, tool): a `resume[]` entry is
    decided with no lookup, so even while no worker runs (it is kept for one)."""

    run_id: str
    cursor: str
    sha256: str
    turn: int
    tool: str
    call_id: str


def interrupt_id(ref: InterruptRef) -> str:
    return ":".join(
        [ref.run_id, ref.cursor, ref.sha256, str(ref.turn), quote(ref.tool, safe=""), ref.call_id]
    )


def parse_interrupt_id(value: str) -> InterruptRef | None:
    parts = value.split(":", 5)
    if len(parts) != 6 or not all(parts) or not parts[3].isdigit():
        return None
    run_id, cursor, sha, turn, tool, call_id = parts
    return InterruptRef(run_id, cursor, sha, int(turn), unquote(tool), call_id)


@dataclass(frozen=True)
class Position:
    """Where a stream stands: after frame `frame` of the run event at `cursor` (None:
    before any run event)."""

    cursor: str | None
    frame: int


def frame_id(cursor: str | None, frame: int, opening: int | None = None) -> str:
    base = "" if cursor is None else f"{cursor}.{frame}"
    return base if opening is None else f"{base}~{opening}"


def parse_frame_id(value: str) -> Position | None:
    """The position an SSE id names, or None when it is not one this mapping wrote."""
    base, _, opening = value.partition("~")
    if opening and not opening.isdigit():
        return None
    if not base:
        return Position(None, -1) if opening else None
    cursor, sep, frame = base.rpartition(".")
    if not sep or not cursor or not frame.isdigit():
        return None
    return Position(cursor, int(frame))


@dataclass
class _Open:
    id: str
    text: str = ""
    name: str = ""  # a tool call's tool


@dataclass
class Tracker:
    """The AG-UI stream's state: messages closed so far and the constructs open now."""

    thread_id: str
    run_id: str
    messages: list[Message] = field(default_factory=list)
    text: _Open | None = None
    reasoning: _Open | None = None
    tool: _Open | None = None
    finished: bool = False

    # -- run events to AG-UI events ----------------------------------------------

    def map(self, event: RunEventItem, *, steadyloop_run: str) -> list[BaseEvent]:
        """The AG-UI events for one run event, applied to this tracker."""
        out = self.make(event, steadyloop_run=steadyloop_run)
        for made in out:
            self.apply(made)
        return out

    def make(self, event: RunEventItem, *, steadyloop_run: str) -> list[BaseEvent]:
        """The AG-UI events for one run event, from the state now (not applied)."""
        out: list[BaseEvent] = []
        if isinstance(event, TextDeltaEvent):
            message_id = f"msg-{event.turn}-{event.attempt}"
            if self.text is None or self.text.id != message_id:
                out += self._close()
                out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
            if event.text:
                out.append(TextMessageContentEvent(message_id=message_id, delta=event.text))
        elif isinstance(event, ReasoningDeltaEvent):
            message_id = f"reasoning-{event.turn}-{event.attempt}"
            if self.reasoning is None or self.reasoning.id != message_id:
                out += self._close()
                out.append(ReasoningStartEvent(message_id=message_id))
                out.append(ReasoningMessageStartEvent(message_id=message_id, role="reasoning"))
            if event.text:
                out.append(ReasoningMessageContentEvent(message_id=message_id, delta=event.text))
        elif isinstance(event, ToolCallEvent):
            call = agui_tool_call_id(event.turn, event.call_id)
            out += self._close()
            out.append(ToolCallStartEvent(tool_call_id=call, tool_call_name=event.name))
            if event.arguments:
                out.append(ToolCallArgsEvent(tool_call_id=call, delta=event.arguments))
            out.append(ToolCallEndEvent(tool_call_id=call))
        elif isinstance(event, ToolResultEvent):
            call = agui_tool_call_id(event.turn, event.call_id)
            out += self._close()
            out.append(
                ToolCallResultEvent(
                    message_id=f"result-{call}", tool_call_id=call, content=event.text, role="tool"
                )
            )
        elif isinstance(event, ApprovalWaitingEvent):
            out += self._close()
            interrupt = Interrupt(
                id=interrupt_id(
                    InterruptRef(
                        steadyloop_run,
                        event.cursor,
                        event.sha,
                        event.turn,
                        event.tool,
                        event.call_id,
                    )
                ),
                reason=INTERRUPT_REASON,
                tool_call_id=agui_tool_call_id(event.turn, event.call_id),
                message=f"Approve the call to {event.tool}?",
                metadata={
                    "tool": event.tool,
                    "sha256": event.sha,
                    "turn": event.turn,
                    "call_id": event.call_id,
                },
            )
            out.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedInterruptOutcome(interrupts=[interrupt]),
                )
            )
        elif isinstance(event, StopEvent):
            out += self._close()
            out.append(self._stop(event))
        else:
            out.append(
                CustomEvent(name=f"steadyloop.{event.type}", value=event.model_dump(mode="json"))
            )
        return out

    def _close(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self.text is not None:
            out.append(TextMessageEndEvent(message_id=self.text.id))
        if self.reasoning is not None:
            out.append(ReasoningMessageEndEvent(message_id=self.reasoning.id))
            out.append(ReasoningEndEvent(message_id=self.reasoning.id))
        return out

    def _stop(self, event: StopEvent) -> BaseEvent:
        result: dict[str, Any] = {"stop_reason": event.reason}
        for name in ("final_answer", "partial", "detail"):
            value = getattr(event, name)
            if value:
                result[name] = value
        if event.partial is not None:
            result["shown"] = event.shown
        if event.reason == "failed":
            return RunErrorEvent(message=event.detail or "the run failed", code="failed")
        outcome: Any = (
            RunFinishedCancelledOutcome()
            if event.reason == "interrupted"
            else RunFinishedSuccessOutcome()
        )
        return RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, result=result
        )

    # -- the state the events leave ----------------------------------------------

    def apply(self, event: BaseEvent) -> None:
        """Fold one AG-UI event into the state (the messages and what is open)."""
        if isinstance(event, TextMessageStartEvent):
            self.text = _Open(event.message_id)
        elif isinstance(event, TextMessageContentEvent) and self.text is not None:
            self.text.text += event.delta
        elif isinstance(event, TextMessageEndEvent) and self.text is not None:
            self.messages.append(AssistantMessage(id=self.text.id, content=self.text.text))
            self.text = None
        elif isinstance(event, ReasoningMessageStartEvent):
            self.reasoning = _Open(event.message_id)
        elif isinstance(event, ReasoningMessageContentEvent) and self.reasoning is not None:
            self.reasoning.text += event.delta
        elif isinstance(event, ReasoningEndEvent) and self.reasoning is not None:
            self.messages.append(
                ReasoningMessage(id=self.reasoning.id, content=self.reasoning.text)
            )
            self.reasoning = None
        elif isinstance(event, ToolCallStartEvent):
            self.tool = _Open(event.tool_call_id, name=event.tool_call_name)
        elif isinstance(event, ToolCallArgsEvent) and self.tool is not None:
            self.tool.text += event.delta
        elif isinstance(event, ToolCallEndEvent) and self.tool is not None:
            call = ToolCall(
                id=self.tool.id,
                function=FunctionCall(name=self.tool.name, arguments=self.tool.text),
            )
            self.messages.append(AssistantMessage(id=f"calls-{self.tool.id}", tool_calls=[call]))
            self.tool = None
        elif isinstance(event, ToolCallResultEvent):
            content = event.content if isinstance(event.content, str) else str(event.content)
            self.messages.append(
                ToolMessage(id=event.message_id, content=content, tool_call_id=event.tool_call_id)
            )
        elif isinstance(event, RunFinishedEvent | RunErrorEvent):
            self.finished = True

    def started(self) -> RunStartedEvent:
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)

    def opening(self) -> list[BaseEvent]:
        """What a resumed stream opens with: RUN_STARTED, the closed messages, and each
        open construct started again with what it held."""
        out: list[BaseEvent] = [self.started(), MessagesSnapshotEvent(messages=list(self.messages))]
        if self.reasoning is not None:
            out.append(ReasoningStartEvent(message_id=self.reasoning.id))
            out.append(ReasoningMessageStartEvent(message_id=self.reasoning.id, role="reasoning"))
            if self.reasoning.text:
                out.append(
                    ReasoningMessageContentEvent(
                        message_id=self.reasoning.id, delta=self.reasoning.text
                    )
                )
        if self.text is not None:
            out.append(TextMessageStartEvent(message_id=self.text.id, role="assistant"))
            if self.text.text:
                out.append(TextMessageContentEvent(message_id=self.text.id, delta=self.text.text))
        if self.tool is not None:
            out.append(ToolCallStartEvent(tool_call_id=self.tool.id, tool_call_name=self.tool.name))
            if self.tool.text:
                out.append(ToolCallArgsEvent(tool_call_id=self.tool.id, delta=self.tool.text))
        return out
