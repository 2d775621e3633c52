"""Record workflow histories as replay fixtures: `python tests/record_histories.py [NAME]`.

`python tests/record_histories.py --freeze VERSION` keeps the fixtures as that
release's histories (`tests/histories/releases/VERSION/`), replayed by every later
version (`docs/versioning.md`).

`SCENARIOS` are runs of ToolLoopWorkflow; `ROUTING_SCENARIOS` are a routed model turn
(`routed_completion` inside a test workflow) and the endpoint-health entity workflow
through a breaker's whole cycle and a continue-as-new.

Re-record only on purpose (a deliberate, versioned workflow change): the point of the
fixtures is that histories written by earlier code still replay on the current code.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import shutil
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from delegation_harness import (
    Brain,
    Turn,
    chain_input,
    delegate,
    profile,
    running_chains,
)
from loop_harness import Loop, run_input, running_loop, summarize
from routing_harness import Routing, candidate, route, routing
from steering_harness import eventually, people_run, trickle, wait_for_approvals
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steadyloop._activities.chain_admission import ChainAdmissionActivities
from steadyloop._chains.admission import (
    AdmissionRequest,
    ChildAsk,
    RunEntry,
    admission_workflow_id,
)
from steadyloop._chains.limits import (
    ChainBudgetLimit,
    ChainPosition,
    DepthLimit,
    TenantCeilingLimit,
)
from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._history.compaction import CompactionPolicy
from steadyloop._history.payload_storage import DEFAULT_THRESHOLD_BYTES
from steadyloop._output.forwarding import ForwardingOptions, OutputDelta
from steadyloop._receipts.decision import receipt_key
from steadyloop._receipts.ledger import Happened, PackedLedger, ReceiptLedger
from steadyloop._routing.endpoint_health import (
    EndpointHealthInput,
    EndpointOutcome,
    ProbeRequest,
    health_workflow_id,
)
from steadyloop._routing.pricing import Price
from steadyloop._routing.route_plan import RouteCandidate, RouteConfig
from steadyloop._run.models import (
    AmbiguousCall,
    ContinuationOptions,
    InheritedReceipts,
    ResolveReceipt,
    RunInput,
    RunLimits,
    RunPlugins,
)
from steadyloop._run.steering import ApprovalDecision, UserMessage
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._workflows.chain_admission import ChainAdmissionWorkflow
from steadyloop._workflows.endpoint_health import EndpointHealthWorkflow
from steadyloop.client._event_log import follow_output
from steadyloop.testing import (
    Pause,
    ScriptedCall,
    ScriptedResponse,
    error_response,
    finish_chunk,
    sse_response,
    text_chunks,
    text_response,
    tool_call_chunks,
    tool_calls_response,
)

HISTORIES = Path(__file__).parent / "histories"


def _calls(
    *calls: ScriptedCall, index: Literal["distinct", "zero", "omit"] = "distinct"
) -> ScriptedResponse:
    """Tool calls in five-byte fragments: every fixture exercises argument assembly."""
    return tool_calls_response(*calls, index=index, fragment_size=5)


def _answer(text: str) -> ScriptedResponse:
    """A final answer that reports usage, so the fixtures record a run's token counts."""
    return text_response(text, usage=(12, 3))


