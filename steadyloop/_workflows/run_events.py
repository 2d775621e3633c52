"""The loop's values made into events (`steadyloop.events`), noted for the next publish.

Deterministic and command-free: each method builds one event from workflow state and
notes it on the run's `EventLog`; publishing is the log's job, at the loop's steps.
Text is bounded here (`MAX_RESULT_CHARS`, `MAX_ARGUMENTS_CHARS`, `MAX_TIMELINE_CHARS`),
so one event stays a line a person reads; the transcript keeps all of it.

The log is the run's one record of what happened: what the guarantees did (its
timeline) is noted here as `TimelineEntryEvent`s, kept nowhere else.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ToolCall
    from steadyloop._output.forwarding import PartialOutput
    from steadyloop._receipts.decision import ReceiptKey
    from steadyloop._run.models import AmbiguousCall
    from steadyloop._workflows.late_results import never_returned
    from steadyloop.events._models import (
        MAX_ARGUMENTS_CHARS,
        MAX_RESULT_CHARS,
        MAX_TIMELINE_CHARS,
        AmbiguousReceiptEvent,
        ApprovalWaitingEvent,
        DecisionEvent,
        DecisionKind,
        EventKind,
        EventPhase,
        LateResult,
        StopEvent,
        TimelineEntryEvent,
        ToolCallEvent,
        ToolResultEvent,
        bounded,
    )
    from steadyloop.tools._payloads import LateToolResult, ToolDescription, ToolOutcome

from steadyloop._workflows.event_log import EventLog

__all__ = ["RunEventNotes"]


class RunEventNotes:
    """Builds the run's events from the loop's values and notes them on `log`."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._replays: dict[str, str] = {}  # call id -> why it was answered from its receipt
        # Timeline events noted in the run so far: the next one's `seq` (carried across
        # continue-as-new, so the numbering goes on).
        self.timeline_count = 0

    def timeline(
        self,
        turn: int,
        phase: EventPhase,
        kind: EventKind,
        text: str,
        call_id: str | None = None,
    ) -> None:
        """What a guarantee did, numbered across the run (`seq`)."""
        self.timeline_count += 1
        self._log.note(
            TimelineEntryEvent(
                seq=self.timeline_count,
                turn=turn,
                phase=phase,
                kind=kind,
                text=bounded(text, MAX_TIMELINE_CHARS)[0],
                call_id=call_id,
            )
        )

    def calls(
        self,
        turn: int,
        calls: list[ToolCall],
        keys: dict[int, ReceiptKey],
        said: str | None = None,
    ) -> None:
        """A batch's calls once read; `keys` by position, for the calls that have one.
        `said`: the model's text beside them when it was not forwarded (on the first)."""
        for position, call in enumerate(calls):
            arguments, cut = bounded(call.arguments or "{}", MAX_ARGUMENTS_CHARS)
            key = keys.get(position)
            text, text_cut = (None, False)
            if position == 0 and said:
                text, text_cut = bounded(said, MAX_RESULT_CHARS)
            self._log.note(
                ToolCallEvent(
                    turn=turn,
                    call_id=call.id,
                    name=call.name,
                    arguments=arguments,
                    arguments_truncated=cut,
                    sha=None if key is None else key.args_hash,
                    said=text,
                    said_truncated=text_cut,
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
        """A call turned ambiguous, or its late result arrived: everything a person needs
        to resolve it (arguments, how the attempt was lost, the late result)."""
        arguments, cut = bounded(_json_text(view.arguments), MAX_ARGUMENTS_CHARS)
        self._log.note(
            AmbiguousReceiptEvent(
                turn=turn,
                key=view.key,
                tool=view.tool,
                attempt=view.attempt,
                reason=bounded(view.reason, MAX_RESULT_CHARS)[0],
                call_ids=list(view.call_ids),
                arguments=arguments,
                arguments_truncated=cut,
                lost=None if view.lost is None else bounded(view.lost, MAX_RESULT_CHARS)[0],
                late=None if view.late_result is None else _late(view.late_result),
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


def _json_text(arguments: dict[str, Any]) -> str:
    """Arguments as compact JSON text (as `cli.progress.arguments_text` writes them);
    what is not JSON after all is written as Python prints it, never a failed task."""
    try:
        return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(arguments)


def _late(late: LateToolResult) -> LateResult:
    text, cut = bounded(late.outcome.content, MAX_RESULT_CHARS)
    return LateResult(
        status=late.outcome.status,
        text=text,
        truncated=cut,
        returned=not never_returned(late),
        overrun_s=late.overrun_s,
    )
