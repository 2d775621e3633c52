"""A test-only workflow that does nothing until released, so a test can put runs with
chain search attributes into visibility and count them. `continue_as_new_once` makes it
hand over to a second execution first (one workflow id, two executions). Kept in its own
importable module: the workflow sandbox refuses classes it cannot re-import cleanly."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name="ParkedWorkflow")
class ParkedWorkflow:
    def __init__(self) -> None:
        self._released = False

    @workflow.signal
    def release(self) -> None:
        self._released = True

    @workflow.run
    async def run(self, continue_as_new_once: bool) -> str:
        if continue_as_new_once:
            workflow.continue_as_new(False)
        await workflow.wait_condition(lambda: self._released)
        return "released"
