"""Before a run's first event, the follower says what the run is doing.

A run that forwards nothing says nothing during a slow model turn, which looks exactly
like a run no worker runs. So the follower reads the run's pending activities: the
model being asked (since when, which attempt), a tool running, a step no worker has
taken, or no step at all (only then does it ask whether a worker runs)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import loop_harness
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from loop_harness import run_input, running_loop
from temporalio.api.common.v1 import ActivityType
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo

from steadyloop._cli.follow import follow, quiet_line
from steadyloop._cli.progress import ProgressDisplay
from steadyloop._stream.completion import STREAM_COMPLETION_ACTIVITY
from steadyloop.testing import Pause, finish_chunk, sse_response, text_chunks


def pending(name: str, *, started: bool, attempt: int = 1) -> PendingActivityInfo:
    stamp = Timestamp()
    stamp.FromDatetime(datetime(2026, 12, 7, 22, 31, 5, tzinfo=UTC))
    state = (
        PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        if started
        else PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    )
    return PendingActivityInfo(
        activity_type=ActivityType(name=name),
        state=state,
        attempt=attempt,
        last_started_time=stamp if started else None,
    )


def test_each_state_of_a_quiet_run_has_its_words() -> None:
    model = pending(STREAM_COMPLETION_ACTIVITY, started=True)
    assert quiet_line([model], "q") == "asking the model (since 22:31:05 UTC)"
    again = pending(STREAM_COMPLETION_ACTIVITY, started=True, attempt=2)
    assert quiet_line([again], "q") == "asking the model (since 22:31:05 UTC, attempt 2)"
    tool = pending("steadyloop.run_tool", started=True)
    assert quiet_line([tool], "q") == "running steadyloop.run_tool (since 22:31:05 UTC)"
    untaken = pending(STREAM_COMPLETION_ACTIVITY, started=False)
    assert quiet_line([untaken], "q") == (
        "waiting for a worker on task queue 'q' to take the run's next step"
    )
    assert quiet_line([], "q") == (
        "waiting for a worker on task queue 'q' to answer (is `steadyloop worker` running?)"
    )


@pytest.mark.slow
async def test_a_slow_model_turn_shows_the_model_being_asked_not_a_missing_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop_harness, "start_environment", loop_harness.dev_server_environment)
    slow = sse_response([Pause(3.5), *text_chunks("done"), finish_chunk("stop")])
    async with running_loop([slow], first_token_s=30) as loop:
        handle = await loop.start(run_input())  # forwards nothing: no event until the end
        out = io.StringIO()
        result = await follow(loop.client, handle, ProgressDisplay(out, live=False))
    assert result.final_answer == "done"
    assert "[asking the model (since " in out.getvalue()
    assert "is `steadyloop worker` running?" not in out.getvalue()
