"""Hostile values on the model activity's side of the stream.

What decides the outcome downstream: the turn the model activity returns, and every
piece it forwards, serialize with the pydantic payload converter whatever the model sent
(lone surrogates, split pairs, NUL, invalid UTF-8); a split emoji is shown whole, once;
a call whose name arrives after its arguments runs; a server that only pings after its
first token trips the inter-chunk stall.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_harness import run_input, running_loop
from temporalio.contrib.pydantic import pydantic_data_converter
from test_output_forwarding_workflow import forwarding_run, run_and_watch

from steadyloop._activities.model_stream import (
    _TurnReader,
    failure_to_application_error,
    stream_turn,
)
from steadyloop._activities.output_publisher import OutputPublisher
from steadyloop._chat import ChatMessage
from steadyloop._output.forwarding import ForwardedOutput, ForwardTarget, OutputDelta
from steadyloop._routing.taxonomy import StreamFailed
from steadyloop._stream.anthropic_assembly import AnthropicAssembler
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.responses_assembly import ResponsesAssembler
from steadyloop._stream.turn_assembly import TurnAssembler
from steadyloop.testing import (
    Chunk,
    Pause,
    ScriptedResponse,
    ScriptedServer,
    chunk,
    finish_chunk,
    role_chunk,
    sse_event,
    sse_response,
)


def split_emoji_answer() -> ScriptedResponse:
    """Item 2's repro: "smile \\ud83d", a pause, then "\\ude00 done", as JSON escapes."""
    return sse_response(
        [
            role_chunk(),
            chunk({"content": "smile \ud83d"}),
            Pause(0.3),
            chunk({"content": "\ude00 done"}),
            finish_chunk(),
        ]
    )


async def test_a_split_emoji_is_forwarded_whole_and_the_run_completes() -> None:
    async with running_loop([split_emoji_answer()]) as loop:
        watched = await asyncio.wait_for(run_and_watch(loop, forwarding_run()), 60)
        requests = len(loop.server.requests)

    assert watched.result.stop_reason == "final_answer"
    assert watched.result.final_answer == "smile \U0001f600 done"
    assert watched.text() == "smile \U0001f600 done"  # whole characters only, each once
    assert requests == 1


async def test_a_split_emoji_without_forwarding_is_the_same_answer() -> None:
    async with running_loop([split_emoji_answer()]) as loop:
        handle = await loop.start(run_input("say hello"))  # forwarding off: the default
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.stop_reason == "final_answer"
    assert result.final_answer == "smile \U0001f600 done"


# -- the model activity's reader, over real HTTP (no Temporal) ----------------------------

CONVERTER = pydantic_data_converter.payload_converter


def serialized(*values: object) -> list[object]:
    """What Temporal would carry: each value through the pydantic payload converter and
    back (raises exactly where a workflow or an activity would fail)."""
    payloads = CONVERTER.to_payloads(list(values))
    return [
        CONVERTER.from_payloads([payload], [type(value)])[0]
        for payload, value in zip(payloads, values, strict=True)
    ]


class Sink:
    """Collects what the reader forwards; each piece must serialize as it is published."""

    def __init__(self) -> None:
        self.deltas: list[OutputDelta] = []

    def __call__(self, delta: OutputDelta, first: bool) -> None:
        serialized(delta)
        self.deltas.append(delta)

    def text(self, kind: str = "text") -> str:
        return "".join(d.text for d in self.deltas if d.kind == kind)


def request(*, forward: bool) -> CompletionRequest:
    return CompletionRequest(
        endpoint="scripted",
        model="scripted-model",
        messages=[ChatMessage(role="user", content="Hello?")],
        forward=(
            ForwardTarget(stream_id="run-1/output", turn=1, attempt=1, reasoning_is_output=True)
            if forward
            else None
        ),
    )


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


async def read(
    server: ScriptedServer, response: ScriptedResponse, sink: Sink | None, **budgets: Any
) -> AssembledTurn:
    server.enqueue(response)
    async with httpx.AsyncClient() as client:
        return await stream_turn(
            client,
            server.endpoint("scripted", **budgets),
            request(forward=sink is not None),
            api_key=None,
            sink=sink,
        )


def raw_chunk(delta_json: bytes) -> bytes:
    """One SSE event whose delta is given as raw JSON bytes (invalid UTF-8 included)."""
    return (
        b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":'
        b'[{"index":0,"delta":' + delta_json + b',"finish_reason":null}]}\n\n'
    )


