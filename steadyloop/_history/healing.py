"""Transcripts providers accept: `validate_and_heal(messages)` before every model request.

A transcript the provider rejects ends the run as surely as a crash, and it is rejected
with a 400 on the *next* request, far from whatever broke it. Each rule below is a
real rejection, named by the message the provider sends; each heal is returned as a
value (`Healing`), so the run can record what was changed and why.

Pairing (every profile). OpenAI: "An assistant message with 'tool_calls' must be
followed by tool messages responding to each 'tool_call_id'" and "messages with role
'tool' must be a response to a preceeding message with 'tool_calls'"; Anthropic:
"`tool_use` ids were found without `tool_result` blocks immediately after"; Gemini:
"the number of function response parts is equal to the number of function call parts";
Mistral: "Not the same number of function calls and responses".

- A call with no answer gets an explicit tool message saying there is no result
  (`missing_answer_added`), never silence: the model must not read a lost call as done.
- An answer that arrives late (after a user message, or after the next turn) is moved
  up to its call (`answer_moved`); answers are put in call order (`answers_reordered`).
- A tool message that answers no call is dropped (`orphan_answer_dropped`), and a
  second answer to one call too (`duplicate_answer_dropped`): exactly one answer each.
  An answer belongs to the latest call before it with its id, so a provider that
  reuses ids across turns (`call_0` every turn) still pairs turn by turn.

Ids (every profile). A blank id, an id used twice in the transcript, or one the
profile's format refuses is replaced on *both* sides of the pair, deterministically
(a hash or a counter, never randomness: workflow code runs this). Portable ids are
1-40 of `[A-Za-z0-9_-]`: Anthropic's `tool_use.id` pattern, and Azure OpenAI refuses
ids over 40 characters ("string too long. Expected a string with maximum length 40").
Mistral needs exactly nine letters or digits ("Tool call id was call_0fypS1hVX but must
be a-z, A-Z, 0-9, with a length of 9").

Content (every profile). Anthropic: "all messages must have non-empty content except for
the optional final assistant message". An assistant message with neither text nor calls
is removed; blank text beside tool calls becomes null; a blank user or system message is
removed; an empty tool result is filled with a sentence saying it was empty.

By profile (`TranscriptRules`, presets in `TRANSCRIPT_PROFILES`):

- `system_first`: every system/developer message merged, in order, into one at the
  start. Qwen, Llama and Gemma chat templates raise "System message must be at the
  beginning"; Anthropic and Gemini take one system prompt; Mistral refuses a system
  message after an assistant or tool message.
- `first_turn_user`: the first message after the system prompt is a user message (a
  placeholder is inserted otherwise). Gemini: "Please ensure that function call turn
  comes immediately after a user turn or after a function response turn", when the
  history starts with a function call.
- `call_turn_after_user`: an assistant turn with calls follows a user or tool message;
  assistant text just before it is merged into it (Gemini, same message).
- `merge_consecutive`: consecutive user messages, and consecutive assistant text
  messages, are merged ("Conversation roles must alternate user/assistant/...", raised
  by Gemma and Mixtral templates).
- `text_apart_from_calls` and `no_user_after_tool`: Mistral's validator refuses an
  assistant message with both text and calls ("must have either content or tool_calls,
  but not both") and a user message right after a tool message ("Unexpected role 'user'
  after role 'tool'"): the text is split into its own assistant message, and an
  assistant placeholder is inserted between tool answers and a user message.

What is not healed: a transcript that ends on an assistant message (Mistral refuses it,
Anthropic reads it as a prefill); healing would have to invent the user's next words.
The input is never mutated; unchanged messages are reused as they are. Healing its own
output heals nothing (tested), so running it before every request is safe.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.call_ids import follow_renamed_calls

HealingKind = Literal[
    "orphan_answer_dropped",
    "duplicate_answer_dropped",
    "answer_moved",
    "answers_reordered",
    "missing_answer_added",
    "call_id_blank",
    "call_id_duplicate",
    "call_id_format",
    "empty_assistant_removed",
    "assistant_content_cleared",
    "empty_message_removed",
    "empty_tool_result_filled",
    "system_merged",
    "user_turn_inserted",
    "assistant_turn_inserted",
    "text_split_from_calls",
    "turns_merged",
]

IdStyle = Literal["portable", "mistral"]
TranscriptProfile = Literal["portable", "openai", "anthropic", "gemini", "mistral"]

NO_RESULT = (
    "No result: this tool call was never answered (the answer was lost, or the run "
    "stopped before the call ran). Do not assume it took effect."
)
EMPTY_TOOL_RESULT = "(the tool returned no output)"
USER_TURN_PLACEHOLDER = "(continue)"
ASSISTANT_TURN_PLACEHOLDER = "(tool results received)"

_PORTABLE_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_MISTRAL_ID = re.compile(r"^[A-Za-z0-9]{9}$")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SYSTEM_ROLES = ("system", "developer")


class Healing(BaseModel):
    """One change `validate_and_heal` made. `index` is the message's position in the input
    (None for a message healing added); `call_id` the tool-call id it concerns, if any."""

    model_config = ConfigDict(frozen=True)

    kind: HealingKind
    index: int | None
    call_id: str | None = None
    detail: str


class TranscriptRules(BaseModel):
    """Which provider-specific rules to heal for (see the module docstring for each)."""

    model_config = ConfigDict(frozen=True)

    system_first: bool = True
    first_turn_user: bool = False
    call_turn_after_user: bool = False
    merge_consecutive: bool = False
    text_apart_from_calls: bool = False
    no_user_after_tool: bool = False
    id_style: IdStyle = "portable"

    @model_validator(mode="after")
    def _consistent(self) -> TranscriptRules:
        if self.text_apart_from_calls and self.call_turn_after_user:
            # One splits assistant text from calls, the other merges it back: no fixed point.
            raise ValueError("text_apart_from_calls and call_turn_after_user contradict each other")
        return self


TRANSCRIPT_PROFILES: dict[TranscriptProfile, TranscriptRules] = {
    # What every provider here accepts, short of inventing turns: the default.
    "portable": TranscriptRules(),
    # OpenAI takes system messages anywhere; only pairing, ids and content are healed.
    "openai": TranscriptRules(system_first=False),
    "anthropic": TranscriptRules(first_turn_user=True),
    "gemini": TranscriptRules(first_turn_user=True, call_turn_after_user=True),
    # Mistral's validator also miscounts a history that opens with a tool-call turn.
    "mistral": TranscriptRules(
        first_turn_user=True,
        text_apart_from_calls=True,
        no_user_after_tool=True,
        id_style="mistral",
    ),
}


def validate_and_heal(
    messages: Sequence[ChatMessage],
    rules: TranscriptRules | TranscriptProfile = "portable",
) -> tuple[list[ChatMessage], list[Healing]]:
    """The transcript healed for `rules` (a profile name or `TranscriptRules`), and what changed.

    An empty list of healings means the transcript was already acceptable and the
    returned list holds the very same message objects.
    """
    if isinstance(rules, str):
        rules = TRANSCRIPT_PROFILES[rules]
    healings: list[Healing] = []
    entries = _pair(messages, healings)
    _heal_ids(entries, rules.id_style, _all_ids(messages), healings)
    flat = _flatten(entries, healings)
    flat = _drop_empty(flat, healings)
    for rule, heal in _PROFILE_PASSES:  # in this order: each pass relies on the ones before
        if getattr(rules, rule):
            flat = heal(flat, healings)
    return [message for _, message in flat], healings


def tool_call_id_ok(call_id: str | None, style: IdStyle = "portable") -> bool:
    """Whether the id is one providers of `style` accept as it is."""
    pattern = _MISTRAL_ID if style == "mistral" else _PORTABLE_ID
    return call_id is not None and pattern.match(call_id) is not None


# -- pairing -------------------------------------------------------------------------

Located = tuple[int | None, ChatMessage]


@dataclass
class _Block:
    """An assistant message with tool calls and the answers found for each call."""

    index: int
    message: ChatMessage
    calls: list[ToolCall]
    answers: list[Located | None]
    arrival: list[int] = field(default_factory=list)
    renamed: bool = False

    def open_slot(self, key: str) -> int | None:
        for slot, call in enumerate(self.calls):
            if _key(call.id) == key and self.answers[slot] is None:
                return slot
        return None


def _key(call_id: str | None) -> str:
    return (call_id or "").strip()


def _pair(messages: Sequence[ChatMessage], healings: list[Healing]) -> list[_Block | Located]:
    entries: list[_Block | Located] = []
    owner: dict[str, _Block] = {}
    current: _Block | None = None  # the block whose answers may follow right here
    for index, message in enumerate(messages):
        if message.role == "tool":
            key = _key(message.tool_call_id)
            block = owner.get(key)
            slot = None if block is None else block.open_slot(key)
            if block is None or slot is None:
                kind: HealingKind = (
                    "orphan_answer_dropped" if block is None else "duplicate_answer_dropped"
                )
                why = (
                    "answers no earlier call"
                    if block is None
                    else "answers a call already answered"
                )
                healings.append(
                    Healing(
                        kind=kind,
                        index=index,
                        call_id=message.tool_call_id,
                        detail=f"tool message {why}",
                    )
                )
                continue
            block.answers[slot] = (index, message)
            block.arrival.append(slot)
            if block is not current:
                healings.append(
                    Healing(
                        kind="answer_moved",
                        index=index,
                        call_id=message.tool_call_id,
                        detail=f"answer moved up to its call in message {block.index}",
                    )
                )
            continue
        current = None
        if message.role == "assistant" and message.tool_calls:
            block = _Block(
                index, message, list(message.tool_calls), [None] * len(message.tool_calls)
            )
            entries.append(block)
            current = block
            for call in block.calls:
                owner[_key(call.id)] = block
            continue
        entries.append((index, message))
    return entries


def _flatten(entries: list[_Block | Located], healings: list[Healing]) -> list[Located]:
    flat: list[Located] = []
    for entry in entries:
        if not isinstance(entry, _Block):
            flat.append(entry)
            continue
        block = entry
        if block.arrival != sorted(block.arrival):
            healings.append(
                Healing(
                    kind="answers_reordered",
                    index=block.index,
                    detail="tool answers put in the order of their calls",
                )
            )
        assistant = block.message
        content = assistant.content
        if content is not None and not content.strip():
            content = None
            healings.append(
                Healing(
                    kind="assistant_content_cleared",
                    index=block.index,
                    detail="blank text beside tool calls set to null",
                )
            )
        if content != assistant.content or block.renamed:
            passback = follow_renamed_calls(assistant.passback, assistant.tool_calls, block.calls)
            assistant = assistant.model_copy(
                update={"content": content, "tool_calls": block.calls, "passback": passback}
            )
        flat.append((block.index, assistant))
        for call, answer in zip(block.calls, block.answers, strict=True):
            if answer is None:
                healings.append(
                    Healing(
                        kind="missing_answer_added",
                        index=None,
                        call_id=call.id,
                        detail=f"call {call.name!r} of message {block.index} had no answer",
                    )
                )
                flat.append(
                    (None, ChatMessage(role="tool", content=NO_RESULT, tool_call_id=call.id))
                )
                continue
            index, message = answer
            if message.tool_call_id != call.id:
                message = message.model_copy(update={"tool_call_id": call.id})
            if not (message.content or "").strip():
                healings.append(
                    Healing(
                        kind="empty_tool_result_filled",
                        index=index,
                        call_id=call.id,
                        detail="empty tool result filled with a sentence saying so",
                    )
                )
                message = message.model_copy(update={"content": EMPTY_TOOL_RESULT})
            flat.append((index, message))
    return flat


# -- ids -----------------------------------------------------------------------------


def _all_ids(messages: Sequence[ChatMessage]) -> set[str]:
    ids = {call.id for message in messages for call in message.tool_calls}
    ids.update(m.tool_call_id for m in messages if m.tool_call_id is not None)
    return ids


def _heal_ids(
    entries: list[_Block | Located], style: IdStyle, taken: set[str], healings: list[Healing]
) -> None:
    """Give every call a usable id no other call has; answers follow their call's id."""
    used: set[str] = set()
    for entry in entries:
        if not isinstance(entry, _Block):
            continue
        for slot, call in enumerate(entry.calls):
            kind: HealingKind | None = None
            if not call.id.strip():
                kind = "call_id_blank"
            elif call.id in used:
                kind = "call_id_duplicate"
            elif not tool_call_id_ok(call.id, style):
                kind = "call_id_format"
            if kind is None:
                used.add(call.id)
                continue
            new_id = _mint(call.id, f"{entry.index}:{slot}", style, taken | used)
            used.add(new_id)
            taken.add(new_id)
            healings.append(
                Healing(
                    kind=kind,
                    index=entry.index,
                    call_id=new_id,
                    detail=f"call id {call.id!r} replaced by {new_id!r} on the call and its answer",
                )
            )
            entry.calls[slot] = call.model_copy(update={"id": new_id})
            entry.renamed = True


