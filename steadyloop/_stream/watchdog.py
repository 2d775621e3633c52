"""The stall watchdog's rules: which deadline a streamed completion is under, and what a
stall is called when one passes.

Pure and clock-agnostic (the caller passes the time), so the rules are unit-tested
without sockets; the model activity arms one `asyncio.timeout_at` at `deadline` and
re-arms it, when `progress` says so, after network reads that delivered SSE events
(`steadyloop._activities.model_stream.stream_turn`). Progress is what arrived on the
stream, never a timer: a heartbeat sent from a timer proves only that the worker is
alive, and keeps a silent upstream "alive" forever.

Four budgets, per endpoint (`EndpointConfig`), each a finite number of seconds above 0
or None (disabled). A zero, negative, NaN or infinite budget is refused when the
configuration is built, never turned into a 1 ms timer or a timer that never fires.

| field             | default | phase it bounds                                             |
|-------------------|---------|-------------------------------------------------------------|
| `first_token_s`   | 120 s   | request sent -> first token (answer text, reasoning or a    |
|                   |         | tool call). A deadline from the request: headers, role      |
|                   |         | chunks and keep-alives do not extend it.                    |
| `reasoning_gap_s` | 120 s   | the gap between two content events after the first          |
|                   |         | reasoning delta and before the first *answer* token, so a   |
|                   |         | reasoning model is not killed while thinking.               |
| `inter_chunk_s`   | 30 s    | the gap between two content events from the first answer    |
|                   |         | token on (text or a tool call).                             |
| `total_s`         | 600 s   | the whole call, request to last byte, whatever arrives.     |

A stall is `StreamFailure(kind="stall")` naming the phase (`before_first_token`,
`between_chunks`, `total_cap`), the budget's field name and its value. It is
retryable: nothing was forwarded to anyone. (A reasoning gap is a `between_chunks`
stall whose budget is `reasoning_gap_s`.) From the first token on, progress is an
event that carries content: answer or reasoning text, a tool-call fragment, usage or
a finish reason. Keep-alives are not: an SSE comment (not even an event), an empty
`data:`, an empty delta, `choices: []` without usage. Otherwise a server that hangs
but pings every few seconds holds the turn until `total_s`. Before the first token
nothing but a token counts either: `first_token_s` is a deadline from the request, so
a keep-alive neither extends it nor needs to (a server that pings while it queues the
request gets the whole budget, and one that pings forever is cut at its end).

Re-arming a timer costs a cancelled handle and a heap push, too much to pay on
every token (a server writes one event per token). So a gap deadline is armed with
a slack of 1/16 of the budget and re-armed only when progress has eaten that slack:
the armed deadline is never earlier than the last progress plus the budget (no
early stall, ever), and a stall is declared at most budget/16 late. Phase changes
re-arm at once.

The httpx read timeout (`read_timeout_s`) still bounds every single read; keep it
above the budgets that should be the ones to fire, or a silent stream ends as a
`network` read timeout instead of a classified stall.
"""

from __future__ import annotations

import math
from typing import Literal

from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._stream.failures import StallPhase

__all__ = [
    "DEFAULT_FIRST_TOKEN_S",
    "DEFAULT_INTER_CHUNK_S",
    "DEFAULT_REASONING_GAP_S",
    "DEFAULT_TOTAL_S",
    "GAP_SLACK",
    "StreamWatchdog",
    "validate_budget",
]

DEFAULT_FIRST_TOKEN_S = 120.0
DEFAULT_REASONING_GAP_S = 120.0
DEFAULT_INTER_CHUNK_S = 30.0
DEFAULT_TOTAL_S = 600.0

# A gap deadline is armed this fraction of its budget late, and re-armed only when
# progress has used the slack up (see the module doc).
GAP_SLACK = 1 / 16

_Stage = Literal["waiting", "reasoning", "answering"]


def validate_budget(value: float | None, field: str) -> float | None:
    """The budget, or `ValueError` for a non-finite, zero or negative one (None: disabled)."""
    if value is None:
        return None
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{field} must be a finite number of seconds above 0, or null to disable it; "
            f"got {value!r}"
        )
    return float(value)


