"""Keeping a long run's transcript small: elide old tool results, or run your compaction.

An agent that works for hours accumulates tool results (files read, pages fetched)
the model no longer needs, and every turn sends them again: the request grows until
the model's context or Temporal's 2 MB payload limit refuses it. When the transcript
passes `CompactionPolicy.max_chars`, at a turn boundary:

- by default, the oldest tool results are *elided*: the tool message stays, with its
  call id, so every call is still answered by exactly one message, and its text says
  what was elided (which tool, how long the result was, how it began) and that the
  model can call the tool again. The results of the latest `keep_recent_turns`
  tool-call turns are never elided, nor results shorter than `min_result_chars`
  (eliding them saves little and costs the model the answer). Elision stops once the
  transcript is under `target_chars` (default three quarters of `max_chars`), so a
  run does not compact again on the very next turn.
- or, when the policy names a compaction *activity* (a summarizer you register on the
  worker: it may call a model), that activity gets the transcript and returns a
  shorter one. Its output is healed (`validate_and_heal`) before it is used, so a
  compactor that drops a tool answer cannot break the transcript; if it fails, the
  run elides instead.

What happened is a `CompactionRecord` (`elided`, `custom`, or `custom_failed` then
elided), counted in `RunStats.compactions`. Everything here is pure and deterministic
(the workflow runs it); the activity call lives in `steadyloop._workflows`.

Sizes are characters of message text, tool-call names, arguments and ids: cheap to
count every turn, and close to the JSON size for ordinary text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from steadyloop._chat import ChatMessage
from steadyloop._history.healing import HealingKind, validate_and_heal
from steadyloop._run.bounds import Seconds

ELIDED_MARK = "[elided by steadyloop]"
EXCERPT_CHARS = 160

CompactionKind = Literal["elided", "custom", "custom_failed"]


class CompactionPolicy(BaseModel):
    """When the transcript is compacted, and how (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    max_chars: int = Field(ge=1)
    target_chars: int | None = Field(default=None, ge=1)
    keep_recent_turns: int = Field(default=2, ge=0)
    min_result_chars: int = Field(default=400, ge=0)
    # The name of a compaction activity registered on the worker (None: elide).
    activity: str | None = None
    activity_timeout_s: Seconds = 300.0

    @model_validator(mode="after")
    def _target_below_max(self) -> CompactionPolicy:
        if self.target_chars is not None and self.target_chars > self.max_chars:
            raise ValueError("target_chars must not be above max_chars")
        return self

    @property
    def target(self) -> int:
        return self.target_chars if self.target_chars is not None else self.max_chars * 3 // 4


class CompactionRecord(BaseModel):
    """What one compaction did: its kind, sizes before and after, the answers it elided,
    and what healing a compactor's output took."""

    model_config = ConfigDict(frozen=True)

    kind: CompactionKind
    before_chars: int
    after_chars: int
    elided_call_ids: list[str] = Field(default_factory=list)
    healed: list[HealingKind] = Field(default_factory=list)
    detail: str = ""


class CompactionRequest(BaseModel):
    """The input of a user compaction activity: the transcript and the sizes to reach."""

    messages: list[ChatMessage]
    max_chars: int
    target_chars: int


class CompactionReply(BaseModel):
    """What a user compaction activity returns: the shorter transcript."""

    messages: list[ChatMessage]


def transcript_chars(messages: Sequence[ChatMessage]) -> int:
    """The transcript's size as compaction measures it."""
    total = 0
    for message in messages:
        total += len(message.content or "") + len(message.tool_call_id or "")
        for call in message.tool_calls:
            total += len(call.id) + len(call.name) + len(call.arguments)
    return total


def needs_compaction(messages: Sequence[ChatMessage], policy: CompactionPolicy | None) -> bool:
    return policy is not None and transcript_chars(messages) > policy.max_chars


def elide_tool_results(
    messages: Sequence[ChatMessage], policy: CompactionPolicy
) -> tuple[list[ChatMessage], CompactionRecord]:
    """Old tool results replaced by a note saying what was elided, oldest first."""
    before = transcript_chars(messages)
    size = before
    out = list(messages)
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    elided: list[str] = []
    for position in _elidable(out, policy):
        if size <= policy.target:
            break
        message = out[position]
        note = _elision_note(message.content or "", names.get(message.tool_call_id or "", "?"))
        size += len(note) - len(message.content or "")
        out[position] = message.model_copy(update={"content": note})
        elided.append(message.tool_call_id or "")
    record = CompactionRecord(
        kind="elided",
        before_chars=before,
        after_chars=size,
        elided_call_ids=elided,
        detail="" if size <= policy.target else "still over target: nothing more to elide",
    )
    return out, record


def adopt_compacted(
    before: Sequence[ChatMessage], compacted: Sequence[ChatMessage]
) -> tuple[list[ChatMessage], CompactionRecord]:
    """A compactor's output, healed so that every call is still answered once."""
    healed, healings = validate_and_heal(compacted)
    record = CompactionRecord(
        kind="custom",
        before_chars=transcript_chars(before),
        after_chars=transcript_chars(healed),
        healed=[h.kind for h in healings],
    )
    return healed, record


def compact_transcript(
    messages: Sequence[ChatMessage],
    policy: CompactionPolicy,
    compactor: Callable[[list[ChatMessage]], list[ChatMessage]] | None = None,
) -> tuple[list[ChatMessage], CompactionRecord | None]:
    """Compact when over `policy.max_chars`: with `compactor` if given, else by eliding.

    Returns the messages unchanged and None when under the limit. For use outside a
    workflow (a workflow runs a compactor as an activity, see `steadyloop._workflows`).
    """
    if not needs_compaction(messages, policy):
        return list(messages), None
    if compactor is None:
        return elide_tool_results(messages, policy)
    return adopt_compacted(messages, compactor(list(messages)))


def _elidable(messages: list[ChatMessage], policy: CompactionPolicy) -> list[int]:
    """Positions of tool results that may be elided, oldest first."""
    call_turns = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls]
    keep = policy.keep_recent_turns
    if keep == 0:
        protected_from = len(messages)
    elif keep <= len(call_turns):
        protected_from = call_turns[-keep]  # the results of the latest `keep` turns stay
    else:
        protected_from = 0
    return [
        i
        for i, m in enumerate(messages[:protected_from])
        if m.role == "tool"
        and len(m.content or "") >= policy.min_result_chars
        and not (m.content or "").startswith(ELIDED_MARK)
    ]


def _elision_note(content: str, tool: str) -> str:
    excerpt = " ".join(content[:EXCERPT_CHARS].split())
    more = "..." if len(content) > EXCERPT_CHARS else ""
    return (
        f"{ELIDED_MARK} The result of tool {tool!r} ({len(content):,} characters) was "
        f"removed to keep the conversation short. It began: {excerpt}{more} "
        "Call the tool again if you need the full result."
    )
