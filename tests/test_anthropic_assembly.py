"""The Anthropic Messages assembler on recorded and documented stream shapes."""

from __future__ import annotations

import json

import pytest
from anthropic_streams import (
    MESSAGE_STOP,
    MINIMAX_M3_ORPHANS,
    PING,
    assemble,
    delta,
    json_delta,
    message_delta,
    message_start,
    sse,
    start,
    stop,
    text_delta,
)

from steadyloop._routing.taxonomy import StreamFailed, http_category
from steadyloop._stream.anthropic_assembly import AnthropicAssembler
from steadyloop._stream.anthropic_wire import ANTHROPIC_WIRE

# What llama.cpp's /v1/messages sent (xllamacpp, SmolLM2, tool_choice any, prefill):
# the tool_use start has no `input` member at all.
LLAMACPP_CALL = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"chatcmpl-1","type":'
    b'"message","role":"assistant","content":[],"model":"smollm2","stop_reason":null,'
    b'"stop_sequence":null,"usage":{"cache_read_input_tokens":0,"input_tokens":187,'
    b'"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"tool_use","id":"H2DvyMwL","name":"get_weather"}}\n\n'
    + b"".join(
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
        b'{"type":"input_json_delta","partial_json":' + json.dumps(f).encode() + b"}}\n\n"
        for f in ["{", '\n    "', "city", '":', ' "', "Paris", '"', "\n}"]
    )
    + b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use",'
    b'"stop_sequence":"</tool_call>"},"usage":{"output_tokens":29}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def test_llamacpps_call_assembles_in_any_read_size() -> None:
    for reads in (1, 7, len(LLAMACPP_CALL)):
        assembler, turn = assemble(LLAMACPP_CALL, reads=reads)
        assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
            ("H2DvyMwL", "get_weather", {"city": "Paris"})
        ]
        assert turn.finish_reason == "tool_calls"
        assert turn.defects == []
        assert assembler.saw_done and ANTHROPIC_WIRE.accepts_end_of_body(assembler, True)
        assert turn.usage is not None and turn.usage.prompt_tokens == 187
        assert turn.usage.completion_tokens == 29 and turn.usage.cached_tokens == 0


def test_the_event_line_is_never_read() -> None:
    events = [
        message_start(),
        start(0, {"type": "text", "text": ""}),
        text_delta(0, "hi"),
        stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    stripped = assemble(sse(events, event_lines=False))[1]
    # A proxy that labels every event `error` (or anything) changes nothing either.
    lying = sse(events).replace(b"event: content_block_delta", b"event: error")
    assert stripped == assemble(sse(events))[1] == assemble(lying)[1]
    assert stripped.text == "hi" and stripped.finish_reason == "stop"


def call_stream(*fragments: str, stop_reason: str = "tool_use", **block: object) -> bytes:
    return sse(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}, **block}),
            *[json_delta(0, f) for f in fragments],
            stop(0),
            message_delta(stop_reason),
            MESSAGE_STOP,
        ]
    )


def test_an_empty_fragment_adds_nothing_and_no_fragment_is_a_zero_argument_call() -> None:
    turn = assemble(call_stream("", '{"a":', "", "1}", ""))[1]
    assert turn.tool_calls[0].arguments == '{"a":1}'
    zero = assemble(call_stream(""))[1]
    assert zero.tool_calls[0].arguments == "" and zero.defects == []


def test_input_sent_whole_with_the_start_stands_unless_fragments_follow() -> None:
    whole = assemble(call_stream(input={"a": 1}))[1]
    assert json.loads(whole.tool_calls[0].arguments) == {"a": 1}
    # vLLM-style: the start carries the input and the fragments repeat it: fragments win.
    repeated = assemble(call_stream('{"a":', "1}", input={"a": 1}))[1]
    assert repeated.tool_calls[0].arguments == '{"a":1}'


def test_malformed_arguments_of_a_finished_call_are_the_argument_readers_not_a_defect() -> None:
    # Fine-grained tool streaming can send invalid JSON: the model is answered with the
    # parse error; a fresh sample is not spent on it.
    turn = assemble(call_stream('{"city": Paris}'))[1]
    assert turn.defects == [] and turn.tool_calls[0].arguments == '{"city": Paris}'