class StreamWatchdog:
    """The deadline one streamed completion is under, moved by stream progress.

    `deadline` is the earliest of the phase's deadline and the total cap (None: no
    deadline). Call `progress` when a read delivered events; when it returns True,
    re-arm the timer at `deadline`. When the deadline passes, `stall` is the
    classified failure.
    """

    __slots__ = (
        "_first_token_deadline",
        "_first_token_s",
        "_inter_chunk_s",
        "_last_progress",
        "_phase_deadline",
        "_rearm_after",
        "_reasoning_gap_s",
        "_stage",
        "_started",
        "_total_deadline",
        "_total_s",
        "deadline",
    )

    def __init__(
        self,
        *,
        started: float,
        first_token_s: float | None = DEFAULT_FIRST_TOKEN_S,
        inter_chunk_s: float | None = DEFAULT_INTER_CHUNK_S,
        reasoning_gap_s: float | None = DEFAULT_REASONING_GAP_S,
        total_s: float | None = DEFAULT_TOTAL_S,
    ) -> None:
        self._first_token_s = validate_budget(first_token_s, "first_token_s")
        self._inter_chunk_s = validate_budget(inter_chunk_s, "inter_chunk_s")
        self._reasoning_gap_s = validate_budget(reasoning_gap_s, "reasoning_gap_s")
        self._total_s = validate_budget(total_s, "total_s")
        self._started = started
        self._last_progress = started
        self._stage: _Stage = "waiting"
        self._first_token_deadline = None if first_token_s is None else started + first_token_s
        self._total_deadline = None if total_s is None else started + total_s
        self._phase_deadline = self._first_token_deadline
        self._rearm_after = math.inf
        self.deadline: float | None = _earliest(self._phase_deadline, self._total_deadline)

    def wants_content(self, now: float) -> bool:
        """Whether `progress` at `now` needs to know if the events carried content: only
        once the slack is used up (before, nothing re-arms whatever arrived), so the
        caller can skip measuring it on nearly every token."""
        return now > self._rearm_after

    def progress(
        self, now: float, *, first_token: bool, answer_token: bool, content: bool | None = True
    ) -> bool:
        """Events arrived at `now` (`first_token`/`answer_token`: seen so far; `content`:
        whether any of them carried content, None when not measured because
        `wants_content(now)` was False); True when the timer must be re-armed at
        `deadline`. A phase change is content by definition (a token arrived)."""
        if answer_token:
            stage: _Stage = "answering"
        elif first_token:
            stage = "reasoning"
        else:
            return False  # still waiting: only a token ends the first-token budget
        if not content and stage == self._stage:
            # A keep-alive: the gap since the last content goes on. (Unmeasured content
            # within the slack is not recorded either: the "last event" in a stall's
            # message may then be up to the slack early.)
            return False
        self._last_progress = now
        if stage == self._stage and now <= self._rearm_after:
            return False  # the armed deadline still lies past now + the budget
        self._stage = stage
        gap = self._inter_chunk_s if stage == "answering" else self._reasoning_gap_s
        if gap is None:
            self._phase_deadline = None
            self._rearm_after = math.inf
        else:
            self._phase_deadline = now + gap * (1 + GAP_SLACK)
            self._rearm_after = now + gap * GAP_SLACK
        self.deadline = _earliest(self._phase_deadline, self._total_deadline)
        return True

    def stall(self, now: float, *, chunks: int = 0, received_bytes: int = 0) -> StreamFailure:
        """The failure for a deadline that passed at `now`."""
        phase: StallPhase
        budget_s: float | None
        total = self._total_deadline
        phase_deadline = self._phase_deadline
        if total is not None and (phase_deadline is None or total <= phase_deadline):
            phase, budget, budget_s = "total_cap", "total_s", self._total_s
            what = f"the call ran past its total cap of {self._total_s:g} s"
        elif self._stage == "waiting":
            phase, budget, budget_s = "before_first_token", "first_token_s", self._first_token_s
            what = f"no token arrived within {self._first_token_s:g} s of the request"
        elif self._stage == "reasoning":
            phase, budget, budget_s = "between_chunks", "reasoning_gap_s", self._reasoning_gap_s
            what = (
                f"nothing arrived for {self._reasoning_gap_s:g} s while the model was "
                "reasoning (before its first answer token)"
            )
        else:
            phase, budget, budget_s = "between_chunks", "inter_chunk_s", self._inter_chunk_s
            what = f"nothing arrived for {self._inter_chunk_s:g} s between chunks"
        return StreamFailure(
            kind="stall",
            message=(
                f"the stream stalled ({phase}, {budget}={budget_s:g} s): {what}; "
                f"{chunks} chunks and {received_bytes} bytes in {now - self._started:.3g} s, "
                f"the last event {now - self._last_progress:.3g} s ago; "
                "the connection was closed"
            ),
            stall_phase=phase,
            budget=budget,
            budget_s=budget_s,
        )


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b