# Each stream, and the text and reasoning the turn must hold (forwarded the same way).
HOSTILE_TEXT: dict[str, tuple[list[Any], str, str]] = {
    "pair split across reads": (
        [chunk({"content": "smile \ud83d"}), Pause(0.05), chunk({"content": "\ude00 done"})],
        "smile \U0001f600 done",
        "",
    ),
    "pair split across chunks of one read": (
        [chunk({"content": "a\ud83d"}), chunk({"content": "\ude00b"})],
        "a\U0001f600b",
        "",
    ),
    "reasoning pair split across reads": (
        [
            chunk({"reasoning_content": "think \ud83e"}),
            Pause(0.05),
            chunk({"reasoning_content": "\udd14 ok"}),
            chunk({"content": "answer"}),
        ],
        "answer",
        "think \U0001f914 ok",
    ),
    "high surrogate left at the end": (
        [chunk({"content": "cut \ud83d"})],
        "cut \ufffd",
        "",
    ),
    "high surrogate then a pause then more text": (
        [chunk({"content": "x\ud83d"}), Pause(0.05), chunk({"content": "y"})],
        "x\ufffdy",
        "",
    ),
    "lone low surrogate": ([chunk({"content": "\ude00 alone"})], "\ufffd alone", ""),
    "two high surrogates": (
        [chunk({"content": "\ud83d\ud83d"}), chunk({"content": "\ude00"})],
        "\ufffd\U0001f600",
        "",
    ),
    "NUL and control characters": ([chunk({"content": "a\x00b\x1bc"})], "a\x00b\x1bc", ""),
    "invalid UTF-8 on the wire": (
        [raw_chunk(b'{"content":"caf\xe9 \xff\xfe ok"}')],
        "caf\ufffd \ufffd\ufffd ok",
        "",
    ),
}


@pytest.mark.parametrize("forward", [True, False], ids=["forwarding", "not-forwarding"])
@pytest.mark.parametrize("case", list(HOSTILE_TEXT))
async def test_the_turn_and_every_forwarded_piece_serialize_and_agree(
    server: ScriptedServer, case: str, forward: bool
) -> None:
    parts, text, reasoning = HOSTILE_TEXT[case]
    sink = Sink() if forward else None
    turn = await read(server, sse_response([role_chunk(), *parts, finish_chunk()]), sink)
    [back] = serialized(turn)
    assert back == turn
    assert (turn.text, turn.reasoning) == (text, reasoning)
    if sink is not None:
        # Whole characters, each shown once: what a person read is the turn's text.
        assert sink.text() == text and sink.text("reasoning") == reasoning
        assert turn.stats.forwarded_chars == len(text) + len(reasoning)


async def test_a_held_half_character_is_not_shown_when_the_stream_is_cut(
    server: ScriptedServer,
) -> None:
    sink = Sink()
    cut = sse_response([role_chunk(), chunk({"content": "half \ud83d"})], done=False)
    with pytest.raises(StreamFailed) as caught:
        await read(server, cut, sink)
    failure = caught.value
    assert failure.failure.kind == "truncated_stream" and failure.failure.produced_output
    assert failure.shown_text == "half " == sink.text()
    error = failure_to_application_error(
        failure.failure, shown=ForwardedOutput(text=failure.shown_text)
    )
    serialized(*error.details)


async def test_a_stall_after_half_a_character_keeps_only_whole_text_shown(
    server: ScriptedServer,
) -> None:
    sink = Sink()
    stalls = sse_response([role_chunk(), chunk({"content": "so \ud83d"}), Pause(2.0)], done=False)
    with pytest.raises(StreamFailed) as caught:
        await read(server, stalls, sink, inter_chunk_s=0.2)
    assert caught.value.failure.kind == "stall"
    assert caught.value.shown_text == "so " == sink.text()


def call_chunk(**delta: Any) -> Chunk:
    return chunk({"tool_calls": [delta]})


async def test_lone_surrogates_in_tool_call_names_ids_and_types_serialize(
    server: ScriptedServer,
) -> None:
    arguments = '{"q": "half \\ud83d"}'  # the JSON text the model sent, escape and all
    stream = sse_response(
        [
            call_chunk(
                index=0,
                id="call_\ud800",
                type="func\udfff",
                function={"name": "sea\ud83d", "arguments": ""},
            ),
            call_chunk(index=0, function={"name": "rch"}),
            call_chunk(index=0, function={"arguments": arguments}),
            call_chunk(index=1, id="call_\ud801", function={"name": "b", "arguments": "{}"}),
            chunk(
                {"content": "", "reasoning_content": "r\udc00"},
                model="mod\ud800el",
                id="resp\udfff",
            ),
            finish_chunk("tool_calls"),
        ]
    )
    turn = await read(server, stream, None)
    [back] = serialized(turn)
    assert back == turn
    first, second = turn.tool_calls
    assert first.name == "sea\ufffdrch" and first.type == "func\ufffd"
    assert first.arguments == arguments  # untouched: the argument reader decides
    # Both wire ids become "call_\ufffd": ids stay unique, so each call can be answered.
    assert first.id == "call_\ufffd" and second.id != first.id and second.id.strip()
    assert turn.reasoning == "r\ufffd"


