"""The transcript rules providers enforce, as checkers that list violations (empty: accepted).

Each check is written from the provider's own rejection, quoted beside it, so a test
that runs a healed transcript through these is a test against the provider's rules,
not against the healer's idea of them. Sources: OpenAI and DeepSeek 400s as reported in
agno-agi/agno#3105, FoundationAgents/OpenManus#744, BerriAI/litellm#10083; Anthropic
400s in anthropics/claude-code#5989 and #6774; Gemini 400s in
google-gemini/gemini-cli#11814 and #16415; Mistral's validator
(mistralai/mistral-common, src/mistral_common/protocol/instruct/validator.py); Azure
OpenAI's id length limit in Portkey-AI/gateway#1062; the Qwen template's system rule
in vllm-project/vllm#44505.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from steadyloop._chat import ChatMessage

Checker = Callable[[Sequence[ChatMessage]], list[str]]

_SYSTEM = ("system", "developer")


def openai(messages: Sequence[ChatMessage]) -> list[str]:
    problems: list[str] = []
    expected: list[str] = []  # ids still to be answered by the tool run in progress
    open_ids: set[str] = set()
    for i, m in enumerate(messages):
        if m.role == "tool":
            if m.tool_call_id not in open_ids:
                # "messages with role 'tool' must be a response to a preceeding message
                # with 'tool_calls'"
                problems.append(f"[{i}] tool message answers no preceding call")
            else:
                open_ids.discard(m.tool_call_id)
                expected.remove(m.tool_call_id)
            continue
        if expected:
            # "An assistant message with 'tool_calls' must be followed by tool messages
            # responding to each 'tool_call_id'. The following tool_call_ids did not have
            # response messages: ..."
            problems.append(f"[{i}] calls not answered before this message: {expected}")
        expected = []
        open_ids = set()
        if m.role == "assistant" and m.tool_calls:
            expected = [c.id for c in m.tool_calls]
            open_ids = set(expected)
            if len(open_ids) != len(expected):
                problems.append(f"[{i}] one assistant message repeats a tool-call id")
        if m.content is None and not (m.role == "assistant" and m.tool_calls):
            problems.append(f"[{i}] null content on a {m.role} message")
    if expected:
        problems.append(f"[end] calls never answered: {expected}")
    ids = [c.id for m in messages for c in m.tool_calls]
    for call_id in ids:
        if len(call_id) > 40:
            # Azure OpenAI: "string too long. Expected a string with maximum length 40"
            problems.append(f"tool-call id {call_id!r} is over 40 characters")
    return problems


def unique_ids(messages: Sequence[ChatMessage]) -> list[str]:
    ids = [c.id for m in messages for c in m.tool_calls]
    seen: set[str] = set()
    repeated = [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]
    blank = [i for i in ids if not i.strip()]
    return [f"tool-call ids used twice: {repeated}"] * bool(repeated) + [
        f"blank tool-call ids: {blank}"
    ] * bool(blank)


def anthropic(messages: Sequence[ChatMessage]) -> list[str]:
    problems = openai(messages) + unique_ids(messages)
    for i, m in enumerate(messages):
        has_calls = m.role == "assistant" and bool(m.tool_calls)
        if not has_calls and not (m.content or "").strip():
            # "messages.0: all messages must have non-empty content except for the
            # optional final assistant message"
            problems.append(f"[{i}] empty {m.role} message")
        for call in m.tool_calls:
            if not re.fullmatch(r"[a-zA-Z0-9_-]+", call.id):
                problems.append(f"[{i}] tool_use id {call.id!r} outside [a-zA-Z0-9_-]+")
    rest = [m for m in messages if m.role not in _SYSTEM]
    if rest and rest[0].role != "user":
        problems.append("first message after the system prompt is not a user message")
    problems += _system_only_first(messages)
    return problems


def gemini(messages: Sequence[ChatMessage]) -> list[str]:
    problems = openai(messages) + unique_ids(messages)
    previous: ChatMessage | None = None
    for i, m in enumerate(messages):
        if m.role in _SYSTEM:
            continue  # systemInstruction, outside contents
        # "Please ensure that function call turn comes immediately after a user turn or
        # after a function response turn."
        after_user = previous is not None and previous.role in ("user", "tool")
        if m.role == "assistant" and m.tool_calls and not after_user:
            problems.append(f"[{i}] function call turn not after a user or function turn")
        if m.role != "tool" and not (m.content or "").strip() and not m.tool_calls:
            problems.append(f"[{i}] {m.role} turn with no parts")
        previous = m
    rest = [m for m in messages if m.role not in _SYSTEM]
    if rest and rest[0].role != "user":
        problems.append("contents do not start with a user turn")
    problems += _system_only_first(messages)
    return problems


def mistral(messages: Sequence[ChatMessage]) -> list[str]:
    """mistral_common's MistralRequestValidatorV3 in serving mode, rule by rule."""
    problems: list[str] = []
    allowed_after = {
        "system": {"user", "assistant", "system"},
        "user": {"assistant", "system", "user"},
        "assistant": {"assistant", "user", "tool"},
        "tool": {"assistant", "tool"},
    }
    previous: str | None = None
    for i, m in enumerate(messages):
        role = "system" if m.role == "developer" else m.role
        if previous is not None and role not in allowed_after[previous]:
            problems.append(f"[{i}] Unexpected role '{role}' after role '{previous}'")
        previous = role
    expected = 0
    for i, m in enumerate(messages[1:], start=1):
        if m.role == "tool":
            expected -= 1
        elif m.role == "assistant":
            if expected != 0:
                problems.append(f"[{i}] Not the same number of function calls and responses")
            expected = len(m.tool_calls)
    if expected != 0:
        problems.append("[end] Not the same number of function calls and responses")
    for i, m in enumerate(messages):
        if m.role == "assistant" and bool(m.content) == bool(m.tool_calls):
            problems.append(
                f"[{i}] Assistant message must have either content or tool_calls, but not both."
            )
        for call in m.tool_calls:
            if not re.fullmatch(r"[a-zA-Z0-9]{9}", call.id):
                problems.append(
                    f"[{i}] Tool call id was {call.id} but must be a-z, A-Z, 0-9, "
                    "with a length of 9."
                )
        if m.role == "tool" and not re.fullmatch(r"[a-zA-Z0-9]{9}", m.tool_call_id or ""):
            problems.append(f"[{i}] tool message id {m.tool_call_id!r} is not nine alphanumerics")
        if m.role in _SYSTEM and m.content is None:
            problems.append(f"[{i}] System prompt must have content")
    return problems + unique_ids(messages)


