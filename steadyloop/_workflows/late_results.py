"""Tool attempts that timed out, told apart from lost ones, and results that came late.

Deterministic workflow state, no commands. Told apart from nothing, a tool that runs past
its timeout on a live worker reads exactly like a crashed worker ("lost its lease ...
without recording an outcome"), and when its function does return, Temporal refuses the
completion and the result is gone, while a person is asked whether the call happened.

- What Temporal says ended the attempt decides the words (`lost_text`): a start-to-close
  timeout is an attempt that "gave no answer within its 30 s timeout" (Temporal cannot
  tell a stopped worker from one still running it, so the words say both); a
  heartbeat timeout is an attempt that went silent (its worker lost, or the tool stalled).
  The same words go to the receipt's reason, the timeline, the trace and the CLI.
- The worker sends what a late opaque call returned (`LateToolResult`, a signal). It is
  kept only while the attempt it names still owns its receipt and has timed out: a
  result for an attempt that completed after all, or that a person already resolved, is
  dropped. A signal can come before the workflow has seen the timeout (both race to
  the server), so it is held until then (`timed_out`), and dropped if the attempt
  completes instead (`settled`).
- Nothing is decided for the person: the call stays ambiguous, and `steadyloop receipts`
  shows "it finished after its timeout, with this result" beside the resolve commands.
  The text is capped and made encodable (`cap_content`): a hostile signal cannot make a
  query, the timeline or the run's result unserializable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from temporalio.exceptions import TimeoutType

from steadyloop._receipts.decision import Receipt
from steadyloop.tools._content import MAX_TOOL_CONTENT_BYTES, cap_content, utf8_text
from steadyloop.tools._payloads import CANCELLED_AFTER_TIMEOUT, LateToolResult, ToolDescription

# A late result kept for a person, and quoted on a timeline line, is cut to these.
LATE_CONTENT_BYTES = MAX_TOOL_CONTENT_BYTES
LATE_QUOTE_CHARS = 120

Arrival = Literal["noted", "held", "ignored"]


def lost_text(description: ToolDescription, kind: TimeoutType | None) -> str:
    """How an attempt that ended with no outcome ended, in words for a person."""
    if kind == TimeoutType.HEARTBEAT and description.heartbeat_timeout_s is not None:
        return (
            f"sent no heartbeat for {description.heartbeat_timeout_s:g} s "
            "(its worker was lost, or the tool stalled)"
        )
    if kind == TimeoutType.START_TO_CLOSE:
        return (
            f"gave no answer within its {description.timeout_s:g} s timeout: "
            "its worker may have stopped, or may still be running it"
        )
    return "timed out without an outcome (its worker may have been lost)"


def late_text(late: LateToolResult) -> str:
    """The timeline line for a late result (shown on the call's answer, which names the
    tool): what came back, and that a person decides."""
    if never_returned(late):
        return (
            f"attempt {late.attempt} was cancelled {overrun_text(late.overrun_s)} after its "
            "timeout, before it returned (it may have taken part of its effect)"
        )
    quote = late.outcome.content.replace("\n", " ")
    if len(quote) > LATE_QUOTE_CHARS:
        quote = quote[: LATE_QUOTE_CHARS - 3] + "..."
    return (
        f"attempt {late.attempt} finished {overrun_text(late.overrun_s)} after its timeout, "
        f"with this result: {quote} (kept for whoever resolves the call)"
    )


def late_reason(tool: str, late: LateToolResult) -> str:
    """The receipt's reason once the late result is known: it did finish, or never will."""
    if never_returned(late):
        return (
            f"attempt {late.attempt} of the opaque tool {tool!r} ran past its timeout and "
            "was cancelled before it returned; it may have taken part of its effect"
        )
    failed = "" if late.outcome.status == "ok" else f" ({late.outcome.status})"
    return (
        f"attempt {late.attempt} of the opaque tool {tool!r} ran past its timeout, then "
        f"ended on a live worker{failed}: it finished after its timeout, with the result "
        "shown below"
    )


def never_returned(late: LateToolResult) -> bool:
    """The worker cancelled the attempt after its timeout (the SDK does, about 5 s on)."""
    return late.outcome.error_type == CANCELLED_AFTER_TIMEOUT


def overrun_text(seconds: float) -> str:
    """`2.4 s`; `under 0.1 s` for a tool that returned as its timeout ran out."""
    return "under 0.1 s" if seconds < 0.1 else f"{seconds:.1f} s"


def kept(late: LateToolResult) -> LateToolResult:
    """`late` with its text bounded and encodable (replaced lone surrogates, a marker)."""
    content, truncated = cap_content(late.outcome.content, LATE_CONTENT_BYTES)
    error_type = late.outcome.error_type
    outcome = late.outcome.model_copy(
        update={
            "content": content,
            "truncated": truncated or late.outcome.truncated,
            "error_type": None if error_type is None else utf8_text(error_type)[:200],
        }
    )
    return late.model_copy(update={"outcome": outcome, "call_id": utf8_text(late.call_id)[:200]})


@dataclass
class LateResults:
    """Per receipt key: the attempt that timed out (with how), and its late result."""

    _timed_out: dict[str, tuple[int, str]] = field(default_factory=dict)
    _results: dict[str, LateToolResult] = field(default_factory=dict)

    def timed_out(self, key: str, attempt: int, why: str) -> LateToolResult | None:
        """Record that `attempt` timed out; the late result already received for it, if
        one came first (to be noted now)."""
        self._timed_out[key] = (attempt, why)
        return self.result(key, attempt)

    def received(self, late: LateToolResult, receipt: Receipt | None) -> Arrival:
        """Keep `late` if its attempt still owns `receipt` (the row under `late.key`):
        `noted` when that attempt is known to have timed out (say so now), `held` when
        the timeout has not been seen yet, `ignored` for a call that moved on (completed,
        resolved, a newer attempt) or a key with no receipt."""
        if receipt is None or receipt.status != "running" or receipt.attempt != late.attempt:
            return "ignored"
        self._results[late.key] = late
        known = self._timed_out.get(late.key)
        return "noted" if known is not None and known[0] == late.attempt else "held"

    def why(self, key: str, attempt: int) -> str | None:
        """How `attempt` ended, if it timed out."""
        known = self._timed_out.get(key)
        return known[1] if known is not None and known[0] == attempt else None

    def result(self, key: str, attempt: int) -> LateToolResult | None:
        late = self._results.get(key)
        return late if late is not None and late.attempt == attempt else None

    def settled(self, key: str) -> None:
        """The call has an outcome (completed, or resolved by a person): forget it."""
        self._timed_out.pop(key, None)
        self._results.pop(key, None)
