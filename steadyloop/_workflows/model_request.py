"""The completion request of one model attempt, built from the run's state.

`routed_completion` sets the endpoint and model of each candidate and the number of
each attempt (`forward.attempt`). A turn being continued sends its answer so far
(`TurnContinuation.messages`), and the model activity is told what is left of the token
budget, so it cuts a runaway turn. A request that could pass the payload limit is
measured exactly, and refused with an error that names the cause, before it is sent.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
    from steadyloop._output.forwarding import ForwardTarget
    from steadyloop._run.models import RunInput
    from steadyloop._stream.completion import CompletionRequest
    from steadyloop.tools._payloads import ToolDescription

from steadyloop._workflows.run_state import RunState
from steadyloop._workflows.turn_continuation import TurnContinuation


async def model_request(
    state: RunState,
    run: RunInput,
    tools: dict[str, ToolDescription],
    attempt: int,
    going_on: TurnContinuation,
) -> CompletionRequest:
    """The completion to route for the turn's attempt `attempt`."""
    budget = run.limits.token_budget
    # A continuation is its own prefill (or asks for the rest); the run's prefill and
    # a forced tool choice open a fresh reply, not the rest of one.
    continuing = going_on.kind is not None
    prefill = None if continuing else run.turn_prefill(state.transcript)
    messages = going_on.messages(state.transcript)
    request = CompletionRequest(
        endpoint=run.endpoint,
        model=run.model,
        messages=messages if prefill is None else [*messages, prefill],
        tools=[tool.to_spec() for tool in tools.values()],
        tool_choice=None if continuing else run.turn_tool_choice(state.transcript),
        # A typed run asks for its schema natively (each wire spells it its own way).
        response_format=None if run.output_type is None else run.output_type.response_format(),
        temperature=run.sampling.temperature,
        top_p=run.sampling.top_p,
        max_tokens=run.sampling.max_tokens,
        seed=run.sampling.seed,
        stop=run.sampling.stop,
        mint_prefix=f"call_sl_t{state.turn}a{attempt}",
        forward=_forward_target(state, run, attempt, going_on),
        output_budget_tokens=None
        if budget is None
        else max(budget - state.stats.tokens_with_children, 1),
    )
    bound = _text_bound(state.transcript) + _tools_bound(tools) + _schema_bound(run)
    if bound > MAX_INLINE_PAYLOAD_BYTES:
        await state.ceiling.check(request, "the model request (the transcript so far)")
    return request


def _forward_target(
    state: RunState, run: RunInput, attempt: int, going_on: TurnContinuation
) -> ForwardTarget | None:
    """Where the attempt forwards its output for people to read, when the run forwards."""
    forwarding = run.forwarding
    if not forwarding.enabled:
        return None
    return ForwardTarget(
        stream_id=state.events.stream_id,
        turn=state.turn,
        attempt=attempt,
        reasoning_is_output=forwarding.reasoning_is_output,
        batch_interval_s=forwarding.batch_interval_s,
        host_max_events=forwarding.host_max_events,
        host_idle_close_s=forwarding.host_idle_close_s,
        accepted_chars=going_on.accepted_chars,
    )


def _text_bound(messages: list[ChatMessage]) -> int:
    """An upper bound on the transcript's JSON size, so the exact (serializing) check runs
    only when it could fail: at most 6 bytes a character (`\\u0000` escapes) plus a
    generous envelope a message."""
    chars = 0
    for message in messages:
        chars += len(message.content or "") + len(message.name or "")
        for call in message.tool_calls:
            chars += len(call.arguments) + len(call.name) + len(call.id)
    return 6 * chars + 512 * len(messages) + 64 * 1024


def _schema_bound(run: RunInput) -> int:
    """The same bound for a typed run's schema (sent with every request; at most 64 KB)."""
    return 0 if run.output_type is None else 6 * len(repr(run.output_type.json_schema)) + 512


def _tools_bound(tools: dict[str, ToolDescription]) -> int:
    """The same bound for the tool specs (their schemas' repr is about their JSON size)."""
    return sum(
        6 * (len(t.name) + len(t.description) + len(repr(t.parameters))) + 512
        for t in tools.values()
    )