def _mint(old: str, salt: str, style: IdStyle, taken: set[str]) -> str:
    if style == "mistral":
        for attempt in _count():
            digest = hashlib.sha256(f"{old}\x00{salt}\x00{attempt}".encode()).digest()
            candidate = _base62(int.from_bytes(digest[:8], "big"))[:9].rjust(9, "0")
            if candidate not in taken:
                return candidate
    base = re.sub(r"[^A-Za-z0-9_-]", "", old)[:28] or "call_sl"
    for n in _count(2):
        candidate = f"{base}_{n}"
        if candidate not in taken:
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def _count(start: int = 0) -> Iterator[int]:
    n = start
    while True:
        yield n
        n += 1


def _base62(value: int) -> str:
    digits = ""
    while value:
        value, rest = divmod(value, 62)
        digits = _BASE62[rest] + digits
    return digits or "0"


# -- content -------------------------------------------------------------------------


def _blank(message: ChatMessage) -> bool:
    return not (message.content or "").strip()


def _drop_empty(flat: list[Located], healings: list[Healing]) -> list[Located]:
    out: list[Located] = []
    for index, message in flat:
        if message.role == "assistant" and not message.tool_calls and _blank(message):
            healings.append(
                Healing(
                    kind="empty_assistant_removed",
                    index=index,
                    detail="assistant message with neither text nor tool calls removed",
                )
            )
            continue
        if message.role in ("user", *_SYSTEM_ROLES) and _blank(message):
            healings.append(
                Healing(
                    kind="empty_message_removed",
                    index=index,
                    detail=f"blank {message.role} message removed",
                )
            )
            continue
        out.append((index, message))
    return out


