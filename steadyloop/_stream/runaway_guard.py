"""The runaway-argument guard: cut a stream whose tool-call arguments grow without bound.

A model can open a tool call and stream its JSON arguments until the output-token
budget is gone: the call grows to megabytes, the provider ends with `length`, and the
oversized (usually malformed) call is either run or silently thrown away. The guard
watches the arguments as they are assembled and cuts the stream when one passes a
limit (`ArgumentLimits`, per endpoint in `EndpointConfig.argument_limits`, overridden
per request by `CompletionRequest.argument_limits`):

- `max_args_bytes` (default 24576): UTF-8 bytes of one call's argument text;
  `TOOL_CALL_ARGUMENTS_TOO_LARGE`.
- `max_args_fragments` (default off): non-empty argument fragments of one call;
  `TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS`.
- `max_total_args_bytes` (default off): UTF-8 bytes of every call's arguments in the
  turn together; `TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE`.

A limit is a positive integer or None (off; `false` too, for TOML, which has no
null); zero or a negative number is refused
when the configuration is built. A breach is an argument text *longer than* the limit.

What the obvious guard gets wrong, and what prevents it here:

- Counting per wire `index`: Ollama labels every call `index: 0`, so three honest
  calls would be summed into one "runaway". The guard counts per *resolved* call, the
  records `ToolCallAccumulator` assembled, whatever the wire labels said.
- Counting characters: `len("中")` is 1, its UTF-8 is 3 bytes. Limits are bytes. The
  hot path only counts characters; exact bytes are computed (incrementally, once per
  fragment) only for a call whose characters times 4 could pass the limit. A UTF-16
  surrogate pair split across two fragments counts 6 bytes instead of 4.
- Bytes alone miss the fragment-count runaway: a recorded stream of 4,074 fragments is
  only 4,658 bytes. `max_args_fragments` catches it; the byte limit at its default
  passes it unchanged.

The guard runs once per network read, after the read's events are folded, so it stops
within one read of the breach. On a breach the model activity stops reading and
closes the upstream connection at once (the rest of the body is never read), and:

- `mode="enforce"` (default): the turn is finished as a *completion defect* (first in
  `defects`), kind and `code` the stable code, and **with no tool calls at all**. The
  oversized call is never executed, twice over: the loop never dispatches or appends
  a turn with a defect (it asks for a fresh completion within the defect's budget,
  then stops the run), and the turn carries no call that anything could dispatch.
  It is a defect, not a transport failure: the exchange worked, what it produced is
  unusable, and a fresh sample may well not run away.
- `mode="observe"`: the stream is cut the same way but the turn finishes normally
  (finish reason `tool_calls` when none arrived): the calls are kept, the cut call's
  arguments do not parse, and the loop answers it with an invalid-arguments tool
  message the model can act on. The `truncated_tool_call` defects the cut explains
  are left out; other defects stay.

Either way `stats.cut_by_guard` carries the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol

from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._stream.defects import DEFECT_RETRY_BUDGETS, CompletionDefect

if TYPE_CHECKING:
    from steadyloop._stream.completion import AssembledTurn

__all__ = [
    "TOOL_CALL_ARGUMENTS_TOO_LARGE",
    "TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS",
    "TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE",
    "GuardBreach",
    "RunawayGuard",
    "apply_breach",
]

TOOL_CALL_ARGUMENTS_TOO_LARGE: Final = "TOOL_CALL_ARGUMENTS_TOO_LARGE"
TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS: Final = "TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS"
TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE: Final = "TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE"

GuardCode = Literal[
    "TOOL_CALL_ARGUMENTS_TOO_LARGE",
    "TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS",
    "TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE",
]


class ArgumentsSoFar(Protocol):
    """What the guard reads of one call being assembled (`accumulator._Record`)."""

    @property
    def parts(self) -> list[str]: ...

    @property
    def name(self) -> str: ...

    @property
    def wire_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class GuardBreach:
    """A limit passed: which, by which call (its position in creation order), by how much."""

    code: GuardCode
    limit: int
    measured: int
    call_position: int
    call_name: str
    call_wire_id: str | None

    def describe(self) -> str:
        who = f"tool call #{self.call_position + 1} ({self.call_name or 'unnamed'!r}"
        who += f", wire id {self.call_wire_id!r})" if self.call_wire_id else ")"
        if self.code == TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS:
            what = f"streamed more than {self.limit} argument fragments ({self.measured})"
        elif self.code == TOOL_CALL_ARGUMENTS_TOO_LARGE:
            what = f"streamed more than {self.limit} bytes of arguments ({self.measured})"
        else:
            what = (
                f"took the turn's tool-call arguments past {self.limit} bytes in all "
                f"({self.measured})"
            )
        return f"{self.code}: {who} {what}; the stream was cut"


class RunawayGuard:
    """Counts each resolved call's argument text incrementally; `check` after each read."""

    __slots__ = (
        "_bytes",
        "_bytes_seen",
        "_chars",
        "_max_bytes",
        "_max_fragments",
        "_max_total",
        "_seen",
        "breach",
    )

    def __init__(self, limits: ArgumentLimits) -> None:
        self._max_bytes = limits.max_args_bytes
        self._max_fragments = limits.max_args_fragments
        self._max_total = limits.max_total_args_bytes
        # Per call, by creation position: fragments counted, characters, and the
        # fragments whose exact UTF-8 bytes are counted in `_bytes`.
        self._seen: list[int] = []
        self._chars: list[int] = []
        self._bytes_seen: list[int] = []
        self._bytes: list[int] = []
        self.breach: GuardBreach | None = None

    def check(self, calls: Sequence[ArgumentsSoFar]) -> GuardBreach | None:
        """The first breach among `calls` (the accumulator's records), or None."""
        seen, chars = self._seen, self._chars
        while len(seen) < len(calls):
            seen.append(0)
            chars.append(0)
            self._bytes_seen.append(0)
            self._bytes.append(0)
        max_bytes, max_fragments = self._max_bytes, self._max_fragments
        total_chars = 0
        grew = -1
        for position, call in enumerate(calls):
            parts = call.parts
            count = len(parts)
            if count != seen[position]:
                grew = position
                # One slice and C-level sums: a Python step per fragment would cost
                # about as much as assembling the fragment did.
                chars[position] += sum(map(len, parts[seen[position] : count]))
                seen[position] = count
                if max_fragments is not None and count > max_fragments:
                    return self._breached(
                        TOOL_CALL_ARGUMENTS_TOO_MANY_FRAGMENTS, max_fragments, count, call, position
                    )
                # A character is at most 4 UTF-8 bytes: below that, no need to encode.
                if max_bytes is not None and chars[position] * 4 > max_bytes:
                    size = self._exact_bytes(position, parts)
                    if size > max_bytes:
                        return self._breached(
                            TOOL_CALL_ARGUMENTS_TOO_LARGE, max_bytes, size, call, position
                        )
            total_chars += chars[position]
        max_total = self._max_total
        if max_total is not None and grew >= 0 and total_chars * 4 > max_total:
            total = 0
            for position, call in enumerate(calls):
                total += self._exact_bytes(position, call.parts)
            if total > max_total:
                return self._breached(
                    TOOL_CALL_ARGUMENTS_TOTAL_TOO_LARGE, max_total, total, calls[grew], grew
                )
        return None

    def _exact_bytes(self, position: int, parts: list[str]) -> int:
        # The new fragments joined and encoded once: the UTF-8 of a concatenation is the
        # concatenation of the parts' UTF-8 (a lone surrogate is 3 bytes either way).
        new = "".join(parts[self._bytes_seen[position] :])
        size = self._bytes[position] + (
            len(new) if new.isascii() else len(new.encode("utf-8", "surrogatepass"))
        )
        self._bytes_seen[position] = len(parts)
        self._bytes[position] = size
        return size

    def _breached(
        self, code: GuardCode, limit: int, measured: int, call: ArgumentsSoFar, position: int
    ) -> GuardBreach:
        self.breach = GuardBreach(
            code=code,
            limit=limit,
            measured=measured,
            call_position=position,
            call_name=call.name,
            call_wire_id=call.wire_id,
        )
        return self.breach


def apply_breach(
    turn: AssembledTurn, breach: GuardBreach, mode: Literal["enforce", "observe"]
) -> AssembledTurn:
    """The turn the activity returns after the guard cut its stream (see the module doc)."""
    stats = turn.stats.model_copy(update={"cut_by_guard": breach.code})
    if mode == "observe":
        return turn.model_copy(
            update={
                "finish_reason": turn.finish_reason or "tool_calls",
                "defects": [d for d in turn.defects if d.kind != "truncated_tool_call"],
                "stats": stats,
            }
        )
    defect = CompletionDefect(
        kind=breach.code,
        detail=breach.describe(),
        tool_call_id=breach.call_wire_id,
        retry_budget=DEFECT_RETRY_BUDGETS[breach.code],
    )
    # The calls are gone, and so are the defects about them (the cut call's arguments
    # do not parse, of course); defects about the whole turn stay.
    kept = [d for d in turn.defects if d.tool_call_id is None]
    return turn.model_copy(update={"tool_calls": [], "defects": [defect, *kept], "stats": stats})
