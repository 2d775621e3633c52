"""One table decides what a failed attempt leads to: retry it, traverse, or stop.

`failure_disposition(failure, attempt)` reads a failed attempt
(`steadyloop._routing.taxonomy.StreamFailure`, as the model activity raised it or the
workflow built it) and where the attempt stands on its
candidate (`AttemptContext`), and returns a `Disposition`: the action, the rule that
decided it (a stable name, so a log line or a test can say which row fired), how long
to wait before a retry, whether the endpoint's breaker records a failure, and which
parameter to drop for a degraded retry. Pure; workflow code calls it. It is the one
decider: the model activity raises every failure non-retryable and runs with one
attempt, so nothing else retries a model call.

The table (`ROWS`): a row is chosen from the facts (`failure_row`), and its action and
whether it counts against the endpoint are fixed per row.

| row                       | action   | breaker | notes                                   |
|---------------------------|----------|---------|-----------------------------------------|
| aborted                   | stop     | no      | cancelled from outside                  |
| configuration             | traverse | no      | this worker lacks the endpoint or key   |
| context_length            | stop     | no      | traverse only to a larger window        |
| unsupported_parameter     | retry    | no      | once, without the parameter, at once    |
| request_rejected          | traverse | no      | 400/413/422: this request, as sent      |
| content_filter            | traverse | no      | another provider's policy may differ    |
| not_found                 | traverse | no      | usually one model, not the endpoint     |
| auth                      | traverse | yes     | the endpoint is unusable for everyone   |
| quota                     | traverse | yes     | waiting does not refill a quota         |
| rate_limit                | retry    | yes     | honours Retry-After                     |
| server_error              | retry    | yes     | honours Retry-After                     |
| transient                 | retry    | yes     | 408/409/425                             |
| unreachable               | traverse | yes     | refused, DNS, TLS (rule 5 when last)    |
| interrupted               | retry    | yes     | reset, cut, timeout                     |
| stall_before_first_token  | traverse | yes     | nothing came (rule 5 when last)         |
| stall_mid_stream          | retry    | yes     | between chunks, total cap               |
| protocol                  | traverse | yes     | not an event stream                     |
| lost                      | retry    | no      | worker died, activity timed out         |
| completion_defect         | retry    | no      | a fresh completion, at once             |
| other                     | traverse | yes     | a redirect, an unknown status           |

Rules over the rows, in order:

1. `produced_output`: an attempt that forwarded output is never retried and never
   traversed (a second answer would be appended to what a user is reading). It stops,
   and the breaker still records the row's verdict: a stall after output is still the
   endpoint failing.
2. A retry row whose candidate has no attempt left traverses (`<row>_attempts_spent`);
   one whose `Retry-After` is longer than the candidate will wait traverses
   (`<row>_retry_after_too_long`), and so does one at `RETRY_AFTER_CEILING_S`, what
   an absurd header (`1e300`, `inf`, a date centuries ahead) is read as, whatever
   the candidate's patience. Otherwise the delay is the backoff for the attempt,
   or `Retry-After` when that is longer (`Retry-After` is a floor, never shortened).
3. `unsupported_parameter` retries once per parameter: a parameter already left out
   that is blamed again falls to `request_rejected`. Dropping a parameter does not
   spend an attempt and does not wait.
4. `context_length` traverses only when a later candidate declares a larger context
   window (`context_length_larger_window`); otherwise it stops, so the caller can
   compact the conversation, instead of sending it to every provider in turn.
5. A row that traverses because the endpoint is unreachable or silent *at the moment*
   (`RETRIED_WHEN_LAST`: refused, DNS, TLS, a stall before the first token) retries the
   same candidate, with its backoff, when no later candidate is left to traverse to
   (`<row>_last_candidate`, then `<row>_attempts_spent`). Going elsewhere is better
   when there is an elsewhere; giving up at once is not, when there is none (a run
   with one endpoint would fail on the first refused connection of a restart).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from steadyloop._routing.route_plan import Backoff
from steadyloop._routing.taxonomy import DegradableParameter, StreamFailure
from steadyloop._stream.failures import RETRY_AFTER_CEILING_S

__all__ = [
    "RETRIED_WHEN_LAST",
    "ROWS",
    "RULES",
    "Action",
    "AttemptContext",
    "Disposition",
    "Row",
    "failure_disposition",
    "failure_row",
]

Action = Literal["retry", "traverse", "stop"]
Row = Literal[
    "aborted",
    "configuration",
    "context_length",
    "unsupported_parameter",
    "request_rejected",
    "content_filter",
    "not_found",
    "auth",
    "quota",
    "rate_limit",
    "server_error",
    "transient",
    "unreachable",
    "interrupted",
    "stall_before_first_token",
    "stall_mid_stream",
    "protocol",
    "lost",
    "completion_defect",
    "other",
]

# row -> (action, the breaker records a failure, a retry waits for the backoff)
ROWS: Final[dict[Row, tuple[Action, bool, bool]]] = {
    "aborted": ("stop", False, False),
    "configuration": ("traverse", False, False),
    "context_length": ("stop", False, False),
    "unsupported_parameter": ("retry", False, False),
    "request_rejected": ("traverse", False, False),
    "content_filter": ("traverse", False, False),
    "not_found": ("traverse", False, False),
    "auth": ("traverse", True, False),
    "quota": ("traverse", True, False),
    "rate_limit": ("retry", True, True),
    "server_error": ("retry", True, True),
    "transient": ("retry", True, True),
    "unreachable": ("traverse", True, False),
    "interrupted": ("retry", True, True),
    "stall_before_first_token": ("traverse", True, False),
    "stall_mid_stream": ("retry", True, True),
    "protocol": ("traverse", True, False),
    "lost": ("retry", False, True),
    "completion_defect": ("retry", False, False),
    "other": ("traverse", True, False),
}

# Traverse rows that retry the same candidate when no later candidate is left: the
# endpoint's state at the moment, which another attempt a little later may find changed.
RETRIED_WHEN_LAST: Final[frozenset[Row]] = frozenset({"unreachable", "stall_before_first_token"})

# Every rule name a disposition can carry.
RULES: Final[frozenset[str]] = frozenset(
    {"produced_output", "context_length_larger_window"}
    | set(ROWS)
    | {
        f"{row}_attempts_spent"
        for row, (action, _, _) in ROWS.items()
        if action == "retry" and row != "unsupported_parameter"
    }
    | {f"{row}_retry_after_too_long" for row, (_, _, waits) in ROWS.items() if waits}
    | {f"{row}_last_candidate" for row in RETRIED_WHEN_LAST}
    | {f"{row}_attempts_spent" for row in RETRIED_WHEN_LAST}
)


class AttemptContext(BaseModel):
    """Where a failed attempt stands: its number on its candidate and the candidate's
    budget, backoff and patience, what it already left out, whether a later candidate
    is left to traverse to, and whether one has a larger context window."""

    model_config = ConfigDict(frozen=True)

    attempt: int = Field(default=1, ge=1)
    attempts: int = Field(default=3, ge=1)
    backoff: Backoff = Field(default_factory=Backoff)
    max_retry_after_s: float = Field(default=60.0, ge=0)
    omitted: list[DegradableParameter] = Field(default_factory=list)
    later_candidates: bool = True
    larger_context_available: bool = False


class Disposition(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: Action
    rule: str
    reason: str
    delay_s: float = 0.0
    record_failure: bool = False
    drop_parameter: DegradableParameter | None = None


def failure_row(failure: StreamFailure, omitted: list[DegradableParameter] | None = None) -> Row:
    """The table row the facts select (`omitted`: parameters already left out)."""
    kind = failure.kind
    if kind in ("aborted", "configuration", "lost", "completion_defect"):
        return kind
    if kind == "truncated_stream":  # the body ended early: a cut, as a reset is
        return "interrupted"
    if kind in ("not_sse", "invalid_chunk") and failure.category is None:
        return "protocol"  # not the wire's protocol, and no provider error in it
    if kind == "network":
        if failure.network_reason in ("refused", "dns", "tls"):
            return "unreachable"
        return "interrupted"
    if kind == "stall":
        if failure.stall_phase == "before_first_token":
            return "stall_before_first_token"
        return "stall_mid_stream"
    category = failure.category or "other"
    if category == "request_rejected":
        parameter = failure.unsupported_parameter
        if parameter is not None and parameter not in (omitted or ()):
            return "unsupported_parameter"
        return "request_rejected"
    return category


def failure_disposition(failure: StreamFailure, attempt: AttemptContext) -> Disposition:
    """Retry the same candidate, traverse to the next, or stop; and the rule that decided."""
    row = failure_row(failure, attempt.omitted)
    action, records, waits = ROWS[row]
    what = failure.describe()
    if failure.produced_output:
        return Disposition(
            action="stop",
            rule="produced_output",
            reason=f"output was already forwarded to a user, so this attempt is not "
            f"repeated anywhere ({row}): {what}",
            record_failure=records,
        )
    if row == "context_length" and attempt.larger_context_available:
        return Disposition(
            action="traverse",
            rule="context_length_larger_window",
            reason=f"a later candidate has a larger context window: {what}",
        )
    # Rule 5: nowhere left to traverse to, so the same candidate again, after its backoff.
    last_resort = action == "traverse" and row in RETRIED_WHEN_LAST and not attempt.later_candidates
    if last_resort:
        action, waits = "retry", True
    if action != "retry":
        return Disposition(action=action, rule=row, reason=what, record_failure=records)
    if row == "unsupported_parameter":
        return Disposition(
            action="retry",
            rule=row,
            reason=f"retrying without {failure.unsupported_parameter!r}: {what}",
            drop_parameter=failure.unsupported_parameter,
        )
    if attempt.attempt >= attempt.attempts:
        return Disposition(
            action="traverse",
            rule=f"{row}_attempts_spent",
            reason=f"{attempt.attempts} attempt(s) spent on this candidate: {what}",
            record_failure=records,
        )
    delay = 0.0
    if waits:
        retry_after = failure.retry_after_s
        if retry_after is not None and (
            retry_after > attempt.max_retry_after_s or retry_after >= RETRY_AFTER_CEILING_S
        ):
            return Disposition(
                action="traverse",
                rule=f"{row}_retry_after_too_long",
                reason=(
                    f"Retry-After {retry_after:g} s is longer than the "
                    f"{attempt.max_retry_after_s:g} s this candidate waits: {what}"
                    if retry_after < RETRY_AFTER_CEILING_S
                    else f"Retry-After asks for {RETRY_AFTER_CEILING_S:g} s or more, longer "
                    f"than anyone waits: {what}"
                ),
                record_failure=records,
            )
        delay = max(attempt.backoff.delay(attempt.attempt), retry_after or 0.0)
    return Disposition(
        action="retry",
        rule=f"{row}_last_candidate" if last_resort else row,
        reason=what,
        delay_s=delay,
        record_failure=records,
    )
