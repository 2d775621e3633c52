"""The model activities of a busy worker: the event log's two local activities slowed.

Queries, signals and kills then land while one of them runs, which is where a patch
check or a clock reading could move to another workflow task live than on replay. Used
by `test_replay_wedges.py` and the chaos suite's workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from temporalio import activity

from steadyloop._activities.model_stream import publish_run_events, record_run_events
from steadyloop.events._publishing import (
    PUBLISH_RUN_EVENTS_ACTIVITY,
    RECORD_RUN_EVENTS_ACTIVITY,
    PublishRunEvents,
    RecordRunEvents,
)


def slowed_event_log(activities: Sequence[Any], delay_s: float) -> list[Any]:
    """`activities` with the event log's record and publish each taking `delay_s` more."""

    @activity.defn(name=RECORD_RUN_EVENTS_ACTIVITY)
    async def slow_record(batch: RecordRunEvents) -> RecordRunEvents:
        await asyncio.sleep(delay_s)
        return await record_run_events(batch)

    @activity.defn(name=PUBLISH_RUN_EVENTS_ACTIVITY)
    async def slow_publish(batch: PublishRunEvents) -> None:
        await asyncio.sleep(delay_s)
        await publish_run_events(batch)

    slow = {RECORD_RUN_EVENTS_ACTIVITY: slow_record, PUBLISH_RUN_EVENTS_ACTIVITY: slow_publish}
    named = ((getattr(fn, "__temporal_activity_definition", None), fn) for fn in activities)
    return [slow.get(getattr(defn, "name", ""), fn) for defn, fn in named]