def _system_first(flat: list[Located], healings: list[Healing]) -> list[Located]:
    systems = [(i, m) for i, m in flat if m.role in _SYSTEM_ROLES]
    leading = 0
    while leading < len(flat) and flat[leading][1].role in _SYSTEM_ROLES:
        leading += 1
    if len(systems) <= 1 and leading == len(systems):
        return flat
    first_index, first = systems[0]
    merged = first.model_copy(
        update={"content": "\n\n".join((m.content or "").strip() for _, m in systems)}
    )
    healings.append(
        Healing(
            kind="system_merged",
            index=first_index,
            detail=(
                f"{len(systems)} system messages (at {[i for i, _ in systems]}) merged, in "
                "order, into one at the start"
            ),
        )
    )
    return [(first_index, merged), *((i, m) for i, m in flat if m.role not in _SYSTEM_ROLES)]


def _split_text_from_calls(flat: list[Located], healings: list[Healing]) -> list[Located]:
    out: list[Located] = []
    for index, message in flat:
        if message.role == "assistant" and message.tool_calls and not _blank(message):
            healings.append(
                Healing(
                    kind="text_split_from_calls",
                    index=index,
                    detail="assistant text moved to its own message before the tool calls",
                )
            )
            out.append((index, ChatMessage(role="assistant", content=message.content)))
            out.append((index, message.model_copy(update={"content": None})))
            continue
        out.append((index, message))
    return out


