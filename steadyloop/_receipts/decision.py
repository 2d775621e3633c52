"""Receipts for tool calls: the key, the row, and the decision table. Pure, no I/O.

A retried turn, a redelivered activity, a continued-as-new run or a human re-driving
a stuck run can each ask for a tool call that already ran. The receipt is the row
that lets the second attempt find out; `decide_tool_call_receipt` reads it.

The obvious implementation is wrong in these ways, each prevented where named:

- **Keying by position** (turn, index in the batch): a retried turn is a fresh
  completion, so the model may reorder the batch or ask for a different tool at the
  same index; position keys then replay one tool's result as another's and skip the
  call actually asked for. `ReceiptKey` is content: (tenant, run, tool, args hash).
  A content key fails the safe way: a genuinely new call finds no receipt and runs.
- **Temporal's run id as "run"**: it changes on every continue-as-new, so every
  receipt would miss and every effect repeat. `ReceiptKey.run` is the workflow id.
- **Joining the parts with a separator**: `"a|b" + "|" + "c"` equals `"a" + "|" +
  "b|c"`. `ReceiptKey.text` is the canonical JSON array of the parts, which JSON's
  quoting makes unambiguous, and which `ReceiptKey.from_text` reads back.
- **Hashing schema-coerced arguments**: a validating parse is lossy (`"5"` becomes 5,
  unknown keys vanish, defaults appear), so different calls collide; and it depends on
  the tool schema deployed, so one call hashes differently after a deploy.
  `tool_call_args_hash` takes the raw parsed arguments, the very values
  `parse_tool_call_arguments` produced from the model's text.
- **"Claimed but not completed" read as ambiguous**: a lease expires whenever a worker
  dies *or merely stalls*, which is routine. The table needs the lease and the
  effect: a resumable (or pure) call is reclaimed as attempt n+1; only an opaque one
  is ambiguous.
- **An off-by-one at the lease boundary**: `lease_live` is the only comparison; the
  lease covers the half-open interval up to `lease_expires_at`, so at exactly
  `lease_expires_at` it has expired.
- **A lease decided by reading the clock in workflow code**: `workflow.now()` is the
  time of the workflow task the code runs in, and after a local activity that task can
  differ live and on replay; a branch on "is the lease over yet" (wait, or surface the
  call as ambiguous) then takes another path on replay, a nondeterminism error
  Temporal retries forever. The workflow passes no `now`: a lease is live until the
  durable timer that ends it fires and the workflow says so (`lease_ended`, set by
  `ReceiptLedger.end_lease`), the same in every replay.
- **Clocks**: a naive datetime compared with an aware one raises `TypeError` in the
  middle of a workflow task (which Temporal retries forever), and two naive ones
  compare silently in whatever zone each came from. `Receipt.lease_expires_at` is an
  `AwareDatetime` and `decide_tool_call_receipt` refuses a naive `now`
  (`NaiveDatetimeError`). Time is `workflow.now()`, never the activity's clock.

Decisions where the issue is silent:

- `pure` tools: "may simply execute again" is read as: a pure call never becomes
  ambiguous (running with an expired lease is reclaimed, like a resumable one), but a
  completed pure call still replays (cheaper, and the model gets the same answer to
  the same question) and a live lease is still waited for (the answer is coming).
- A failed receipt executes attempt n+1 *carrying its recorded progress*: a resumable
  tool that raised after two of three sub-operations skips those two on the retry.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, Self, get_args

import pydantic_core
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)

from steadyloop._receipts.canonical_json import canonical_json
from steadyloop.errors import SteadyloopError

__all__ = [
    "Ambiguous",
    "Effect",
    "Execute",
    "NaiveDatetimeError",
    "Receipt",
    "ReceiptDecision",
    "ReceiptKey",
    "ReceiptStatus",
    "Replay",
    "Wait",
    "decide_tool_call_receipt",
    "lease_live",
    "receipt_key",
    "require_aware",
    "tool_call_args_hash",
]

Effect = Literal["pure", "resumable", "opaque"]
ReceiptStatus = Literal["running", "completed", "failed"]
AmbiguityResolutionKind = Literal["happened", "did_not_happen", "give_up"]

_EFFECTS: frozenset[str] = frozenset(get_args(Effect))
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class NaiveDatetimeError(SteadyloopError, ValueError):
    """A datetime without a UTC offset where workflow time (tz-aware) is required."""


def require_aware(moment: datetime, name: str) -> datetime:
    """Return `moment` if it carries a UTC offset; raise `NaiveDatetimeError` if not."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise NaiveDatetimeError(
            f"{name} is a naive datetime ({moment.isoformat()}); receipts compare workflow "
            "time, which is tz-aware UTC: pass workflow.now()"
        )
    return moment


