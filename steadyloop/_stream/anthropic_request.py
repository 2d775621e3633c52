"""The Anthropic Messages request (`POST <base>/messages`), built from the same transcript
and tool specs as every other wire.

`anthropic_body(request, endpoint)` is the JSON body, `anthropic_headers(endpoint, key)`
the headers. What the obvious translation of a chat-completions request gets wrong, and
what prevents each here:

- A `system` message in `messages` is refused ("Unexpected role "system""): system and
  developer messages are taken out, in order, into the top-level `system`.
- Tool results are not messages of their own: each is a `tool_result` block in a user
  message, and consecutive results go in one user message ("`tool_use` ids were found
  without `tool_result` blocks immediately after"). Every call needs exactly one result
  carrying its id, and every message non-empty content: the transcript is first healed
  for Anthropic (`validate_and_heal(..., "anthropic")`, the same rules the workflow
  applies; healing a healed transcript changes nothing), then consecutive messages of
  one role are merged, results first.
- `tool_use.input` must be an object: arguments that are not one JSON object (a
  zero-argument `""`, text the model got wrong) go as `{}`, as on the chat wire
  (`steadyloop._chat.ToolCall.to_wire`); the transcript keeps what the model sent. The
  object goes as the model's own text (`orjson.Fragment`): parsed and dumped again,
  arguments nested past orjson's 255 levels made the activity fail on every attempt.
- Pass-back blocks (`thinking`, `redacted_thinking`, `server_tool_use` and its results)
  go back byte-exact: the block's text in the body is `PassbackItem.raw` itself
  (`orjson.Fragment`), never parsed and dumped again, so keys, their order, every
  escape and the signature are what the assembler kept. Parsed and dumped, a block
  whose text holds a lone surrogate (kept as its JSON escape) made orjson refuse the
  whole body. A block whose text is not one JSON object (a transcript given by hand)
  is left out: sent, it would make the body invalid JSON. They go in the order they
  came, and only to the endpoint that issued them on this wire (another endpoint cannot
  verify the signature: 400 "Invalid signature in thinking block"). A block goes before
  the tool call it preceded, blocks that preceded no call first. None is ever made up.
- `max_tokens` is required ("max_tokens: Field required"): a run that sets none sends
  `DEFAULT_MAX_TOKENS`.
- `tool_choice` is an object: `auto` -> `{"type": "auto"}`, `required` -> `{"type":
  "any"}`, `none` -> `{"type": "none"}`, a named function -> `{"type": "tool", "name":
  ...}` (an object already in Anthropic's spelling is sent as it is).
  `parallel_tool_calls=False` is `disable_parallel_tool_use: true` on it. Neither is
  sent without tools.
- The final assistant message is a prefill, and "final assistant content cannot end
  with trailing whitespace": its trailing whitespace is removed.
- `stop` is `stop_sequences`. `seed` and `reasoning_effort` have no Messages
  counterpart and are not sent (an endpoint that takes one sets it in `extra_body`).
  `extra_body` comes first, so a field the run sets wins.
- A JSON schema `response_format` is Anthropic's structured output,
  `output_config: {"format": {"type": "json_schema", "schema": ...}}` (generally
  available, no beta header; the beta spelling was a top-level `output_format` under
  `anthropic-beta: structured-outputs-2025-11-13`). Not a forced tool: forcing one
  (`tool_choice: {"type": "tool"}`) would stop the model calling the run's own tools,
  and is refused with extended thinking; and its answer would be a `tool_use` the loop
  must answer with a result. `json_object` has no counterpart and is not sent. An
  endpoint that refuses `output_config` has it dropped (`omit_parameters`), and the run
  checks the answer all the same.
- Authentication is `x-api-key` plus `anthropic-version`, never `Authorization: Bearer`
  (which Anthropic ignores, answering 401).
"""

from __future__ import annotations

from typing import Any

import orjson

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall, ToolSpec
from steadyloop._history.healing import validate_and_heal
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.chat_request import USER_AGENT
from steadyloop._stream.completion import CompletionRequest, ToolChoice
from steadyloop._stream.passback import passback_block, passback_for

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "anthropic_body",
    "anthropic_headers",
    "anthropic_messages",
    "anthropic_tool_choice",
]

# What a run that sets no output limit asks for: Anthropic requires one, and 4096 is
# within every current Claude model's output limit (the smallest, Claude 3 Haiku's, is 4096).
DEFAULT_MAX_TOKENS = 4096
_SYSTEM_ROLES = ("system", "developer")


def anthropic_headers(endpoint: EndpointConfig, api_key: str | None) -> dict[str, str]:
    """`x-api-key` (when the endpoint has a key) and `anthropic-version`, no bearer."""
    headers = {
        "Accept": "text/event-stream",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "anthropic-version": endpoint.anthropic_version,
        **endpoint.headers,
    }
    if api_key is not None:
        headers["x-api-key"] = api_key
    return headers


def anthropic_body(request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]:
    """The `/messages` body: streaming on, optional fields only when set."""
    system, messages = anthropic_messages(request.messages, endpoint.name)
    body: dict[str, Any] = {
        **endpoint.extra_body,
        "model": request.model,
        "messages": [
            {**message, "content": [_sent(block) for block in message["content"]]}
            for message in messages
        ],
        "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "stream": True,
    }
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
        choice = anthropic_tool_choice(request.tool_choice, request.parallel_tool_calls)
        if choice is not None:
            body["tool_choice"] = choice
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = request.stop
    output_format = _output_format(request.response_format)
    if output_format is not None:
        body["output_config"] = {**body.get("output_config", {}), "format": output_format}
    for parameter in request.omit_parameters:  # what this endpoint is known to refuse
        body.pop(_OMITTED_AS.get(parameter, parameter), None)
    return body