SCENARIOS: dict[str, list[ScriptedResponse]] = {
    "multi_turn_parallel_calls": [
        _calls(
            ScriptedCall("add", {"a": 1, "b": 2}, id="c1"),
            ScriptedCall("note", {"text": "hi"}, id="c2"),
            ScriptedCall("no_such_tool", {}, id="c3"),
            index="zero",
        ),
        _calls(ScriptedCall("current_time", ""), ScriptedCall("boom", {"reason": "x"})),
        _answer("done"),
    ],
    "defect_retry_then_answer": [
        sse_response([*tool_call_chunks([ScriptedCall("add", '{"a": 1')]), finish_chunk("length")]),
        _answer("fine"),
    ],
    "deadline_during_backoff": [
        error_response(503, "overloaded", type="server_error", retry_after=7200),
    ],
    "receipts_replay_and_ambiguous": [
        _calls(
            ScriptedCall("note", {"text": "once"}, id="a"),
            ScriptedCall("note", {"text": "once"}, id="b"),
            ScriptedCall("slow_note", {"text": "maybe"}, id="c"),
        ),
        _calls(
            ScriptedCall("note", {"text": "once"}, id="d"),
            ScriptedCall("slow_note", {"text": "maybe"}, id="e"),
        ),
        _answer("done"),
    ],
    # The user's own activity as a tool: scheduled by its type, a repeat of the same
    # call answered from its receipt, a wrongly typed argument refused unscheduled.
    "activity_tool_calls": [
        _calls(
            ScriptedCall("record_payment", {"order_id": "o1", "amount_cents": 500}, id="p1"),
            ScriptedCall("record_payment", {"order_id": "o2", "amount_cents": "x"}, id="p2"),
        ),
        _calls(ScriptedCall("record_payment", {"order_id": "o1", "amount_cents": 500}, id="p3")),
        _answer("done"),
    ],
    # The opaque `slow_note` runs past its timeout on a live worker; the worker
    # signals what it returned late, and a person resolves the call with it.
    "opaque_timeout_late_result": [
        _calls(ScriptedCall("slow_note", {"text": "late"}, id="t1")),
        _answer("done"),
    ],
    # With the event log: a failed model attempt, retried; its timeline events are
    # published before the retry runs (so a follower says the retry before its text).
    "retry_published_first": [
        error_response(500, "boom", type="server_error"),
        _answer("done"),
    ],
    # The same with the event log: the late result is published while the call waits.
    "opaque_late_result_on_the_log": [
        _calls(ScriptedCall("slow_note", {"text": "late"}, id="t1")),
        _answer("done"),
    ],
    # Forwarding: a silent first attempt retried after a backoff, then an attempt that
    # showed text and stalled, so the run stops `output_interrupted` (and closes its host).
    "forwarded_output_interrupted": [
        sse_response([Pause(2.0), *text_chunks("late")], done=False),
        sse_response([*text_chunks("Shown to a person"), Pause(2.0)], done=False),
    ],
    # A route of two endpoints: the first fails twice (its budget), the second answers
    # the first turn; the first answers the next (its breaker is still closed).
    "routed_run_falls_back": [
        error_response(500, "boom", type="server_error"),
        error_response(500, "boom", type="server_error"),
        _answer("done"),
    ],
    # A broken history healed before the first request (Mistral ids), cost counted, and
    # the transcript compacted by a user activity at a turn boundary.
    "long_run_upkeep": [
        _calls(ScriptedCall("note", {"text": "0" + "u" * 600}, id="call_1")),
        _calls(ScriptedCall("note", {"text": "1" + "u" * 600}, id="call_2")),
        _calls(ScriptedCall("note", {"text": "2" + "u" * 600}, id="call_3")),
        _answer("done"),
    ],
    # People in the loop: a call waits for approval while the rest of its batch runs, a
    # message sent meanwhile goes out with turn 2, and an interrupt cancels turn 2's stream.
    "people_in_the_loop": [
        _calls(
            ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x1"),
            ScriptedCall("note", {"text": "meanwhile"}, id="n1"),
        ),
        trickle(400),
    ],
    # The event log: forwarded text, a call that waits for approval beside one
    # that runs, the same call again answered from its receipt, then the answer; each
    # step published to the run's output host, keyed to its first execution.
    "event_log_approval_and_replay": [
        _calls(
            ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x1"),
            ScriptedCall("add", {"a": 2, "b": 3}, id="a1"),
        ),
        _calls(ScriptedCall("add", {"a": 2, "b": 3}, id="a2")),
        _answer("sent and added"),
    ],
    # Progressive disclosure: a tool of an inactive plugin, an activation, an unknown
    # plugin; then the plugin's tool runs and the activation is asked for again.
    "progressive_tool_disclosure": [
        _calls(
            ScriptedCall("write_scratch", {"path": "a", "text": "early"}, id="w1"),
            ScriptedCall("activate_plugin", {"plugin": "files"}, id="act1"),
            ScriptedCall("activate_plugin", {"plugin": "web"}, id="act2"),
        ),
        _calls(
            ScriptedCall("write_scratch", {"path": "a", "text": "now"}, id="w2"),
            ScriptedCall("activate_plugin", {"plugin": "files"}, id="act3"),
        ),
        _answer("done"),
    ],
    # Forwarding: a person interrupts while the answer streams; the cancelled attempt
    # is waited for, and the text it showed is read back from the host as the partial.
    "interrupted_with_output": [trickle(400)],
    # Three turns, each execution handing over after its first turn (its history passed
    # `continue_as_new_at_events`): the first execution is recorded.
    "continue_as_new_at_events": [
        _calls(ScriptedCall("add", {"a": 1, "b": 2}, id="k1")),
        _calls(ScriptedCall("note", {"text": "x" * 2000}, id="k2")),
        _calls(ScriptedCall("add", {"a": 3, "b": 4}, id="k3")),
        _answer("done"),
    ],
    # A resumed run (`steadyloop resume`): the predecessor completed `note` and left an
    # opaque `slow_note` without an outcome. The model asks both again: the first
    # replays, the second is listed as ambiguous from the start and resolved by a
    # person; then the run hands over with its receipts packed against the transcript.
    "resumed_with_inherited_receipts": [
        _calls(
            ScriptedCall("note", {"text": "once"}, id="a"),
            ScriptedCall("slow_note", {"text": "maybe"}, id="b"),
        ),
        _answer("done"),
    ],
    # An answer cut by the token limit is continued, then its continuation's
    # stream fails after showing text and is continued from it; one answer results.
    "continued_answers": [
        sse_response([*text_chunks("Part one, "), finish_chunk("length")]),
        sse_response([*text_chunks("part two, "), Pause(2.0)], done=False),
        _answer("and the end."),
    ],
    # The deadline passes while a forwarded answer streams; what was shown is
    # read back from the output host as the partial.
    "deadline_keeps_shown_output": [trickle(400)],
}
# One healthy endpoint, four model turns: health is read before the first turn only
# (`HealthView`, within the TTL the worker recorded with that read).
# The same run not forwarded: its event log is in its own history (no host).
SCENARIOS["event_log_in_history"] = SCENARIOS["event_log_approval_and_replay"]
# The same again once each step's events rode as the activity input's second payload
# (`args=[request, events]`), so a follower never reads the request.
SCENARIOS["event_log_rides_apart"] = SCENARIOS["event_log_approval_and_replay"]
SCENARIOS["one_healthy_endpoint_reads_health_once"] = [
    _calls(ScriptedCall("add", {"a": 1, "b": 2}, id="h1")),
    _calls(ScriptedCall("note", {"text": "two"}, id="h2")),
    _calls(ScriptedCall("add", {"a": 3, "b": 4}, id="h3")),
    _answer("done"),
]
# The tools described by a local activity in the run's first workflow task,
# with the first health read and the patches (one marker batch), then a call answered.
SCENARIOS["tools_described_locally"] = [
    _calls(ScriptedCall("add", {"a": 2, "b": 5}, id="t1")),
    _answer("seven"),
]
# Pure tools as local activities (`local_pure_tools_s`), beside an opaque one
# that stays a regular activity, and a repeated pure call replayed from its receipt.
SCENARIOS["pure_tools_as_local_activities"] = [
    _calls(
        ScriptedCall("add", {"a": 1, "b": 2}, id="l1"),
        ScriptedCall("note", {"text": "kept"}, id="l2"),
        ScriptedCall("current_time", "", id="l3"),
    ),
    _calls(ScriptedCall("add", {"a": 1, "b": 2}, id="l4")),
    _answer("done"),
]
# A typed run: a tool call, a prose answer corrected with what failed, a valid answer.
SCENARIOS["typed_output_corrected"] = [
    _calls(ScriptedCall("add", {"a": 1, "b": 2}, id="y1")),
    _answer("The sum is 3."),
    _answer('{"sum": 3}'),
]
DEADLINES = {"deadline_during_backoff": 3600.0, "deadline_keeps_shown_output": 1.5}
# Scenarios whose endpoint needs more than the defaults (watchdog budgets).
ENDPOINT_CONFIG: dict[str, dict[str, Any]] = {
    "forwarded_output_interrupted": {"first_token_s": 0.3, "inter_chunk_s": 0.3},
    "continued_answers": {"inter_chunk_s": 0.3},
}
# Scenarios with more providers than the first: endpoint name -> its script.
MORE_ENDPOINTS: dict[str, dict[str, list[ScriptedResponse]]] = {
    "routed_run_falls_back": {
        "backup": [_calls(ScriptedCall("add", {"a": 1, "b": 2}, id="r1"))],
    },
}
# Scenarios that start from more than a prompt: fields of RunInput to set.
RUN_UPDATES: dict[str, dict[str, Any]] = {
    "forwarded_output_interrupted": {
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05),
        "limits": RunLimits(model_retry_initial_s=0.1),
    },
    "people_in_the_loop": {"tools": people_run().tools},
    "event_log_approval_and_replay": {
        "tools": people_run().tools,
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05),
    },
    "event_log_in_history": {"tools": people_run().tools},
    "event_log_rides_apart": {"tools": people_run().tools},
    "interrupted_with_output": {
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.5),
    },
    # The host's publishes, not the log in history: a forwarded run's path.
    "retry_published_first": {
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05),
    },
    "opaque_late_result_on_the_log": {
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05),
    },
    "continue_as_new_at_events": {"limits": RunLimits(continue_as_new_at_events=12)},
    "continued_answers": {
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05),
        "continuation": ContinuationOptions(after_max_tokens=1, after_stream_failure=1),
    },
    "deadline_keeps_shown_output": {
        "forwarding": ForwardingOptions(enabled=True, batch_interval_s=0.05),
    },
    "routed_run_falls_back": {
        "route": RouteConfig(
            candidates=[
                RouteCandidate(endpoint="scripted", model="scripted-model", attempts=2),
                RouteCandidate(endpoint="backup", model="backup-model"),
            ]
        ),
    },
    "long_run_upkeep": {
        "provider_profile": "mistral",
        "prices": {"scripted": Price(input=1.0, cached_input=0.5, output=2.0)},
        "limits": RunLimits(
            compaction=CompactionPolicy(
                max_chars=2500, keep_recent_turns=1, min_result_chars=100, activity="test.summarize"
            )
        ),
        "messages": [
            ChatMessage(role="user", content="earlier"),
            ChatMessage(
                role="assistant",
                tool_calls=[ToolCall(id="old-1", name="add", arguments='{"a": 1, "b": 2}')],
            ),
            ChatMessage(role="tool", content="stray", tool_call_id="nobody"),
        ],
    },
    "pure_tools_as_local_activities": {"local_pure_tools_s": 30.0},
    "activity_tool_calls": {"tools": ["add", "record_payment"]},
    "typed_output_corrected": {
        "output_type": {
            "name": "Sum",
            "json_schema": {
                "type": "object",
                "properties": {"sum": {"type": "integer"}},
                "required": ["sum"],
            },
        }
    },
    "progressive_tool_disclosure": {
        "tools": ["add"],
        "plugins": RunPlugins(on_demand=["files", "search"]),
    },
}


