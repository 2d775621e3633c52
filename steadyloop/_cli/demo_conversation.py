"""The demo's model: a scripted OpenAI-compatible provider that answers from the request.

It decides each turn from the transcript it is sent (how many tool messages it has,
and what they say), never from a counter of its own, so the conversation is
deterministic and a retried request gets the same answer. Four turns:

1. Reads the order and the clock: `read_file` and `current_time` in Ollama's shape,
   both calls labelled `index: 0`, names split across chunks (`read` + `_fil` + `e`),
   each id arriving on the call's *last* fragment, and `current_time`'s arguments
   sent as `""` (a zero-argument call).
2. Adds it up: `calculate` with an expression built from the file's lines, its
   arguments streamed in five-byte fragments, again `index: 0` with a late id.
3. Leaves a note: `append_note` (the side effect) with the total `calculate` returned
   and the time `current_time` returned.
4. Answers in text, word by word, with the total and the note.

Every turn ends with a usage chunk, so the token count moves. `pace` pauses between
chunks so the live display has something to show; 0 streams as fast as the socket.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from steadyloop.testing._chunks import (
    ScriptedCall,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing._scripted_server import (
    Pause,
    RecordedRequest,
    ScriptedResponse,
    error_response,
    sse_response,
)

ORDER_PATH = "orders/march.txt"
ORDER_TEXT = """\
# March order
12 x widget   @ 4.50
 3 x gadget   @ 19.99
 1 x shipping @ 7.25
"""
PROMPT = (
    "How much does the March order in the sandbox come to? Work it out, then leave the "
    "team a note with the total and the time you checked."
)
SYSTEM_PROMPT = "You are steadyloop's demo agent. Use the tools; answer briefly."
DEMO_TOOLS = ["read_file", "current_time", "calculate", "append_note", "list_notes", "add"]

_LINE = re.compile(r"^\s*(\d+)\s*x\s*(\w+)\s*@\s*(\d+(?:\.\d+)?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class OrderLine:
    quantity: int
    item: str
    price: str


def order_lines(text: str) -> list[OrderLine]:
    return [OrderLine(int(q), item, price) for q, item, price in _LINE.findall(text)]


class DemoProvider:
    """The responder for `ScriptedServer`: one `ScriptedResponse` per request."""

    def __init__(self, *, pace_s: float = 0.04) -> None:
        self.pace_s = pace_s

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error_response(400, "the demo provider expects a chat-completions body")
        messages: list[dict[str, Any]] = body["messages"]
        answers = _tool_answers(messages)
        prompt_tokens = max(1, len(request.body) // 4)
        if not answers:
            return self._stream(
                text_chunks("Let me read the order and check the time first.")
                + tool_call_chunks(
                    [
                        ScriptedCall("read_file", {"path": ORDER_PATH}, id="call_read"),
                        ScriptedCall("current_time", "", id="call_clock"),
                    ],
                    index="zero",
                    id_on="last",
                    name_split=4,
                    fragment_size=8,
                    role=False,
                ),
                "tool_calls",
                prompt_tokens,
            )
        lines = order_lines(answers.get("read_file", ""))
        if "calculate" not in answers:
            if not lines:
                return self._answer(
                    "I could not read the order: " + answers.get("read_file", "no file"),
                    prompt_tokens,
                )
            expression = " + ".join(f"{line.quantity} * {line.price}" for line in lines)
            return self._stream(
                tool_call_chunks(
                    [ScriptedCall("calculate", {"expression": expression}, id="call_sum")],
                    index="zero",
                    id_on="last",
                    name_split=3,
                    fragment_size=5,
                ),
                "tool_calls",
                prompt_tokens,
            )
        total = _money(answers["calculate"])
        checked = answers.get("current_time", "").strip() or "an unknown time"
        note = f"March order total: {total} (checked {checked})"
        if "append_note" not in answers:
            return self._stream(
                tool_call_chunks(
                    [ScriptedCall("append_note", {"text": note}, id="call_note")],
                    index="zero",
                    fragment_size=16,
                ),
                "tool_calls",
                prompt_tokens,
            )
        items = ", ".join(f"{line.quantity} x {line.item} at {line.price}" for line in lines)
        return self._answer(
            f"The March order comes to {total} ({items}). I left the team a note in the "
            f'outbox: "{note}".',
            prompt_tokens,
        )

    def _answer(self, text: str, prompt_tokens: int) -> ScriptedResponse:
        return self._stream(text_chunks(text), "stop", prompt_tokens)

    def _stream(
        self, chunks: list[dict[str, Any]], finish: str, prompt_tokens: int
    ) -> ScriptedResponse:
        produced = sum(len(json.dumps(chunk["choices"])) for chunk in chunks) // 16
        paced: list[dict[str, Any] | Pause] = []
        for chunk in chunks:
            paced.append(chunk)
            if self.pace_s > 0:
                paced.append(Pause(self.pace_s))
        paced.append(finish_chunk(finish))
        paced.append(usage_chunk(prompt_tokens, max(1, produced)))
        return sse_response(paced)


def _tool_answers(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Each tool's latest answer in the transcript, by tool name."""
    names: dict[str, str] = {}
    answers: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
        if message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), "?")
            answers[name] = str(message.get("content") or "")
    return answers


def _money(text: str) -> str:
    try:
        return f"{float(text.strip()):.2f}"
    except ValueError:
        return text.strip()