# -- the class, as a property: any text, any cut into chunks and reads ---------------------

# Characters that break naive handling: both halves of a pair, halves that never pair,
# NUL, a BOM, multi-byte and astral characters, plain ASCII.
ALPHABET = ["a", " ", "\ud83d", "\ude00", "\udbff", "\udc00", "\x00", "\ufeff", "é", "\U0001f600"]


def independent_oracle(text: str) -> str:
    """Lone halves as U+FFFD, pairs joined: UTF-16's own reading, not `rejoin_surrogates`."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(
        st.tuples(
            st.sampled_from(["content", "reasoning_content"]),
            st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6).map("".join),
        ),
        max_size=12,
    ),
    cuts=st.lists(st.booleans(), max_size=12),
    forward=st.booleans(),
)
def test_any_text_cut_anywhere_serializes_and_is_forwarded_whole(
    pieces: list[tuple[str, str]], cuts: list[bool], forward: bool
) -> None:
    sink = Sink() if forward else None
    reader = _TurnReader(request(forward=forward), None, 3600.0, sink=sink)
    events = [sse_event(role_chunk())]
    events += [sse_event(chunk({field: text})) for field, text in pieces]
    events += [sse_event(finish_chunk()), b"data: [DONE]\n\n"]
    read: list[bytes] = []
    done = False
    for position, event in enumerate(events):  # `cuts` decides which events share a read
        read.append(event)
        if position >= len(cuts) or cuts[position]:
            done = reader.feed(b"".join(read))
            read = []
    if read:
        done = reader.feed(b"".join(read))
    assert done
    turn = reader.finish()

    [back] = serialized(turn)
    assert back == turn
    want_text = independent_oracle("".join(t for f, t in pieces if f == "content"))
    want_reasoning = independent_oracle("".join(t for f, t in pieces if f == "reasoning_content"))
    assert (turn.text, turn.reasoning) == (want_text, want_reasoning)
    if sink is not None:
        assert (sink.text(), sink.text("reasoning")) == (want_text, want_reasoning)


NOT_COUNTS = [
    b"1" + b"0" * 400,
    b"9" * 5000,  # past the 4,300 digits Python makes an int of: valid JSON all the same
    b"-" + b"9" * 5000,
    b"1e400",
    b"-5",
    b"NaN",
    b"Infinity",
    b"1e300",
    b"2.5",
]


@pytest.mark.parametrize("raw", NOT_COUNTS)
def test_usage_counts_that_are_not_counts_are_left_out(raw: bytes) -> None:
    """A number past float range would overflow the pricing arithmetic in workflow code."""
    assembler = TurnAssembler()
    assembler.feed(
        b'{"choices":[],"usage":{"prompt_tokens":'
        + raw
        + b',"completion_tokens":'
        + raw
        + b',"total_tokens":'
        + raw
        + b"}}"
    )
    turn = assembler.finish()
    assert turn.usage is not None
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (0, 0)
    assert turn.usage.total_tokens == 0
    serialized(turn)


@pytest.mark.parametrize("raw", NOT_COUNTS)
def test_the_new_wires_leave_out_usage_counts_that_are_not_counts(raw: bytes) -> None:
    """The same on Responses and Anthropic: the event is read, its other members kept,
    and only the count is left out (a 5,000-digit one once made the event "not JSON")."""
    responses = ResponsesAssembler(endpoint="e")
    completed = (
        b'{"type":"response.completed","response":{"id":"resp_1","status":"completed",'
        b'"output":[],"usage":{"input_tokens":' + raw + b',"output_tokens":' + raw + b"}}}"
    )
    text = b'{"type":"response.output_text.delta","output_index":0,"delta":"hi"}'
    assert responses.feed_events([text, completed])
    anthropic = AnthropicAssembler()
    events = [
        b'{"type":"message_start","message":{"id":"msg_1","model":"m","usage":'
        b'{"input_tokens":' + raw + b',"cache_read_input_tokens":' + raw + b"}}}",
        b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}',
        b'{"type":"content_block_stop","index":0}',
        b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":'
        b'{"output_tokens":' + raw + b"}}",
        b'{"type":"message_stop"}',
    ]
    assert anthropic.feed_events(events)
    for turn in (responses.finish(), anthropic.finish()):
        assert (turn.text, turn.defects) == ("hi", [])
        assert turn.usage is not None
        assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (0, 0)
        assert turn.usage.cached_tokens is None and turn.usage.total_tokens == 0
        serialized(turn)
    assert anthropic.finish().response_id == "msg_1"


async def test_a_call_named_after_its_arguments_runs_over_http(server: ScriptedServer) -> None:
    """Item 11's exact repro through the reader (fast path and all): one usable call."""
    stream = sse_response(
        [
            role_chunk(),
            call_chunk(index=0, id="call_nl", function={"arguments": '{"q":"x"}'}),
            call_chunk(index=0, function={"name": "search"}),
            finish_chunk("tool_calls"),
        ]
    )
    turn = await read(server, stream, None)
    [call] = turn.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_nl", "search", '{"q":"x"}')
    assert turn.defects == [] and turn.stats.dropped_deltas == 0


