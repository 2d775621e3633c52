"""Compaction at a turn boundary, as workflow code (see `steadyloop._history.compaction` for why).

Deterministic: the decision and the elision are pure functions of the transcript; a
user's compaction runs as an activity (it may call a model), with its output healed.
What the obvious version gets wrong, and what this one does instead:

- A compactor that fails, times out, or would get an input over Temporal's payload
  limit must not end the run (nor fail the workflow task forever): the transcript is
  elided instead, and the record says `custom_failed` and why.
- A compactor that drops a tool answer or keeps an orphan would make the next request
  fail: its output goes through `validate_and_heal` before it replaces the transcript.
- A transcript still over the limit once every old result is elided (the recent turns
  are large) would count an empty compaction on every turn: nothing is recorded then.
  A compaction activity, though, runs again at every boundary while the transcript
  stays over the limit: it is the activity's job to get under it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
    from steadyloop._history.compaction import (
        CompactionPolicy,
        CompactionRecord,
        CompactionReply,
        CompactionRequest,
        adopt_compacted,
        elide_tool_results,
        needs_compaction,
    )
    from steadyloop._run.models import RunStats

from steadyloop._workflows.payload_ceiling import payload_bytes

COMPACTION_ATTEMPTS = 3


async def compact_at_boundary(
    transcript: list[ChatMessage], policy: CompactionPolicy | None, stats: RunStats
) -> list[ChatMessage]:
    """The transcript, compacted when it passed the policy's size; counted in `stats`."""
    if policy is None or not needs_compaction(transcript, policy):
        return transcript
    if policy.activity is None:
        compacted, record = elide_tool_results(transcript, policy)
        if not record.elided_call_ids:
            return transcript  # everything old is elided already: nothing to record
    else:
        compacted, record = await _run_compactor(transcript, policy, policy.activity)
    stats.count_compaction(record)
    workflow.logger.info(
        "compacted the transcript (%s): %d -> %d characters, %d results elided",
        record.kind,
        record.before_chars,
        record.after_chars,
        len(record.elided_call_ids),
    )
    return compacted


async def _run_compactor(
    transcript: list[ChatMessage], policy: CompactionPolicy, activity: str
) -> tuple[list[ChatMessage], CompactionRecord]:
    request = CompactionRequest(
        messages=transcript, max_chars=policy.max_chars, target_chars=policy.target
    )
    size = payload_bytes(request)
    if size > MAX_INLINE_PAYLOAD_BYTES:  # Temporal refuses payloads over 2 MB
        return _instead(transcript, policy, f"its input would be {size:,} bytes, over the limit")
    try:
        reply = await workflow.execute_activity(
            activity,
            request,
            result_type=CompactionReply,
            start_to_close_timeout=timedelta(seconds=policy.activity_timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=COMPACTION_ATTEMPTS),
        )
    except ActivityError as error:
        cause: BaseException = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        return _instead(transcript, policy, f"it failed: {cause}")
    return adopt_compacted(transcript, reply.messages)


def _instead(
    transcript: list[ChatMessage], policy: CompactionPolicy, why: str
) -> tuple[list[ChatMessage], CompactionRecord]:
    compacted, record = elide_tool_results(transcript, policy)
    detail = f"compaction activity {policy.activity!r} not used ({why}); elided instead"
    return compacted, record.model_copy(update={"kind": "custom_failed", "detail": detail})