def _inherited() -> dict[str, Any]:
    """The messages and receipts a run resuming `replay-predecessor` starts from."""
    messages = [
        ChatMessage(role="user", content="earlier"),
        ChatMessage(
            role="assistant",
            tool_calls=[
                ToolCall(id="p1", name="note", arguments='{"text": "once"}'),
                ToolCall(id="p2", name="slow_note", arguments='{"text": "maybe"}'),
            ],
        ),
        ChatMessage(role="tool", content="noted 'once'", tool_call_id="p1"),
        ChatMessage(role="tool", content="Not run again: unknown outcome.", tool_call_id="p2"),
    ]
    then = datetime(2026, 1, 1, tzinfo=UTC)
    ledger = ReceiptLedger()
    done = receipt_key("default", "replay-predecessor", "note", {"text": "once"})
    ledger.claim(done, 1, then + timedelta(seconds=10), now=then)
    ledger.complete(done, 1, "noted 'once'")
    open_call = receipt_key("default", "replay-predecessor", "slow_note", {"text": "maybe"})
    ledger.claim(open_call, 1, then + timedelta(seconds=10), now=then)
    packed = PackedLedger.pack(ledger, messages)
    return {
        "messages": messages,
        "inherited": InheritedReceipts(scope="replay-predecessor", receipts=packed),
        "limits": RunLimits(continue_as_new_after_turns=1),
    }