def tool_call_args_hash(args: object) -> str:
    """SHA-256 hex of `canonical_json(args)` (ASCII, so its UTF-8 bytes are its chars).

    Pass the *raw parsed* arguments, not a schema-coerced copy: coercion is lossy and
    deploy-dependent (see the module docstring). Raises `CanonicalJsonError` for a
    value with no faithful canonical text.
    """
    return hashlib.sha256(canonical_json(args).encode("utf-8")).hexdigest()


class ReceiptKey(BaseModel):
    """Content identity of one tool call: who, which run, which tool, which arguments.

    `run` is the workflow id, stable across continue-as-new; not Temporal's run id and
    not a position in a batch. `text` is the form used as a dict key in workflow state.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: Annotated[str, Field(min_length=1)]
    run: Annotated[str, Field(min_length=1)]
    tool: Annotated[str, Field(min_length=1)]
    args_hash: str

    @field_validator("args_hash")
    @classmethod
    def _sha256_hex(cls, value: str) -> str:
        if not _SHA256_HEX.fullmatch(value):
            raise ValueError("args_hash must be 64 lowercase hex digits (a SHA-256)")
        return value

    @property
    def text(self) -> str:
        """`["tenant","run","tool","hash"]` as canonical JSON: unambiguous, ASCII, parseable."""
        return canonical_json([self.tenant, self.run, self.tool, self.args_hash])

    def __str__(self) -> str:
        return self.text

    @classmethod
    def from_text(cls, text: str) -> ReceiptKey:
        """Read a key back from `text`; refuses anything `text` would not have produced."""
        try:
            parts = json.loads(text)
        except ValueError as error:
            raise ValueError(f"not a receipt key: {error}") from None
        if type(parts) is not list or len(parts) != 4 or any(type(p) is not str for p in parts):
            raise ValueError("not a receipt key: expected a JSON array of four strings")
        key = cls(tenant=parts[0], run=parts[1], tool=parts[2], args_hash=parts[3])
        if key.text != text:
            raise ValueError("not a receipt key: not in canonical form")
        return key


def receipt_key(tenant: str, run: str, tool: str, args: object) -> ReceiptKey:
    """The receipt key of a call of `tool` with raw parsed `args` in workflow `run`."""
    return ReceiptKey(tenant=tenant, run=run, tool=tool, args_hash=tool_call_args_hash(args))


def _require_utf8(value: str, name: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # One such string would make the whole ledger unserializable (pydantic's JSON
        # encoder refuses lone surrogates), failing every query and continue-as-new.
        raise ValueError(f"{name} contains a lone surrogate; it cannot be stored as JSON") from None
    return value


class Receipt(BaseModel):
    """The ledger row of one content-keyed tool call.

    - `attempt`: the attempt that owns the row (running), or whose outcome it records.
    - `lease_expires_at`: workflow time at which a running attempt's lease ends (the
      lease is live strictly before it); kept, unused, once the row is final.
    - `lease_ended`: the lease is over whatever the time (its timer fired, or the run
      holding it stopped): how workflow code, which never compares clocks, ends one.
    - `result`: the tool message content to replay; set exactly when completed.
    - `truncated` / `result_bytes`: the stored result was cut to the ledger's bound;
      `result_bytes` is the UTF-8 size of the full result.
    - `recorded_progress`: a snapshot of the sub-operations a resumable tool recorded
      (from heartbeat details), carried to the attempt that reclaims or retries it.
    - `resolution`: set when a person resolved an ambiguous attempt (audit only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ReceiptStatus
    attempt: Annotated[int, Field(ge=1, strict=True)]
    lease_expires_at: AwareDatetime
    lease_ended: bool = False
    result: str | None = None
    truncated: bool = False
    result_bytes: Annotated[int, Field(ge=0)] | None = None
    recorded_progress: list[JsonValue] = Field(default_factory=list)
    resolution: AmbiguityResolutionKind | None = None

    @field_validator("result")
    @classmethod
    def _result_storable(cls, value: str | None) -> str | None:
        return None if value is None else _require_utf8(value, "result")

    @field_validator("recorded_progress")
    @classmethod
    def _progress_storable(cls, value: list[JsonValue]) -> list[JsonValue]:
        canonical_json(value)  # refuses NaN, cycles, non-JSON: progress must replay exactly
        try:
            pydantic_core.to_json(value)
        except pydantic_core.PydanticSerializationError as error:
            raise ValueError(f"recorded_progress cannot be stored as JSON: {error}") from None
        return value

    @model_validator(mode="after")
    def _result_iff_completed(self) -> Self:
        if self.status == "completed" and self.result is None:
            raise ValueError("a completed receipt carries the result to replay")
        if self.status != "completed" and (self.result is not None or self.truncated):
            raise ValueError(f"a {self.status} receipt has no result")
        return self


def lease_live(receipt: Receipt, now: datetime | None) -> bool:
    """True while the lease holds: not ended, and strictly before `lease_expires_at`.

    At exactly `lease_expires_at` the lease has expired. `now` None (workflow code):
    time decides nothing, the lease holds until it is ended (`lease_ended`). This is
    the only lease comparison; the decision and the ledger both call it.
    """
    if receipt.lease_ended:
        return False
    return now is None or require_aware(now, "now") < receipt.lease_expires_at


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the tool as `attempt`. Claim the receipt before scheduling it.

    `reclaimed`: a running attempt's lease expired and this attempt takes over (the
    previous one may be a zombie: every write is fenced by attempt).
    `previous_progress`: sub-operations earlier attempts recorded, to be skipped.
    """

    attempt: int
    reclaimed: bool
    previous_progress: tuple[JsonValue, ...] = ()
    kind: Literal["execute"] = "execute"


@dataclass(frozen=True, slots=True)
class Replay:
    """The call already completed: answer it with the recorded result, do not run it."""

    result: str
    truncated: bool
    kind: Literal["replay"] = "replay"


@dataclass(frozen=True, slots=True)
class Wait:
    """Another attempt owns the call and its lease is live until `until`."""

    reason: str
    until: datetime
    attempt: int
    kind: Literal["wait"] = "wait"


@dataclass(frozen=True, slots=True)
class Ambiguous:
    """An opaque call's attempt lost its lease: it may or may not have taken effect.

    Do not guess: surface it and wait for a person to resolve `attempt`.
    """

    reason: str
    attempt: int
    kind: Literal["ambiguous"] = "ambiguous"


ReceiptDecision = Execute | Replay | Wait | Ambiguous


def decide_tool_call_receipt(
    receipt: Receipt | None, effect: Effect, now: datetime | None
) -> ReceiptDecision:
    """What to do with a tool call, given its receipt, its effect and workflow time
    (None: only an ended lease is over, see `lease_live`).

    | receipt                                  | decision                     |
    |------------------------------------------|------------------------------|
    | absent                                   | execute, attempt 1           |
    | completed                                | replay                       |
    | failed                                   | execute, attempt n+1         |
    | running, lease live                      | wait                         |
    | running, lease expired, resumable / pure | execute, attempt n+1 reclaim |
    | running, lease expired, opaque           | ambiguous                    |

    Raises `NaiveDatetimeError` for a naive `now`, `ValueError` for an unknown effect.
    """
    if now is not None:
        require_aware(now, "now")
    if effect not in _EFFECTS:
        raise ValueError(f"unknown effect {effect!r}: expected one of {sorted(_EFFECTS)}")
    if receipt is None:
        return Execute(attempt=1, reclaimed=False)
    if receipt.status == "completed":
        assert receipt.result is not None  # Receipt's validator: completed carries a result
        return Replay(result=receipt.result, truncated=receipt.truncated)
    progress = tuple(receipt.recorded_progress)
    if receipt.status == "failed":
        return Execute(attempt=receipt.attempt + 1, reclaimed=False, previous_progress=progress)
    if lease_live(receipt, now):
        return Wait(
            reason=f"attempt {receipt.attempt} holds the lease until "
            f"{receipt.lease_expires_at.isoformat()}",
            until=receipt.lease_expires_at,
            attempt=receipt.attempt,
        )
    if effect == "opaque":
        return Ambiguous(
            reason=f"attempt {receipt.attempt} of an opaque tool lost its lease at "
            f"{receipt.lease_expires_at.isoformat()} without recording an outcome; it may "
            "or may not have taken effect, and running it again could repeat the effect",
            attempt=receipt.attempt,
        )
    return Execute(attempt=receipt.attempt + 1, reclaimed=True, previous_progress=progress)
