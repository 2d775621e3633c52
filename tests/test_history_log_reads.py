"""How a follower reads a run's history log (`steadyloop.client._history_log`).

What decides the cost downstream: on a server that answers history long polls (the dev
server), a follower of a live run is sent each history event once, however long the
run (each read goes on from the page token of the one before, never from the start),
a failed read is taken up again from the same token, and a follower that stops while
its long poll is pending leaves no RPC running. With external payload storage, a
follower of a 10-turn run fetches no model request from the blob store (the events
ride as their own small payload), only the result that holds the stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import loop_harness
import pytest
from loop_harness import run_input, running_loop
from steering_harness import people_run
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import HistoryEventFilterType
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryRequest,
    GetWorkflowExecutionHistoryResponse,
)
from temporalio.client import Client
from temporalio.converter import (
    ExternalStorage,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
)
from temporalio.service import RPCError, RPCStatusCode

from steadyloop._history.payload_storage import LocalFileStorageDriver, steadyloop_data_converter
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.client._event_log import run_events
from steadyloop.client._history_log import history_events
from steadyloop.events import ApprovalWaitingEvent, RunEventItem, StopEvent, ToolResultEvent
from steadyloop.events._publishing import log_mode_memo
from steadyloop.testing import ScriptedCall, text_response, tool_calls_response

pytestmark = pytest.mark.slow

READ_GUARD_S = 60.0


class HistoryReads:
    """The follower's history reads, through the client's service (the result's own
    long poll, a close-event filter, is left out)."""

    def __init__(self, client: Client, fail_at: int | None = None) -> None:
        self.service = client.workflow_service
        self.original = self.service.get_workflow_execution_history
        self.fail_at = fail_at
        self.requests: list[GetWorkflowExecutionHistoryRequest] = []
        self.event_ids: list[int] = []
        self.in_flight = 0

    async def __call__(
        self, request: GetWorkflowExecutionHistoryRequest, **kwargs: Any
    ) -> GetWorkflowExecutionHistoryResponse:
        if (
            request.history_event_filter_type
            == HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT
        ):
            return await self.original(request, **kwargs)
        self.requests.append(request)
        if len(self.requests) == self.fail_at:
            raise RPCError("the read failed", RPCStatusCode.UNAVAILABLE, b"")
        self.in_flight += 1
        try:
            response = await self.original(request, **kwargs)
        finally:
            self.in_flight -= 1
        self.event_ids += [event.event_id for event in response.history.events]
        return response


@contextmanager
def counted(
    monkeypatch: pytest.MonkeyPatch, client: Client, fail_at: int | None = None
) -> Iterator[HistoryReads]:
    reads = HistoryReads(client, fail_at)
    with monkeypatch.context() as patch:
        patch.setattr(reads.service, "get_workflow_execution_history", reads)
        yield reads


async def follow(client: Client, handle: Any, poll_s: float | None = 0.02) -> list[RunEventItem]:
    run_id = handle.first_execution_run_id or ""

    async def read() -> list[RunEventItem]:
        return [e async for e in history_events(client, handle.id, run_id, None, poll_s=poll_s)]

    return await asyncio.wait_for(read(), READ_GUARD_S)


def slow_turns(count: int) -> list[Any]:
    """`count` tool turns, each streamed after a pause (a run followed while it goes)."""
    return [
        *(
            tool_calls_response(ScriptedCall("add", {"a": n, "b": 1}, id=f"c{n}"), pause_s=0.2)
            for n in range(count)
        ),
        text_response("done"),
    ]


@pytest.fixture
def dev_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_harness, "start_environment", loop_harness.dev_server_environment)


@pytest.mark.usefixtures("dev_server")
async def test_a_live_run_is_read_from_its_history_each_event_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_loop(slow_turns(4)) as loop:
        handle = await loop.start(run_input("add"))
        with counted(monkeypatch, loop.client) as reads:
            live = await follow(loop.client, handle)
        await handle.result()
        history = await handle.fetch_history()
        after = await follow(loop.client, handle, poll_s=None)
    print(f"live follower: sent {len(reads.event_ids)} events of {len(history.events)}", end=" ")
    print(f"in {len(reads.requests)} reads")

    assert [e.type for e in live if e.type != "timeline"][-3:] == [
        "tool_call",
        "tool_result",
        "stop",
    ]
    assert live == after  # the same events, with the same cursors, read live or at the end
    assert reads.event_ids == [event.event_id for event in history.events]  # each once
    waited = [r for r in reads.requests if r.wait_new_event and r.next_page_token]
    assert len(waited) >= 4  # the turns came while it waited, each read from the last token


@pytest.mark.usefixtures("dev_server")
async def test_a_live_chain_is_read_across_continue_as_new_each_event_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each execution is long-polled from its own first read, the next once the one
    before closed: every execution's events are sent once, in the chain's order."""
    async with running_loop(slow_turns(3)) as loop:
        handle = await loop.start(run_input("add", continue_as_new_after_turns=1))
        with counted(monkeypatch, loop.client) as reads:
            live = await follow(loop.client, handle)
        await handle.result()
        runs = [r.execution.run_id for r in reads.requests]
        chain = list(dict.fromkeys(runs))  # each execution, in the order it was read
        histories = [
            await loop.client.get_workflow_handle(handle.id, run_id=r).fetch_history()
            for r in chain
        ]

    assert len(chain) >= 3 and all(r.wait_new_event for r in reads.requests)
    assert reads.event_ids == [e.event_id for history in histories for e in history.events]
    answered = [getattr(e, "call_id", None) for e in live if isinstance(e, ToolResultEvent)]
    assert answered == ["c0", "c1", "c2"] and isinstance(live[-1], StopEvent)