def _join(first: str | None, second: str | None) -> str | None:
    parts = [part for part in (first, second) if part and part.strip()]
    return "\n\n".join(parts) if parts else None


def _call_turn_after_user(flat: list[Located], healings: list[Healing]) -> list[Located]:
    out: list[Located] = []
    for index, message in flat:
        if message.role == "assistant" and message.tool_calls:
            while out and out[-1][1].role == "assistant" and not out[-1][1].tool_calls:
                previous_index, previous = out.pop()
                healings.append(
                    Healing(
                        kind="turns_merged",
                        index=previous_index,
                        detail=f"assistant text merged into the tool-call turn at {index}",
                    )
                )
                message = message.model_copy(
                    update={"content": _join(previous.content, message.content)}
                )
        out.append((index, message))
    return out


def _merge_consecutive(flat: list[Located], healings: list[Healing]) -> list[Located]:
    out: list[Located] = []
    for index, message in flat:
        if out:
            previous_index, previous = out[-1]
            mergeable = message.role == previous.role and message.role in ("user", "assistant")
            if mergeable and not message.tool_calls and not previous.tool_calls:
                healings.append(
                    Healing(
                        kind="turns_merged",
                        index=index,
                        detail=f"{message.role} message merged into the one before it",
                    )
                )
                merged = _join(previous.content, message.content)
                out[-1] = (previous_index, previous.model_copy(update={"content": merged}))
                continue
        out.append((index, message))
    return out


