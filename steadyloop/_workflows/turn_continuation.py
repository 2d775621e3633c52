"""One model turn's answer across continuations, and the truth about a cut answer.

Deterministic code only (called from `ModelTurn.complete`). A text answer can
end before it is finished in three ways, and none of them is a final answer:

- the token limit cut it (`finish_reason` `length`/`max_tokens`, the request's
  `max_tokens` or the server's context full): the obvious loop reported it as
  `final_answer`. It is a `max_tokens` stop with the text in `RunResult.partial`, or,
  when the run asks (`ContinuationOptions.after_max_tokens`), a continuation;
- the stream failed after people had read part of it: `output_interrupted`, or, when
  the run asks (`after_stream_failure`), a continuation from the text that was shown;
- the run's token budget ran out while it streamed: the model activity cut the stream
  (`StreamStats.cut_by_budget`), and the run stops `token_budget` with what streamed.

A continuation is another attempt of the same turn (same turn number, next attempt
number), whose request is the transcript plus the text so far
(`steadyloop._stops.continuation`), and whose forward target accepts the text already
shown (`ForwardTarget.accepted_chars`), so the model activity streams only the rest and
a follower prints it after what it printed. The pieces are joined into one answer
(`whole`) before the workflow appends it; tokens are counted per piece, by the caller.
While a turn is being continued, what it has so far is the run's partial output, so a
stop in between (deadline, budget, interrupt) keeps it.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._output.forwarding import ForwardedOutput, PartialOutput
    from steadyloop._run.models import ContinuationOptions
    from steadyloop._stops.continuation import (
        CutKind,
        continuation_messages,
        joined,
        takes_assistant_prefill,
    )
    from steadyloop._stream.completion import AssembledTurn
    from steadyloop._stream.defects import LENGTH_FINISH_REASONS


def cut_by_length(turn: AssembledTurn) -> bool:
    """A text answer the token limit ended (a cut with tool calls is a defect's matter)."""
    return turn.finish_reason in LENGTH_FINISH_REASONS and not turn.tool_calls


class TurnContinuation:
    """The answer so far of one turn being continued, and the continuations it used."""

    def __init__(self, options: ContinuationOptions, profile: str) -> None:
        self._options = options
        self.prefill = takes_assistant_prefill(profile, options.prefill)
        self.text = ""  # the answer so far, every piece joined
        self.kind: CutKind | None = None  # why the last piece was cut (None: not cut)
        self.accepted_chars = 0  # of the turn's output shown so far (the host holds it)
        self.shown = False  # whether any piece so far was shown to people
        self.used: dict[CutKind, int] = {"max_tokens": 0, "stream_failure": 0}

    @property
    def active(self) -> bool:
        return self.kind is not None

    def may_continue(self, kind: CutKind) -> bool:
        bound = (
            self._options.after_max_tokens
            if kind == "max_tokens"
            else self._options.after_stream_failure
        )
        return self.used[kind] < bound

    def after_length_cut(self, turn: AssembledTurn) -> None:
        """Go on from `turn` (already `whole`): the token limit cut it."""
        self.text = turn.text
        self.kind = "max_tokens"
        self.used["max_tokens"] += 1
        self.accepted_chars += turn.stats.forwarded_chars
        self.shown = self.shown or turn.stats.produced_output

    def after_stream_failure(
        self, shown: ForwardedOutput, source: str | None, *, reasoning_counts: bool
    ) -> bool:
        """Go on from what a failed attempt showed; False when that cannot be told apart
        from what came before (the host's copy does not begin with the answer so far,
        or lost its beginning), so the caller stops rather than risk a repeat."""
        counted = len(shown.reasoning) if reasoning_counts else 0
        if source == "stream":  # the host's copy: every attempt of the turn
            if not shown.complete or not shown.text.startswith(self.text):
                return False
            self.text = shown.text
            self.accepted_chars = len(shown.text) + counted
        else:  # the failed attempt's own copy: this piece only
            self.text = joined(self.text, shown.text)
            self.accepted_chars += len(shown.text) + counted
        self.kind = "stream_failure"
        self.used["stream_failure"] += 1
        self.shown = True
        return True

    def messages(self, transcript: list[ChatMessage]) -> list[ChatMessage]:
        """The request's messages: the transcript, then the answer so far when continuing."""
        if self.kind is None:
            return transcript
        return [*transcript, *continuation_messages(self.text, self.kind, prefill=self.prefill)]

    def whole(self, turn: AssembledTurn) -> AssembledTurn:
        """`turn` with the answer so far before its text: the one answer people read."""
        if self.kind is None:
            return turn
        return turn.model_copy(update={"text": joined(self.text, turn.text)})

    def whole_text(self, piece: str) -> str:
        return piece if self.kind is None else joined(self.text, piece)

    def partial(self, turn: int, attempt: int) -> PartialOutput:
        """The answer so far as the run's partial output, should the run stop meanwhile."""
        return PartialOutput(
            turn=turn,
            attempt=attempt,
            text=self.text,
            source="activity",
            cause=f"the answer was being continued ({self.kind})",
            shown=self.shown,
        )
