"""Call ids qualified per response where a server resets them.

The accumulator makes a turn's ids unique within its response; a server may still number
the calls of every response from the start: Bedrock's GPT models answer `call_0` in every
turn. Kept as sent, the run's transcript holds two calls `call_0` and two tool messages
answering it.

What the obvious implementations get wrong, and what prevents each:

- Leaving it to the healing before the next request (`healing`, `call_id_duplicate`): it
  renames the later pair, but only before a *next* request. Until then the turn's tool
  activities, approvals, late results and timeline carry an id an earlier call holds,
  and a run that stops after the batch (a turn budget, an interrupt) ends with both.
  So the turn's calls are qualified where every wire's turn enters the transcript, before
  the assistant message is appended and any call is read (`steadyloop._workflows.tool_loop`).
- Minting a fresh id (`call_sl_...`): the id the server sent is evidence a reader
  matches against the provider's logs. The qualified id keeps it: `{id}_t{turn}`.
- Qualifying every id: a server whose ids are unique would see its ids change for
  nothing. Only an id the transcript already holds (a call's or an answer's) is changed.
- Renaming the call but not what points at it: a pass-back item (a Responses reasoning
  item, an Anthropic thinking block) names the call it preceded (`before_call`). Left at
  the old id, it names no call of the message and goes back before the text, not in
  front of its call ("function_call was provided without its required 'reasoning'
  item"). `follow_renamed_calls` moves it with the call; healing uses it too.
- Counting on the qualified form being free: a server may send `call_0_t2` itself, or the
  same id twice in a batch after repairs. Each candidate is checked against every id held
  and every id this batch keeps, with `_{n}` added until free.

Deterministic and pure (workflow code runs it): no clock, no randomness, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall

__all__ = ["follow_renamed_calls", "qualify_reused_call_ids"]


def _held_ids(transcript: Sequence[ChatMessage]) -> set[str]:
    held = {call.id for message in transcript for call in message.tool_calls}
    held.update(m.tool_call_id for m in transcript if m.tool_call_id is not None)
    return held


def qualify_reused_call_ids(
    calls: Sequence[ToolCall], transcript: Sequence[ChatMessage], turn: int
) -> tuple[list[ToolCall], list[tuple[str, str]]]:
    """`calls` with each id the `transcript` already holds qualified by the `turn`, and
    the renames made, `(wire id, qualified id)`, in call order (empty: nothing reused)."""
    held = _held_ids(transcript)
    if not any(call.id in held for call in calls):
        return list(calls), []
    kept = {call.id for call in calls if call.id not in held}
    out: list[ToolCall] = []
    renames: list[tuple[str, str]] = []
    for call in calls:
        if call.id not in held:
            out.append(call)
            continue
        base = f"{call.id}_t{turn}"
        candidate, n = base, 1
        while candidate in held or candidate in kept:
            n += 1
            candidate = f"{base}_{n}"
        kept.add(candidate)
        renames.append((call.id, candidate))
        out.append(call.model_copy(update={"id": candidate}))
    return out, renames


def follow_renamed_calls(
    items: Sequence[PassbackItem], before: Sequence[ToolCall], after: Sequence[ToolCall]
) -> list[PassbackItem]:
    """`items` with each `before_call` that names a call of `before` naming the call at
    the same place in `after` (the same calls, some renamed). An item naming no call of
    `before` is kept as it is; the raw bytes are never touched."""
    renamed: dict[str, str] = {}
    for old, new in zip(before, after, strict=True):
        renamed.setdefault(old.id, new.id)  # a repeated id: its first call, as the wires read it
    return [
        item.model_copy(update={"before_call": renamed[item.before_call]})
        if item.before_call in renamed and renamed[item.before_call] != item.before_call
        else item
        for item in items
    ]
