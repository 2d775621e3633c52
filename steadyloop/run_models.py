"""Payloads of one agent run: what a user starts `ToolLoopWorkflow` with and gets back.

A run names its model endpoint and tools; it never carries a key or a base URL, so
nothing secret enters workflow input or history. Stop reasons are a closed set so a
caller can branch on them instead of parsing text.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from steadyloop.chat import ChatMessage
from steadyloop.output_forwarding import ForwardingOptions, PartialOutput
from steadyloop.receipt_ledger import AmbiguityResolution, ReceiptLedger

StopReason = Literal[
    "final_answer",
    "max_turns",
    "token_budget",
    "deadline",
    "interrupted",
    "failed",
    # An attempt failed after its output was shown to people watching: it is not
    # repeated; the result keeps what was shown (`RunResult.partial`).
    "output_interrupted",
]


class RunLimits(BaseModel):
    """Bounds on one run. `None` disables a bound; zero or negative values are refused."""

    model_config = ConfigDict(frozen=True)

    max_turns: int = Field(default=20, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    deadline_s: float | None = Field(default=None, gt=0)
    tool_concurrency: int = Field(default=4, ge=1)
    # Continue-as-new after this many turns in one run (besides when Temporal suggests
    # it); None: only when suggested.
    continue_as_new_after_turns: int | None = Field(default=None, ge=1)
    # Above the watchdog's default total cap (600 s), so a stream that runs too long ends as
    # a classified stall rather than a bare activity timeout.
    model_timeout_s: float = Field(default=630.0, gt=0)
    # Attempts at one completion when the transport fails (steadyloop retries in the
    # workflow, so it can read what a lost attempt heartbeated), and the first backoff,
    # doubled each time up to a minute; a provider's Retry-After wins.
    model_attempts: int = Field(default=3, ge=1)
    model_retry_initial_s: float = Field(default=1.0, gt=0)
    # How long a model stream may go without a heartbeat before Temporal declares its
    # worker lost. Heartbeats come from stream progress, so keep it above the endpoint's
    # watchdog budgets (120 s by default); None: only `model_timeout_s` ends a lost attempt.
    model_heartbeat_timeout_s: float | None = Field(default=150.0, gt=0)


class Sampling(BaseModel):
    model_config = ConfigDict(frozen=True)

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None


class RunInput(BaseModel):
    """Start a run from a prompt, a conversation so far, or both (the prompt is appended)."""

    endpoint: str
    model: str
    prompt: str | None = None
    messages: list[ChatMessage] = Field(default_factory=list)
    system_prompt: str | None = None
    tools: list[str] = Field(default_factory=list)
    limits: RunLimits = Field(default_factory=RunLimits)
    sampling: Sampling = Field(default_factory=Sampling)
    tenant_id: str = "default"
    forwarding: ForwardingOptions = Field(default_factory=ForwardingOptions)
    # Set only by the run itself when it continues-as-new.
    carried: CarriedState | None = None

    @model_validator(mode="after")
    def _has_conversation(self) -> RunInput:
        if not self.prompt and not self.messages and self.carried is None:
            raise ValueError("a run needs a prompt or messages")
        if len(set(self.tools)) != len(self.tools):
            raise ValueError("tool names must be unique")
        return self


class AmbiguousCall(BaseModel):
    """A call suspended because an earlier attempt may have taken effect (query view)."""

    key: str
    tool: str
    arguments: dict[str, Any]
    attempt: int
    reason: str
    call_ids: list[str]


class ResolveReceipt(BaseModel):
    """The `resolve_receipt` update: what a person decided about an ambiguous call.

    `happened` (with the result the model should read), `did_not_happen` (run it again),
    or `give_up` (tell the model it was abandoned).
    """

    key: str
    resolution: AmbiguityResolution


class RunStats(BaseModel):
    turns: int = 0
    model_attempts: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    tool_replays: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    defect_retries: dict[str, int] = Field(default_factory=dict)
    # Transport failures retried, by failure kind (`stall`, `network`, `http_status`...).
    model_retries: dict[str, int] = Field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class RunProgress(BaseModel):
    """What the `progress` query answers while the run goes on."""

    turn: int
    tool_calls: int
    tokens: int
    phase: str
    stop_reason: StopReason | None = None
    receipts: int = 0
    receipts_bytes: int = 0
    ambiguous: int = 0


class CarriedState(BaseModel):
    """What a run carries across continue-as-new: everything its next turn needs."""

    transcript: list[ChatMessage]
    receipts: ReceiptLedger
    stats: RunStats
    turn: int
    deadline: str | None = None  # ISO workflow time, so a new run keeps the old deadline


class RunResult(BaseModel):
    """How a run ended. `partial` is set when it stopped with `output_interrupted`: the
    output a person saw of the turn that could not finish (not in the transcript, which
    stays valid for a provider)."""

    final_answer: str | None
    stop_reason: StopReason
    detail: str = ""
    transcript: list[ChatMessage]
    stats: RunStats
    partial: PartialOutput | None = None