RUN_UPDATES["resumed_with_inherited_receipts"] = _inherited()
# Scenarios in which a person resolves the ambiguous call, with this answer.
RESOLUTIONS = {
    "receipts_replay_and_ambiguous": Happened(result="it was noted"),
    "resumed_with_inherited_receipts": Happened(result="it was noted"),
}


async def _approve_send_interrupt(loop: Loop, handle: WorkflowHandle[Any, Any]) -> None:
    (waiting,) = await wait_for_approvals(handle)
    await handle.execute_update("send_message", UserMessage(content="also note the date"))
    await handle.execute_update("approve_call", ApprovalDecision.for_call(waiting))
    await eventually(lambda: len(loop.server.exchanges) == 2, "turn 2 streams")
    await handle.signal("interrupt", "stop here")


async def _approve_while_followed(loop: Loop, handle: WorkflowHandle[Any, Any]) -> None:
    (waiting,) = await wait_for_approvals(handle)
    await handle.execute_update("approve_call", ApprovalDecision.for_call(waiting))


async def _interrupt_once_shown(loop: Loop, handle: WorkflowHandle[Any, Any]) -> None:
    shown: list[OutputDelta] = []

    async def follow() -> None:
        async for delta in follow_output(loop.client, handle.id, poll_s=0.02):
            shown.append(delta)

    follower = asyncio.ensure_future(follow())
    await eventually(lambda: len(shown) >= 3, "part of the answer is shown")
    await handle.signal("interrupt", "I have read enough")
    await handle.result()
    await asyncio.wait_for(follower, 60)


