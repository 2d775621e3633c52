"""The two workflows `bench_routing.py` compares: N model turns made directly (one
activity each, the floor) and N turns through `routed_completion`. Importable, for the
workflow sandbox."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyloop._routing.route_plan import RouteConfig
    from steadyloop._stream.completion import (
        STREAM_COMPLETION_ACTIVITY,
        AssembledTurn,
        CompletionRequest,
    )
    from steadyloop._workflows.routed_turn import routed_completion

TIMEOUT = timedelta(seconds=30)


class TurnsInput(BaseModel):
    request: CompletionRequest
    turns: int
    route: RouteConfig | None = None


@workflow.defn
class DirectTurnsWorkflow:
    @workflow.run
    async def run(self, params: TurnsInput) -> int:
        for _ in range(params.turns):
            await workflow.execute_activity(
                STREAM_COMPLETION_ACTIVITY,
                params.request,
                result_type=AssembledTurn,
                start_to_close_timeout=TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        return params.turns


@workflow.defn
class RoutedTurnsWorkflow:
    @workflow.run
    async def run(self, params: TurnsInput) -> int:
        assert params.route is not None
        done = 0
        for _ in range(params.turns):
            routed = await routed_completion(params.route, params.request, attempt_timeout=TIMEOUT)
            done += routed.turn is not None
        return done
