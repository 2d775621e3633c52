"""Payloads of one agent run: what a user starts `ToolLoopWorkflow` with and gets back.

A run names its model endpoint and tools; it never carries a key or a base URL, so
nothing secret enters workflow input or history. Stop reasons are a closed set so a
caller can branch on them instead of parsing text.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from steadyloop.chat import ChatMessage
from steadyloop.compaction import CompactionPolicy, CompactionRecord
from steadyloop.completion import Usage
from steadyloop.output_forwarding import ForwardingOptions, PartialOutput
from steadyloop.pricing import Price, cost_of
from steadyloop.provider_profiles import ProviderProfile
from steadyloop.receipt_ledger import AmbiguityResolution, ReceiptLedger
from steadyloop.transcript_healing import Healing

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
    # Shrink the transcript at a turn boundary once it passes a size (None: never).
    compaction: CompactionPolicy | None = None


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
    # What the provider accepts: the transcript is healed and tool schemas are
    # sanitized for it (`steadyloop.provider_profiles`).
    provider_profile: ProviderProfile = "portable"
    # USD per million tokens by endpoint name (or "endpoint/model"), for RunStats.cost_usd.
    prices: dict[str, Price] = Field(default_factory=dict)
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
    """A run's numbers, carried across continue-as-new and folded in from children.

    Every field has a default, so stats recorded before a field existed still load.
    `retries` counts retries by reason (a defect kind for a fresh completion, and what
    else spent an attempt); `defect_retries` is the defect part alone. `cost_usd` sums
    the calls that could be priced (reported usage and a price); `unpriced_calls`
    counts those that could not, so a cost is never shown as complete when it is not.
    `healed` counts transcript healings by kind, `compactions` compactions by kind.
    """

    turns: int = 0
    model_attempts: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    tool_replays: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    defect_retries: dict[str, int] = Field(default_factory=dict)
    retries: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0
    priced_calls: int = 0
    unpriced_calls: int = 0
    healed: dict[str, int] = Field(default_factory=dict)
    compactions: dict[str, int] = Field(default_factory=dict)
    elided_results: int = 0
    # Turns taken by child runs folded in (`turns` is this run's own: it bounds the run).
    child_turns: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def count_retry(self, reason: str) -> None:
        self.retries[reason] = self.retries.get(reason, 0) + 1

    def count_cost(self, usage: Usage | None, price: Price | None) -> None:
        """Add one model call's cost, or count it unpriced (no usage reported, no price)."""
        if usage is not None:
            self.cached_tokens += usage.cached_tokens or 0
        if usage is None or price is None:
            self.unpriced_calls += 1
            return
        self.priced_calls += 1
        self.cost_usd += cost_of(usage, price)

    def count_healings(self, healings: list[Healing]) -> None:
        for healing in healings:
            self.healed[healing.kind] = self.healed.get(healing.kind, 0) + 1

    def count_compaction(self, record: CompactionRecord) -> None:
        self.compactions[record.kind] = self.compactions.get(record.kind, 0) + 1
        self.elided_results += len(record.elided_call_ids)
        for kind in record.healed:
            self.healed[kind] = self.healed.get(kind, 0) + 1

    def fold(self, other: RunStats) -> None:
        """Add `other` (a child run's stats) into these; its turns go to `child_turns`."""
        for name, value in other:
            if name == "turns":
                self.child_turns += value
                continue
            mine = getattr(self, name)
            if isinstance(value, dict):
                for key, count in value.items():
                    mine[key] = mine.get(key, 0) + count
            else:
                setattr(self, name, mine + value)


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
    cost_usd: float = 0.0


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
