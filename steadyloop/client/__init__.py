"""The client API: start, follow and steer runs from your own code.

    client = await steadyloop.connect()                    # the worker's own settings
    thread = client.thread("support-42")                   # or client.thread(): a new id
    run = await thread.start("What is 2 + 3?", options=RunOptions(model="...", tools=["add"]),
                             key="request-17")             # retried: the same run
    for call in (await run.snapshot()).pending_approvals:
        await run.approve(call, key=f"approve-{call.call_id}")
    result = await run.result()

- `connect` (`connection`): one call, the worker's settings, the right data converter.
- `Thread` (`threads`): a conversation whose runs follow each other, one at a time,
  started idempotently under a key; a follow-up inherits transcript and receipts.
- `RunHandle` (`runs`): `snapshot`, `result`, and steering (`approve`, `reject`,
  `send`, `pause`, `unpause`, `resolve_receipt`, `interrupt`), each update idempotent
  under a caller's key.
- `RunOptions` (`options`): a run's configuration, apart from its conversation.
- Typed errors (`errors`): `ThreadBusy`, `ThreadCannotContinue`, `RunEnded`,
  `NotTheCallReviewed`, `NoWorkerAnswered`, `RequestRefused`, `RunFailed`,
  `RunNotFound`, `StopUnread` (a completed run's stop could not be read in time),
  `TemporalLost` (Temporal stopped answering a follower for longer than its bound),
  `ToolsNotServed` (a run naming tools its worker does not serve, refused before it
  starts); and the event log's `CursorExpired` and `InvalidCursor` (`steadyloop.events`).
- `EventFanout` (`fanout`): the followers of a run in one process share one reader.
- `collect` (`blob_gc`): delete the blobs of runs closed longer than a retention period
  (`steadyloop blobs gc`; a Schedule or cron job can call it).
"""

from steadyloop._run.steering import PendingApproval
from steadyloop._worker.config import ConfigError, TemporalUnreachable
from steadyloop.client._connection import SteadyloopClient, connect
from steadyloop.client._errors import (
    ClientError,
    NotTheCallReviewed,
    NoWorkerAnswered,
    RequestRefused,
    RunEnded,
    RunFailed,
    RunNotFound,
    StopUnread,
    TemporalLost,
    ThreadBusy,
    ThreadCannotContinue,
    ToolsNotServed,
)
from steadyloop.client._options import RunOptions
from steadyloop.client._runs import RunHandle, RunSnapshot, RunStatus, StartOrigin
from steadyloop.client._threads import Thread, ThreadMemo, run_workflow_id
from steadyloop.events import CursorExpired, InvalidCursor, RunEventItem

__all__ = [
    "ClientError",
    "ConfigError",
    "CursorExpired",
    "InvalidCursor",
    "NoWorkerAnswered",
    "NotTheCallReviewed",
    "PendingApproval",
    "RequestRefused",
    "RunEnded",
    "RunEventItem",
    "RunFailed",
    "RunHandle",
    "RunNotFound",
    "RunOptions",
    "RunSnapshot",
    "RunStatus",
    "StartOrigin",
    "SteadyloopClient",
    "StopUnread",
    "TemporalLost",
    "TemporalUnreachable",
    "Thread",
    "ThreadBusy",
    "ThreadCannotContinue",
    "ThreadMemo",
    "ToolsNotServed",
    "connect",
    "run_workflow_id",
]