# The chat name of a parameter an endpoint refused (`omit_parameters`) -> the body
# field that carries it on this wire.
_OMITTED_AS = {"response_format": "output_config"}


def _output_format(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chat's JSON schema `response_format` as Anthropic's `output_config.format`."""
    if response_format is None or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        return None
    return {"type": "json_schema", "schema": spec["schema"]}


def anthropic_tool_choice(
    choice: ToolChoice | None, parallel_tool_calls: bool | None
) -> dict[str, Any] | None:
    """`tool_choice` in Anthropic's spelling (see the module docstring), or None."""
    spelled: dict[str, Any] | None
    if choice is None:
        spelled = None
    elif choice == "auto":
        spelled = {"type": "auto"}
    elif choice == "required":
        spelled = {"type": "any"}
    elif choice == "none":
        spelled = {"type": "none"}
    elif isinstance(choice, dict):
        function = choice.get("function")
        if choice.get("type") == "function" and isinstance(function, dict):
            spelled = {"type": "tool", "name": function.get("name")}
        else:
            spelled = dict(choice)  # already Anthropic's (`{"type": "tool", "name": ...}`)
    else:
        raise ValueError(f"tool_choice {choice!r} has no Anthropic spelling")
    if parallel_tool_calls is False:
        spelled = spelled or {"type": "auto"}
        if spelled.get("type") != "none":
            spelled["disable_parallel_tool_use"] = True
    return spelled


def anthropic_messages(
    transcript: list[ChatMessage], endpoint: str
) -> tuple[str, list[dict[str, Any]]]:
    """The `system` text and the `messages` list for a transcript sent to `endpoint`."""
    # Only this endpoint's own blocks (`passback_for`), then Anthropic's transcript rules.
    healed, _ = validate_and_heal(passback_for(transcript, endpoint, "anthropic"), "anthropic")
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in healed:
        if message.role in _SYSTEM_ROLES:
            if message.content:
                system.append(message.content)
            continue
        if message.role == "tool":
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content or "",
                }
            ]
        elif message.role == "assistant":
            role = "assistant"
            blocks = _assistant_blocks(message, endpoint)
        else:
            role = "user"
            blocks = [{"type": "text", "text": message.content}] if message.content else []
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            previous = out[-1]["content"]
            # Results first in a user message (Anthropic requires them before its text).
            results = [b for b in blocks if b["type"] == "tool_result"]
            others = [b for b in blocks if b["type"] != "tool_result"]
            head = [b for b in previous if b["type"] == "tool_result"] + results
            previous[:] = head + [b for b in previous if b["type"] != "tool_result"] + others
        else:
            out.append({"role": role, "content": blocks})
    if out and out[-1]["role"] == "assistant":
        _trim_prefill(out[-1]["content"])
        if not out[-1]["content"]:
            out.pop()  # a prefill of whitespace only is no prefill
    return "\n\n".join(system), out


def _assistant_blocks(message: ChatMessage, endpoint: str) -> list[dict[str, Any]]:
    """Pass-back blocks, text, and each call after the blocks that preceded it."""
    mine = [item for item in message.passback if item.wire == "anthropic"]
    ids = {call.id for call in message.tool_calls}
    blocks = _passed([item for item in mine if item.before_call not in ids])
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.extend(_passed([item for item in mine if item.before_call == call.id]))
        blocks.append(_tool_use(call))
    return blocks


class _Passed(dict[str, Any]):
    """A pass-back block: read here as the object it parses to (its `type` decides where
    it goes), sent as the text it arrived as (`raw`, see `_sent`)."""

    __slots__ = ("raw",)

    def __init__(self, raw: str, block: dict[str, Any]) -> None:
        super().__init__(block)
        self.raw = raw


def _passed(items: list[PassbackItem]) -> list[dict[str, Any]]:
    """`items` as blocks, each that is one JSON object (`passback_block`)."""
    out: list[dict[str, Any]] = []
    for item in items:
        block = passback_block(item.raw)
        if block is not None:
            out.append(_Passed(item.raw, block))
    return out


def _sent(block: dict[str, Any]) -> Any:
    """A block as it goes in the body: a pass-back block as its own bytes."""
    return orjson.Fragment(block.raw) if isinstance(block, _Passed) else block


def _tool_use(call: ToolCall) -> dict[str, Any]:
    wire = call.to_wire()["function"]["arguments"]  # the arguments, or "{}" (see above)
    # Spliced in as the text the model wrote: parsed into objects and dumped again, an
    # object nested deeper than orjson writes (255 levels) made the whole body fail.
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": orjson.Fragment(wire)}


def _tool(tool: ToolSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description:
        out["description"] = tool.description
    return out


def _trim_prefill(blocks: list[dict[str, Any]]) -> None:
    """A final assistant message may not end with whitespace (the prefill)."""
    last = blocks[-1]
    if last["type"] == "text":
        trimmed = last["text"].rstrip()
        if trimmed:
            blocks[-1] = {**last, "text": trimmed}
        else:
            blocks.pop()