async def test_a_call_still_nameless_at_the_end_is_a_defect(server: ScriptedServer) -> None:
    stream = sse_response(
        [
            role_chunk(),
            call_chunk(index=0, id="call_nl", function={"arguments": '{"q":"x"}'}),
            finish_chunk("tool_calls"),
        ]
    )
    turn = await read(server, stream, None)
    assert [d.kind for d in turn.defects] == ["unnamed_tool_call"]
    assert turn.defects[0].tool_call_id == "call_nl"


async def test_a_batch_that_cannot_be_published_never_fails_the_model_call() -> None:
    """The live view may be lost; the answer may not (a non-RPC error in the pump)."""
    publisher = OutputPublisher.__new__(OutputPublisher)  # no host needed for this
    publisher._interval = 0.01
    publisher._queued = []
    publisher._wake = asyncio.Event()
    publisher._pump = None
    publisher.failed = None
    sends = 0

    async def unserializable() -> None:
        nonlocal sends
        sends += 1
        raise ValueError("surrogates not allowed")

    publisher._send = unserializable  # type: ignore[method-assign]
    async with publisher:
        publisher._wake.set()
        await asyncio.sleep(0.1)
    assert isinstance(publisher.failed, ValueError)
    assert sends >= 2  # the pump went on, and the exit's last send was tried too


async def test_invalid_utf8_in_any_event_shape_is_replaced_not_fatal(
    server: ScriptedServer,
) -> None:
    """The slow SSE path (an `id:` line) and a tool call's name and id, bytes refused by
    UTF-8 included: the turn is assembled with U+FFFD and serializes."""
    stream = sse_response(
        [
            b"id: \xff1\n" + raw_chunk(b'{"content":"x\xc3"}'),
            raw_chunk(
                b'{"tool_calls":[{"index":0,"id":"call_\xfe","function":'
                b'{"name":"se\x80arch","arguments":"{}"}}]}'
            ),
            finish_chunk("tool_calls"),
        ]
    )
    turn = await read(server, stream, Sink())
    [back] = serialized(turn)
    assert back == turn
    assert turn.text == "x\ufffd"
    [call] = turn.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_\ufffd", "se\ufffdarch", "{}")


HOSTILE = st.lists(st.sampled_from(ALPHABET), max_size=5).map("".join)


@st.composite
def hostile_call_delta(draw: st.DrawFn) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if draw(st.booleans()):
        delta["index"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        delta["id"] = "call_" + draw(HOSTILE)
    function: dict[str, Any] = {}
    if draw(st.booleans()):
        function["name"] = draw(HOSTILE)
    if draw(st.booleans()):
        function["arguments"] = draw(st.sampled_from(["{}", '{"a":', '"\ud83d"}', "", "\x00"]))
    if function:
        delta["function"] = function
    if draw(st.booleans()):
        delta["type"] = draw(HOSTILE)
    return delta


@settings(max_examples=300, deadline=None)
@given(st.lists(hostile_call_delta(), min_size=1, max_size=8))
def test_any_tool_call_deltas_assemble_into_a_turn_that_serializes(
    deltas: list[dict[str, Any]],
) -> None:
    assembler = TurnAssembler()
    for delta in deltas:
        assembler.feed(json.dumps(chunk({"tool_calls": [delta]})))
    turn = assembler.finish()
    [back] = serialized(turn)
    assert back == turn
    ids = [call.id for call in turn.tool_calls]
    assert len(set(ids)) == len(ids) and all(i.strip() for i in ids)  # each can be answered
