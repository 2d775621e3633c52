"""What people say to a running run, and what the model reads back: pure payloads.

A person steers a run through its updates and signals (`ToolLoopWorkflow.send_message`,
`pause`, `unpause`, `interrupt`, `approve_call`); these are their payloads and the tool
answers they lead to, with no Temporal import, so they are tested without a server.

Every outcome is a tool message the model can read, because every assistant tool call
is answered exactly once, whatever a person did:

- a call a person rejected: `rejected_outcome`, with their reason;
- a call still waiting for approval when the run stopped: `unapproved_outcome`;
- a call whose activity was cancelled by an interrupt: `interrupted_outcome`, which
  never says "not run" for a tool with a side effect, since its effect may already
  have happened (a tool that does not heartbeat never even hears of the cancellation
  and runs to its end on the worker);
- a call that never started: answered by the loop as "Not run: ...".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from steadyloop._chat import ChatMessage
from steadyloop.tools._payloads import Effect, ToolOutcome

# A message is appended to the transcript and sent with every later request: keep one
# far below Temporal's 2 MB payload limit (the whole request must fit in one payload).
MAX_USER_MESSAGE_BYTES = 256 * 1024


class UserMessage(BaseModel):
    """The `send_message` update: what a person says to the agent while it works.

    It is appended as a user message before the run's next model request (never in the
    middle of a turn), so the model reads it with everything the current turn produced.
    """

    model_config = ConfigDict(frozen=True)

    content: str

    @field_validator("content")
    @classmethod
    def _sendable(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("the message is blank: say something for the agent to read")
        size = len(content.encode("utf-8"))
        if size > MAX_USER_MESSAGE_BYTES:
            raise ValueError(
                f"the message is {size:,} bytes, over the {MAX_USER_MESSAGE_BYTES:,}-byte "
                "limit: it is sent with every later request; attach large text through a "
                "tool instead"
            )
        return content


class PendingApproval(BaseModel):
    """A call of a tool declared `approval=True`, suspended until a person decides
    (the `pending_approvals` query). `requested_at` is workflow time, ISO 8601."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    turn: int
    requested_at: str
    # What a decision binds to: the sha256 of the canonical JSON of `arguments` (the
    # receipt key's hash). Providers that number calls per turn reuse `call_0` every
    # turn, so a call id alone could approve a different call than the one reviewed.
    arguments_sha256: str


class ApprovalDecision(BaseModel):
    """The `approve_call` update: a person's decision on one pending call.

    `approved=False` rejects it: the call does not run and the model reads `reason`.
    """

    model_config = ConfigDict(frozen=True)

    call_id: str = Field(min_length=1)
    approved: bool = True
    reason: str | None = None
    # The binding: the tool, the hash of its arguments and the turn of the call the
    # person reviewed, as `pending_approvals` listed them. A decision whose binding does
    # not match the call waiting under `call_id` is refused (`for_call` fills it in).
    # Optional in the model so an unbound decision reaches the run's validator, which
    # refuses it naming the call that waits, instead of failing to decode; `RunHandle`
    # sends one unbound on purpose when nothing waits under its SHA, so Temporal answers
    # a repeat of its update id from the record.
    tool: str | None = None
    arguments_sha256: str | None = None
    turn: int | None = None

    @classmethod
    def for_call(
        cls, call: PendingApproval, *, approved: bool = True, reason: str | None = None
    ) -> ApprovalDecision:
        """A decision bound to exactly the call `pending_approvals` listed."""
        return cls(
            call_id=call.call_id,
            approved=approved,
            reason=reason,
            tool=call.tool,
            arguments_sha256=call.arguments_sha256,
            turn=call.turn,
        )


class SteeringState(BaseModel):
    """What people asked of a run that it has not acted on yet; carried across
    continue-as-new, so a message sent or a pause asked for at a hand-over is kept."""

    paused: bool = False
    interrupt: str | None = None
    messages: list[ChatMessage] = Field(default_factory=list)


def rejected_outcome(tool: str, reason: str | None) -> ToolOutcome:
    said = reason.strip() if reason and reason.strip() else "(no reason given)"
    return ToolOutcome(
        status="tool_error",
        content=f"Not run: a person rejected this call of {tool!r}. Their reason: {said}",
        error_type="Rejected",
    )


def unapproved_outcome(tool: str, why: str) -> ToolOutcome:
    return ToolOutcome(
        status="tool_error",
        content=f"Not run: this call of {tool!r} was waiting for a person's approval when {why}.",
        error_type="NotApproved",
    )


def interrupted_outcome(tool: str, effect: Effect, reason: str) -> ToolOutcome:
    """The answer for a call whose activity was cancelled mid-run by an interrupt."""
    if effect == "pure":
        said = f"{tool!r} has no side effect; nothing happened that needs undoing."
    else:
        said = f"{tool!r} may or may not have taken effect; check before asking for it again."
    return ToolOutcome(
        status="tool_error",
        content=f"Interrupted while running: the run was interrupted ({reason}). {said}",
        error_type="Interrupted",
    )
