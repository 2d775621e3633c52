"""The OpenAI Responses request: the `/responses` body of one turn, from the same transcript.

The transcript is Chat Completions shaped (`steadyloop._chat`); the Responses API wants
`input` items. How each message becomes items, and what the obvious translation gets
wrong:

- An assistant message is several items: its text as a `message`, each tool call as a
  `function_call` (`call_id`, `name`, `arguments`), and its pass-back reasoning items
  *in front of the call they preceded* (`PassbackItem.before_call`; one that preceded
  no call goes before the text). Sent after the call, or not at all, a reasoning
  model's next turn is refused: "function_call was provided without its required
  'reasoning' item".
- A reasoning item is sent as the bytes it arrived as (`orjson.Fragment`), never
  parsed and dumped again, and only to the endpoint that issued it
  (`steadyloop._stream.passback.passback_for`). Text that is not one JSON object (a
  transcript given by hand) is left out: spliced in, the body would not parse.
- A tool message is a `function_call_output` (`call_id`, `output`), not a message with
  a role: a `tool` role is refused.
- Arguments that are not one JSON object (the `""` of a zero-argument call, text the
  model broke) go back as `{}`, as on the chat wire (`ToolCall.to_wire`).
- llama.cpp refuses an item without `type` ("Cannot determine type of 'item'"), so
  every message carries `"type": "message"`.
- Tools are flat (`{"type": "function", "name", "description", "parameters",
  "strict"}`), not nested under `function`; `strict` is sent explicitly because the
  Responses API's default for it is not Chat Completions' (off).
- `tool_choice` naming a function is `{"type": "function", "name": N}` here (Chat's
  `{"type": "function", "function": {"name": N}}` is translated).
- The output-token limit is `max_output_tokens`; `reasoning_effort` is
  `reasoning.effort`; `response_format` is `text.format`, with a JSON schema's fields
  flattened into it. The API has no `stop` and no `seed`: they are not sent (an
  endpoint that takes them can have them in `extra_body`).
- steadyloop keeps the transcript itself, so nothing is stored server-side:
  `store: false`, and `include: ["reasoning.encrypted_content"]` so a stateless
  reasoning item still carries what the next turn needs. An endpoint that refuses
  either sets its own in `extra_body`, which then wins.
"""

from __future__ import annotations

from typing import Any

import orjson

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall, ToolSpec
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._stream.completion import CompletionRequest, ToolChoice
from steadyloop._stream.passback import passback_block, passback_for

__all__ = [
    "REASONING_INCLUDE",
    "build_responses_body",
    "input_items",
    "responses_tool",
    "responses_tool_choice",
]

REASONING_INCLUDE = "reasoning.encrypted_content"
# The chat name of a parameter an endpoint refused (`omit_parameters`) -> the body
# field that carries it on this wire.
_OMITTED_AS = {"response_format": "text", "reasoning_effort": "reasoning"}


def build_responses_body(request: CompletionRequest, endpoint: EndpointConfig) -> dict[str, Any]:
    """The `/responses` body: streaming on, optional fields only when set, the endpoint's
    `extra_body` under the run's fields (except `store` and `include`, which it may set)."""
    messages = passback_for(request.messages, endpoint.name, "responses")
    body: dict[str, Any] = {
        "store": False,
        "include": [REASONING_INCLUDE],
        **endpoint.extra_body,
        "model": request.model,
        "input": input_items(messages),
        "stream": True,
    }
    if request.tools:
        body["tools"] = [responses_tool(tool) for tool in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = responses_tool_choice(request.tool_choice)
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.response_format is not None:
        body["text"] = {"format": _text_format(request.response_format)}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.reasoning_effort is not None:
        body["reasoning"] = {"effort": request.reasoning_effort}
    for parameter in request.omit_parameters:  # what this endpoint is known to refuse
        body.pop(_OMITTED_AS.get(parameter, parameter), None)
    return body


def input_items(messages: list[ChatMessage]) -> list[Any]:
    """The transcript as Responses `input` items, in order (see the module docstring)."""
    items: list[Any] = []
    for message in messages:
        role = message.role
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": message.content or "",
                }
            )
        elif role == "assistant":
            items.extend(_assistant_items(message))
        else:
            items.append({"type": "message", "role": role, "content": message.content or ""})
    return items


def _assistant_items(message: ChatMessage) -> list[Any]:
    calls = {call.id for call in message.tool_calls}
    before: dict[str | None, list[PassbackItem]] = {}
    for item in message.passback:
        if passback_block(item.raw) is None:
            continue  # not one JSON object: spliced in, the body would not parse
        key = item.before_call if item.before_call in calls else None
        before.setdefault(key, []).append(item)
    out: list[Any] = [orjson.Fragment(item.raw) for item in before.get(None, ())]
    if message.content:
        out.append({"type": "message", "role": "assistant", "content": message.content})
    for call in message.tool_calls:
        out.extend(orjson.Fragment(item.raw) for item in before.get(call.id, ()))
        out.append(_function_call(call))
    return out


def _function_call(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.to_wire()["function"]["arguments"],
    }


def responses_tool(tool: ToolSpec) -> dict[str, Any]:
    """A function tool in the Responses spelling (flat, `strict` explicit)."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": tool.strict,
    }


def responses_tool_choice(choice: ToolChoice) -> ToolChoice:
    """`tool_choice` in the Responses spelling: a forced function is `{"type":
    "function", "name": N}`; the strings and any other object pass unchanged."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        if isinstance(function, dict) and "name" in function and "name" not in choice:
            return {"type": "function", "name": function["name"]}
    return choice


def _text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """Chat's `response_format` as Responses' `text.format` (a JSON schema flattened)."""
    if response_format.get("type") == "json_schema" and isinstance(
        response_format.get("json_schema"), dict
    ):
        return {"type": "json_schema", **response_format["json_schema"]}
    return response_format
