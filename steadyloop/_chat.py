"""The OpenAI chat-completions vocabulary steadyloop passes between workflow and activities.

These are payloads: they cross Temporal's data converter, so they are pydantic models
with no behaviour beyond conversion to the wire. Field names follow the OpenAI wire
format so a transcript can be sent to any OpenAI-compatible endpoint unchanged.

`PassbackItem` is the one thing here no Chat Completions server sees: reasoning a
provider hands out to be passed back on the next request (OpenAI Responses'
encrypted `reasoning` items, Anthropic's signed `thinking` blocks). What goes wrong
with it, and what prevents each:

- Re-serialized, a signed block no longer matches its signature ("Invalid signature
  in thinking block"): `raw` is the JSON text as received, never parsed into a model
  and dumped again.
- Passed to another endpoint (a route's fallback), an item is refused or, worse,
  read: each carries the *name* of the endpoint that issued it, and the wires pass
  it back only there (`steadyloop.stream.wire.passback_for`).
- Left out while its function call is sent ("function_call was provided without its
  required 'reasoning' item"): `before_call` keeps which call it preceded, so the
  Responses wire puts it back in front of that call.
- Synthesized: never. The workflow only carries what a wire returned.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "developer", "user", "assistant", "tool"]
PassbackWire = Literal["responses", "anthropic"]


class PassbackItem(BaseModel):
    """One item of an assistant turn that must round-trip to the endpoint that issued it.

    `endpoint`: the endpoint *name* that issued it (passed back only there); `wire`:
    the wire it came on; `kind`: the item's type on that wire (`reasoning`,
    `thinking`, `redacted_thinking`, `server_tool_use`, ...); `raw`: the item or
    block as received, JSON text, byte-exact (never re-serialized); `before_call`:
    the id of the tool call it preceded, None when it came before text or after every
    call. It names the call's id in the transcript: where the workflow qualifies or
    healing renames that id, the item follows (`history.call_ids.follow_renamed_calls`).
    """

    model_config = ConfigDict(frozen=True)

    endpoint: str
    wire: PassbackWire
    kind: str
    raw: str
    before_call: str | None = None


class FunctionCall(BaseModel):
    """The `function` member of an assistant tool call, as the wire spells it."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: str


class ToolCall(BaseModel):
    """One finished assistant tool call.

    `id` is the id steadyloop emits (the wire id when usable, else a minted one);
    `arguments` is the verbatim concatenation of the streamed fragments, unparsed:
    reading it is `parse_tool_call_arguments`' job, so every outcome stays a value.

    On the wire it goes back as one JSON object (`to_wire`): llama.cpp's server answers a
    500 "Failed to parse tool call arguments as JSON" for the `""` of a zero-argument
    call and for malformed text anywhere in the history, and gateways that translate to
    Anthropic need an object for `tool_use.input`. Blank or unreadable arguments are sent
    as `{}`; the transcript keeps what the model sent, and the call's tool message
    already quotes it and says why it was refused, so the model loses nothing.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str
    type: str = "function"

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "function": {
                "name": self.name,
                "arguments": self.arguments if _json_object_text(self.arguments) else "{}",
            },
        }


def _json_object_text(arguments: str) -> bool:
    """Whether a strict reader takes `arguments` as one JSON object. orjson is strict the
    way servers' readers are: no NaN, no escapes of lone surrogates, no numbers past a
    double's range, exactly one value."""
    if not arguments.lstrip().startswith("{"):
        return False
    try:
        return isinstance(orjson.loads(arguments), dict)
    except orjson.JSONDecodeError:
        return False


class ChatMessage(BaseModel):
    """One transcript message. `content` None is legal only for assistant tool-call turns."""

    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    # Assistant messages only: what a Responses or Anthropic endpoint handed out to be
    # passed back (never sent on the chat wire). Left out of the payload when empty, so
    # a transcript without any costs no history bytes for it.
    passback: list[PassbackItem] = Field(default_factory=list, exclude_if=lambda items: not items)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class ToolSpec(BaseModel):
    """A function tool offered to the model (`{"type": "function", "function": {...}}`).

    `strict` asks OpenAI to hold the arguments to the schema (sent only when True: other
    providers may not know the field); the schema must then be strict-shaped
    (`steadyloop.sanitize_tool_schema(schema, "openai_strict")`).
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False

    def to_wire(self) -> dict[str, Any]:
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.strict:
            function["strict"] = True
        return {"type": "function", "function": function}