async def _follow_to_the_end(loop: Loop, handle: WorkflowHandle[Any, Any]) -> None:
    """A person follows the answer as it streams (their polls keep the time-skipping
    server from jumping to the deadline before the stream starts)."""
    shown: list[OutputDelta] = []

    async def follow() -> None:
        async for delta in follow_output(loop.client, handle.id, poll_s=0.02):
            shown.append(delta)

    follower = asyncio.ensure_future(follow())
    await handle.result()
    await asyncio.wait_for(follower, 60)


async def _resolve_with_the_late_result(loop: Loop, handle: WorkflowHandle[Any, Any]) -> None:
    """Wait for the worker's late result of the timed-out call, then accept it."""
    late: list[AmbiguousCall] = []

    async def kept() -> bool:
        late[:] = await handle.query("ambiguous_receipts", result_type=list[AmbiguousCall])
        return bool(late) and late[0].late_result is not None

    deadline = asyncio.get_running_loop().time() + 60
    while not await kept():
        assert asyncio.get_running_loop().time() < deadline, "no late result came"
        await asyncio.sleep(0.05)
    result = late[0].late_result
    assert result is not None
    happened = Happened(result=result.outcome.content)
    update = ResolveReceipt(key=late[0].key, resolution=happened)
    await handle.execute_update("resolve_receipt", update)


# Scenarios in which a person steers the run while it goes.
DRIVERS: dict[str, Callable[[Loop, WorkflowHandle[Any, Any]], Awaitable[None]]] = {
    "people_in_the_loop": _approve_send_interrupt,
    "event_log_approval_and_replay": _approve_while_followed,
    "event_log_in_history": _approve_while_followed,
    "event_log_rides_apart": _approve_while_followed,
    "interrupted_with_output": _interrupt_once_shown,
    "deadline_keeps_shown_output": _follow_to_the_end,
    "opaque_timeout_late_result": _resolve_with_the_late_result,
    "opaque_late_result_on_the_log": _resolve_with_the_late_result,
}


def _fan_out_brain(turn: Turn) -> ScriptedResponse:
    """Four delegations in one batch (one a repeat, one over the budget), the first again
    next turn (replayed from its receipt), then an answer."""
    if turn.agent == "writer":
        return _answer(f"wrote {turn.task}")
    if turn.turn == 1:
        return _calls(
            delegate("writer", "part a", "d1"),
            delegate("writer", "part a", "d2"),
            delegate("writer", "part b", "d3"),
            delegate("writer", "part c", "d4"),
        )
    if turn.turn == 2:
        return _calls(delegate("writer", "part a", "d5"))
    return _answer("assembled")


