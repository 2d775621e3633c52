"""Payloads of one agent run: what a user starts `ToolLoopWorkflow` with and gets back.

A run names its model endpoint and tools; it never carries a key or a base URL, so
nothing secret enters workflow input or history. Stop reasons are a closed set so a
caller can branch on them instead of parsing text.

A run may name a route instead of one endpoint (`RunInput.route`): candidates tried in
order by `steadyloop._routing.disposition`'s table. A run without one has the route of
its endpoint and model alone, with the patience `RunLimits` gives it
(`RunInput.resolved_route`).

A run that may delegate carries `Delegation`: the agent profiles of its chain, which
of them it may hand work to, and the chain's limits. A child inherits the profiles and
the limits; what it may delegate to is its own profile's `delegates_to`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from steadyloop._chains.limits import DEFAULT_CHAIN_LIMITS, ChainLimit, ChildRecord
from steadyloop._chains.lineage import Lineage
from steadyloop._chains.queries import quotable
from steadyloop._chat import ChatMessage
from steadyloop._history.compaction import CompactionPolicy, CompactionRecord
from steadyloop._history.healing import Healing
from steadyloop._output.forwarding import ForwardingOptions, PartialOutput
from steadyloop._output.typed import OutputType
from steadyloop._receipts.ledger import AmbiguityResolution, PackedLedger
from steadyloop._routing.pricing import Price, cost_of
from steadyloop._routing.provider_profiles import ProviderProfile
from steadyloop._routing.route_plan import Backoff, RouteCandidate, RouteConfig
from steadyloop._run.bounds import (
    Count,
    Identity,
    Seconds,
    Temperature,
    Text,
    TokenCount,
    TopP,
    identity_problem,
)
from steadyloop._run.steering import SteeringState
from steadyloop._stream.completion import Usage
from steadyloop.tools._payloads import LateToolResult

# An agent profile's name: what the model types, and half of a `pair_key` ("a|b"), so
# no "|" and nothing a visibility query or a workflow id would trip on.
AgentName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]

# The longest wait between two model attempts of a run without a route, when the
# provider names none.
MAX_BACKOFF_S = 60.0
# How long a run without a route waits when a provider asks (`Retry-After`): it has no
# other endpoint to go to, so as long as asked; its deadline still bounds the wait.
SINGLE_ROUTE_MAX_RETRY_AFTER_S = 86_400.0
# The most continuations of one answer a run may ask for (each is a whole request).
MAX_CONTINUATIONS = 50
# The most `RunInput.local_pure_tools_s` may be: a local activity holds the run's
# workflow task while it runs (an interrupt, a message or a query waits on the SDK's
# workflow-task heartbeat) and is retried with it, so a long tool belongs in a regular
# activity, whose dispatch costs less than holding the task for minutes.
LOCAL_TOOL_MAX_S = 60.0
LocalToolSeconds = Annotated[Seconds, Field(le=LOCAL_TOOL_MAX_S)]

StopReason = Literal[
    "final_answer",
    # The answer was cut by the output token limit (`finish_reason: "length"`, the
    # request's `max_tokens` or the server's context) and not continued to its end: the
    # cut text is in `RunResult.partial`, not `final_answer` (`ContinuationOptions`).
    "max_tokens",
    "max_turns",
    "token_budget",
    "deadline",
    "interrupted",
    "failed",
    # An attempt failed after its output was shown to people watching: it is not
    # repeated; the result keeps what was shown (`RunResult.partial`).
    "output_interrupted",
    # The state the run must carry to its next execution (transcript and receipts) does
    # not fit one payload, even with the receipts' own results cut short.
    "state_too_large",
    # A typed run's final answer did not match its `output_type` after the extra turns
    # it may spend asking again (`OutputType.retries`): the last answer's text is
    # `RunResult.raw_output`.
    "invalid_output",
]


class RunLimits(BaseModel):
    """Bounds on one run. `None` disables a bound; zero or negative values are refused.

    Durations are `Seconds` (finite, above 0, at most ten years) and counts are bounded
    (`steadyloop._run.bounds`): workflow code adds them to its clock and hands them to
    Temporal, where 1e12 seconds would overflow and wedge the run's workflow task, and an
    infinite deadline would be stored as `null`, silently no deadline at all.
    """

    model_config = ConfigDict(frozen=True)

    max_turns: Count = 20
    token_budget: TokenCount | None = None
    deadline_s: Seconds | None = None
    tool_concurrency: Count = 4
    # Continue-as-new at a turn boundary when Temporal suggests it, or when this
    # execution reaches any of these (None turns that bound off): turns taken, history
    # events, history bytes, updates handled. Defaults sit well below the server's
    # limits (warning at 10,240 events / 10 MB, terminated at 51,200 / 50 MB; 2,000
    # updates), since a turn must still fit after the check (`steadyloop._history.budget`).
    continue_as_new_after_turns: Count | None = None
    continue_as_new_at_events: Count | None = 8_000
    continue_as_new_at_bytes: TokenCount | None = 8_000_000
    continue_as_new_at_updates: Count | None = 1_500
    # Above the watchdog's default total cap (600 s), so a stream that runs too long ends as
    # a classified stall rather than a bare activity timeout.
    model_timeout_s: Seconds = 630.0
    # Attempts at one completion when the transport fails (steadyloop retries in the
    # workflow, so it can read what a lost attempt heartbeated), and the first backoff,
    # doubled each time up to a minute; a longer Retry-After from the provider wins.
    # They shape a run without a route (`RunInput.resolved_route`); a route's candidates
    # carry their own.
    model_attempts: Count = 3
    model_retry_initial_s: Seconds = 1.0
    # How long a model stream may go without a heartbeat before Temporal declares its
    # worker lost. Heartbeats come from stream progress, so keep it above the endpoint's
    # watchdog budgets (120 s by default); None: only `model_timeout_s` ends a lost attempt.
    model_heartbeat_timeout_s: Seconds | None = 150.0
    # Shrink the transcript at a turn boundary once it passes a size (None: never).
    compaction: CompactionPolicy | None = None


class Sampling(BaseModel):
    """What the provider is asked to sample with. Numbers are sent as JSON, where NaN and
    infinities do not exist (pydantic writes `null`) and providers take `max_tokens` as
    a 32-bit and `seed` as a 64-bit integer: anything else is refused here, by name,
    rather than by the provider on every attempt. A temperature outside 0..2 or a
    `top_p` outside 0..1 is refused by every provider, so it is refused here too
    (Anthropic's 0..1 temperature is held by `steadyloop run` and by the model activity,
    which know the endpoint's wire: `steadyloop._run.bounds.SAMPLING_RANGES`). `stop`:
    sequences that end the model's reply where they appear (not included in it)."""

    model_config = ConfigDict(frozen=True)

    temperature: Temperature | None = None
    top_p: TopP | None = None
    max_tokens: Count | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    stop: list[Text] | None = Field(default=None, max_length=16)

    @field_validator("stop")
    @classmethod
    def _stops_not_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not all(value):
            raise ValueError("a stop sequence must not be empty (it would end every reply)")
        return value


# How the model may use the offered tools: `auto` (it decides), `required` (it must call
# one), `none` (it must answer in text), or the name of the one tool it must call.
ToolChoiceSetting = Literal["auto", "required", "none"] | Identity


def tool_choice_wire(choice: str) -> str | dict[str, Any]:
    """`tool_choice` as the OpenAI API spells it: the keyword, or a named function."""
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def answers_the_user(transcript: list[ChatMessage]) -> bool:
    """Whether the next turn answers a user message (not a tool result): the turns a
    forced `tool_choice` and a `prefill` apply to."""
    return bool(transcript) and transcript[-1].role == "user"


class ContinuationOptions(BaseModel):
    """When a text answer is cut short, go on from it automatically, up to a bound.

    `after_max_tokens`: how many times an answer cut by the token limit is continued
    (0: the run stops `max_tokens` with the cut text as its partial).
    `after_stream_failure`: how many times a stream that failed after its text was shown
    is continued from that text (0: the run stops `output_interrupted`).
    Each continuation sends the text so far back and asks for the rest: as an assistant
    prefill where the provider continues one (`prefill`; None: as the run's provider
    profile says, `steadyloop.routing.provider_profiles.takes_assistant_prefill`), else followed
    by a user message asking to continue. The pieces are one answer, in one assistant
    message; a person following the run sees the rest, never the text again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    after_max_tokens: int = Field(default=0, ge=0, le=MAX_CONTINUATIONS)
    after_stream_failure: int = Field(default=0, ge=0, le=MAX_CONTINUATIONS)
    prefill: bool | None = None


class AgentProfile(BaseModel):
    """An agent another run may delegate to: what the model is told about it, and how it runs.

    `endpoint`, `model` and `sampling` default to the delegating run's, and so does its
    route when the profile names no endpoint, model or route of its own; `limits` are
    the child's own, except that its deadline and token budget are cut to what remains
    of the parent's.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = Field(min_length=1)
    system_prompt: str | None = None
    tools: list[Identity] = Field(default_factory=list)
    delegates_to: list[AgentName] = Field(default_factory=list)
    endpoint: Identity | None = None
    model: Identity | None = None
    route: RouteConfig | None = None
    limits: RunLimits = Field(default_factory=RunLimits)
    sampling: Sampling | None = None
    # The child's own (its tools are its own); None: the provider's default (`auto`).
    tool_choice: ToolChoiceSetting | None = None
    # None: the delegating run's (a child usually runs on the same model).
    prefill: Text | None = None

    @model_validator(mode="after")
    def _named_tool_choice_offered(self) -> Self:
        """Refused here, not when a child starts: the child's input is built in workflow
        code, where a refusal would fail the parent's workflow task over and over."""
        choice = self.tool_choice
        if choice not in (None, "auto", "required", "none") and choice not in self.tools:
            raise ValueError(
                f"tool_choice names {choice!r}, which is not one of the profile's tools "
                f"({', '.join(self.tools) or 'none'})"
            )
        return self

    @model_validator(mode="after")
    def _one_way_to_name_the_model(self) -> Self:
        if self.route is not None and (self.endpoint is not None or self.model is not None):
            raise ValueError(
                "an agent profile names its model by `route` or by `endpoint`/`model`, not "
                "both (a route's first candidate is its endpoint and model)"
            )
        return self


class Delegation(BaseModel):
    """Which agents this run may delegate to (`to`), every profile of the chain, and the
    chain's limits, checked in order (the first refusal is what the model reads)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    to: list[AgentName]
    agents: dict[AgentName, AgentProfile]
    limits: list[ChainLimit] = Field(default_factory=lambda: list(DEFAULT_CHAIN_LIMITS))

    @model_validator(mode="after")
    def _names_known(self) -> Self:
        named = {"to": self.to} | {
            f"agents[{name!r}].delegates_to": p.delegates_to for name, p in self.agents.items()
        }
        for where, names in named.items():
            unknown = sorted(set(names) - set(self.agents))
            if unknown:
                raise ValueError(
                    f"{where} names agents with no profile: {unknown}; "
                    f"profiles: {sorted(self.agents)}"
                )
            if len(set(names)) != len(names):
                raise ValueError(f"{where} names an agent twice")
        kinds = [limit.kind for limit in self.limits]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"each kind of chain limit may be given once; got {kinds}")
        if "depth" not in kinds:
            # Every other rule needs a visibility count and is left out when the count
            # cannot be taken; without depth, a visibility outage would let a chain
            # recurse without end.
            raise ValueError(
                "limits must include a depth limit (DepthLimit): it needs no measurement, "
                "so it bounds a chain even when visibility cannot answer"
            )
        return self

    def for_child(self, agent: str) -> Delegation | None:
        """What a child playing `agent` may delegate (None: nothing)."""
        to = self.agents[agent].delegates_to
        return self.model_copy(update={"to": list(to)}) if to else None


class RunPlugins(BaseModel):
    """Which of the worker's tool plugins a run uses (`steadyloop.tools._plugins`).

    `core` plugins are offered from the first turn, like `RunInput.tools`. `on_demand`
    plugins are not: the run offers an `activate_plugin` tool naming them, and a plugin
    the model activates is offered from its next turn on. No `on_demand` plugins, no
    activation tool; to offer every plugin at once, list them all in `core`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    core: list[Identity] = Field(default_factory=list)
    on_demand: list[Identity] = Field(default_factory=list)

    @property
    def named(self) -> list[str]:
        """Every plugin the run names, core first."""
        return [*self.core, *self.on_demand]

    @model_validator(mode="after")
    def _each_once(self) -> Self:
        if len(set(self.named)) != len(self.named):
            raise ValueError(
                f"each plugin may be named once, in core or in on_demand; got core={self.core}, "
                f"on_demand={self.on_demand}"
            )
        return self


class RunSettings(BaseModel):
    """How a run is configured, apart from what it is asked: the fields a caller sets.

    `RunInput` adds the conversation and what only the library sets; the client's
    `RunOptions` is these fields alone, so the two cannot drift apart. Checked as a whole
    only by `RunInput`, whose validators see the conversation too.

    The model is `endpoint` and `model`, or a `route` of candidates tried in order (then
    `endpoint` and `model` may be left out: they are the route's first candidate).
    `agent` names the agent this run plays (a root may leave it `main`).
    """

    endpoint: str = ""
    model: str = ""
    route: RouteConfig | None = None
    system_prompt: Text | None = None
    tools: list[Identity] = Field(default_factory=list)
    # Plugins whose tools are offered from the start or once the model activates them.
    plugins: RunPlugins = Field(default_factory=RunPlugins)
    limits: RunLimits = Field(default_factory=RunLimits)
    sampling: Sampling = Field(default_factory=Sampling)
    # Whether an answer cut short (token limit, a stream that failed once shown) is
    # continued automatically, and how many times.
    continuation: ContinuationOptions = Field(default_factory=ContinuationOptions)
    # How the model may use its tools (`ToolChoiceSetting`; None: the provider's default,
    # `auto`). A forcing choice (`required`, a tool's name) applies to the turns that
    # answer a user message; after tool results the model may answer (`reset_tool_choice`,
    # as in the OpenAI Agents SDK), or a forced run would call tools until `max_turns`.
    # Left out for an endpoint known to refuse it (the route's unsupported-parameter rule).
    tool_choice: ToolChoiceSetting | None = None
    reset_tool_choice: bool = True
    # The opening of the model's reply, sent as a last assistant message on the turns
    # that answer a user message; the model continues it. For small models whose chat
    # template needs a nudge (SmolLM2 on llama.cpp calls a tool after "<tool_call>\n").
    # The reply is recorded as the server returned it, without the prefill.
    prefill: Text | None = Field(default=None, min_length=1)
    # Half of every receipt key (`ReceiptKey.tenant`): refused here when it would make
    # one invalid, so the caller hears about it, not the model on every tool call.
    tenant_id: Identity = "default"
    forwarding: ForwardingOptions = Field(default_factory=ForwardingOptions)
    # Pure tools (`effect="pure"`) whose declared timeout is at most this many seconds run
    # as local activities: no activity task to dispatch and no workflow task to take the
    # result, one of each saved per tool round. Receipts are kept as for any tool. None
    # (the default): every tool is a regular activity. A local activity holds the workflow
    # task while it runs and is retried with it, hence the bound (`LOCAL_TOOL_MAX_S`).
    local_pure_tools_s: LocalToolSeconds | None = None
    # What the provider accepts: the transcript is healed and tool schemas are
    # sanitized for it (`steadyloop._routing.provider_profiles`).
    provider_profile: ProviderProfile = "portable"
    # USD per million tokens by endpoint name (or "endpoint/model"), for RunStats.cost_usd.
    prices: dict[str, Price] = Field(default_factory=dict)
    agent: AgentName = "main"
    delegation: Delegation | None = None
    # What the final answer must be (a pydantic model class, or a JSON object schema):
    # asked of the provider as its structured output, checked in the workflow, and
    # returned as `RunResult.output`. An invalid answer is answered with what failed
    # and asked again, `retries` times, then the run stops `invalid_output`.
    output_type: OutputType | None = None


class RunInput(RunSettings):
    """Start a run from a prompt, a conversation so far, or both (the prompt is appended).

    Its configuration is `RunSettings`'. `lineage` and `parent_agent` are set by the run
    that starts a child, never by hand. An unknown field is refused by name: one
    silently dropped (`response_format=...`) would start a run that ignores it.
    """

    model_config = ConfigDict(extra="forbid")

    prompt: Text | None = None
    messages: list[ChatMessage] = Field(default_factory=list)
    lineage: Lineage = Field(default_factory=Lineage)
    parent_agent: AgentName | None = None
    # Set only by the run itself when it continues-as-new.
    carried: CarriedState | None = None
    # Set by `steadyloop._run.resume.resume_input`: the receipts of the run this one
    # resumes, so what it completed replays and what it left ambiguous stays so.
    inherited: InheritedReceipts | None = None

    def resolved_route(self) -> RouteConfig:
        """The route the run's model turns take: its own, or its endpoint and model alone,
        retried by `limits` (attempts, backoff doubling from `model_retry_initial_s` up to
        a minute, and any `Retry-After` the provider asks for)."""
        if self.route is not None:
            return self.route
        limits = self.limits
        candidate = RouteCandidate(
            endpoint=self.endpoint,
            model=self.model,
            attempts=limits.model_attempts,
            backoff=Backoff(
                initial_s=limits.model_retry_initial_s, multiplier=2.0, max_s=MAX_BACKOFF_S
            ),
            max_retry_after_s=SINGLE_ROUTE_MAX_RETRY_AFTER_S,
        )
        return RouteConfig(candidates=[candidate])

    @field_validator("endpoint", "model")
    @classmethod
    def _named_plainly(cls, value: str) -> str:
        """Blank is left to `_model_named` (a route may name them); anything else must be
        a usable name, since it reaches logs, visibility and the provider."""
        problem = identity_problem(value) if value.strip() else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _model_named(self) -> RunInput:
        """An endpoint and model, or a route whose first candidate they are."""
        if self.route is not None:
            first = self.route.candidates[0]
            if not self.endpoint and not self.model:
                self.endpoint, self.model = first.endpoint, first.model
            elif (first.endpoint, first.model) != (self.endpoint, self.model):
                raise ValueError(
                    f"endpoint {self.endpoint!r} and model {self.model!r} are not the route's "
                    f"first candidate ({first.endpoint!r}, {first.model!r}); leave them out "
                    "when a route is given"
                )
        elif not self.endpoint.strip() or not self.model.strip():
            raise ValueError("a run needs an endpoint and a model, or a route")
        return self

    def turn_tool_choice(self, transcript: list[ChatMessage]) -> str | dict[str, Any] | None:
        """The `tool_choice` of the next turn (None: leave it to the provider)."""
        choice = self.tool_choice
        if choice is None:
            return None
        forcing = choice not in ("auto", "none")
        if forcing and self.reset_tool_choice and not answers_the_user(transcript):
            return None
        return tool_choice_wire(choice)

    def turn_prefill(self, transcript: list[ChatMessage]) -> ChatMessage | None:
        """The assistant message that opens the next turn's reply, if any."""
        if self.prefill is None or not answers_the_user(transcript):
            return None
        return ChatMessage(role="assistant", content=self.prefill)

    @model_validator(mode="after")
    def _named_tool_choice_offered(self) -> RunInput:
        choice = self.tool_choice
        named = choice is not None and choice not in ("auto", "required", "none")
        if named and choice not in self.tools:
            raise ValueError(
                f"tool_choice names {choice!r}, which is not one of the run's tools "
                f"({', '.join(self.tools) or 'none'})"
            )
        return self

    @model_validator(mode="after")
    def _prefill_not_typed(self) -> RunInput:
        if self.prefill is not None and self.output_type is not None:
            raise ValueError(
                "prefill opens the reply with text, and a typed answer (output_type) is "
                "a JSON value alone; leave one of them out"
            )
        return self

    @model_validator(mode="after")
    def _has_conversation(self) -> RunInput:
        if not self.prompt and not self.messages and self.carried is None:
            raise ValueError("a run needs a prompt or messages")
        if len(set(self.tools)) != len(self.tools):
            raise ValueError("tool names must be unique")
        if self.delegation is not None and not quotable(self.tenant_id):
            raise ValueError(
                f"tenant_id {self.tenant_id!r}: a run that delegates is counted by its tenant "
                "in Temporal visibility, which cannot match quotes, backslashes or control "
                "characters; use a tenant id without them"
            )
        return self


class AmbiguousCall(BaseModel):
    """A call suspended because an earlier attempt may have taken effect (query view).

    `lost`: how the attempt ended when it timed out ("gave no answer within its 30 s
    timeout ..."), None when that is not known (a run it resumes).
    `late_result`: what the tool returned after its timeout, when the worker sent it
    (`steadyloop._workflows.late_results`): for the person who resolves the call.
    """

    key: str
    tool: str
    arguments: dict[str, Any]
    attempt: int
    reason: str
    call_ids: list[str]
    lost: str | None = None
    late_result: LateToolResult | None = None


class ResolveReceipt(BaseModel):
    """The `resolve_receipt` update: what a person decided about an ambiguous call.

    `happened` (with the result the model should read), `did_not_happen` (run it again),
    or `give_up` (tell the model it was abandoned).
    """

    key: str
    resolution: AmbiguityResolution


class RunStats(BaseModel):
    """A run's numbers, carried across continue-as-new and folded in from children.

    Every field has a default, so stats carried by a run that lacks a field still load.
    `retries` counts retries by reason (a defect kind for a fresh completion, and what
    else spent an attempt); `defect_retries` is the defect part alone. `cost_usd` sums
    the calls that could be priced (reported usage and a price); `unpriced_calls`
    counts those that could not, so a cost is never shown as complete when it is not.
    `healed` counts transcript healings by kind, `compactions` compactions by kind.
    `children` is the sum over every child run it started, their own children folded
    in; the run's own counters exclude them, its token budget does not
    (`tokens_with_children`).
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
    # Answers continued automatically, by why they were cut (`ContinuationOptions`).
    continuations: dict[str, int] = Field(default_factory=dict)
    # Workflow time from the run's start to its end, across continue-as-new (for the
    # folded `children`, the sum of theirs).
    wall_time_s: float = 0.0
    cost_usd: float = 0.0
    priced_calls: int = 0
    unpriced_calls: int = 0
    healed: dict[str, int] = Field(default_factory=dict)
    compactions: dict[str, int] = Field(default_factory=dict)
    elided_results: int = 0
    # Continue-as-new hand-overs by reason (`history_budget.ContinueAsNewReason`).
    continued_as_new: dict[str, int] = Field(default_factory=dict)
    child_runs: int = 0  # children started (or re-attached to) by this run
    child_refusals: int = 0  # delegations refused (a chain rule, or no token budget left)
    children: RunStats | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def children_tokens(self) -> int:
        """Tokens every finished descendant used (`children` is already their sum)."""
        return 0 if self.children is None else self.children.total_tokens

    @property
    def tokens_with_children(self) -> int:
        """What a token budget counts: this run's tokens and every finished descendant's,
        so delegating work does not make it free."""
        return self.total_tokens + self.children_tokens

    def budget_use(self, budget: int) -> str:
        """How much of `budget` is spent, and by whom (what a stop or refusal says)."""
        return (
            f"{self.tokens_with_children} tokens used of a budget of {budget} "
            f"({self.total_tokens} by this run, {self.children_tokens} by its child runs)"
        )

    def count_retry(self, reason: str) -> None:
        self.retries[reason] = self.retries.get(reason, 0) + 1

    def count_continuation(self, why: str) -> None:
        self.continuations[why] = self.continuations.get(why, 0) + 1

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

    def fold_child(self, child: RunStats) -> None:
        """Add a finished child's stats (and its descendants') to `children`."""
        self.children = _summed(self.children or RunStats(), child.flattened())

    def flattened(self) -> RunStats:
        """This run's counters plus its descendants', as one run's worth (no `children`)."""
        own = self.model_copy(update={"children": None})
        return own if self.children is None else _summed(own, self.children)


