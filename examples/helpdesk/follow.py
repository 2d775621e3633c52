"""Start a helpdesk run, print its events as they come, and approve the refund it asks for.

With a worker serving the helpdesk tools
(`steadyloop worker --dev --tools examples.helpdesk.agent:registry`):

    STEADYLOOP_MODEL=gpt-4.1-mini python -m examples.helpdesk.follow "Refund order A-17."

The approval is bound to what was printed: the call's id and the SHA of its arguments,
as the `approval_waiting` event carried them. If another call waited under that id by
the time the decision arrived, the run would refuse it (`NotTheCallReviewed`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import TextIO

import steadyloop
from examples.helpdesk.agent import SYSTEM_PROMPT
from steadyloop.events import (
    ApprovalWaitingEvent,
    StopEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)

TOOLS = ["lookup_order", "refund", "send_email"]


async def follow_and_approve(
    run: steadyloop.RunHandle,
    *,
    approve: Callable[[ApprovalWaitingEvent], bool] = lambda event: True,
    out: TextIO = sys.stdout,
) -> steadyloop.RunResult:
    """Print every event of `run`; decide each waiting call with `approve`."""
    async for event in run.events():
        if isinstance(event, TextDeltaEvent):
            print(event.text, end="", file=out, flush=True)
        elif isinstance(event, ToolCallEvent):
            print(f"\n-> {event.name} {event.arguments}", file=out)
        elif isinstance(event, ToolResultEvent):
            replayed = " (replayed, not run again)" if event.replayed else ""
            print(f"<- {event.name}: {event.text}{replayed}", file=out)
        elif isinstance(event, ApprovalWaitingEvent):
            # The key makes a retried decision (a second click) count once.
            if approve(event):
                said = await run.approve(event.call_id, event.sha, key=event.cursor)
            else:
                said = await run.reject(event.call_id, event.sha, reason="no", key=event.cursor)
            print(f"?? {event.tool} {event.call_id} (sha {event.sha[:12]}): {said}", file=out)
        elif isinstance(event, StopEvent):
            print(f"\n== stopped: {event.reason}", file=out)
    return await run.result()


async def main(prompt: str) -> None:
    client = await steadyloop.connect()
    options = steadyloop.RunOptions(
        endpoint=os.environ.get("STEADYLOOP_ENDPOINT", "default"),
        model=os.environ["STEADYLOOP_MODEL"],
        tools=TOOLS,
        system_prompt=SYSTEM_PROMPT,
    )
    run = await client.thread().start(prompt, options=options)
    print(f"run {run.workflow_id}")
    await follow_and_approve(run)


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Refund order A-17."))
