"""The receipt ledger: workflow state, every write fenced by attempt. Pure, no I/O.

The workflow holds one `ReceiptLedger`, claims a receipt before scheduling a tool,
and records its outcome after. The ledger is a pydantic model, so it travels through
`temporalio.contrib.pydantic.pydantic_data_converter` in queries and across
continue-as-new.

The obvious implementation (a dict of rows, written as results arrive) is wrong in
these ways, each prevented where named:

- **Unfenced completion**: attempt 1 stalls, its lease expires, attempt 2 reclaims the
  call; then attempt 1's late result arrives and marks the row completed while attempt
  2's effect is in flight, or overwrites attempt 2's result. `_fence` applies a write
  only to a running row whose attempt is the writer's; anything else is returned as
  `WriteIgnored` (`stale_attempt`, `not_running`, `absent`), never applied.
- **Unfenced claims**: two claimants both believe they own the call. `claim` accepts
  only the next attempt (1 for an absent row, n+1 otherwise) and never over a live
  lease or a completed row.
- **Unfenced progress**: a zombie attempt's heartbeat overwrites the newer attempt's
  trail, and the next reclaim repeats sub-operations. `record_progress` goes through
  the same `_fence`. Progress is a snapshot (the latest heartbeat details, replacing
  the previous), carried from attempt to attempt by `claim`.
- **Unbounded rows**: a tool returning megabytes makes every query and the
  continue-as-new payload too large (2 MB per payload). `_bounded` stores results
  above `result_limit_bytes` cut at a UTF-8 character boundary (slicing the bytes
  mid-character would not decode) with a marker the model reads on replay, and sets
  `truncated`. Progress is never truncated (a cut trail makes the reclaimed attempt
  repeat sub-operations): a snapshot above `progress_limit_bytes` is refused
  (`too_large`) and the previous one kept. `size_bytes()` is the exact size of the
  ledger's JSON, for the progress query.
- **A lone surrogate in a result** (a tool that decoded bytes with `surrogateescape`)
  makes pydantic's JSON encoder fail on the *whole* ledger. `_bounded` replaces each
  with U+FFFD.
- **Resolving an ambiguity while the lease is live**, or for an attempt that has moved
  on: "it did not happen, run it" would start attempt n+1 beside a live attempt n.
  `resolve_ambiguous` is fenced like any write, and refuses a live lease.
- **Rows keyed by the key object**: a model is not a JSON object key. Rows are keyed by
  `ReceiptKey.text`.
- **Every result stored twice in what a run carries**: a completed call's result is
  also the content of its tool message, and continue-as-new (or a `RunResult` a resumed
  run inherits) carries the transcript and the ledger in one payload, so 16 KB results
  put 2 MB in it by turn 65. `PackedLedger.pack` stores such a result as a reference
  to a message *of the transcript carried in the same payload* plus its digest, and
  `unpack` restores it from that transcript. Only the carried form refers: the live
  ledger keeps every result, because compaction may later elide or rewrite the
  message, and a replay must still give the model the result the tool returned. A
  reference is made only where the message, bounded as the ledger bounds results,
  has the same digest as the stored result, so a message compaction already shortened
  is never taken for the result; the row then keeps its copy.

Where the issue is silent: "give up" resolves to a *completed* receipt whose result
tells the model the call was abandoned (and `resolution="give_up"` records why). A
distinct status would need a new row in the decision table that every reader must
handle; as a completed receipt, a repeat of the call replays the same answer instead
of running an effect nobody could confirm.

Misuse raises (naive datetimes, a lease that is already over, progress that is not
JSON); races and stale writes are values, because a late activity result is routine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from steadyloop._chat import ChatMessage
from steadyloop._receipts.canonical_json import CanonicalJsonError, canonical_json
from steadyloop._receipts.decision import (
    Effect,
    Receipt,
    ReceiptDecision,
    ReceiptKey,
    decide_tool_call_receipt,
    lease_live,
    require_aware,
)
from steadyloop._stream.surrogates import rejoin_surrogates

__all__ = [
    "DEFAULT_PROGRESS_LIMIT_BYTES",
    "DEFAULT_RESULT_LIMIT_BYTES",
    "MIN_RESULT_LIMIT_BYTES",
    "AmbiguityResolution",
    "DidNotHappen",
    "GiveUp",
    "Happened",
    "LedgerWrite",
    "PackedLedger",
    "ReceiptLedger",
    "ResultRef",
    "WriteApplied",
    "WriteIgnored",
    "WriteRefusal",
    "abandoned_result",
    "resolution_text",
]

DEFAULT_RESULT_LIMIT_BYTES = 16 * 1024
DEFAULT_PROGRESS_LIMIT_BYTES = 16 * 1024
MIN_RESULT_LIMIT_BYTES = 256  # room for the truncation marker and some of the result

UNRESTORABLE_RESULT = (
    "[steadyloop: this call completed earlier, but the result recorded for it could not be "
    "restored; it is not run again. Do not assume what it returned.]"
)
_TRUNCATION_MARKER = "\n[steadyloop: result truncated to {kept} of {total} bytes]"

WriteRefusal = Literal[
    "absent",  # no receipt under the key
    "final",  # the receipt is completed: replay it, never claim it again
    "not_running",  # the writer's attempt already ended (completed or failed)
    "stale_attempt",  # a different attempt owns the receipt now
    "not_next_attempt",  # a claim must be for attempt n+1 (1 when absent)
    "lease_live",  # the owning attempt's lease has not expired
    "too_large",  # progress above progress_limit_bytes
]


@dataclass(frozen=True, slots=True)
class WriteApplied:
    """The write took effect; `receipt` is the row now stored."""

    receipt: Receipt
    kind: Literal["applied"] = "applied"

    @property
    def applied(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class WriteIgnored:
    """The write was not applied. `current` is the row as it stands (None if absent)."""

    refusal: WriteRefusal
    detail: str
    current: Receipt | None
    kind: Literal["ignored"] = "ignored"

    @property
    def applied(self) -> bool:
        return False


LedgerWrite = WriteApplied | WriteIgnored


class Happened(BaseModel):
    """Resolution: the ambiguous call did take effect, and this is its result."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["happened"] = "happened"
    result: str