def _summed(a: RunStats, b: RunStats) -> RunStats:
    """Field-wise sum: numbers added, counts by kind merged (every field, so a counter
    added later is folded too)."""
    summed: dict[str, Any] = {}
    for name in RunStats.model_fields:
        if name == "children":
            continue
        mine, theirs = getattr(a, name), getattr(b, name)
        if isinstance(mine, dict):
            merged = dict(mine)
            for key, count in theirs.items():
                merged[key] = merged.get(key, 0) + count
            summed[name] = merged
        else:
            summed[name] = mine + theirs
    return RunStats(**summed, children=None)


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
    # People in the loop: a pause asked for (in effect once `phase` is "paused"), calls
    # waiting for approval (`pending_approvals` query), messages not yet sent.
    paused: bool = False
    pending_approvals: int = 0
    pending_messages: int = 0
    # Plugins whose tools are offered (core first, then in activation order), and the
    # on-demand plugins the model has not activated.
    active_plugins: list[str] = Field(default_factory=list)
    activatable_plugins: list[str] = Field(default_factory=list)
    events: int = 0  # timeline events of the run's log so far
    tool_replays: int = 0  # of `tool_calls`, answered from a receipt without running


class InheritedReceipts(BaseModel):
    """The receipts a resumed run takes over from the run it resumes.

    `scope` is the receipt key's `run` part the predecessor used (its workflow id, or
    the scope it inherited itself), so a call it completed has the same key here and
    replays. `receipts` is packed against the resumed run's `RunInput.messages`, which
    begin with the predecessor's transcript (`PackedLedger`).
    """

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(min_length=1)
    receipts: PackedLedger