@pytest.mark.parametrize("reason", ["max_tokens", "model_context_window_exceeded"])
def test_a_call_open_when_the_limit_hit_is_vetoed_even_when_its_json_parses(reason: str) -> None:
    turn = assemble(call_stream('{"a":1}', stop_reason=reason))[1]
    assert [d.kind for d in turn.defects] == ["truncated_tool_call"]
    assert turn.defects[0].tool_call_id == "toolu_1"
    # Text written after a finished call is what was cut: the call stands, the text is
    # a length cut the workflow continues or stops on.
    after = sse(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            json_delta(0, "{}"),
            stop(0),
            start(1, {"type": "text", "text": ""}),
            text_delta(1, "and then"),
            stop(1),
            message_delta(reason),
            MESSAGE_STOP,
        ]
    )
    assert assemble(after)[1].defects == []


THINKING = "Let me think.\nThe user wants \u00e9 and \U0001f600."
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=="


def thinking_stream() -> bytes:
    return sse(
        [
            message_start(),
            start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, type="thinking_delta", thinking=THINKING[:9]),
            delta(0, type="thinking_delta", thinking=THINKING[9:]),
            delta(0, type="signature_delta", signature=SIGNATURE),
            stop(0),
            # Claude's `display: "omitted"`: a block holding only a signature.
            start(1, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(1, type="signature_delta", signature="c2ln"),
            stop(1),
            start(2, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}),
            stop(2),
            start(3, {"type": "text", "text": ""}),
            text_delta(3, "Calling."),
            stop(3),
            start(4, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
            json_delta(4, "{}"),
            stop(4),
            start(5, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(5, type="thinking_delta", thinking="second"),
            delta(5, type="signature_delta", signature="c2Vj"),
            stop(5),
            start(6, {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}),
            json_delta(6, "{}"),
            stop(6),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )


def test_thinking_blocks_are_kept_byte_exact_in_order_with_the_call_they_preceded() -> None:
    assembler, turn = assemble(thinking_stream(), reads=5)
    blocks = assembler.passback_blocks(turn.tool_calls)
    assert [(b.kind, b.before_call) for b in blocks] == [
        ("thinking", "toolu_a"),
        ("thinking", "toolu_a"),
        ("redacted_thinking", "toolu_a"),
        ("thinking", "toolu_b"),
    ]
    assert json.loads(blocks[0].raw()) == {
        "type": "thinking",
        "thinking": THINKING,
        "signature": SIGNATURE,
    }
    assert json.loads(blocks[1].raw()) == {"type": "thinking", "thinking": "", "signature": "c2ln"}
    assert json.loads(blocks[2].raw()) == {
        "type": "redacted_thinking",
        "data": "EmwKAhgBEgy3va3pzix/LafPsn4a",
    }
    assert turn.reasoning == THINKING + "second"
    assert turn.text == "Calling." and [c.id for c in turn.tool_calls] == ["toolu_a", "toolu_b"]


def test_server_tool_use_is_kept_for_pass_back_and_never_dispatched() -> None:
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://example.com", "title": "x"}],
    }
    body = sse(
        [
            message_start(),
            start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}),
            json_delta(0, '{"query":'),
            json_delta(0, '"paris weather"}'),
            stop(0),
            start(1, result),
            stop(1),
            start(2, {"type": "text", "text": ""}),
            text_delta(2, "Sunny."),
            stop(2),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    assembler, turn = assemble(body)
    assert turn.tool_calls == [] and turn.text == "Sunny." and turn.defects == []
    blocks = assembler.passback_blocks(turn.tool_calls)
    assert [b.kind for b in blocks] == ["server_tool_use", "web_search_tool_result"]
    assert json.loads(blocks[0].raw())["input"] == {"query": "paris weather"}
    assert json.loads(blocks[1].raw()) == result
    assert all(b.before_call is None for b in blocks)


def failure_of(body: bytes) -> StreamFailed:
    with pytest.raises(StreamFailed) as raised:
        assemble(body)
    return raised.value


def test_an_error_event_after_200_is_a_classified_stream_error() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    failure = failure_of(sse([message_start(), overloaded])).failure
    assert failure.kind == "stream_error" and failure.provider_type == "overloaded_error"
    assert failure.message == "Overloaded"
    assert http_category(None, failure.provider_code, failure.provider_type) == "server_error"
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    limited_failure = failure_of(sse([message_start(), limited])).failure
    assert http_category(None, None, limited_failure.provider_type) == "rate_limit"


def test_a_refusal_is_its_own_stop_with_its_category_and_nothing_is_dispatched() -> None:
    body = sse(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            json_delta(0, "{}"),
            stop(0),
            message_delta("refusal", stop_details={"type": "refusal", "category": "cyber"}),
            MESSAGE_STOP,
        ]
    )
    failure = failure_of(body).failure
    assert (failure.kind, failure.provider_type, failure.provider_code) == (
        "stream_error",
        "refusal",
        "cyber",
    )
    assert "refused" in failure.message and "'cyber'" in failure.message
    assert http_category(None, failure.provider_code, failure.provider_type) == "content_filter"