def _first_turn_user(flat: list[Located], healings: list[Healing]) -> list[Located]:
    position = 0
    while position < len(flat) and flat[position][1].role in _SYSTEM_ROLES:
        position += 1
    if position == len(flat) or flat[position][1].role == "user":
        return flat
    healings.append(
        Healing(
            kind="user_turn_inserted",
            index=None,
            detail="the conversation began with an assistant turn; a user turn was put first",
        )
    )
    return [
        *flat[:position],
        (None, ChatMessage(role="user", content=USER_TURN_PLACEHOLDER)),
        *flat[position:],
    ]


def _no_user_after_tool(flat: list[Located], healings: list[Healing]) -> list[Located]:
    out: list[Located] = []
    for index, message in flat:
        if out and out[-1][1].role == "tool" and message.role in ("user", *_SYSTEM_ROLES):
            healings.append(
                Healing(
                    kind="assistant_turn_inserted",
                    index=None,
                    detail=f"assistant turn put between tool answers and a {message.role} message",
                )
            )
            out.append((None, ChatMessage(role="assistant", content=ASSISTANT_TURN_PLACEHOLDER)))
        out.append((index, message))
    return out


_PROFILE_PASSES: tuple[tuple[str, Callable[[list[Located], list[Healing]], list[Located]]], ...] = (
    ("system_first", _system_first),
    ("text_apart_from_calls", _split_text_from_calls),
    ("call_turn_after_user", _call_turn_after_user),
    ("merge_consecutive", _merge_consecutive),
    ("first_turn_user", _first_turn_user),
    ("no_user_after_tool", _no_user_after_tool),
)