def _child_budget_brain(turn: Turn) -> ScriptedResponse:
    """A child given what is left of its parent's token budget (it spends 800 of the
    900), then a delegation with nothing left (refused), and the parent's budget stop."""
    if turn.agent == "writer":
        return text_response(f"wrote {turn.task}", usage=(800, 0))
    if turn.turn == 1:
        return tool_calls_response(delegate("writer", "first"), usage=(100, 0))
    return tool_calls_response(delegate("writer", "second"), usage=(150, 0))


# Delegation scenarios: the root's history, recorded with chain measurements and a child
# run per admitted delegation (see delegation_harness).
CHAIN_SCENARIOS: dict[str, tuple[Brain, RunInput]] = {
    "delegation_fan_out_budget_and_replay": (
        _fan_out_brain,
        chain_input(
            "write it",
            to=["writer"],
            agents={"writer": profile("writer")},
            limits=[DepthLimit(max_depth=2), ChainBudgetLimit(max_runs=3)],
        ),
    ),
    # The same fan-out decided by the tenant's admission entity: the root
    # registers at its start and asks the entity for each child; a ceiling of 2 makes
    # the entity ask Temporal which counted runs closed.
    "delegation_admitted_by_the_tenant_entity": (
        _fan_out_brain,
        chain_input(
            "write it",
            to=["writer"],
            agents={"writer": profile("writer")},
            limits=[
                DepthLimit(max_depth=2),
                TenantCeilingLimit(max_active=2),
                ChainBudgetLimit(max_runs=3),
            ],
        ),
    ),
    "delegation_token_budget_covers_children": (
        _child_budget_brain,
        chain_input(
            "write it",
            to=["writer"],
            agents={"writer": profile("writer")},
            limits=[DepthLimit(max_depth=1)],
            token_budget=1000,
        ),
    ),
}


# Admission entities' histories (still open: an entity runs on), each recorded with the
# chain scenario that drives it.
ENTITY_SCENARIOS: dict[str, str] = {
    "chain_admission_entity": "delegation_admitted_by_the_tenant_entity",
}


async def record_chain(name: str, directory: Path = HISTORIES) -> Path:
    brain, run = CHAIN_SCENARIOS[name]
    async with running_chains(brain) as chains:
        handle = await chains.start(run, workflow_id=f"replay-{name}")
        await handle.result()
        history = await handle.fetch_history()
        entity = chains.client.get_workflow_handle(admission_workflow_id(run.tenant_id))
        for entity_name, scenario in ENTITY_SCENARIOS.items():
            if scenario == name:
                entity_history = await entity.fetch_history()
                (directory / f"{entity_name}.json").write_text(entity_history.to_json())
    path = directory / f"{name}.json"
    path.write_text(history.to_json())
    return path


async def record(
    name: str,
    script: list[ScriptedResponse],
    directory: Path = HISTORIES,
    *,
    blob_dir: Path | None = None,
    blob_threshold: int = DEFAULT_THRESHOLD_BYTES,
) -> Path:
    """Record a scenario's (first execution's) history; payloads of `blob_threshold` bytes
    or more go to `blob_dir`, which a replay of it then needs."""
    async with running_loop(
        script,
        [summarize],
        blob_threshold=blob_threshold,
        blob_dir=blob_dir,
        more_endpoints=MORE_ENDPOINTS.get(name),
        **ENDPOINT_CONFIG.get(name, {}),
    ) as loop:
        run = run_input(deadline_s=DEADLINES.get(name)).model_copy(update=RUN_UPDATES.get(name, {}))
        handle = await loop.start(run, workflow_id=f"replay-{name}")
        if name in RESOLUTIONS:
            open_calls: list[AmbiguousCall] = []
            while not open_calls:
                await asyncio.sleep(0.05)
                open_calls = await handle.query(
                    "ambiguous_receipts", result_type=list[AmbiguousCall]
                )
            update = ResolveReceipt(key=open_calls[0].key, resolution=RESOLUTIONS[name])
            await handle.execute_update("resolve_receipt", update)
        if name in DRIVERS:
            await DRIVERS[name](loop, handle)
        await handle.result()
        first = loop.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
        history = await first.fetch_history()
    path = directory / f"{name}.json"
    path.write_text(history.to_json())
    return path


