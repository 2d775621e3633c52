"""A run is one trace: its turns, their attempts (a retried one with its failure kind and
the route's decision), its tool calls with their receipt decisions (executed, replayed),
and a child run under the call that started it; metrics counted once. Runs a chain on
the time-skipping server with the scripted provider, spans into memory."""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import delegation_harness
import loop_harness
import pytest
from delegation_harness import Turn, chain_input, delegate, profile, running_chains
from loop_harness import run_input, running_loop
from opentelemetry.sdk.trace import ReadableSpan
from telemetry_fixtures import Recorded, recorded
from temporalio.worker import Worker

from steadyloop._mcp.config import McpServerConfig
from steadyloop._mcp.serving import serving_mcp
from steadyloop._run.models import RunInput
from steadyloop.telemetry import _attributes as a
from steadyloop.telemetry import worker_plugins
from steadyloop.testing import (
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
from steadyloop.tools._registry import ToolRegistry

pytestmark = pytest.mark.slow

SECRET_NOTE = "the launch code is 0000"
PROMPT = "plan the offsite for team orchid"


@pytest.fixture
def telemetry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    for installed in recorded():
        # The harness builds its worker itself; give it what `build_worker` gives every
        # worker (`steadyloop._worker.process`): the telemetry plugins.
        monkeypatch.setattr(
            delegation_harness, "Worker", functools.partial(Worker, plugins=worker_plugins())
        )
        yield installed


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    (found,) = [s for s in spans if s.context.span_id == span.parent.span_id]
    return found


def attr(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(key)


async def run_chain(telemetry: Recorded) -> tuple[list[ReadableSpan], str]:
    asked: Counter[tuple[str, int]] = Counter()

    def brain(turn: Turn) -> ScriptedResponse:
        asked[(turn.agent, turn.turn)] += 1
        if turn.agent == "helper":
            return text_response("the venue is booked", usage=(7, 0))
        if turn.turn == 1 and asked[("main", 1)] == 1:
            return error_response(503, "overloaded", type="server_error")  # retried
        if turn.turn == 1:
            return tool_calls_response(
                ScriptedCall("note", {"text": SECRET_NOTE}, id="n1"),
                delegate("helper", "book a venue", "d1"),
                usage=(11, 0),
            )
        if turn.turn == 2:  # the same note again: its receipt replays it
            return tool_calls_response(
                ScriptedCall("note", {"text": SECRET_NOTE}, id="n2"), usage=(13, 0)
            )
        return text_response("done", usage=(17, 0))

    run = chain_input(
        PROMPT,
        to=["helper"],
        agents={"helper": profile("helper")},
        limits=[],
    )
    async with running_chains(brain) as chains:
        handle = await chains.start(run)
        result = await handle.result()
        effects = list(chains.effects.notes)
    assert result.stop_reason == "final_answer", result.detail
    assert effects == [SECRET_NOTE]  # run once, replayed once
    return telemetry.finished(), handle.id


async def test_a_run_is_one_trace_of_turns_attempts_tools_and_child_runs(
    telemetry: Recorded,
) -> None:
    spans, root_id = await run_chain(telemetry)
    assert len({s.context.trace_id for s in spans}) == 1, "every span in one trace"

    runs = by_name(spans, a.RUN_SPAN)
    (root,) = [s for s in runs if attr(s, a.WORKFLOW_ID) == root_id]
    (child,) = [s for s in runs if s is not root]
    assert root.parent is None
    assert attr(root, a.RUN_OUTCOME) == "final_answer"

    turns = [s for s in by_name(spans, a.TURN_SPAN) if parent_of(s, spans) is root]
    assert sorted(attr(t, a.TURN) for t in turns) == [1, 2, 3]
    first = next(t for t in turns if attr(t, a.TURN) == 1)
    attempts = sorted(
        (s for s in spans if s.parent and s.parent.span_id == first.context.span_id),
        key=lambda s: attr(s, a.ATTEMPT_SEQUENCE),
    )
    assert [s.name for s in attempts] == ["chat scripted-model", "chat scripted-model"]
    failed, answered = attempts
    assert attr(failed, a.ATTEMPT_OUTCOME) == "failed"
    assert attr(failed, a.ERROR_TYPE) == "http_status"
    assert attr(failed, a.ROUTE_ACTION) == "retry"
    assert attr(answered, a.ATTEMPT_OUTCOME) == "ok"
    assert attr(answered, a.FINISH_REASONS) == ("tool_calls",)
    assert attr(answered, a.INPUT_TOKENS) == 11
    assert attr(first, "steadyloop.turn.attempts") == 2
    assert attr(first, a.INPUT_TOKENS) == 11
    # The model activity's span, on the worker that streamed it, under each attempt.
    for attempt in attempts:
        (stream,) = [
            s
            for s in by_name(spans, "stream scripted-model")
            if s.parent and s.parent.span_id == attempt.context.span_id
        ]
        assert attr(stream, a.REQUEST_MODEL) == "scripted-model"
        assert attr(stream, a.PROVIDER) == delegation_harness.ENDPOINT  # its name, not 127.0.0.1
    assert attr(failed_stream(spans, failed), a.ERROR_TYPE) == "http_status"

    tools = [s for s in spans if attr(s, a.OPERATION) == "execute_tool"]
    notes = sorted(
        (s for s in tools if attr(s, a.TOOL_NAME) == "note"), key=lambda s: s.start_time or 0
    )
    assert [attr(s, a.RECEIPT_DECISION) for s in notes] == ["executed", "replayed"]
    assert all(parent_of(s, spans) is root for s in notes)
    assert [attr(s, a.MCP_SERVER) for s in tools] == [None] * len(tools)  # Python tools
    (delegated,) = [s for s in tools if attr(s, a.TOOL_NAME) == "delegate"]
    assert attr(delegated, a.RECEIPT_DECISION) == "executed"
    # The child run hangs under the call that started it, in the same trace.
    assert parent_of(child, spans) is delegated
    assert attr(child, a.PARENT_WORKFLOW_ID) == root_id

    # Metrics: one retry (by its reason), one replay, tokens per call, each once.
    retries = telemetry.metric_points(a.METRIC_RETRIES)
    assert [(p[a.RETRY_REASON], p[a.ROUTE_ACTION], v) for p, v in retries] == [
        ("http_status", "retry", 1.0)
    ]
    assert [v for _, v in telemetry.metric_points(a.METRIC_REPLAYS)] == [1.0]
    decisions = {
        (p[a.RECEIPT_DECISION], p[a.TOOL_NAME]): v
        for p, v in telemetry.metric_points(a.METRIC_RECEIPTS)
    }
    assert decisions == {
        ("executed", "note"): 1.0,
        ("replayed", "note"): 1.0,
        ("executed", "delegate"): 1.0,
    }
    token_points = telemetry.metric_points(a.METRIC_TOKENS)
    assert {p[a.TOKEN_TYPE] for p, _ in token_points} == {"input", "output"}


def failed_stream(spans: list[ReadableSpan], attempt: ReadableSpan) -> ReadableSpan:
    (stream,) = [
        s for s in spans if s.parent is not None and s.parent.span_id == attempt.context.span_id
    ]
    return stream


async def test_spans_carry_no_prompt_or_tool_arguments_by_default(telemetry: Recorded) -> None:
    spans, _ = await run_chain(telemetry)
    dumped = "\n".join(s.to_json() for s in spans)
    for content in (SECRET_NOTE, PROMPT, "book a venue", "the venue is booked", "You are agent"):
        assert content not in dumped


async def test_a_run_replayed_on_every_task_is_still_one_whole_trace(
    telemetry: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No workflow cache: every workflow task replays the history from the start, as on a
    # worker that never ran the run before. Spans restarted while replaying get the ids
    # the first execution gave them, so every parent named is a span that was exported,
    # and nothing is exported twice. (No failed attempt here: the time-skipping server
    # does not answer the breaker's update in time with no cache, telemetry or not.)
    # On a real dev server: with no cache, the time-skipping server let a workflow task
    # whose local activity signals another workflow time out, and a task run twice
    # exported twice. This run does not forward, so its event log is in its own history
    # and no local activity of it signals anything.
    monkeypatch.setattr(
        loop_harness,
        "Worker",
        functools.partial(Worker, plugins=worker_plugins(), max_cached_workflows=0),
    )
    monkeypatch.setattr(loop_harness, "start_environment", loop_harness.dev_server_environment)
    script = [
        tool_calls_response(ScriptedCall("note", {"text": SECRET_NOTE}, id="c1")),
        tool_calls_response(ScriptedCall("note", {"text": SECRET_NOTE}, id="c2")),
        sse_response([*text_chunks("done"), finish_chunk()]),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
    assert result.stop_reason == "final_answer"
    spans = telemetry.finished()
    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids)), "a span exported twice"
    known = set(ids)
    orphans = [s.name for s in spans if s.parent is not None and s.parent.span_id not in known]
    assert orphans == []
    assert len({s.context.trace_id for s in spans}) == 1
    assert len(by_name(spans, a.RUN_SPAN)) == 1
    assert len(by_name(spans, a.TURN_SPAN)) == 3
    notes = sorted(by_name(spans, "execute_tool note"), key=lambda s: s.start_time or 0)
    assert [attr(s, a.RECEIPT_DECISION) for s in notes] == ["executed", "replayed"]


async def test_continue_as_new_keeps_the_run_in_one_trace(
    telemetry: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_harness, "Worker", functools.partial(Worker, plugins=worker_plugins()))
    script = [
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 1}, id="c1")),
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 2}, id="c2")),
        sse_response([*text_chunks("3"), finish_chunk()]),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input(continue_as_new_after_turns=1))
        result = await handle.result()
    assert result.final_answer == "3"
    spans = telemetry.finished()
    runs = sorted(by_name(spans, a.RUN_SPAN), key=lambda s: s.start_time or 0)
    assert len(runs) == 3  # one execution per turn
    assert [attr(s, a.RUN_OUTCOME) for s in runs] == [
        "continued_as_new",
        "continued_as_new",
        "final_answer",
    ]
    assert len({s.context.trace_id for s in spans}) == 1
    # Each execution's span is a child of the one it continued.
    assert runs[0].parent is None
    assert parent_of(runs[1], spans) is runs[0] and parent_of(runs[2], spans) is runs[1]
    assert len({attr(s, a.RUN_ID) for s in runs}) == 3