class DidNotHappen(BaseModel):
    """Resolution: the call did not take effect; run it again (attempt n+1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["did_not_happen"] = "did_not_happen"


class GiveUp(BaseModel):
    """Resolution: do not run it; tell the model it was abandoned (with an optional note)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["give_up"] = "give_up"
    note: str | None = None


AmbiguityResolution = Annotated[Happened | DidNotHappen | GiveUp, Field(discriminator="kind")]


def abandoned_result(tool: str, note: str | None) -> str:
    """The tool message content a given-up call replays."""
    text = (
        f"The call to {tool} was abandoned. An earlier attempt started it and stopped "
        "without reporting an outcome, so it is unknown whether it took effect; a person "
        "chose not to run it again. Do not assume it succeeded or that it failed."
    )
    return text if note is None else f"{text} Note from the operator: {note}"


def resolution_text(resolution: Happened | DidNotHappen | GiveUp, attempt: int) -> str | None:
    """What a person's resolution of ambiguous `attempt` says on the call's answer, for
    the run's timeline; None for `Happened`, whose replayed answer already says a person
    resolved it (`ReceiptPath.replayed`). A give-up is never called a replay: the
    tool did not run, and no earlier result is being repeated."""
    if isinstance(resolution, Happened):
        return None
    if isinstance(resolution, DidNotHappen):
        return f"a person resolved attempt {attempt} as not done: it runs again"
    note = f": {resolution.note}" if resolution.note else ""
    return f"given up by a person after attempt {attempt}, not run{note}"


def _bounded(result: str, limit: int) -> tuple[str, bool, int]:
    """(stored text, truncated, full UTF-8 size) of `result` under `limit` bytes; lone
    surrogates read as everywhere else (`steadyloop._stream.surrogates`)."""
    text = rejoin_surrogates(result)
    encoded = text.encode("utf-8")
    total = len(encoded)
    if total <= limit:
        return text, False, total
    longest_marker = len(_TRUNCATION_MARKER.format(kept=total, total=total))
    cut = limit - longest_marker
    while cut > 0 and (encoded[cut] & 0xC0) == 0x80:  # never split a character
        cut -= 1
    kept = encoded[:cut].decode("utf-8")
    return kept + _TRUNCATION_MARKER.format(kept=cut, total=total), True, total