async def _routed_turn_fallback(env: Routing) -> WorkflowHistory:
    """`a` refuses a parameter, then rate-limits, then fails twice; `b` answers."""
    env.a.unsupported_parameters.add("parallel_tool_calls")
    env.a.enqueue(
        error_response(429, "slow down", code="rate_limit_exceeded", retry_after=2),
        error_response(500, "boom", type="server_error"),
        error_response(500, "boom", type="server_error"),
    )
    env.b.enqueue(_answer("from b"))
    handle = await env.start(route(candidate("a"), "b"))
    await handle.result()
    return await handle.fetch_history()


async def _health_entity(env: Routing, *, handover: int) -> WorkflowHandle[Any, Any]:
    """The entity of endpoint `a`, continuing as new after `handover` messages."""
    return await env.env.client.start_workflow(
        EndpointHealthWorkflow.run,
        EndpointHealthInput(endpoint="a", continue_as_new_after=handover),
        id=health_workflow_id("a"),
        task_queue=env.task_queue,
    )


async def _first_execution(env: Routing, handle: WorkflowHandle[Any, Any]) -> WorkflowHistory:
    """The history of `handle`'s first execution, once it has handed over."""
    run_id = handle.first_execution_run_id
    while (await env.env.client.get_workflow_handle(handle.id).describe()).run_id == run_id:
        await asyncio.sleep(0.05)
    return await env.env.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()


async def _endpoint_health_cycle(env: Routing) -> WorkflowHistory:
    """Closed, open, half-open with one probe, closed; a parameter degraded and forgotten;
    then the hand-over to a new run."""
    handle = await _health_entity(env, handover=9)
    activities = env.health
    for detail in ("HTTP 500", "HTTP 502", "HTTP 503"):
        await activities.record_endpoint_outcome(
            EndpointOutcome(endpoint="a", outcome="failure", detail=detail)
        )
    await activities.admit_probe(ProbeRequest(endpoint="a"))  # open: refused
    await env.env.sleep(timedelta(seconds=31))
    await activities.admit_probe(ProbeRequest(endpoint="a"))  # half-open: the probe
    await activities.admit_probe(ProbeRequest(endpoint="a"))  # refused: probe out
    await activities.record_endpoint_outcome(EndpointOutcome(endpoint="a", outcome="success"))
    await activities.record_endpoint_outcome(
        EndpointOutcome(
            endpoint="a", outcome="degraded", parameter="stream_options", detail="unsupported"
        )
    )
    await handle.signal("forget_degradation", "stream_options")  # the ninth: hand over
    return await _first_execution(env, handle)


async def _endpoint_health_batched(env: Routing) -> WorkflowHistory:
    """Reports and probe requests arriving at once, sent in batches
    (`record_many`, `admit_probes`); a report sent twice counted once; the hand-over."""
    handle = await _health_entity(env, handover=20)
    activities = env.health
    await asyncio.gather(
        *(
            activities.record_endpoint_outcome(
                EndpointOutcome(endpoint="a", outcome="failure", detail=f"HTTP 503 (run {i})")
            )
            for i in range(8)
        )
    )
    twice = EndpointOutcome(endpoint="a", outcome="failure", detail="lost", report="run-x/7")
    await asyncio.gather(activities.records.call("a", twice), activities.records.call("a", twice))
    await env.env.sleep(timedelta(seconds=31))
    grants = await asyncio.gather(
        *(activities.admit_probe(ProbeRequest(endpoint="a")) for _ in range(5))
    )
    assert sum(grant.granted for grant in grants) == 1
    await asyncio.gather(
        *(
            activities.record_endpoint_outcome(EndpointOutcome(endpoint="a", outcome="success"))
            for _ in range(5)
        )
    )  # the twentieth message: hand over
    return await _first_execution(env, handle)


