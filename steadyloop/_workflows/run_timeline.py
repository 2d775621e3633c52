"""The sentences of the run's timeline events: a route's attempts, breaker skips, healing,
replays (`steadyloop.events.TimelineEntryEvent`, noted on the event log).

Pure functions of values the workflow already has (`RouteAttempt`, `RoutePlan`,
`Healing`), so `ToolLoopWorkflow` notes an event where the fact arises without a
command of its own, and the wording is tested without a server.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._history.healing import Healing
    from steadyloop._receipts.decision import receipt_key
    from steadyloop._routing.route_plan import RoutePlan
    from steadyloop._routing.taxonomy import StreamFailure
    from steadyloop._stream.arguments import parse_tool_call_arguments
    from steadyloop._stream.passback import foreign_passback
    from steadyloop._workflows.routed_turn import RouteAttempt
    from steadyloop.events._models import EventKind

# The longest failure message quoted in an event.
FAILURE_CHARS = 160


def failure_words(facts: StreamFailure | None, error_type: str = "") -> tuple[str, str]:
    """The failure's kind (`stalled before first token`, `network (cut)`, `http_status
    (rate_limit, HTTP 429)`) and its message, apart, so the kind is never cut off."""
    if facts is None:
        return error_type or "failed", ""
    if facts.kind == "stall":
        phase = (facts.stall_phase or "").replace("_", " ")
        return f"stalled {phase}".strip(), _quoted(facts.message)
    extra: list[str] = [part for part in (facts.category, facts.network_reason) if part]
    if facts.status is not None:
        extra.append(f"HTTP {facts.status}")
    head = facts.route_kind + (f" ({', '.join(extra)})" if extra else "")
    return head, _quoted(facts.message)


def attempt_events(entry: RouteAttempt) -> list[tuple[EventKind, str]]:
    """What one line of a route's log says to a person (nothing for an attempt that answered)."""
    if entry.outcome == "ok":
        return []
    where = f"endpoint {entry.endpoint!r}"
    if entry.outcome == "skipped":
        return [("breaker", f"skipped {where}: {entry.detail}")]
    kind, message = failure_words(entry.failure, entry.error_type)
    said = f"model attempt {entry.sequence} failed, {kind}"
    events: list[tuple[EventKind, str]] = []
    if entry.action == "retry":
        if entry.rule == "unsupported_parameter":
            how = "retrying without the refused parameter"
        elif entry.delay_s > 0:
            how = f"retrying in {entry.delay_s:g} s"
        else:
            how = "retrying now"
        events.append(("model_retry", f"{said}; {how} ({where}){message}"))
    elif entry.action == "traverse":
        # Whether the route has a next candidate is the route's to say (its next line).
        events.append(
            (
                "model_retry",
                f"{said}; not retried on {where}, the route's next endpoint "
                f"(if any) is tried{message}",
            )
        )
    else:
        events.append(("model_failed", f"{said}; not retried: {entry.rule} ({where}){message}"))
    if entry.breaker_recorded:
        events.append(("breaker", f"failure recorded on the breaker of {where}"))
    return events


def plan_events(plan: RoutePlan) -> list[str]:
    """The candidates a route skipped before trying any (breaker open), and probes."""
    lines = [
        f"skipped endpoint {s.candidate.endpoint!r}: {s.reason}"
        + (f" until {s.open_until.isoformat()}" if s.open_until is not None else "")
        for s in plan.skipped
    ]
    lines.extend(
        f"endpoint {p.candidate.endpoint!r} is half-open: this turn is its probe"
        for p in plan.candidates
        if p.probe
    )
    return lines


def healing_text(healed: list[Healing]) -> str:
    """One sentence for what healing changed before a request."""
    kinds: dict[str, int] = {}
    for healing in healed:
        kinds[healing.kind] = kinds.get(healing.kind, 0) + 1
    counted = ", ".join(f"{kind} x{n}" if n > 1 else kind for kind, n in kinds.items())
    first = healed[0].detail if healed else ""
    return f"transcript healed before the request ({counted})" + _quoted(first)


def passback_dropped_text(transcript: list[ChatMessage], endpoint: str) -> str | None:
    """The sentence for a request to `endpoint` that leaves out pass-back items other
    endpoints issued (a route's fallback), or None when it leaves out none."""
    dropped = foreign_passback(transcript, endpoint, None)
    if not dropped:
        return None
    issuers = sorted({i.endpoint for m in transcript for i in m.passback if i.endpoint != endpoint})
    return (
        f"{dropped} reasoning item(s) issued by endpoint "
        f"{', '.join(repr(e) for e in issuers)} not passed back to endpoint {endpoint!r} "
        "(they go back only to the endpoint that issued them)"
    )


def earlier_call(
    transcript: list[ChatMessage], key_text: str, tenant: str, scope: str
) -> tuple[int, str] | None:
    """The turn (counted as assistant messages, as the CLI counts them) and id of the
    first call with receipt key `key_text` before the transcript's last assistant
    message (the batch being answered), or None."""
    assistants = [i for i, m in enumerate(transcript) if m.role == "assistant"]
    turn = 0
    for index in assistants[:-1]:
        turn += 1
        for call in transcript[index].tool_calls:
            reading = parse_tool_call_arguments(call)
            if reading.kind != "parsed":
                continue
            try:
                key = receipt_key(tenant, scope, call.name, reading.arguments)
            except ValueError:
                continue
            if key.text == key_text:
                return turn, call.id
    return None


def cut_copy_text(stored: str, first_bytes: int | None) -> str:
    """What a replay from a cut receipt gives the model, for the timeline: the receipt
    kept a bounded copy (no blob storage, or a carried state that had to shrink), so
    the replayed answer is not the first one byte for byte."""
    kept = len(stored.encode("utf-8"))
    whole = "" if first_bytes is None else f" of the first answer's {first_bytes:,}"
    return (
        f"the model reads the receipt's {kept:,}-byte cut copy{whole} bytes "
        "(whole answers need blob storage, STEADYLOOP_BLOB_DIR)"
    )


def _quoted(message: str) -> str:
    message = " ".join(message.split())
    if not message:
        return ""
    if len(message) > FAILURE_CHARS:
        message = message[: FAILURE_CHARS - 3] + "..."
    return f": {message}"
