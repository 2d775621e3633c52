"""The tour's model: a scripted provider that answers each of the three runs from the
request it is sent (never from a counter of its own, so a retried request gets the same
answer), told apart by their prompts:

1. `REFUND_PROMPT`: calls `refund` (which waits for a person's approval), then answers
   from the refund's tool message and from any message a person sent meanwhile.
2. `REPORT_PROMPT`: streams a long report slowly (`REPORT_WORDS` words, one every
   `report_pace_s`), long enough for a person to interrupt it. Asked to continue (the
   transcript ends with the shown part and a user message), it streams only the rest.
3. `CHARGE_PROMPT`: calls `charge` (whose worker dies), then answers from its tool
   message, whatever a person said it was.
"""

from __future__ import annotations

from typing import Any

from steadyloop.testing._chunks import (
    ScriptedCall,
    chunk,
    finish_chunk,
    role_chunk,
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

REFUND_PROMPT = "Ana's kettle (order A-17, 34.50) arrived broken. Refund her."
REPORT_PROMPT = "Write the quarterly report for the board."
CHARGE_PROMPT = "Charge order B-02 (29.99) to the customer's card."
REFUND_ARGUMENTS = {"order_id": "A-17", "cents": 3450}
CHARGE_ARGUMENTS = {"order_id": "B-02", "cents": 2999}
REPORT_WORDS = 1500
REPORT_END = "That concludes the quarterly report."


def report_word(number: int) -> str:
    """The report's words: numbered sections, so a repeat or a gap is visible."""
    return f"[{number}]" if number % 10 == 0 else f"w{number}"


class TourProvider:
    """The responder for `ScriptedServer`."""

    def __init__(self, *, pace_s: float = 0.02, report_pace_s: float = 0.25) -> None:
        self.pace_s = pace_s
        self.report_pace_s = report_pace_s

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            return error_response(400, "the tour's provider expects a chat-completions body")
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        prompt = users[0] if users else ""
        answers = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
        if prompt == REFUND_PROMPT:
            return self._refund(answers, users[1:])
        if prompt == REPORT_PROMPT:
            return self._report(messages)
        if prompt == CHARGE_PROMPT:
            return self._charge(answers)
        return self._say("This demo provider only knows the tour's three requests.")

    def _refund(self, answers: list[str], said: list[str]) -> ScriptedResponse:
        if not answers:
            return self._calls("I'll refund order A-17.", "refund", REFUND_ARGUMENTS)
        text = f"Done: {answers[-1]}."
        if said:
            text += f' You also said "{said[-1]}": noted for the follow-up.'
        return self._say(text)

    def _charge(self, answers: list[str]) -> ScriptedResponse:
        if not answers:
            return self._calls("Charging B-02.", "charge", CHARGE_ARGUMENTS)
        return self._say(f"Charge of B-02: {answers[-1]}.")

    def _report(self, messages: list[dict[str, Any]]) -> ScriptedResponse:
        shown = ""
        if messages and messages[-1].get("role") == "user" and len(messages) > 2:
            previous = messages[-2]
            if previous.get("role") == "assistant":
                shown = str(previous.get("content") or "")
        if shown:  # asked to continue: only what was not shown
            last = shown.split()[-1] if shown.split() else ""
            start = _number(last) + 1
            words = [report_word(n) for n in range(start, min(start + 8, REPORT_WORDS))]
            return self._say(" ".join([*words, REPORT_END]), paced=False, role=True)
        parts: list[dict[str, Any] | Pause] = [role_chunk()]
        for number in range(REPORT_WORDS):
            separator = "" if number == 0 else " "
            parts += [
                Pause(self.report_pace_s),
                chunk({"content": separator + report_word(number)}),
            ]
        parts += [chunk({"content": " " + REPORT_END}), finish_chunk("stop"), usage_chunk(40, 1500)]
        return sse_response(parts)

    def _calls(self, text: str, tool: str, arguments: dict[str, Any]) -> ScriptedResponse:
        chunks = text_chunks(text) + tool_call_chunks(
            [ScriptedCall(tool, arguments, id=f"call_{tool}")], role=False
        )
        return self._stream(chunks, "tool_calls")

    def _say(self, text: str, *, paced: bool = True, role: bool = True) -> ScriptedResponse:
        return self._stream(text_chunks(text, role=role), "stop", paced=paced)

    def _stream(
        self, chunks: list[dict[str, Any]], finish: str, *, paced: bool = True
    ) -> ScriptedResponse:
        parts: list[dict[str, Any] | Pause] = []
        for item in chunks:
            parts.append(item)
            if paced and self.pace_s > 0:
                parts.append(Pause(self.pace_s))
        parts += [finish_chunk(finish), usage_chunk(30, max(1, len(chunks)))]
        return sse_response(parts)


def _number(word: str) -> int:
    """The number of a report word (`w12` or `[20]`); -1 for anything else."""
    digits = word.strip("[]w.,")
    return int(digits) if digits.isdigit() else -1