ROUTING_SCENARIOS: dict[str, Callable[[Routing], Awaitable[WorkflowHistory]]] = {
    "routed_turn_fallback": _routed_turn_fallback,
    "endpoint_health_cycle": _endpoint_health_cycle,
    "endpoint_health_batched": _endpoint_health_batched,
}


async def _admission_entity_batched() -> WorkflowHistory:
    """Admissions asked at once, sent in batches (`admit_many`), until the
    ledger is full (`ledger_bound`, its patch and the closed-runs activity), then the
    hand-over."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=time_skipping_server_path(),
    )
    async with env:
        task_queue = f"admission-{uuid.uuid4()}"
        admission = ChainAdmissionActivities(
            env.client, task_queue=task_queue, continue_as_new_after=12, max_ledger_bytes=1500
        )
        started = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

        def ask(number: int) -> AdmissionRequest:
            root = f"replay-root-{number}"
            return AdmissionRequest(
                tenant="replay-batched",
                run=RunEntry(workflow_id=root, chain_root=root, agent="a", started_at=started),
                position=ChainPosition(agent="a", depth=0, started_at=started),
                child=ChildAsk(
                    workflow_id=f"{root}/child",
                    agent="b",
                    limits=[ChainBudgetLimit(max_runs=3)],
                ),
            )

        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=[ChainAdmissionWorkflow],
            activities=list(admission.activities()),
        ):
            answers = await asyncio.gather(*(admission.admit(ask(n)) for n in range(12)))
            assert any(a.admission is not None and not a.admission.admitted for a in answers)
            entity = env.client.get_workflow_handle(admission_workflow_id("replay-batched"))
            run_id = (await entity.describe()).run_id
            first = env.client.get_workflow_handle(entity.id, run_id=run_id)
            for _ in range(100):
                if (await entity.describe()).run_id != run_id:
                    break
                await asyncio.sleep(0.05)
            return await first.fetch_history()


# Entity histories recorded on their own (not driven by a chain or a routed run).
BATCH_SCENARIOS: dict[str, Callable[[], Awaitable[WorkflowHistory]]] = {
    "chain_admission_entity_batched": _admission_entity_batched,
}


async def record_batch(name: str, directory: Path = HISTORIES) -> Path:
    history = await BATCH_SCENARIOS[name]()
    path = directory / f"{name}.json"
    path.write_text(history.to_json())
    return path


async def record_routing(name: str, directory: Path = HISTORIES) -> Path:
    async with routing() as env:
        history = await ROUTING_SCENARIOS[name](env)
    path = directory / f"{name}.json"
    path.write_text(history.to_json())
    return path


RELEASES = HISTORIES / "releases"


def freeze(version: str, *, source: Path = HISTORIES, releases: Path = RELEASES) -> Path:
    """Keep the current fixtures as release `version`'s histories, once.

    Run at a release; every later version replays the folder in CI. Refuses a version
    that is not the installed package's (a freeze of the wrong code) and a folder that
    exists (a release's histories are never re-recorded)."""
    installed = importlib.metadata.version("steadyloop")
    if version != installed:
        raise SystemExit(f"--freeze {version}: the installed steadyloop is {installed}")
    target = releases / version
    if target.exists():
        raise SystemExit(f"{target} exists: a release's histories are kept as recorded")
    target.mkdir(parents=True)
    for path in sorted(source.glob("*.json")):
        shutil.copyfile(path, target / path.name)
    return target


async def main(names: list[str]) -> None:
    """Record the named scenarios (all when none are named)."""
    HISTORIES.mkdir(exist_ok=True)
    for name in names or [*SCENARIOS, *CHAIN_SCENARIOS, *ROUTING_SCENARIOS, *BATCH_SCENARIOS]:
        name = ENTITY_SCENARIOS.get(name, name)
        if name in BATCH_SCENARIOS:
            print("recorded", await record_batch(name))
        elif name in CHAIN_SCENARIOS:
            print("recorded", await record_chain(name))
        elif name in ROUTING_SCENARIOS:
            print("recorded", await record_routing(name))
        else:
            print("recorded", await record(name, SCENARIOS[name]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--freeze"] and len(sys.argv) == 3:
        print("kept", freeze(sys.argv[2]))
    else:
        asyncio.run(main(sys.argv[1:]))