async def test_a_breaker_opening_is_counted_once_by_endpoint(
    telemetry: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steadyloop._routing.endpoint_health import EndpointOutcome

    monkeypatch.setattr(loop_harness, "Worker", functools.partial(Worker, plugins=worker_plugins()))
    async with running_loop([]) as loop:
        assert loop.health is not None
        for _ in range(7):  # five failures within a minute open it; two more keep it open
            await loop.health.record_endpoint_outcome(
                EndpointOutcome(endpoint="scripted", outcome="failure", detail="HTTP 503")
            )
    points = telemetry.metric_points(a.METRIC_BREAKER_OPENINGS)
    assert [(p[a.ENDPOINT], v) for p, v in points] == [("scripted", 1.0)]


async def test_a_lost_opaque_call_shows_every_receipt_decision_it_went_through(
    telemetry: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_tool_loop_receipts import wait_for_ambiguous

    from steadyloop._receipts.ledger import Happened
    from steadyloop._run.models import ResolveReceipt

    monkeypatch.setattr(loop_harness, "Worker", functools.partial(Worker, plugins=worker_plugins()))
    script = [
        tool_calls_response(ScriptedCall("slow_note", {"text": "pay invoice"}, id="s1")),
        sse_response([*text_chunks("ok"), finish_chunk()]),
    ]
    async with running_loop(script) as loop:
        handle = await loop.start(run_input())
        (suspended,) = await wait_for_ambiguous(handle)
        update = ResolveReceipt(key=suspended.key, resolution=Happened(result="paid"))
        await handle.execute_update("resolve_receipt", update)
        result = await handle.result()
    assert result.stop_reason == "final_answer"
    (span,) = by_name(telemetry.finished(), "execute_tool slow_note")
    # Run, lost (its lease held it: wait), ambiguous until a person said it happened,
    # then answered with what the person said.
    assert attr(span, a.RECEIPT_DECISIONS) == ("executed", "waited", "ambiguous", "replayed")
    assert attr(span, a.RECEIPT_DECISION) == "replayed"
    assert attr(span, a.TOOL_EFFECT) == "opaque"
    # The attempt that ran past its timeout is on the trace, though its own activity
    # span may never be exported (a worker killed with SIGKILL exports nothing).
    (lost,) = [e for e in span.events if e.name == a.TOOL_ATTEMPT_LOST_EVENT]
    assert lost.attributes is not None
    assert lost.attributes[a.TOOL_ATTEMPT] == 1
    assert lost.attributes[a.TOOL_LOST_KIND] == "start_to_close"
    assert "gave no answer within its 0.5 s timeout" in str(lost.attributes[a.TOOL_LOST_REASON])
    assert attr(span, a.TOOL_ATTEMPTS_LOST) == 1


async def test_an_mcp_tools_span_names_the_server_it_is_served_from(
    telemetry: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real MCP server (`mcp-server-time`, from the dev extra), configured as `clock`."""
    server = McpServerConfig(
        name="clock",
        command=str(Path(sys.executable).parent / "mcp-server-time"),
        args=["--local-timezone", "UTC"],
    )
    monkeypatch.setattr(loop_harness, "Worker", functools.partial(Worker, plugins=worker_plugins()))
    script = [
        tool_calls_response(ScriptedCall("get_current_time", {"timezone": "UTC"}, id="t1")),
        sse_response([*text_chunks("now"), finish_chunk()]),
    ]
    async with serving_mcp(ToolRegistry(), [server]) as tools:
        monkeypatch.setattr(loop_harness, "build_tools", lambda effects: tools)
        async with running_loop(script) as loop:
            result = await loop.run(
                RunInput(
                    endpoint=loop_harness.ENDPOINT,
                    model=loop_harness.MODEL,
                    prompt="what time is it?",
                    tools=["get_current_time"],
                )
            )
    assert result.final_answer == "now"
    (span,) = by_name(telemetry.finished(), "execute_tool get_current_time")
    assert attr(span, a.MCP_SERVER) == "clock"
    assert attr(span, a.MCP_METHOD) == "tools/call"
    assert attr(span, a.TOOL_STATUS) == "ok"


async def test_a_turn_of_calls_ended_with_stop_is_traced_as_tool_calls(
    telemetry: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama's chat stream ends a turn of tool calls with `finish_reason: stop`
    (BerriAI/litellm#34718): the calls run, so every span that shows the turn's finish
    reason (the turn, its attempt, the model activity's stream) says `tool_calls`."""
    monkeypatch.setattr(loop_harness, "Worker", functools.partial(Worker, plugins=worker_plugins()))
    calls = tool_call_chunks([ScriptedCall("add", {"a": 1, "b": 2}, id="c1")], index="zero")
    script = [
        sse_response([*calls, finish_chunk("stop")]),
        sse_response([*text_chunks("3"), finish_chunk("stop")]),
    ]
    async with running_loop(script) as loop:
        result = await loop.run(run_input())
    assert result.final_answer == "3"
    spans = telemetry.finished()
    turns = sorted(by_name(spans, a.TURN_SPAN), key=lambda s: attr(s, a.TURN))
    labels = []
    for turn in turns:
        attempts = [s for s in spans if s.parent and s.parent.span_id == turn.context.span_id]
        streams = [
            s for s in spans for t in attempts if s.parent and s.parent.span_id == t.context.span_id
        ]
        labels.append({attr(s, a.FINISH_REASONS) for s in [turn, *attempts, *streams]} - {None})
    assert labels == [{("tool_calls",)}, {("stop",)}]