class CarriedState(BaseModel):
    """What a run carries across continue-as-new: everything its next turn needs.

    Receipts travel packed against `transcript` (`packed_receipts`), so a result the
    transcript holds is not carried twice. `receipt_scope`: the run part of receipt keys
    when it is not the workflow id (a resumed run's; None: the workflow id).
    """

    transcript: list[ChatMessage]
    packed_receipts: PackedLedger
    receipt_scope: str | None = None
    stats: RunStats
    turn: int
    deadline: str | None = None  # ISO workflow time, so a new run keeps the old deadline
    started: str | None = None  # ISO workflow time the run began, for its wall time
    children: list[ChildRecord] = Field(default_factory=list)  # for chain admissions
    steering: SteeringState = Field(default_factory=SteeringState)
    activated_plugins: list[str] = Field(default_factory=list)  # in activation order
    timeline_count: int = 0  # timeline events noted so far (their `seq` goes on from it)
    # Whether the run's event log is in its history (decided by its first execution and
    # kept: followers read the mode from the first one; `steadyloop.events._publishing`).
    log_in_history: bool = False


class RunResult(BaseModel):
    """How a run ended. `partial` is the text of the turn that could not finish (not in
    the transcript, which stays valid for a provider): what a person saw when it stopped
    `output_interrupted`, or `interrupted` or `deadline` while a forwarded answer
    streamed; the cut answer of a `max_tokens` stop; what streamed before a
    `token_budget` stop cut the turn in flight. `final_answer` is set only for
    `final_answer`."""

    final_answer: str | None
    stop_reason: StopReason
    detail: str = ""
    # A typed run's answer (`RunSettings.output_type`), validated: set only for
    # `final_answer`. `raw_output`: the text of the last answer that did not validate,
    # set for `invalid_output`.
    output: JsonValue = None
    raw_output: str | None = None
    transcript: list[ChatMessage]
    stats: RunStats
    partial: PartialOutput | None = None
    # As in `RunProgress`: which plugins were active when the run ended, and which not.
    active_plugins: list[str] = Field(default_factory=list)
    activatable_plugins: list[str] = Field(default_factory=list)
    # What a run resuming this one inherits (`steadyloop._run.resume`): the receipt key
    # scope, and the receipts packed against `transcript`. None when the run ended before
    # this was recorded, or when they did not fit the result (`detail` then says so).
    receipt_scope: str | None = None
    receipts: PackedLedger | None = None
    # The run's last events (its stop among them) when its event log is in its history
    # (`steadyloop.events._publishing`): recorded with the result instead of a marker.
    log_events: list[JsonValue] = Field(default_factory=list)


# `RunInput` names types defined below it; complete its schema now, at import, where the
# names resolve. Left to its first use, that would happen while Temporal decodes a run's
# input inside the workflow sandbox, where it can fail ("not fully defined").
RunInput.model_rebuild()