class ReceiptLedger(BaseModel):
    """Every receipt of a run, keyed by `ReceiptKey.text`; carried across continue-as-new.

    Writes (`claim`, `complete`, `fail`, `record_progress`, `resolve_ambiguous`) return
    a `LedgerWrite`: `WriteApplied`, or `WriteIgnored` saying why nothing changed.
    """

    model_config = ConfigDict(extra="forbid")

    receipts: dict[str, Receipt] = Field(default_factory=dict)
    result_limit_bytes: Annotated[int, Field(ge=MIN_RESULT_LIMIT_BYTES)] = (
        DEFAULT_RESULT_LIMIT_BYTES
    )
    progress_limit_bytes: Annotated[int, Field(ge=2)] = DEFAULT_PROGRESS_LIMIT_BYTES

    # -- reading -------------------------------------------------------------------

    def get(self, key: ReceiptKey) -> Receipt | None:
        return self.receipts.get(key.text)

    def decide(
        self, key: ReceiptKey, effect: Effect, now: datetime | None = None
    ) -> ReceiptDecision:
        """`decide_tool_call_receipt` on this ledger's receipt for `key`; without `now`
        (workflow code) a lease is over only once ended (`end_lease`)."""
        return decide_tool_call_receipt(self.get(key), effect, now)

    def items(self) -> Iterator[tuple[ReceiptKey, Receipt]]:
        """(key, receipt) pairs in the order they were first claimed."""
        for text, receipt in self.receipts.items():
            yield ReceiptKey.from_text(text), receipt

    def __len__(self) -> int:
        return len(self.receipts)

    def size_bytes(self) -> int:
        """Exact size of this ledger's JSON (what a query or continue-as-new carries)."""
        return len(self.__pydantic_serializer__.to_json(self))

    # -- writing -------------------------------------------------------------------

    def claim(
        self,
        key: ReceiptKey,
        attempt: int,
        lease_expires_at: datetime,
        *,
        now: datetime | None = None,
    ) -> LedgerWrite:
        """Mark `key` running as `attempt` until `lease_expires_at`, before executing.

        Applies only for the next attempt (1 when absent, n+1 after attempt n), never
        over a completed receipt or a live lease. Progress recorded by earlier attempts
        is carried over, so a reclaim that dies before its first heartbeat loses none.
        Without `now` (workflow code) a running lease blocks until it is ended.
        """
        require_aware(lease_expires_at, "lease_expires_at")
        if now is not None and lease_expires_at <= require_aware(now, "now"):
            raise ValueError(
                f"lease_expires_at ({lease_expires_at.isoformat()}) must be after now "
                f"({now.isoformat()}): a lease that is already over protects nothing"
            )
        current = self.get(key)
        expected = 1 if current is None else current.attempt + 1
        if current is not None and current.status == "completed":
            return WriteIgnored("final", f"attempt {current.attempt} completed it", current)
        if attempt != expected:
            return WriteIgnored(
                "not_next_attempt", f"the next attempt is {expected}, not {attempt}", current
            )
        if current is not None and current.status == "running" and lease_live(current, now):
            return WriteIgnored(
                "lease_live",
                f"attempt {current.attempt} holds the lease until "
                f"{current.lease_expires_at.isoformat()}",
                current,
            )
        progress = [] if current is None else current.recorded_progress
        return self._store(
            key,
            Receipt(
                status="running",
                attempt=attempt,
                lease_expires_at=lease_expires_at,
                recorded_progress=progress,
            ),
        )

    def complete(self, key: ReceiptKey, attempt: int, result: str) -> LedgerWrite:
        """Record `attempt`'s result (truncated above the bound); fenced by attempt."""
        current = self._fence(key, attempt)
        if isinstance(current, WriteIgnored):
            return current
        return self._store(key, self._completed(current, result, resolution=None))

    def fail(self, key: ReceiptKey, attempt: int) -> LedgerWrite:
        """Record that `attempt` failed, so the next decision executes n+1; fenced."""
        current = self._fence(key, attempt)
        if isinstance(current, WriteIgnored):
            return current
        return self._store(key, self._failed(current, resolution=None))

    def record_progress(
        self, key: ReceiptKey, attempt: int, progress: list[JsonValue]
    ) -> LedgerWrite:
        """Replace `attempt`'s progress snapshot with `progress`; fenced, bounded.

        Raises `CanonicalJsonError` if `progress` cannot be stored to replay exactly: not
        JSON, nested deeper than `MAX_DEPTH` (lists and objects alike), or holding a lone
        surrogate. Nothing else: one check, before anything is stored, below every limit
        pydantic applies when the ledger is validated, serialized or decoded.
        """
        text = canonical_json(progress, utf8=True)
        current = self._fence(key, attempt)
        if isinstance(current, WriteIgnored):
            return current
        if len(text) > self.progress_limit_bytes:  # ASCII: characters are bytes
            return WriteIgnored(
                "too_large",
                f"progress of {len(text)} bytes exceeds {self.progress_limit_bytes}; "
                "the previous snapshot is kept",
                current,
            )
        snapshot: list[JsonValue] = json.loads(text)  # a deep copy the caller cannot mutate
        try:
            receipt = Receipt(
                status="running",
                attempt=attempt,
                lease_expires_at=current.lease_expires_at,
                recorded_progress=snapshot,
            )
        except ValidationError as error:  # a backstop: canonical_json refuses all it knows
            raise CanonicalJsonError("$", f"progress cannot be stored: {error}") from None
        return self._store(key, receipt)

    def resolve_ambiguous(
        self,
        key: ReceiptKey,
        attempt: int,
        resolution: AmbiguityResolution,
        *,
        now: datetime | None = None,
    ) -> LedgerWrite:
        """A person's answer for a running `attempt` whose lease expired.

        `Happened(result)` completes it with that result; `DidNotHappen()` fails it, so
        the next decision executes attempt n+1; `GiveUp(note)` completes it with
        `abandoned_result` and the model is told. Refused while the lease is live.
        """
        if now is not None:
            require_aware(now, "now")
        current = self._fence(key, attempt)
        if isinstance(current, WriteIgnored):
            return current
        if lease_live(current, now):
            return WriteIgnored(
                "lease_live",
                f"attempt {attempt} holds the lease until "
                f"{current.lease_expires_at.isoformat()}; it may still report",
                current,
            )
        if isinstance(resolution, Happened):
            return self._store(key, self._completed(current, resolution.result, "happened"))
        if isinstance(resolution, DidNotHappen):
            return self._store(key, self._failed(current, "did_not_happen"))
        result = abandoned_result(key.tool, resolution.note)
        return self._store(key, self._completed(current, result, "give_up"))

    # -- internals -----------------------------------------------------------------

    def _fence(self, key: ReceiptKey, attempt: int) -> Receipt | WriteIgnored:
        """The current row if `attempt` may write to it (running, same attempt), else why not."""
        current = self.get(key)
        if current is None:
            return WriteIgnored("absent", "no receipt under this key", None)
        if current.attempt != attempt:
            return WriteIgnored(
                "stale_attempt",
                f"attempt {attempt} is stale: attempt {current.attempt} owns the receipt",
                current,
            )
        if current.status != "running":
            return WriteIgnored(
                "not_running", f"attempt {attempt} already {current.status}", current
            )
        return current

    def _completed(
        self,
        current: Receipt,
        result: str,
        resolution: Literal["happened", "give_up"] | None,
    ) -> Receipt:
        stored, truncated, total = _bounded(result, self.result_limit_bytes)
        return Receipt(
            status="completed",
            attempt=current.attempt,
            lease_expires_at=current.lease_expires_at,
            result=stored,
            truncated=truncated,
            result_bytes=total,
            resolution=resolution,
        )  # progress dropped: a completed call replays, nothing will resume it

    @staticmethod
    def _failed(current: Receipt, resolution: Literal["did_not_happen"] | None) -> Receipt:
        return Receipt(
            status="failed",
            attempt=current.attempt,
            lease_expires_at=current.lease_expires_at,
            recorded_progress=current.recorded_progress,
            resolution=resolution,
        )

    def _store(self, key: ReceiptKey, receipt: Receipt) -> WriteApplied:
        self.receipts[key.text] = receipt
        return WriteApplied(receipt)

    # -- what a run carries ----------------------------------------------------------

    def end_lease(self, key: ReceiptKey, attempt: int) -> LedgerWrite:
        """End running `attempt`'s lease now, whatever its expiry says; fenced by attempt.

        Workflow code calls this when the durable timer that ends the lease fires: a
        decision read from that timer is the same live and on every replay, where one
        read from the clock is not (the module docstring of `decision`).
        """
        current = self._fence(key, attempt)
        if isinstance(current, WriteIgnored):
            return current
        return self._store(key, current.model_copy(update={"lease_ended": True}))

    def release_leases(self, now: datetime | None = None) -> int:
        """End every running attempt's lease; how many were live (at `now`, if given).

        For a run that inherits this ledger from a run that stopped: the stopped run's
        attempts can never report to the new one, so waiting out their leases would only
        delay the decision (retry a pure or resumable call, ask a person about an opaque
        one) and block `resolve_ambiguous` meanwhile.
        """
        if now is not None:
            require_aware(now, "now")
        released = 0
        for text, receipt in list(self.receipts.items()):
            if receipt.status == "running" and lease_live(receipt, now):
                self.receipts[text] = receipt.model_copy(update={"lease_ended": True})
                released += 1
        return released


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResultRef(BaseModel):
    """A completed receipt whose result is the content of `message` (an index into the
    transcript carried beside it), bounded as the ledger bounds results, with that
    text's sha256: the row without its second copy of the result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: Annotated[int, Field(ge=0)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    attempt: Annotated[int, Field(ge=1)]
    lease_expires_at: AwareDatetime
    truncated: bool = False
    result_bytes: Annotated[int, Field(ge=0)] | None = None
    resolution: Literal["happened", "give_up"] | None = None


class PackedLedger(BaseModel):
    """A `ReceiptLedger` as a run carries it next to a transcript (see the module
    docstring): each row a `Receipt`, or a `ResultRef` into that transcript. Rows keep
    their order."""

    model_config = ConfigDict(extra="forbid")

    rows: dict[str, ResultRef | Receipt] = Field(default_factory=dict)
    result_limit_bytes: Annotated[int, Field(ge=MIN_RESULT_LIMIT_BYTES)] = (
        DEFAULT_RESULT_LIMIT_BYTES
    )
    progress_limit_bytes: Annotated[int, Field(ge=2)] = DEFAULT_PROGRESS_LIMIT_BYTES

    @classmethod
    def pack(cls, ledger: ReceiptLedger, transcript: list[ChatMessage]) -> PackedLedger:
        """`ledger` with each result that a tool message of `transcript` holds referred to."""
        holders: dict[str, int] = {}
        for index, message in enumerate(transcript):
            if message.role == "tool" and message.content is not None:
                stored, _, _ = _bounded(message.content, ledger.result_limit_bytes)
                holders.setdefault(_digest(stored), index)
        rows: dict[str, ResultRef | Receipt] = {}
        for text, receipt in ledger.receipts.items():
            rows[text] = receipt
            if receipt.status != "completed" or receipt.result is None:
                continue
            digest = _digest(receipt.result)
            holder = holders.get(digest)
            if holder is None:
                continue
            rows[text] = ResultRef(
                message=holder,
                sha256=digest,
                attempt=receipt.attempt,
                lease_expires_at=receipt.lease_expires_at,
                truncated=receipt.truncated,
                result_bytes=receipt.result_bytes,
                resolution=receipt.resolution,
            )
        return cls(
            rows=rows,
            result_limit_bytes=ledger.result_limit_bytes,
            progress_limit_bytes=ledger.progress_limit_bytes,
        )

    def unpack(self, transcript: list[ChatMessage]) -> tuple[ReceiptLedger, int]:
        """The ledger again, results read back from `transcript` (the one packed with it),
        and how many could not be (a completed row then replays `UNRESTORABLE_RESULT`:
        never run again, never a guess at what it returned)."""
        receipts: dict[str, Receipt] = {}
        lost = 0
        for text, row in self.rows.items():
            if isinstance(row, Receipt):
                receipts[text] = row
                continue
            result = self._read(row, transcript)
            if result is None:
                lost += 1
                result = UNRESTORABLE_RESULT
            receipts[text] = Receipt(
                status="completed",
                attempt=row.attempt,
                lease_expires_at=row.lease_expires_at,
                result=result,
                truncated=row.truncated,
                result_bytes=row.result_bytes,
                resolution=row.resolution,
            )
        ledger = ReceiptLedger(
            receipts=receipts,
            result_limit_bytes=self.result_limit_bytes,
            progress_limit_bytes=self.progress_limit_bytes,
        )
        return ledger, lost

    def shrink_results(self, limit: int) -> int:
        """Cut each result the rows hold themselves to `limit` bytes, with the truncation
        marker (the model still reads how it began and that it was cut); how many were cut.

        For a carried state that would not fit otherwise: the call still replays, shorter,
        rather than being dropped (which would run its effect again)."""
        limit = max(limit, MIN_RESULT_LIMIT_BYTES)
        cut = 0
        for text, row in self.rows.items():
            if not isinstance(row, Receipt) or row.result is None:
                continue
            stored, truncated, _ = _bounded(row.result, limit)
            if truncated:
                self.rows[text] = row.model_copy(update={"result": stored, "truncated": True})
                cut += 1
        return cut

    def __len__(self) -> int:
        return len(self.rows)

    def _read(self, row: ResultRef, transcript: list[ChatMessage]) -> str | None:
        if row.message >= len(transcript):
            return None
        message = transcript[row.message]
        if message.role != "tool" or message.content is None:
            return None
        stored, _, _ = _bounded(message.content, self.result_limit_bytes)
        return stored if _digest(stored) == row.sha256 else None