def test_pause_turn_is_a_veto() -> None:
    failure = failure_of(sse([message_start(), message_delta("pause_turn"), MESSAGE_STOP]))
    assert failure.failure.provider_type == "pause_turn"


def test_a_frame_for_a_block_never_started_is_a_defect_and_a_gap_is_not() -> None:
    orphan = sse(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            json_delta(0, '{"a":1}'),
            stop(0),
            json_delta(1, '{"b":2}'),  # block 1 never started: its call is lost
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    turn = assemble(orphan)[1]
    assert [d.kind for d in turn.defects] == ["dropped_deltas"]
    assert turn.stats.dropped_deltas == 1
    gap = sse(
        [
            message_start(),
            start(0, {"type": "text", "text": ""}),
            text_delta(0, "ok"),
            stop(0),
            start(3, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            json_delta(3, '{"a":1}'),
            stop(3),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    assert assemble(gap)[1].defects == []


@pytest.mark.parametrize("reads", [1, 3, 50])
def test_minimax_frames_for_a_block_never_started_that_carry_nothing_are_noted(
    reads: int,
) -> None:
    """MINIMAX_M3_ORPHANS (MadAppGang/claudish#200): a signature and a stop for an index 0
    never started, then normal blocks. Nothing the turn could hold is lost, so the turn
    is whole: the text and the call dispatched, the frames named in a note."""
    events = [
        message_start(),
        *MINIMAX_M3_ORPHANS,
        start(0, {"type": "text", "text": ""}),
        text_delta(0, "Reading it."),
        stop(0),
        start(1, {"type": "tool_use", "id": "call_m3", "name": "read", "input": {}}),
        json_delta(1, '{"path":"a"}'),
        stop(1),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    for event_lines in (True, False):
        _, turn = assemble(sse(events, event_lines=event_lines), reads=reads)
        assert turn.defects == []
        assert turn.stats.dropped_deltas == 0
        assert turn.text == "Reading it."
        assert [(c.id, c.arguments) for c in turn.tool_calls] == [("call_m3", '{"path":"a"}')]
        assert turn.passback == []  # no thinking block: the signature has nowhere to go
        [note] = turn.stats.notes
        assert "content_block_stop x1" in note and "signature_delta x1" in note


@pytest.mark.parametrize(
    ("frames", "dropped"),
    [
        # Content for a block never started: lost, a defect.
        ([text_delta(0, "lost")], 1),
        ([json_delta(0, '{"a":1}')], 1),
        ([delta(0, type="thinking_delta", thinking="lost")], 1),
        # A signature after its thinking block stopped: that block would go back unsigned.
        (
            [
                start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                delta(0, type="thinking_delta", thinking="hm"),
                stop(0),
                delta(0, type="signature_delta", signature="late"),
            ],
            1,
        ),
        # Carrying nothing: noted, not lost (hostile index and signature values too).
        ([{"type": "content_block_stop", "index": 7}], 0),
        ([{"type": "content_block_stop", "index": -1}], 0),
        ([{"type": "content_block_stop", "index": "0"}], 0),
        ([{"type": "content_block_stop"}], 0),
        ([stop(0), stop(0), stop(0)], 0),
        ([delta(5, type="signature_delta", signature=float("nan"))], 0),
        ([delta(5, type="signature_delta", signature="\ud800")], 0),
        ([delta(5, type="signature_delta")], 0),
        ([{"type": "content_block_delta", "delta": {"type": "signature_delta"}}], 0),
    ],
)
def test_a_frame_for_no_block_is_a_defect_only_when_it_carries_content(
    frames: list[dict[str, object]], dropped: int
) -> None:
    events = [
        message_start(),
        *frames,
        start(1, {"type": "text", "text": ""}),
        text_delta(1, "ok"),
        stop(1),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    _, turn = assemble(sse(events))
    assert turn.stats.dropped_deltas == dropped
    assert [d.kind for d in turn.defects] == (["dropped_deltas"] if dropped else [])
    assert turn.text == "ok"
    if not dropped:
        assert turn.stats.notes and "carrying nothing" in turn.stats.notes[0]
    turn.model_dump_json()  # always serializes


def test_a_second_start_on_an_open_index_is_a_defect_a_start_after_its_stop_is_not() -> None:
    reused_open = sse(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            start(0, {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}),
            json_delta(0, "{}"),
            stop(0),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    assert [d.kind for d in assemble(reused_open)[1].defects] == ["dropped_deltas"]
    sequential = sse(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            json_delta(0, '{"a":1}'),
            stop(0),
            start(0, {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}),
            json_delta(0, '{"b":2}'),
            stop(0),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    turn = assemble(sequential)[1]
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("f", '{"a":1}'),
        ("g", '{"b":2}'),
    ]
    assert turn.defects == []


def test_pings_and_empty_deltas_are_not_progress_and_thinking_is_not_an_answer() -> None:
    assembler = AnthropicAssembler()
    assembler.feed_events(
        [json.dumps(message_start()), json.dumps(start(0, {"type": "thinking", "thinking": ""}))]
    )
    before = assembler.content_mark
    for event in (PING, text_delta(0, ""), json_delta(0, ""), text_delta(7, "")):
        assembler.feed(json.dumps(event))
    assert assembler.content_mark == before
    assembler.feed(json.dumps(delta(0, type="thinking_delta", thinking="hmm")))
    assert assembler.content_mark > before
    assert assembler.first_token_seen and not assembler.answer_token_seen


def test_the_end_of_the_body_without_message_stop_does_not_end_cleanly() -> None:
    assembler, _ = assemble(sse([message_start(), message_delta("end_turn")]))
    assert assembler.finish_reason_seen and not assembler.saw_done
    assert not ANTHROPIC_WIRE.accepts_end_of_body(assembler, assembler.saw_done)


def test_a_payload_that_is_not_an_event_is_an_invalid_chunk() -> None:
    for payload in (
        b"data: {not json\n\n",
        b"data: [1]\n\n",
        b'data: {"type":"message_start"}\n\n',
    ):
        assert failure_of(payload).failure.kind == "invalid_chunk"


def test_cache_tokens_are_read_into_usage() -> None:
    body = sse(
        [
            message_start(
                input_tokens=5, cache_creation_input_tokens=100, cache_read_input_tokens=900
            ),
            message_delta("end_turn", output_tokens=7),
            MESSAGE_STOP,
        ]
    )
    usage = assemble(body)[1].usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_creation_tokens) == (
        1005,
        900,
        100,
    )
    assert (usage.completion_tokens, usage.total_tokens) == (7, 1012)


HALF = (
    b'data: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"TEXT"}}\n\n'
)


def test_lone_surrogates_split_across_deltas_are_rejoined() -> None:
    body = (
        sse([message_start(), start(0, {"type": "text", "text": ""})])
        + HALF.replace(b"TEXT", b"a\\ud83d")
        + HALF.replace(b"TEXT", b"\\ude00")
        + sse([stop(0), message_delta("end_turn"), MESSAGE_STOP])
    )
    turn = assemble(body)[1]
    assert turn.text == "a\U0001f600"
    turn.model_dump_json()  # serializes