def qwen_template(messages: Sequence[ChatMessage]) -> list[str]:
    """The Qwen/Llama chat templates: "System message must be at the beginning."."""
    return _system_only_first(messages)


def _system_only_first(messages: Sequence[ChatMessage]) -> list[str]:
    return [
        f"[{i}] System message must be at the beginning."
        for i, m in enumerate(messages)
        if m.role in _SYSTEM and i != 0
    ]


def portable(messages: Sequence[ChatMessage]) -> list[str]:
    """The default profile: OpenAI's rules, portable ids, no empty message, system first."""
    problems = openai(messages) + unique_ids(messages) + qwen_template(messages)
    for i, m in enumerate(messages):
        has_calls = m.role == "assistant" and bool(m.tool_calls)
        if not has_calls and not (m.content or "").strip():
            problems.append(f"[{i}] empty {m.role} message")
        if has_calls and m.content is not None and not m.content.strip():
            problems.append(f"[{i}] blank text beside tool calls")
        for call in m.tool_calls:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", call.id):
                problems.append(f"[{i}] tool-call id {call.id!r} is not portable")
    return problems


def object_arguments(messages: Sequence[ChatMessage]) -> list[str]:
    """llama.cpp's server parses every call's arguments in the history, as sent on the
    wire: `""` and malformed text are a 500 "Failed to parse tool call arguments as JSON"
    (seen on the server of the `realserver` tests), and gateways that translate to
    Anthropic need an object for `tool_use.input`. Read strictly: no NaN, no lone
    surrogates."""
    problems: list[str] = []
    for i, m in enumerate(messages):
        for call in m.to_wire().get("tool_calls", []):
            try:
                value = json.loads(call["function"]["arguments"], parse_constant=_refuse)
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            except (ValueError, UnicodeEncodeError) as error:
                problems.append(f"[{i}] Failed to parse tool call arguments as JSON: {error}")
                continue
            if not isinstance(value, dict):
                problems.append(f"[{i}] tool call arguments are not a JSON object")
    return problems


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


CHECKERS: dict[str, Checker] = {
    "portable": lambda ms: portable(ms) + object_arguments(ms),
    "openai": lambda ms: openai(ms) + unique_ids(ms) + object_arguments(ms),
    "anthropic": lambda ms: anthropic(ms) + object_arguments(ms),
    "gemini": lambda ms: gemini(ms) + object_arguments(ms),
    "mistral": lambda ms: mistral(ms) + object_arguments(ms),
}
