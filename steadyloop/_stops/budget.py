"""Counting a turn's tokens while it streams, so a run's token budget bounds the turn in
flight (a runaway turn once streamed 3,258 tokens for 124 s past a budget of 300).

The provider's usage is the count when it sends one mid-stream (vLLM's running usage);
most send usage only in the last chunk, so until then the streamed characters are
estimated at `CHARS_PER_TOKEN` a token (answer and reasoning text, tool-call names and
arguments: everything the provider bills as output). The estimate errs short for text
in languages that take more tokens a character, so the budget is a bound on the order of
the budget, not to the token; the stop's detail says which count it used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class HasParts(Protocol):
    """A tool call being assembled: its argument fragments so far."""

    @property
    def parts(self) -> list[str]: ...


# About four characters a token in English text and JSON (OpenAI's rule of thumb).
CHARS_PER_TOKEN = 4


def estimate_tokens(chars: int) -> int:
    """Tokens for `chars` streamed characters: at least one once anything streamed."""
    if chars <= 0:
        return 0
    return max(1, chars // CHARS_PER_TOKEN)


def streamed_tokens(reported: int | None, chars: int) -> tuple[int, bool]:
    """The turn's output tokens so far and whether the provider reported them: its own
    count when it sent one, else the estimate."""
    if reported is not None and reported > 0:
        return reported, True
    return estimate_tokens(chars), False


class StreamMeter:
    """The output tokens of one stream so far, against what is left of the run's budget.

    Read once per network read: answer and reasoning characters come from the
    assembler's own incremental count, tool-call argument characters are summed here
    from the fragments added since the last read (no pass over the whole turn per read).
    """

    __slots__ = ("_call_chars", "_seen", "budget")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._seen: list[int] = []  # fragments counted so far, per call
        self._call_chars = 0

    def spent(
        self, text_chars: int, calls: Sequence[HasParts], reported: int | None
    ) -> tuple[int, bool] | None:
        """(tokens, reported) once the stream's output reaches the budget, else None."""
        seen = self._seen
        while len(seen) < len(calls):
            seen.append(0)
        for position, call in enumerate(calls):
            parts = call.parts
            if len(parts) != seen[position]:
                self._call_chars += sum(map(len, parts[seen[position] :]))
                seen[position] = len(parts)
        tokens, was_reported = streamed_tokens(reported, text_chars + self._call_chars)
        return (tokens, was_reported) if tokens >= self.budget else None
