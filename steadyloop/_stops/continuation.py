"""Asking a model for the rest of an answer it was cut off in, without showing it twice.

An answer is cut two ways: the token limit (`finish_reason: "length"`, or the server's
context full) and a stream that failed after people had read part of it. Going on is a
new request whose messages are the transcript plus the text so far, so the model writes
what follows. What the obvious implementation gets wrong, and what this does instead:

- Appending the cut text as a finished assistant message and a bare "continue" makes
  many models start the answer over, and a follower then reads it twice. Where the
  provider continues a trailing assistant message (a prefill), only that is sent;
  elsewhere the user message says exactly what to do: go on from the last character,
  repeat nothing.
- The pieces are one answer: the transcript gets one assistant message holding their
  concatenation (`joined`), so the next request, the final answer and a resumed run see
  the answer a person read, not fragments with "continue" between them.
- The continuation's own attempt forwards only the rest: the model activity is told how
  much of the turn was already shown and accepted (`ForwardTarget.accepted_chars`), so
  it does not refuse to stream as if repeating the turn, and a follower prints the
  rest after what it printed.
"""

from __future__ import annotations

from typing import Literal

from steadyloop._chat import ChatMessage

CutKind = Literal["max_tokens", "stream_failure"]

_WHY: dict[CutKind, str] = {
    "max_tokens": "it reached the output token limit",
    "stream_failure": "the connection failed",
}


def continue_prompt(kind: CutKind) -> str:
    """The user message that asks for the rest, where no prefill is taken."""
    return (
        f"Your previous message was cut off because {_WHY[kind]}; the person already read "
        "it. Continue exactly from its last character: do not repeat any of it, do not "
        "start over, and add nothing before the continuation."
    )


def continuation_messages(text_so_far: str, kind: CutKind, *, prefill: bool) -> list[ChatMessage]:
    """What follows the transcript in a request for the rest of `text_so_far`."""
    cut = ChatMessage(role="assistant", content=text_so_far)
    if prefill:
        return [cut]
    return [cut, ChatMessage(role="user", content=continue_prompt(kind))]


def joined(text_so_far: str, rest: str) -> str:
    """The answer the person read: the pieces, in order, nothing added between them."""
    return text_so_far + rest


# Profiles whose endpoints continue a trailing assistant message (Anthropic's Messages
# API does; OpenAI answers it with a new message, and Mistral needs a `prefix` flag on
# the message, which a portable request does not carry). llama.cpp and vLLM servers
# can be told to: set `ContinuationOptions.prefill` for them.
PREFILL_PROFILES = frozenset({"anthropic"})


def takes_assistant_prefill(profile: str, setting: bool | None = None) -> bool:
    """Whether a continuation is sent as a prefill: the run's setting, else its profile."""
    return setting if setting is not None else profile in PREFILL_PROFILES
