"""The loop's values made into events (`steadyloop.events`), noted for the next publish.

Deterministic and command-free: each method builds one event from workflow state and
notes it on the run's `EventLog`; publishing is the log's job, at the loop's steps.
Text is bounded here (`MAX_RESULT_CHARS`, `MAX_ARGUMENTS_CHARS`), so one event stays
a line a person reads; the transcript keeps all of it.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop.chat import ToolCall
    from steadyloop.events.models import (
        MAX_ARGUMENTS_CHARS,
        MAX_RESULT_CHARS,
        AmbiguousReceiptEvent,
        ApprovalWaitingEvent,
        DecisionEvent,
        DecisionKind,
        StopEvent,
        TimelineEntryEvent,
        ToolCallEvent,
        ToolResultEvent,
        bounded,
    )
    from steadyloop.output.forwarding import PartialOutput
    from steadyloop.receipts.decision import ReceiptKey
    from steadyloop.run.models import AmbiguousCall
    from steadyloop.run.timeline import RunEvent
    from steadyloop.tools.payloads import ToolDescription, ToolOutcome

from steadyloop.workflows.event_log import EventLog

__all__ = ["RunEventNotes"]


class RunEventNotes:
    """Builds the run's events from the loop's values and notes them on `log`."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._replays: dict[str, str] = {}  # call id -> why it was answered from its receipt

    def timeline(self, event: RunEvent) -> None:
        if event.kind == "decision":
            return  # a person's decision is its own typed event (`decision`)
        self._log.note(
            TimelineEntryEvent(
                seq=event.seq,
                turn=event.turn,
                phase=event.phase,
                kind=event.kind,
                text=event.text,
                call_id=event.call_id,
            )
        )

    def calls(self, turn: int, calls: list[ToolCall], keys: dict[int, ReceiptKey]) -> None:
        """A batch's calls once read; `keys` by position, for the calls that have one."""
        for position, call in enumerate(calls):
            arguments, cut = bounded(call.arguments or "{}", MAX_ARGUMENTS_CHARS)
            key = keys.get(position)
            self._log.note(
                ToolCallEvent(
                    turn=turn,
                    call_id=call.id,
                    name=call.name,
                    arguments=arguments,
                    arguments_truncated=cut,
                    sha=None if key is None else key.args_hash,
                )
            )

    def replayed(self, call_id: str, why: str) -> None:
        self._replays[call_id] = why

    def result(self, turn: int, call: ToolCall, outcome: ToolOutcome) -> None:
        text, cut = bounded(outcome.content, MAX_RESULT_CHARS)
        why = self._replays.pop(call.id, None)
        self._log.note(
            ToolResultEvent(
                turn=turn,
                call_id=call.id,
                name=call.name,
                status=outcome.status,
                text=text,
                truncated=cut or outcome.truncated,
                replayed=why is not None,
                replay_reason=why,
            )
        )

    def approval_waiting(
        self, turn: int, call_id: str, description: ToolDescription, key: ReceiptKey
    ) -> None:
        self._log.note(
            ApprovalWaitingEvent(
                turn=turn, call_id=call_id, tool=description.name, sha=key.args_hash
            )
        )

    def ambiguous(self, turn: int, view: AmbiguousCall) -> None:
        self._log.note(
            AmbiguousReceiptEvent(
                turn=turn,
                key=view.key,
                tool=view.tool,
                attempt=view.attempt,
                reason=bounded(view.reason, MAX_RESULT_CHARS)[0],
                call_ids=list(view.call_ids),
            )
        )

    def decision(
        self,
        turn: int,
        decision: DecisionKind,
        *,
        call_id: str | None = None,
        key: str | None = None,
        detail: str | None = None,
    ) -> None:
        self._log.note(
            DecisionEvent(
                turn=turn,
                decision=decision,
                call_id=call_id,
                key=key,
                detail=bounded(detail or "", MAX_RESULT_CHARS)[0],
            )
        )

    def stop(
        self,
        turn: int,
        reason: str,
        detail: str,
        final_answer: str | None,
        partial: PartialOutput | None,
    ) -> None:
        self._log.note(
            StopEvent(
                turn=turn,
                reason=reason,
                final_answer=final_answer,
                partial=None if partial is None else partial.text,
                shown=partial is not None and partial.shown,
                detail=bounded(detail, MAX_RESULT_CHARS)[0],
            )
        )
