"""The hostile-values class test's turns written on the OpenAI Responses and Anthropic
Messages wires, so the same values cross every wire the worker speaks.

A writer turns the pieces of one turn (text, reasoning, tool calls, an error event, the
usage numbers) into that wire's stream parts for `sse_response`: event dicts, or bytes
for an event whose JSON carries invalid UTF-8 (`raw=True`). Where a piece goes:

- text: Responses `response.output_text.delta` of a `message` item; Anthropic
  `text_delta` of a `text` block.
- reasoning: Responses `response.reasoning_summary_text.delta` of a `reasoning` item,
  whose `output_item.done` carries the value again as `encrypted_content` and summary
  (the item is kept for pass-back); Anthropic `thinking_delta` of a `thinking` block,
  with the value as its signature too.
- a call: the hostile id is the Responses `call_id` (the item id stays an alias the test
  controls) and the Anthropic `tool_use` id; the name and each argument fragment go
  where the wire puts them; a name after the arguments comes only in Responses'
  `output_item.done` (Anthropic has no later name: its start carries none).
- the labels: `distinct` numbers `output_index` / the block `index` by position, `zero`
  gives every item 0, `omit` leaves the label out.
- usage: the numbers as JSON text spliced into the terminal event (`NaN`, `1e400` and a
  5,000-digit int are JSON text no encoder writes).
- an error event after HTTP 200: the error body with `"type": "error"` in front.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from steadyloop.testing import Pause, ScriptedResponse, sse_response

Api = Literal["chat", "responses", "anthropic"]
Part = dict[str, Any] | bytes | str | Pause
Index = Literal["distinct", "zero", "omit"]

PLAIN_USAGE = ("10", "5")


def raw_event(payload: dict[str, Any]) -> bytes:
    """An event whose JSON is written without escapes: lone surrogates become their
    3-byte encodings and surrogate escapes the bytes they stand for (invalid UTF-8)."""
    out = bytearray()
    for char in json.dumps(payload, ensure_ascii=False):
        if "\udc80" <= char <= "\udcff":
            out.append(ord(char) - 0xDC00)
        else:
            out += char.encode("utf-8", "surrogatepass")
    return b"data: " + bytes(out) + b"\n\n"


def error_event(body: bytes) -> bytes:
    """An error body as the event a Responses or Anthropic stream sends after HTTP 200."""
    stripped = body.lstrip()
    if stripped.startswith(b"{") and stripped[1:].lstrip()[:1] not in (b"}", b""):
        data = b'{"type":"error",' + stripped[1:]
    else:  # not an object: its text as the message
        text = json.dumps(body.decode("utf-8", "surrogateescape"))
        data = (
            b'{"type":"error","error":{"type":"api_error","message":'
            + text.encode("utf-8", "surrogatepass")
            + b"}}"
        )
    return b"data: " + data + b"\n\n"


class WireWriter:
    """One turn's stream on one wire, written piece by piece (see the module docstring)."""

    def __init__(self, api: Api, index: Index = "distinct") -> None:
        assert api != "chat", "the chat wire is written by test_hostile_values itself"
        self.api = api
        self.index = index
        self.parts: list[Part] = []
        self._position = 0  # the next item's output_index / block index
        self._text: int | None = None  # the open text item or block
        self._start()

    # -- pieces ----------------------------------------------------------------------

    def text(self, value: str, *, raw: bool = False) -> None:
        where = self._open_text()
        if self.api == "responses":
            self._put(
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_h",
                    "content_index": 0,
                    **self._label("output_index", where),
                    "delta": value,
                },
                raw,
            )
        else:
            self._put(self._block_delta(where, {"type": "text_delta", "text": value}), raw)

    def text_cut_in_utf8(self, value: str, cut_before: str) -> None:
        """`value` in one delta whose bytes are cut two bytes into `cut_before`'s UTF-8,
        across two writes."""
        where = self._open_text()
        if self.api == "responses":
            payload = {"type": "response.output_text.delta", "item_id": "msg_h", "delta": value}
            payload |= self._label("output_index", where)
        else:
            payload = self._block_delta(where, {"type": "text_delta", "text": value})
        event = raw_event(payload)
        cut = event.index(cut_before.encode()) + 2
        self.parts += [event[:cut], Pause(0.15), event[cut:]]

    def pause(self) -> None:
        self.parts.append(Pause(0.15))

    def reasoning(self, value: str, *, raw: bool = False) -> None:
        self._close_text()
        where = self._next()
        if self.api == "responses":
            item = {"type": "reasoning", "id": f"rs_{where}", "summary": []}
            label = self._label("output_index", where)
            self._put({"type": "response.output_item.added", **label, "item": item}, False)
            self._put(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": item["id"],
                    **label,
                    "summary_index": 0,
                    "delta": value,
                },
                raw,
            )
            done = {
                **item,
                "summary": [{"type": "summary_text", "text": value}],
                "encrypted_content": value,
            }
            self._put({"type": "response.output_item.done", **label, "item": done}, raw)
            return
        block = {"type": "thinking", "thinking": "", "signature": ""}
        self._put(self._block_start(where, block), False)
        self._put(self._block_delta(where, {"type": "thinking_delta", "thinking": value}), raw)
        self._put(self._block_delta(where, {"type": "signature_delta", "signature": value}), raw)
        self._put(self._block_stop(where), False)

    def call(
        self,
        wire_id: Any,
        name: Any,
        fragments: list[str],
        *,
        raw: bool = False,
        name_after_arguments: bool = False,
    ) -> None:
        """One call; `wire_id` "omit" leaves the id out."""
        self._close_text()
        where = self._next()
        arguments = "".join(fragments)
        if self.api == "responses":
            item: dict[str, Any] = {"type": "function_call", "id": f"fc_{where}"}
            if wire_id != "omit":
                item["call_id"] = wire_id
            head = dict(item) if name_after_arguments else {**item, "name": name}
            label = self._label("output_index", where)
            added = {
                "type": "response.output_item.added",
                **label,
                "item": head | {"arguments": ""},
            }
            self._put(added, raw)
            for fragment in fragments:
                self._put(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        **label,
                        "delta": fragment,
                    },
                    raw,
                )
            done = {**item, "name": name, "arguments": arguments, "status": "completed"}
            self._put({"type": "response.output_item.done", **label, "item": done}, raw)
            return
        block: dict[str, Any] = {"type": "tool_use"}
        if wire_id != "omit":
            block["id"] = wire_id
        if not name_after_arguments:
            block["name"] = name
        block["input"] = {}
        self._put(self._block_start(where, block), raw)
        for fragment in fragments:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            self._put(self._block_delta(where, delta), raw)
        self._put(self._block_stop(where), False)

    def error(self, body: bytes) -> None:
        self.parts.append(error_event(body))

    def end(self, *, calls: bool, usage: tuple[str, str] = PLAIN_USAGE) -> list[Part]:
        """The terminal events, with the usage numbers as JSON text; the parts."""
        self._close_text()
        prompt, completion = usage
        if self.api == "responses":
            self.parts.append(
                '{"type":"response.completed","response":{"id":"resp_h","status":"completed",'
                f'"output":[],"usage":{{"input_tokens":{prompt},"output_tokens":{completion},'
                f'"input_tokens_details":{{"cached_tokens":{prompt}}}}}}}}}'
            )
        else:
            reason = "tool_use" if calls else "end_turn"
            self.parts.append(
                f'{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}},'
                f'"usage":{{"output_tokens":{completion},"cache_read_input_tokens":{prompt}}}}}'
            )
            self.parts.append({"type": "message_stop"})
        return self.parts

    # -- the framing -------------------------------------------------------------------

    def _start(self) -> None:
        if self.api == "responses":
            self.parts.append(
                {"type": "response.created", "response": {"id": "resp_h", "output": []}}
            )
        else:
            message = {"id": "msg_h", "type": "message", "role": "assistant", "content": []}
            usage = {"input_tokens": 10, "output_tokens": 1}
            self.parts.append({"type": "message_start", "message": {**message, "usage": usage}})

    def _put(self, payload: dict[str, Any], raw: bool) -> None:
        self.parts.append(raw_event(payload) if raw else payload)

    def _next(self) -> int:
        where = self._position
        self._position += 1
        return where

    def _label(self, key: str, where: int) -> dict[str, Any]:
        if self.index == "omit":
            return {}
        return {key: 0 if self.index == "zero" else where}

    def _open_text(self) -> int:
        if self._text is None:
            self._text = self._next()
            if self.api == "responses":
                item = {"type": "message", "id": "msg_h", "role": "assistant", "content": []}
                label = self._label("output_index", self._text)
                self._put({"type": "response.output_item.added", **label, "item": item}, False)
            else:
                self._put(self._block_start(self._text, {"type": "text", "text": ""}), False)
        return self._text

    def _close_text(self) -> None:
        if self._text is not None and self.api == "anthropic":
            self._put(self._block_stop(self._text), False)
        self._text = None

    def _block_start(self, where: int, block: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "content_block_start",
            **self._label("index", where),
            "content_block": block,
        }

    def _block_delta(self, where: int, delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", **self._label("index", where), "delta": delta}

    def _block_stop(self, where: int) -> dict[str, Any]:
        return {"type": "content_block_stop", **self._label("index", where)}


def wire_answer(api: Api, text: str = "done") -> ScriptedResponse:
    """A plain final answer on `api` (not chat)."""
    writer = WireWriter(api)
    writer.text(text)
    return sse_response(writer.end(calls=False), done=False)


def api_of_path(path: str) -> Api:
    """The wire a request was posted on, by its path."""
    if path.rstrip("/").endswith("/responses"):
        return "responses"
    if path.rstrip("/").endswith("/messages"):
        return "anthropic"
    return "chat"