@pytest.mark.usefixtures("dev_server")
async def test_a_failed_read_is_taken_up_again_from_the_same_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_loop(slow_turns(3)) as loop:
        handle = await loop.start(run_input("add"))
        with counted(monkeypatch, loop.client, fail_at=3) as reads:
            live = await follow(loop.client, handle)
        history = await handle.fetch_history()

    failed, retried = reads.requests[2], reads.requests[3]
    assert failed.next_page_token and retried.next_page_token == failed.next_page_token
    assert reads.event_ids == [event.event_id for event in history.events]
    assert isinstance(live[-1], StopEvent)


@pytest.mark.usefixtures("dev_server")
async def test_a_follower_that_stops_while_its_long_poll_waits_leaves_nothing_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = [
        tool_calls_response(ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x1")),
        text_response("sent"),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(people_run())
        before = asyncio.all_tasks()
        with counted(monkeypatch, loop.client) as reads:
            waiting = asyncio.Event()

            async def read() -> None:
                run_id = handle.first_execution_run_id or ""
                async for event in history_events(
                    loop.client, handle.id, run_id, None, poll_s=0.02
                ):
                    if isinstance(event, ApprovalWaitingEvent):
                        waiting.set()

            follower = asyncio.create_task(read())
            await asyncio.wait_for(waiting.wait(), READ_GUARD_S)
            while reads.in_flight == 0:  # the long poll the run's wait leaves pending
                await asyncio.sleep(0.01)
            follower.cancel()
            with pytest.raises(asyncio.CancelledError):
                await follower
            in_flight = reads.in_flight
            left = asyncio.all_tasks() - before - {asyncio.current_task()}
        await handle.terminate("the test is over")

    assert in_flight == 0 and not [t for t in left if not t.done()]


class CountingDriver(LocalFileStorageDriver):
    """The blob store as a follower's client sees it, counting the payloads it fetches."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.fetched = 0

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        self.fetched += len(claims)
        return await super().retrieve(context, claims)


async def blob_reads_of_a_follower(
    tmp_path: Path, turns: int, *, memo: bool = True
) -> tuple[int, int, list[RunEventItem]]:
    """A `turns`-turn run with every model request (and its input) in the blob store, read
    to its end by a follower with a client of its own: (stored payloads it fetched, model
    requests stored, its events). `memo`: started as the library starts a run (with the
    memo naming where its log is), or by a client of its own, without it."""
    script = [
        *(
            tool_calls_response(ScriptedCall("add", {"a": n, "b": 1}, id=f"c{n}"))
            for n in range(turns - 1)
        ),
        text_response("done"),
    ]
    async with running_loop(script, blob_threshold=1_000, blob_dir=tmp_path) as loop:
        run = run_input("add")
        handle = await loop.client.start_workflow(
            ToolLoopWorkflow.run,
            run,
            id=f"loop-{uuid.uuid4()}",
            task_queue=loop.task_queue,
            memo=log_mode_memo(run) if memo else None,
        )
        await handle.result()
        history = await handle.fetch_history()
        driver = CountingDriver(str(tmp_path))
        converter = dataclasses.replace(
            steadyloop_data_converter(str(tmp_path), threshold_bytes=1_000),
            external_storage=ExternalStorage(drivers=[driver], payload_size_threshold=1_000),
        )
        config = loop.client.config()
        config["data_converter"] = converter
        follower = Client(**config)
        run_id = handle.first_execution_run_id or ""
        events = [e async for e in run_events(follower, handle.id, run_id)]
    stored_requests = sum(
        1
        for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name
        == "steadyloop.stream_completion"
        and e.activity_task_scheduled_event_attributes.input.payloads[0].metadata.get("encoding")
        != b"json/plain"
    )
    return driver.fetched, stored_requests, events


@pytest.mark.parametrize("memo", [True, False], ids=["memo", "no_memo"])
async def test_a_follower_of_a_stored_run_fetches_no_model_request(
    tmp_path: Path, memo: bool
) -> None:
    fetched, stored_requests, events = await blob_reads_of_a_follower(tmp_path, turns=10, memo=memo)
    print(f"follower of a 10-turn run: {fetched} stored payload(s) fetched of", end=" ")
    print(f"{stored_requests} stored requests")

    assert stored_requests == 10  # the case this is for: every request out of history
    assert [e.call_id for e in events if isinstance(e, ToolResultEvent)] == [
        f"c{n}" for n in range(9)
    ]
    assert isinstance(events[-1], StopEvent)
    # The result, which carries the stop; never a request. A run started without the
    # memo costs its input once more: where its log is, read by the loop's own rule.
    assert fetched <= (1 if memo else 2)
