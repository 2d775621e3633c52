"""A test-only workflow that runs one routed model turn (`routed_completion`), so the
route executor is exercised inside a real workflow, on a real server, against real
HTTP; kept in its own importable module for the workflow sandbox."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._routing.route_plan import RouteConfig
    from steadyloop._stream.completion import CompletionRequest
    from steadyloop._workflows.durable_time import Deadline
    from steadyloop._workflows.routed_turn import RoutedTurn, routed_completion


class RoutedTurnInput(BaseModel):
    route: RouteConfig
    request: CompletionRequest
    attempt_timeout_s: float = 60.0
    deadline_s: float | None = None


@workflow.defn
class RoutedTurnWorkflow:
    @workflow.run
    async def run(self, params: RoutedTurnInput) -> RoutedTurn:
        deadline = Deadline(
            None
            if params.deadline_s is None
            else workflow.now() + timedelta(seconds=params.deadline_s)
        )
        deadline.start()
        return await routed_completion(
            params.route,
            params.request,
            attempt_timeout=timedelta(seconds=params.attempt_timeout_s),
            deadline=deadline,
        )
