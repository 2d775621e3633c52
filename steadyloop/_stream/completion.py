"""Payloads of one model turn: what the workflow asks for and what the model activity returns.

The request names an endpoint; it never carries a base URL or a key. Those live in the
worker's configuration and environment, so no secret enters workflow input or history.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall, ToolSpec
from steadyloop._output.forwarding import ForwardTarget
from steadyloop._routing.taxonomy import DegradableParameter
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._stream.defects import CompletionDefect
from steadyloop._stream.surrogates import rejoin_surrogates

# The model activity's name, here so the scheduling side (workflow) and the registering
# side (worker) cannot drift apart, and workflow code need not import httpx to know it.
STREAM_COMPLETION_ACTIVITY = "steadyloop.stream_completion"

MAX_STREAM_NOTES = 8
STREAM_NOTE_CHARS = 200

# Finish reasons that say only "the model ended its turn": `stop` (Chat Completions, and
# Anthropic's `end_turn` / `stop_sequence` once read), and Anthropic's own labels where a
# chat gateway passes them through. With tool calls in the turn they are relabelled.
_PLAIN_ENDS = frozenset({"stop", "end_turn", "stop_sequence"})

ToolChoice = Literal["auto", "none", "required"] | dict[str, Any]


def add_note(notes: list[str], text: str) -> None:
    """Append a stream note (`StreamStats.notes`): at most `MAX_STREAM_NOTES`, each cut to
    `STREAM_NOTE_CHARS`, lone surrogates replaced so it always serializes."""
    if len(notes) < MAX_STREAM_NOTES:
        notes.append(rejoin_surrogates(text[:STREAM_NOTE_CHARS], json_escape=False))


def reported_finish_reason(
    finish_reason: str | None, has_tool_calls: bool, notes: list[str], said: str | None = None
) -> str | None:
    """The finish reason a turn reports: what it did, on every wire.

    A turn that holds tool calls reports `tool_calls` when the provider's label only said
    the model ended its turn (`stop`, `end_turn`, `stop_sequence`): gateways that
    translate between wires send `end_turn` with a closed `tool_use` block
    (BerriAI/litellm#34692), and the calls are dispatched, so `stop` would contradict
    what the run did in every place the label is shown (traces, the turn's record). The
    provider's own label (`said`, when the wire's reader renamed it) is kept as a note.
    A label that says more (`length`, `content_filter`, `max_tokens`) is kept as sent: it
    is what the defects read, and a cut is not a plain end. No label stays none (a
    stream accepted on `[DONE]` without one).
    """
    if has_tool_calls and finish_reason in _PLAIN_ENDS:
        add_note(
            notes,
            f"the provider ended the turn with {said or finish_reason!r} while it holds tool "
            "calls; reported as 'tool_calls'",
        )
        return "tool_calls"
    return finish_reason


class CompletionRequest(BaseModel):
    """One streamed chat completion, by endpoint *name*.

    `response_format` is passed through verbatim; when it asks for JSON
    (`json_object` or `json_schema`), content that does not parse is a defect.
    `mint_prefix` namespaces the ids steadyloop mints for calls whose wire id is
    unusable, so two turns of one run never mint the same id.
    `argument_limits` replaces the endpoint's runaway-argument limits for this request
    (None: the endpoint's). `forward` names where this attempt forwards its output for
    people watching (None: nowhere; see `steadyloop._output.forwarding`).
    `omit_parameters` are left out of the body even when set (or, for `stream_options`,
    configured on the endpoint): the route executor fills it with what the endpoint is
    known not to support (`steadyloop._routing.taxonomy.DEGRADABLE_PARAMETERS`).
    """

    endpoint: str
    model: str
    messages: list[ChatMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: list[str] | None = None
    # OpenAI's reasoning models: "minimal", "low", "medium", "high" (sent verbatim).
    reasoning_effort: str | None = None
    omit_parameters: list[DegradableParameter] = Field(default_factory=list)
    mint_prefix: str = "call_sl"
    argument_limits: ArgumentLimits | None = None
    forward: ForwardTarget | None = None
    # What is left of the run's token budget: the stream is cut once this turn's output
    # tokens reach it (`steadyloop._stops.budget`; None: no budget).
    output_budget_tokens: int | None = None

    def wants_json(self) -> bool:
        kind = (self.response_format or {}).get("type")
        return kind in ("json_object", "json_schema")


class Usage(BaseModel):
    """Token usage as the provider reported it; absent when the provider sent none."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    # Anthropic's `cache_creation_input_tokens`: input written to the prompt cache (part
    # of `prompt_tokens`; billed above the input price there). None: not reported.
    cache_creation_tokens: int | None = None


class StreamStats(BaseModel):
    """What the stream looked like on the wire: counts, bytes and first-token latency."""

    chunks: int = 0
    events: int = 0
    bytes: int = 0
    time_to_first_token_s: float | None = None
    duration_s: float = 0.0
    saw_done: bool = False
    dropped_deltas: int = 0
    malformed_aliases: int = 0
    ignored_choices: int = 0
    # The runaway-argument guard's code when it cut this stream (`runaway_guard`).
    cut_by_guard: str | None = None
    # Whether output was forwarded to people watching, and how many characters of it.
    produced_output: bool = False
    forwarded_chars: int = 0
    # The output tokens counted when the run's remaining token budget cut this stream,
    # and whether the provider reported them (else they were estimated).
    cut_by_budget: int | None = None
    budget_count_reported: bool = False
    # What the stream showed that did not make the turn unusable: a terminal event whose
    # `output` is empty or names another call id than the stream did (the stream is the
    # truth), content parts neither text nor reasoning, frames for a block never started
    # that carried nothing, a provider's plain-end label on a turn of tool calls
    # (`reported_finish_reason`). At most `MAX_STREAM_NOTES`, each cut to
    # `STREAM_NOTE_CHARS` (`add_note`).
    notes: list[str] = Field(default_factory=list, exclude_if=lambda notes: not notes)


class AssembledTurn(BaseModel):
    """The model activity's result: one assistant message with finished tool calls.

    `defects` is what `detect_completion_defect` found (empty when the turn is usable);
    the workflow decides whether to spend a retry on a fresh completion. `passback`
    is what the endpoint handed out to be passed back to it (reasoning items,
    thinking blocks; `steadyloop._chat.PassbackItem`), in the order it came; the chat
    wire never has any.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    response_id: str | None = None
    defects: list[CompletionDefect] = Field(default_factory=list)
    stats: StreamStats = Field(default_factory=StreamStats)
    passback: list[PassbackItem] = Field(default_factory=list, exclude_if=lambda items: not items)

    def to_message(self) -> ChatMessage:
        return ChatMessage(
            role="assistant",
            content=self.text if (self.text or not self.tool_calls) else None,
            tool_calls=list(self.tool_calls),
            passback=list(self.passback),
        )
