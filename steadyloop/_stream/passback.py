"""Which pass-back items a request may carry: only those its own endpoint issued.

A reasoning item or a signed thinking block (`steadyloop._chat.PassbackItem`) is valid
only where it came from: another endpoint (a route's fallback, another account, another
model behind the same wire) refuses it or misreads it. The wires call `passback_for`
when they build a body; the workflow calls `foreign_passback` to say on the run's
timeline how many were dropped when a route fell back. Both are pure: the transcript
keeps every item, so a later turn back on the issuing endpoint still has them.

An item whose `wire` is not the endpoint's is dropped too: an endpoint renamed to
speak another wire cannot read what its predecessor issued.

The wires splice an item's `raw` into the body as it is (`orjson.Fragment`), so text that
is not one JSON object (a transcript given by hand may hold anything) would make the whole
body invalid JSON: `passback_block` reads it first, and a wire leaves out what it cannot.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from steadyloop._chat import ChatMessage

__all__ = ["foreign_passback", "passback_block", "passback_for"]


def passback_for(messages: Sequence[ChatMessage], endpoint: str, wire: str) -> list[ChatMessage]:
    """`messages` with every pass-back item not issued by `endpoint` on `wire` left out
    (the same objects where nothing is left out, so the common case copies nothing)."""
    out: list[ChatMessage] = []
    for message in messages:
        items = message.passback
        if items and any(i.endpoint != endpoint or i.wire != wire for i in items):
            kept = [i for i in items if i.endpoint == endpoint and i.wire == wire]
            message = message.model_copy(update={"passback": kept})
        out.append(message)
    return out


def foreign_passback(messages: Sequence[ChatMessage], endpoint: str, wire: str | None) -> int:
    """How many pass-back items of `messages` a request to `endpoint` (speaking `wire`,
    None when the caller does not know it) leaves out."""
    return sum(
        1
        for message in messages
        for item in message.passback
        if item.endpoint != endpoint or (wire is not None and item.wire != wire)
    )


def passback_block(raw: str) -> dict[str, Any] | None:
    """The object `raw` holds when it is one JSON object with a text `type` (an item or
    block a wire can send), else None. The stdlib reads it: it takes the lone-surrogate
    escapes a block may keep, which orjson refuses."""
    try:
        block = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(block, dict) and isinstance(block.get("type"), str):
        return block
    return None
