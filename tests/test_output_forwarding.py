"""Forwarding in the stream reader, over real HTTP: what is published, and what it makes of a
failure. These tests use `stream_turn` with a list as the sink (no Temporal): the host and
the workflow's use of `produced_output` are tested in `test_output_forwarding_workflow.py`.

The property that decides the outcome downstream is `produced_output`: once anything a
person will read was forwarded, a failure of that attempt must be non-retryable and
carry the text that was shown; before that, a failure stays retryable.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from steadyloop._activities.model_stream import (
    StreamProgress,
    failure_to_application_error,
    stream_turn,
)
from steadyloop._chat import ChatMessage
from steadyloop._output.forwarding import (
    ForwardedOutput,
    ForwardingOptions,
    ForwardTarget,
    OutputDelta,
)
from steadyloop._routing.disposition import AttemptContext, Disposition, failure_disposition
from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop.testing import (
    Pause,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    finish_chunk,
    reasoning_chunks,
    sse_response,
    text_chunks,
    tool_calls_response,
)


def decided(failure: StreamFailure) -> Disposition:
    """What the route table does with the failure: the one decider of a model attempt."""
    return failure_disposition(failure, AttemptContext())


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


class Sink:
    """Collects what the reader forwards, with the `first` flag it was given."""

    def __init__(self) -> None:
        self.deltas: list[OutputDelta] = []
        self.firsts: list[int] = []

    def __call__(self, delta: OutputDelta, first: bool) -> None:
        if first:
            self.firsts.append(len(self.deltas))
        self.deltas.append(delta)

    def text(self, kind: str = "text") -> str:
        return "".join(d.text for d in self.deltas if d.kind == kind)


def forwarding_request(*, reasoning_is_output: bool = False, **fields: Any) -> CompletionRequest:
    return CompletionRequest(
        endpoint="scripted",
        model="scripted-model",
        messages=[ChatMessage(role="user", content="Hello?")],
        forward=ForwardTarget(
            stream_id="run-1/output", turn=3, attempt=2, reasoning_is_output=reasoning_is_output
        ),
        **fields,
    )


async def read(
    server: ScriptedServer,
    response: ScriptedResponse,
    sink: Sink | None,
    request: CompletionRequest | None = None,
    progress: list[StreamProgress] | None = None,
    **budgets: Any,
) -> AssembledTurn:
    server.enqueue(response)
    async with httpx.AsyncClient() as client:
        return await stream_turn(
            client,
            server.endpoint("scripted", **budgets),
            request or forwarding_request(),
            api_key=None,
            sink=sink,
            on_progress=None if progress is None else progress.append,
            progress_interval_s=3600.0,
        )


async def test_answer_text_is_forwarded_as_it_arrives_and_marks_the_turn(
    server: ScriptedServer,
) -> None:
    sink = Sink()
    turn = await read(
        server,
        sse_response(
            [*text_chunks("Hello "), Pause(0.05), *text_chunks("there", role=False), finish_chunk()]
        ),
        sink,
    )
    assert sink.text() == turn.text == "Hello there"
    assert len(sink.deltas) >= 2  # the pause split the answer into two reads
    assert sink.firsts == [0]  # exactly one piece is the first a person sees
    assert {(d.turn, d.attempt) for d in sink.deltas} == {(3, 2)}
    assert turn.stats.produced_output and turn.stats.forwarded_chars == len("Hello there")


async def test_without_a_sink_or_a_target_nothing_is_forwarded(server: ScriptedServer) -> None:
    turn = await read(server, sse_response([*text_chunks("Hi"), finish_chunk()]), None)
    assert turn.text == "Hi" and not turn.stats.produced_output

    sink = Sink()
    plain = CompletionRequest(
        endpoint="scripted", model="m", messages=[ChatMessage(role="user", content="x")]
    )
    turn = await read(server, sse_response([*text_chunks("Hi"), finish_chunk()]), sink, plain)
    assert sink.deltas == [] and not turn.stats.produced_output


async def test_structured_output_is_never_forwarded(server: ScriptedServer) -> None:
    """JSON output is not forwarded (half a document helps no reader), so it stays
    retryable: a malformed document is a completion defect the workflow may retry."""
    sink = Sink()
    request = forwarding_request(response_format={"type": "json_object"})
    turn = await read(
        server, sse_response([*text_chunks(['{"a": ', "1}"]), finish_chunk()]), sink, request
    )
    assert turn.text == '{"a": 1}'
    assert sink.deltas == [] and not turn.stats.produced_output


async def test_a_json_stream_that_fails_midway_stays_retryable(server: ScriptedServer) -> None:
    request = forwarding_request(response_format={"type": "json_schema", "json_schema": {}})
    with pytest.raises(StreamFailed) as info:
        await read(
            server,
            sse_response([*text_chunks(['{"a": ']), Pause(1.0)], done=False),
            Sink(),
            request,
            inter_chunk_s=0.2,
        )
    assert not info.value.failure.produced_output
    assert decided(info.value.failure).action == "retry"


async def test_reasoning_is_forwarded_but_is_not_output_by_default(server: ScriptedServer) -> None:
    sink = Sink()
    turn = await read(
        server,
        sse_response([*reasoning_chunks("thinking hard"), Pause(0.05), finish_chunk()]),
        sink,
    )
    assert sink.text("reasoning") == "thinking hard"
    assert sink.firsts == []
    assert not turn.stats.produced_output


async def test_reasoning_counts_as_output_when_the_run_says_so(server: ScriptedServer) -> None:
    sink = Sink()
    turn = await read(
        server,
        sse_response([*reasoning_chunks("thinking"), finish_chunk()]),
        sink,
        forwarding_request(reasoning_is_output=True),
    )
    assert sink.firsts == [0] and turn.stats.produced_output


async def test_tool_call_arguments_are_never_forwarded(server: ScriptedServer) -> None:
    sink = Sink()
    turn = await read(
        server,
        tool_calls_response(ScriptedCall("search", {"q": "x"})),
        sink,
    )
    assert turn.tool_calls and sink.deltas == [] and not turn.stats.produced_output


async def test_the_first_output_is_heartbeated_at_once(server: ScriptedServer) -> None:
    """Progress is coalesced (here: one report an hour), but the first forwarded piece is
    reported immediately, so a worker that dies next still leaves the flag behind."""
    progress: list[StreamProgress] = []
    await read(
        server,
        sse_response(
            [*reasoning_chunks("hmm"), Pause(0.05), *text_chunks("Yes", role=False), finish_chunk()]
        ),
        Sink(),
        progress=progress,
    )
    # The reasoning before it (not output here) is not reported: the stream is younger
    # than the interval; the first piece shown is, at once.
    assert [p.produced_output for p in progress] == [True]
    assert progress[-1].forwarded_chars == len("Yes")


async def test_a_stall_after_output_was_shown_is_not_retryable_and_keeps_the_text(
    server: ScriptedServer,
) -> None:
    sink = Sink()
    with pytest.raises(StreamFailed) as info:
        await read(
            server,
            sse_response([*text_chunks("The answer is"), Pause(2.0)], done=False),
            sink,
            inter_chunk_s=0.2,
        )
    failure = info.value.failure
    assert failure.kind == "stall" and failure.produced_output
    assert (decided(failure).action, decided(failure).rule) == ("stop", "produced_output")
    [exchange] = server.exchanges
    await asyncio.wait_for(exchange.ended.wait(), 2.0)
    assert exchange.client_disconnected  # the stalled connection was released
    assert info.value.shown_text == sink.text() == "The answer is"
    error = failure_to_application_error(failure, shown=ForwardedOutput(text=info.value.shown_text))
    assert error.non_retryable and error.next_retry_delay is None
    assert error.details[0]["produced_output"] is True
    assert ForwardedOutput.model_validate(error.details[1]).text == "The answer is"


async def test_a_stall_before_any_output_stays_retryable(server: ScriptedServer) -> None:
    with pytest.raises(StreamFailed) as info:
        await read(
            server,
            sse_response([Pause(2.0), *text_chunks("late")], done=False),
            Sink(),
            first_token_s=0.2,
        )
    failure = info.value.failure
    assert failure.kind == "stall" and not failure.produced_output
    assert decided(failure).rule == "stall_before_first_token"  # not barred by output
    assert info.value.shown_text == ""


async def test_shown_reasoning_only_counts_when_reasoning_is_output(
    server: ScriptedServer,
) -> None:
    script = sse_response([*reasoning_chunks("thinking"), Pause(2.0)], done=False)
    with pytest.raises(StreamFailed) as quiet:
        await read(server, script, Sink(), reasoning_gap_s=0.2)
    assert not quiet.value.failure.produced_output and quiet.value.shown_reasoning == ""

    with pytest.raises(StreamFailed) as loud:
        await read(
            server,
            script,
            Sink(),
            forwarding_request(reasoning_is_output=True),
            reasoning_gap_s=0.2,
        )
    assert loud.value.failure.produced_output
    assert loud.value.shown_reasoning == "thinking"


async def test_a_disconnect_after_output_is_not_retryable(server: ScriptedServer) -> None:
    sink = Sink()
    with pytest.raises(StreamFailed) as info:
        await read(
            server,
            sse_response([*text_chunks("Partial answ")], done=False, ending="reset"),
            sink,
        )
    assert info.value.failure.kind in ("network", "truncated_stream")
    assert info.value.failure.produced_output
    assert decided(info.value.failure).rule == "produced_output"
    assert info.value.shown_text == "Partial answ"


async def test_each_call_repaired_for_an_empty_identity_is_logged_once(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    from steadyloop.testing import tool_call_delta, tool_calls_chunk

    calls = [
        tool_calls_chunk([tool_call_delta(index=0, id="", name="add", arguments='{"a": 1}')]),
        tool_calls_chunk([tool_call_delta(index=1, id="call_ok", name="add", arguments="{}")]),
    ]
    with caplog.at_level("WARNING", logger="steadyloop._activities.model_stream"):
        turn = await read(server, sse_response([*calls, finish_chunk("tool_calls")]), None)
    repaired = [r.getMessage() for r in caplog.records]
    blank = turn.tool_calls[0]
    assert blank.id.strip() and blank.id != "call_ok"
    assert repaired == [
        f"tool call {blank.id} repaired: empty id (absent, blank or repeated on the wire; "
        f"minted {blank.id!r})"
    ]


def test_a_call_with_no_name_is_logged_naming_the_name(caplog: pytest.LogCaptureFixture) -> None:
    from steadyloop._activities.model_stream import _log_repaired_calls
    from steadyloop._chat import ToolCall

    turn = AssembledTurn(tool_calls=[ToolCall(id="call_x", name=" ", arguments="{}")])
    with caplog.at_level("WARNING", logger="steadyloop._activities.model_stream"):
        _log_repaired_calls(turn, lambda _call_id: False)  # the wire sent this id
    assert [r.getMessage() for r in caplog.records] == ["tool call call_x repaired: empty name"]


@pytest.mark.parametrize("value", [0, 0.5, -1, float("nan"), float("inf"), 1e300, 7 * 86_400 + 1])
def test_a_host_idle_close_out_of_bounds_is_refused_naming_the_field(value: float) -> None:
    with pytest.raises(ValidationError, match="host_idle_close_s"):
        ForwardingOptions(enabled=True, host_idle_close_s=value)


def test_a_host_idle_close_in_bounds_is_kept_and_an_hour_by_default() -> None:
    assert ForwardingOptions().host_idle_close_s == 3_600.0
    assert ForwardingOptions(host_idle_close_s=1).host_idle_close_s == 1.0
    assert ForwardingOptions(host_idle_close_s=7 * 86_400).host_idle_close_s == 7 * 86_400
