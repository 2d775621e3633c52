"""`TurnAssembler`: chunks of one streamed completion folded into one `AssembledTurn`.

Every case runs through each way in: `feed` per payload, and `feed_events` per batch
of event objects, of data strings, and of `MessageData` (the decoder's raw bytes, the
model activity's way); a property test checks them against a plain reading of the
chunks. Tool calls taking the fast path must come out exactly as the accumulator alone
assembles them: every wire shape of its suite, valid streams relabelled the ways
gateways do, and junk, are run through both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from assembly_assertions import run_chunks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_accumulator_properties import JUNK, JUNK_DELTA, MODES, plans
from wire_shapes import (
    CONTENT_SHAPES,
    UNDECIDABLE_SHAPES,
    WIRE_SHAPES,
    ContentShape,
    UndecidableShape,
    WireShape,
    tc,
)

from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream.completion import AssembledTurn, Usage
from steadyloop._stream.sse import MessageData, ServerSentEvent, SSEDecoder
from steadyloop._stream.turn_assembly import TurnAssembler

Payload = dict[str, Any] | str | bytes


def dumps(payload: Payload) -> str | bytes:
    return payload if isinstance(payload, str | bytes) else json.dumps(payload)


def by_feed(assembler: TurnAssembler, payloads: Sequence[Payload]) -> None:
    for payload in payloads:
        assembler.feed(dumps(payload))


def by_events(assembler: TurnAssembler, payloads: Sequence[Payload]) -> None:
    events = []
    for payload in payloads:
        data = dumps(payload)
        events.append(ServerSentEvent(data.decode() if isinstance(data, bytes) else data))
    # Two batches, so state carried between calls is exercised too.
    half = len(events) // 2
    assembler.feed_events(events[:half])
    assembler.feed_events(events[half:])


def by_strings(assembler: TurnAssembler, payloads: Sequence[Payload]) -> None:
    """What `SSEDecoder.feed_data` hands over for plain message events: the data alone."""
    data = [dumps(p) for p in payloads]
    texts = [d.decode() if isinstance(d, bytes) else d for d in data]
    half = len(texts) // 2
    assembler.feed_events(texts[:half])
    assembler.feed_events(texts[half:])


def by_message_data(assembler: TurnAssembler, payloads: Sequence[Payload]) -> None:
    """What `SSEDecoder.feed_data` returns for plain message events: their raw bytes."""
    data = [dumps(p) for p in payloads]
    raw = [d if isinstance(d, bytes) else d.encode() for d in data]
    half = len(raw) // 2
    assembler.feed_events(MessageData(raw[:half]))
    assembler.feed_events(MessageData(raw[half:]))


FEEDERS = [by_feed, by_events, by_strings, by_message_data]
Feeder = Callable[[TurnAssembler, Sequence[Payload]], None]


def assemble(feeder: Feeder, payloads: Sequence[Payload], **kwargs: Any) -> AssembledTurn:
    assembler = TurnAssembler(**kwargs)
    feeder(assembler, payloads)
    return assembler.finish()


def failure(feeder: Feeder, payloads: Sequence[Payload]) -> StreamFailure:
    with pytest.raises(StreamFailed) as caught:
        assemble(feeder, payloads)
    return caught.value.failure


def chunk(
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    *,
    index: int | None = 0,
    **top: Any,
) -> dict[str, Any]:
    choice: dict[str, Any] = {"delta": delta if delta is not None else {}}
    if index is not None:
        choice["index"] = index
    choice["logprobs"] = None
    choice["finish_reason"] = finish_reason
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m-1",
        "choices": [choice],
        **top,
    }


def text_chunks(*tokens: str) -> list[Payload]:
    return [chunk({"content": token}) for token in tokens]


def tool_delta(
    index: int | None, arguments: str, *, id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    delta: dict[str, Any] = {"function": {"arguments": arguments}}
    if index is not None:
        delta["index"] = index
    if id is not None:
        delta["id"] = id
        delta["type"] = "function"
    if name is not None:
        delta["function"]["name"] = name
    return delta


parametrize_feeders = pytest.mark.parametrize(
    "feeder", FEEDERS, ids=["feed", "feed_events", "feed_events-strings", "feed_events-bytes"]
)


# -- text, metadata, finish reason, usage ----------------------------------------------------------


@parametrize_feeders
def test_openai_shaped_text_stream(feeder: Feeder) -> None:
    payloads: list[Payload] = [
        chunk({"role": "assistant", "content": "", "refusal": None}),
        *text_chunks("Hel", "lo", ",", " world"),
        chunk({}, "stop"),
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "m-1",
            "choices": [],
            "usage": {
                "prompt_tokens": 11,
                "completion_tokens": 4,
                "total_tokens": 15,
                "prompt_tokens_details": {"cached_tokens": 8},
                "completion_tokens_details": {"reasoning_tokens": 2},
            },
        },
    ]
    turn = assemble(feeder, payloads)
    assert turn.text == "Hello, world"
    assert turn.finish_reason == "stop"
    assert turn.model == "m-1"
    assert turn.response_id == "chatcmpl-1"
    assert turn.usage == Usage(
        prompt_tokens=11, completion_tokens=4, total_tokens=15, reasoning_tokens=2, cached_tokens=8
    )
    assert turn.defects == []
    assert turn.tool_calls == []
    assert turn.stats.chunks == 7


@parametrize_feeders
def test_metadata_is_read_when_every_chunk_takes_the_fast_path(feeder: Feeder) -> None:
    turn = assemble(feeder, text_chunks("a", "b"))
    assert (turn.model, turn.response_id, turn.text) == ("m-1", "chatcmpl-1", "ab")


@parametrize_feeders
def test_first_id_and_model_win(feeder: Feeder) -> None:
    payloads = [chunk({"content": "a"}), chunk({"content": "b"}, id="other", model="other")]
    turn = assemble(feeder, payloads)
    assert (turn.model, turn.response_id) == ("m-1", "chatcmpl-1")


@parametrize_feeders
def test_usage_without_total_and_without_details(feeder: Feeder) -> None:
    payloads = [
        *text_chunks("x"),
        chunk({}, "stop", usage={"prompt_tokens": 3, "completion_tokens": 1}),
    ]
    assert assemble(feeder, payloads).usage == Usage(
        prompt_tokens=3, completion_tokens=1, total_tokens=4
    )


@parametrize_feeders
def test_deepseek_cache_hits(feeder: Feeder) -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 1, "prompt_cache_hit_tokens": 6}
    turn = assemble(feeder, [*text_chunks("x"), chunk({}, "stop", usage=usage)])
    assert turn.usage is not None and turn.usage.cached_tokens == 6


@parametrize_feeders
def test_no_usage_is_none_not_zeros(feeder: Feeder) -> None:
    assert assemble(feeder, [*text_chunks("x"), chunk({}, "stop", usage=None)]).usage is None


@parametrize_feeders
def test_groq_usage_beside_the_final_chunk(feeder: Feeder) -> None:
    groq_usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    final = chunk({}, "stop", x_groq={"id": "req_1", "usage": groq_usage})
    usage = assemble(feeder, [*text_chunks("x"), final]).usage
    assert usage == Usage(prompt_tokens=5, completion_tokens=2, total_tokens=7)


@parametrize_feeders
def test_finish_reason_in_its_own_chunk_then_a_usage_chunk(feeder: Feeder) -> None:
    payloads = [
        *text_chunks("x"),
        chunk({}, "length"),
        {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
    ]
    turn = assemble(feeder, payloads)
    assert turn.finish_reason == "length"
    assert turn.usage is not None and turn.usage.total_tokens == 2


@parametrize_feeders
def test_finish_reason_with_content_in_the_same_chunk(feeder: Feeder) -> None:
    turn = assemble(feeder, [chunk({"content": "a"}), chunk({"content": "b"}, "stop")])
    assert (turn.text, turn.finish_reason) == ("ab", "stop")


@parametrize_feeders
def test_choices_empty_null_or_missing_are_chunks_without_a_delta(feeder: Feeder) -> None:
    payloads: list[Payload] = [
        *text_chunks("a"),
        {"id": "chatcmpl-1", "choices": []},
        {"id": "chatcmpl-1", "choices": None},
        {"id": "chatcmpl-1"},
        *text_chunks("b"),
    ]
    turn = assemble(feeder, payloads)
    assert turn.text == "ab"
    assert turn.stats.chunks == 5


@parametrize_feeders
def test_delta_null_or_missing(feeder: Feeder) -> None:
    no_delta = chunk()
    del no_delta["choices"][0]["delta"]
    null_delta = chunk()
    null_delta["choices"][0]["delta"] = None
    turn = assemble(feeder, [*text_chunks("a"), no_delta, null_delta, chunk({}, "stop")])
    assert (turn.text, turn.finish_reason) == ("a", "stop")


@parametrize_feeders
def test_bytes_payloads(feeder: Feeder) -> None:
    payloads: list[Payload] = [json.dumps(p).encode() for p in text_chunks("caf\u00e9", "!")]
    assert assemble(feeder, payloads).text == "caf\u00e9!"


# -- choices other than 0 ------------------------------------------------------------------------


@parametrize_feeders
def test_only_choice_zero_is_assembled(feeder: Feeder) -> None:
    two = chunk({"content": "A"})
    two["choices"].append({"index": 1, "delta": {"content": "B"}, "finish_reason": None})
    turn = assemble(feeder, [two, chunk({"content": "C"}), chunk({"content": "D"}, index=1)])
    assert turn.text == "AC"
    assert turn.stats.ignored_choices == 2


@parametrize_feeders
def test_the_choice_index_decides_not_the_list_position(feeder: Feeder) -> None:
    # n=2 streams send each choice alone: choice 1 sits at list position 0.
    payloads = [
        chunk({"content": "zero "}, index=0),
        chunk({"content": "one "}, index=1),
        chunk({"content": "zero again"}, index=0),
        chunk({}, "stop", index=1),
    ]
    reversed_pair = chunk({"content": "one"}, index=1)
    reversed_pair["choices"].append({"index": 0, "delta": {"content": "!"}, "finish_reason": None})
    turn = assemble(feeder, [*payloads, reversed_pair])
    assert turn.text == "zero zero again!"
    assert turn.finish_reason is None  # choice 1's finish reason is not this turn's
    assert turn.stats.ignored_choices == 3


@parametrize_feeders
def test_missing_index_falls_back_to_list_position(feeder: Feeder) -> None:
    first = chunk({"content": "a"}, index=None)
    pair = chunk({"content": "b"}, index=None)
    pair["choices"].append({"delta": {"content": "X"}, "finish_reason": None})
    turn = assemble(feeder, [first, pair])
    assert turn.text == "ab"
    assert turn.stats.ignored_choices == 1


# -- reasoning ------------------------------------------------------------------------------------


@parametrize_feeders
def test_reasoning_is_kept_apart_from_the_answer(feeder: Feeder) -> None:
    payloads = [
        chunk({"role": "assistant", "reasoning_content": "think "}),
        chunk({"reasoning_content": "more", "content": None}),
        chunk({"reasoning": " (or)"}),
        chunk({"content": "answer"}),
        chunk({}, "stop"),
    ]
    turn = assemble(feeder, payloads)
    assert turn.reasoning == "think more (or)"
    assert turn.text == "answer"


@parametrize_feeders
@pytest.mark.parametrize("shape", CONTENT_SHAPES, ids=[s.case for s in CONTENT_SHAPES])
def test_mistral_content_parts_are_text_and_reasoning(feeder: Feeder, shape: ContentShape) -> None:
    """`delta.content` as typed parts (Mistral's reasoning models): text parts are the
    answer, thinking parts reasoning, anything else a note; never a refused chunk."""
    payloads: list[Payload] = [chunk(dict(d)) for d in shape.deltas]
    turn = assemble(feeder, [*payloads, chunk({}, "stop")])
    assert (turn.text, turn.reasoning) == (shape.text, shape.reasoning)
    assert turn.finish_reason == "stop"
    empty = not shape.text.strip()
    assert [d.kind for d in turn.defects] == (["empty_completion"] if empty else [])
    if shape.noted:
        [note] = turn.stats.notes
        assert all(word in note for word in shape.noted), note
    else:
        assert turn.stats.notes == []
    turn.model_dump_json()  # always serializes


@parametrize_feeders
def test_ollama_repeats_role_on_every_chunk(feeder: Feeder) -> None:
    payloads = [chunk({"role": "assistant", "content": t}) for t in ("a", "b", "c")]
    turn = assemble(feeder, [*payloads, chunk({"role": "assistant", "content": ""}, "stop")])
    assert (turn.text, turn.finish_reason) == ("abc", "stop")


@parametrize_feeders
def test_content_beside_reasoning_keeps_both(feeder: Feeder) -> None:
    payloads = [chunk({"content": "a", "reasoning_content": "r"}), chunk({"content": "b"})]
    turn = assemble(feeder, payloads)
    assert (turn.text, turn.reasoning) == ("ab", "r")


@parametrize_feeders
def test_reasoning_sent_twice_in_one_delta_counts_once(feeder: Feeder) -> None:
    payloads = [chunk({"reasoning_content": "r", "reasoning": "r"}), chunk({"content": "a"})]
    assert assemble(feeder, payloads).reasoning == "r"


@parametrize_feeders
def test_reasoning_only_completion_is_an_empty_completion(feeder: Feeder) -> None:
    turn = assemble(feeder, [chunk({"reasoning": "hmm"}), chunk({}, "stop")])
    assert [d.kind for d in turn.defects] == ["empty_completion"]


# -- tool calls ----------------------------------------------------------------------------------


@parametrize_feeders
def test_parallel_tool_calls(feeder: Feeder) -> None:
    payloads = [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [tool_delta(0, "", id="call_a", name="read")]}),
        chunk({"tool_calls": [tool_delta(0, '{"p":')]}),
        chunk({"tool_calls": [tool_delta(0, '"a"}')]}),
        chunk({"tool_calls": [tool_delta(1, "", id="call_b", name="write")]}),
        chunk({"tool_calls": [tool_delta(1, "{}")]}),
        chunk({}, "tool_calls"),
    ]
    turn = assemble(feeder, payloads)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_a", "read", '{"p":"a"}'),
        ("call_b", "write", "{}"),
    ]
    assert turn.finish_reason == "tool_calls"
    assert turn.defects == []


@parametrize_feeders
def test_tool_calls_beside_other_delta_members(feeder: Feeder) -> None:
    payloads = [
        chunk(
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [tool_delta(0, '{"q":1}', id="call_a", name="search")],
            }
        ),
        chunk({}, "tool_calls"),
    ]
    turn = assemble(feeder, payloads)
    assert turn.text == "Let me look."
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("call_a", '{"q":1}')]


@parametrize_feeders
def test_tool_calls_beside_reasoning_and_empty_content(feeder: Feeder) -> None:
    first = tool_delta(0, "{}", id="call_a", name="f")
    payloads = [
        chunk({"content": "", "reasoning_content": "plan", "tool_calls": [first]}),
        chunk({}, "tool_calls"),
    ]
    turn = assemble(feeder, payloads)
    assert turn.reasoning == "plan"
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("call_a", "{}")]


@parametrize_feeders
def test_ollama_index_zero_calls_stay_apart(feeder: Feeder) -> None:
    payloads = [
        chunk({"tool_calls": [tool_delta(0, '{"p":"a"}', id="c1", name="read")]}),
        chunk({"tool_calls": [tool_delta(0, '{"p":"b"}', id="c2", name="write")]}),
        chunk({"tool_calls": [tool_delta(0, '{"p":"c"}', id="c3", name="read")]}),
        chunk({}, "tool_calls"),
    ]
    turn = assemble(feeder, payloads)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("c1", "read", '{"p":"a"}'),
        ("c2", "write", '{"p":"b"}'),
        ("c3", "read", '{"p":"c"}'),
    ]


@parametrize_feeders
def test_dropped_deltas_reach_defects_and_stats(feeder: Feeder) -> None:
    payloads = [
        chunk({"tool_calls": [tool_delta(0, "{", id="c1", name="a")]}),
        chunk({"tool_calls": [tool_delta(1, "{", id="c2", name="b")]}),
        chunk({"tool_calls": [tool_delta(None, "}")]}),  # no alias, two calls open
        chunk({}, "tool_calls"),
    ]
    turn = assemble(feeder, payloads)
    assert turn.stats.dropped_deltas == 1
    assert "dropped_deltas" in [d.kind for d in turn.defects]


@parametrize_feeders
def test_malformed_aliases_reach_stats(feeder: Feeder) -> None:
    bad = tool_delta(0, "{}", id="c1", name="a")
    bad["index"] = "0"
    turn = assemble(feeder, [chunk({"tool_calls": [bad]}), chunk({}, "tool_calls")])
    assert turn.stats.malformed_aliases == 1
    assert [c.arguments for c in turn.tool_calls] == ["{}"]


@parametrize_feeders
def test_truncated_tool_call_is_a_defect(feeder: Feeder) -> None:
    payloads = [
        chunk({"tool_calls": [tool_delta(0, '{"p": "a', id="c1", name="read")]}),
        chunk({}, "length"),
    ]
    assert [d.kind for d in assemble(feeder, payloads).defects] == ["truncated_tool_call"]


@parametrize_feeders
def test_mint_prefix_reaches_the_accumulator(feeder: Feeder) -> None:
    payloads = [chunk({"tool_calls": [tool_delta(0, "{}", name="a")]}), chunk({}, "tool_calls")]
    turn = assemble(feeder, payloads, mint_prefix="turn7")
    assert turn.tool_calls[0].id.startswith("turn7")


# -- tool calls on the fast path come out as the accumulator alone assembles them ----------------


def tool_call_payloads(chunks: Sequence[Any]) -> list[bytes]:
    """Each chunk's `delta.tool_calls` as a whole stream chunk, as the wire carries it."""
    return [json.dumps(chunk({"tool_calls": deltas})).encode() for deltas in chunks]


def as_parsed(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload)  # what the assembler falls back to (lone surrogates)


def assert_assembled_as_alone(chunks: Sequence[Any], batches: Sequence[int]) -> None:
    """Fed in batches of the given sizes (cycled), the assembler's calls, defects (with
    their delta numbers) and counters equal those of the accumulator fed directly."""
    payloads = tool_call_payloads(chunks)
    # The accumulator gets the deltas as the JSON parser reads them (orjson reads an
    # integer beyond 64 bits as a float, for one): the fast path is what is compared.
    alone = run_chunks(as_parsed(p)["choices"][0]["delta"]["tool_calls"] for p in payloads)
    assembler = TurnAssembler()
    start, turn = 0, 0
    while start < len(payloads):
        size = batches[turn % len(batches)]
        assembler.feed_events(MessageData(payloads[start : start + size]))
        start, turn = start + size, turn + 1
    calls = assembler.calls
    assert calls.assembled() == alone.assembled()
    assert calls.defects == alone.defects
    assert calls.dropped_deltas == alone.dropped_deltas
    assert calls.malformed_aliases == alone.malformed_aliases
    assert calls.call_count == alone.call_count


ALL_SHAPES: list[WireShape | UndecidableShape] = [*WIRE_SHAPES, *UNDECIDABLE_SHAPES]


@pytest.mark.parametrize("batches", [[1], [3, 1], [10_000]], ids=["one", "mixed", "whole"])
@pytest.mark.parametrize("shape", ALL_SHAPES, ids=[s.case for s in ALL_SHAPES])
def test_every_wire_shape_assembles_as_the_accumulator_alone(
    shape: WireShape | UndecidableShape, batches: list[int]
) -> None:
    assert_assembled_as_alone(shape.chunks, batches)


BATCHES = st.lists(st.integers(1, 6), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(MODES), BATCHES)
def test_relabelled_streams_assemble_as_the_accumulator_alone(
    data: st.DataObject, mode: str, batches: list[int]
) -> None:
    assert_assembled_as_alone(data.draw(plans(mode)).chunks, batches)


# Junk as JSON can carry it: deltas and values of every type, no attribute objects.
JSON_JUNK_CHUNK = st.one_of(st.none(), st.lists(JUNK_DELTA | JUNK, max_size=4), JUNK)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JSON_JUNK_CHUNK, max_size=12), BATCHES)
def test_junk_assembles_as_the_accumulator_alone(chunks: list[Any], batches: list[int]) -> None:
    assert_assembled_as_alone(chunks, batches)


def test_bare_fragments_of_every_kind_the_fast_path_must_refuse() -> None:
    """Each of these looks like a bare fragment but is not one the accumulator would
    append as is: each must reach the accumulator's full rules."""
    opening = [tc(index=0, id="a", name="f", arguments="{")]
    for odd in (
        {"index": True, "function": {"arguments": "x"}},  # malformed index (rule 9)
        {"index": 0.0, "function": {"arguments": "x"}},
        {"index": -1, "function": {"arguments": "x"}},
        {"index": 1, "function": {"arguments": "x"}},  # no call claims index 1
        {"index": 0, "function": {"arguments": ""}},  # empty: counted, not appended
        {"index": 0, "function": {"arguments": 7}},
        {"index": 0, "function": {"arguments": {"k": 1}}},  # an object, serialized
        {"index": 0, "function": {"name": "g"}},  # a name, not arguments
        {"index": 0, "function": {"arguments": "x", "name": "g"}},  # a new call
        {"index": 0, "id": "b", "function": {"arguments": "x"}},  # a new alias
        {"id": "a", "function": {"arguments": "x"}},  # by id
        {"index": 0, "type": "function"},
    ):
        assert_assembled_as_alone([opening, [odd], [tc(index=-1)]], [3])


# -- defects --------------------------------------------------------------------------------------


@parametrize_feeders
def test_empty_completion(feeder: Feeder) -> None:
    turn = assemble(feeder, [chunk({"role": "assistant", "content": ""}), chunk({}, "stop")])
    assert [d.kind for d in turn.defects] == ["empty_completion"]


@parametrize_feeders
def test_structured_output_that_does_not_parse(feeder: Feeder) -> None:
    payloads = [*text_chunks('{"a": '), chunk({}, "stop")]
    assert [d.kind for d in assemble(feeder, payloads, wants_json=True).defects] == [
        "structured_output_unparseable"
    ]
    assert assemble(feeder, payloads).defects == []
    good = [*text_chunks('{"a": ', "1}"), chunk({}, "stop")]
    assert assemble(feeder, good, wants_json=True).defects == []


# -- failures --------------------------------------------------------------------------------------


@parametrize_feeders
@pytest.mark.parametrize(
    "payload",
    ["not json", "{", "[1, 2]", '"a string"', "42", "null", "{} {}", "[DONE"],
)
def test_payload_that_is_not_a_json_object_is_an_invalid_chunk(
    feeder: Feeder, payload: str
) -> None:
    got = failure(feeder, [*text_chunks("a"), payload])
    assert got.kind == "invalid_chunk"
    assert got.body_excerpt == payload


@parametrize_feeders
@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c.__setitem__("choices", "abc"),
        lambda c: c.__setitem__("choices", {"0": {}}),
        lambda c: c["choices"].__setitem__(0, "x"),
        lambda c: c["choices"][0].__setitem__("delta", 5),
        lambda c: c["choices"][0].__setitem__("delta", ["content"]),
        lambda c: c["choices"][0]["delta"].__setitem__("content", {"type": "text"}),
        lambda c: c["choices"][0]["delta"].__setitem__("content", 7),
        lambda c: c["choices"][0]["delta"].__setitem__("reasoning_content", {"t": 1}),
    ],
)
def test_members_of_the_wrong_type_are_an_invalid_chunk(
    feeder: Feeder, mutate: Callable[[dict[str, Any]], None]
) -> None:
    bad = chunk({"content": "x"})
    mutate(bad)
    assert failure(feeder, [*text_chunks("a"), bad]).kind == "invalid_chunk"


@parametrize_feeders
def test_openai_style_error_object(feeder: Feeder) -> None:
    error = {
        "error": {
            "message": "Rate limit reached",
            "type": "rate_limit_error",
            "code": "rate_limit_exceeded",
            "param": None,
        }
    }
    got = failure(feeder, [*text_chunks("a"), error])
    assert got.kind == "stream_error"
    assert got.message == "Rate limit reached"
    assert got.provider_code == "rate_limit_exceeded"
    assert got.provider_type == "rate_limit_error"
    assert "Rate limit reached" in got.body_excerpt


@parametrize_feeders
def test_string_error_and_numeric_code(feeder: Feeder) -> None:
    got = failure(feeder, [{"error": "upstream overloaded"}])
    assert (got.kind, got.message) == ("stream_error", "upstream overloaded")
    assert got.provider_code is None
    got = failure(feeder, [{"error": {"message": "slow down", "code": 429}}])
    assert (got.message, got.provider_code) == ("slow down", "429")


@parametrize_feeders
def test_errors_that_are_not_objects_or_say_nothing(feeder: Feeder) -> None:
    """A string error has no type; a number is shown as written; an error object with
    no message still says what happened."""
    assert failure(feeder, [{"error": "busy"}]).provider_type is None
    assert failure(feeder, [{"error": 42}]).message == "42"
    got = failure(feeder, [{"error": {}}])
    assert got.message == "the provider reported an error inside the stream"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('"overloaded"', "overloaded"),  # JSON, but not an object: the text itself
        ("[1, 2]", "[1, 2]"),
        ('{"error": false, "message": "overloaded"}', "overloaded"),  # no error member
    ],
)
def test_error_event_data_that_is_not_an_error_object(data: str, message: str) -> None:
    with pytest.raises(StreamFailed) as caught:
        TurnAssembler().feed_events([ServerSentEvent(data, "error")])
    assert caught.value.failure.message == message
    assert data in caught.value.failure.body_excerpt


@parametrize_feeders
def test_zero_and_float_counts_in_usage(feeder: Feeder) -> None:
    """OpenAI sends `reasoning_tokens: 0`: zero is a count (not "not reported"), and a
    count written as `12.0` is 12."""
    usage = {
        "prompt_tokens": 12.0,
        "completion_tokens": 0,
        "total_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 0.0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    turn = assemble(feeder, [*text_chunks("a"), {"choices": [], "usage": usage}])
    assert turn.usage == Usage(
        prompt_tokens=12, completion_tokens=0, total_tokens=12, reasoning_tokens=0, cached_tokens=0
    )


def test_a_str_payload_after_learned_shapes_is_parsed_whole() -> None:
    """Shapes are learned from the decoder's bytes; `feed` may be given the same chunk
    as a string, which a learned shape (bytes) must not be tried on."""
    assembler = TurnAssembler()
    raw = [orjson.dumps(c) for c in text_chunks("a", "b", "c")]
    assembler.feed_events(MessageData(raw))
    assembler.feed(raw[0].decode())
    assembler.feed_events(MessageData(raw[1:]))
    assert assembler.finish().text == "abcabc"


@parametrize_feeders
def test_vllm_error_shape(feeder: Feeder) -> None:
    body = {"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}
    got = failure(feeder, [*text_chunks("a"), body])
    assert (got.kind, got.message, got.provider_type, got.provider_code) == (
        "stream_error",
        "too long",
        "BadRequestError",
        "400",
    )


@parametrize_feeders
def test_openrouter_mid_stream_error_beside_choices(feeder: Feeder) -> None:
    body = chunk(
        {"content": ""},
        "error",
        error={"code": "server_error", "message": "Provider disconnected"},
    )
    got = failure(feeder, [*text_chunks("partial"), body])
    assert (got.kind, got.message, got.provider_code) == (
        "stream_error",
        "Provider disconnected",
        "server_error",
    )


@parametrize_feeders
def test_null_error_member_is_not_an_error(feeder: Feeder) -> None:
    assert assemble(feeder, [*text_chunks("a"), chunk({}, "stop", error=None)]).text == "a"


@pytest.mark.parametrize(
    "data",
    [
        "overloaded",
        '{"message": "overloaded"}',
        '{"error": {"message": "overloaded"}}',
        '{"error": "overloaded", "choices": []}',
        # Even a payload shaped like an ordinary token chunk: the event type decides.
        json.dumps(chunk({"content": "overloaded"}) | {"message": "overloaded"}),
    ],
)
def test_error_event_type_is_a_stream_error(data: str) -> None:
    assembler = TurnAssembler()
    events = [ServerSentEvent(json.dumps(text_chunks("a")[0])), ServerSentEvent(data, "error")]
    with pytest.raises(StreamFailed) as caught:
        assembler.feed_events(events)
    assert caught.value.failure.kind == "stream_error"
    assert caught.value.failure.message == "overloaded"
    assert assembler.chunks == 2


def test_error_event_with_no_data_is_a_stream_error() -> None:
    with pytest.raises(StreamFailed) as caught:
        TurnAssembler().feed_events([ServerSentEvent("", "error")])
    assert caught.value.failure.kind == "stream_error"


def test_other_event_types_are_folded_like_messages() -> None:
    assembler = TurnAssembler()
    events = [
        ServerSentEvent(json.dumps(text_chunks("a")[0]), "delta"),
        # "message" built at run time: equal to, but not the same object as, the default.
        ServerSentEvent(json.dumps(text_chunks("b")[0]), "".join(["mess", "age"])),
    ]
    assembler.feed_events(events)
    assert assembler.finish().text == "ab"


@parametrize_feeders
def test_blank_payloads_are_keep_alives(feeder: Feeder) -> None:
    turn = assemble(feeder, [*text_chunks("a"), "", "  ", *text_chunks("b")])
    assert turn.text == "ab"
    assert turn.stats.chunks == 2


@parametrize_feeders
def test_error_message_with_a_lone_surrogate_is_serializable(feeder: Feeder) -> None:
    got = failure(feeder, ['{"error": {"message": "bad \\ud83d", "code": "x"}}'])
    assert got.message == "bad \ufffd"
    got.model_dump_json()


def test_long_bodies_are_excerpted() -> None:
    got = failure(by_feed, ["x" * 5000])
    assert got.body_excerpt.startswith("x" * 500)
    assert len(got.body_excerpt) < 600


# -- [DONE] ---------------------------------------------------------------------------------------


def test_feed_events_stops_at_done() -> None:
    assembler = TurnAssembler()
    events = [ServerSentEvent(json.dumps(p)) for p in text_chunks("a", "b")]
    assert assembler.feed_events(events) is False
    after = [ServerSentEvent("[DONE]"), ServerSentEvent("not json, never read")]
    assert assembler.feed_events([ServerSentEvent(json.dumps(text_chunks("c")[0])), *after])
    turn = assembler.finish()
    assert turn.text == "abc"
    assert turn.stats.saw_done
    assert turn.stats.chunks == 3


@parametrize_feeders
@pytest.mark.parametrize("marker", ["[DONE]", " [DONE]", "[DONE] ", "[DONE]\n"])
def test_done_marker_variants(feeder: Feeder, marker: str) -> None:
    assembler = TurnAssembler()
    feeder(assembler, [*text_chunks("a"), marker])
    turn = assembler.finish()
    assert turn.stats.saw_done
    assert turn.text == "a"
    assert turn.stats.chunks == 1


def test_no_done_is_visible() -> None:
    assembler = TurnAssembler()
    assert assembler.feed_events([ServerSentEvent(json.dumps(text_chunks("a")[0]))]) is False
    assert not assembler.finish().stats.saw_done


# -- surrogates -----------------------------------------------------------------------------------


@parametrize_feeders
def test_surrogate_pair_split_across_chunks_is_one_character(feeder: Feeder) -> None:
    # JSON text as a provider writes it: the two halves escaped in separate chunks.
    high = '{"choices":[{"index":0,"delta":{"content":"a\\ud83d"},"finish_reason":null}]}'
    low = '{"choices":[{"index":0,"delta":{"content":"\\ude00b"},"finish_reason":null}]}'
    r_high = '{"choices":[{"index":0,"delta":{"reasoning":"\\ud83d"},"finish_reason":null}]}'
    r_low = '{"choices":[{"index":0,"delta":{"reasoning":"\\ude00"},"finish_reason":null}]}'
    turn = assemble(feeder, [high, low, r_high, r_low])
    assert turn.text == "a\U0001f600b"
    assert turn.reasoning == "\U0001f600"
    turn.model_dump_json()  # serializable


@parametrize_feeders
def test_lone_surrogates_become_replacement_characters(feeder: Feeder) -> None:
    lone = '{"choices":[{"index":0,"delta":{"content":"x\\udc00y\\ud800"},"finish_reason":null}]}'
    turn = assemble(feeder, [lone])
    assert turn.text == "x\ufffdy\ufffd"
    turn.text.encode("utf-8")


def test_invalid_utf8_in_a_payload_reads_as_replacement_characters() -> None:
    """The decoder hands payloads over undecoded; the spec's U+FFFD for invalid bytes
    must come out the same as when the decoder decodes them (`feed`)."""
    payload = json.dumps(chunk({"content": "@"})).encode().replace(b"@", b"a\xff\xe2\x82")
    tool_call = tool_delta(0, "{}", id="c1", name="f\u00e9")
    body = (
        b"data: "
        + payload
        + b"\n\ndata: "
        + json.dumps(chunk({"tool_calls": [tool_call]}), ensure_ascii=False).encode()
        + b"\n\ndata: [DONE]\n\n"
    )
    turns = []
    for size in (len(body), 5):
        for objects in (False, True):
            decoder, assembler = SSEDecoder(), TurnAssembler()
            decode = decoder.feed if objects else decoder.feed_data
            for i in range(0, len(body), size):
                assembler.feed_events(decode(body[i : i + size]))
            turns.append(assembler.finish())
    assert turns[0].text == "a\ufffd\ufffd"
    assert [(c.name, c.arguments) for c in turns[0].tool_calls] == [("f\u00e9", "{}")]
    assert turns[0].stats.chunks == 2 and turns[0].stats.saw_done
    assert all(turn == turns[0] for turn in turns)


# -- heartbeat properties ------------------------------------------------------------------------


def test_progress_properties() -> None:
    assembler = TurnAssembler()
    assert not assembler.first_token_seen
    assembler.feed(json.dumps(chunk({"role": "assistant", "content": ""})))
    assert not assembler.first_token_seen  # an empty role chunk is not a token
    assert assembler.output_chars == 0
    assembler.feed(json.dumps(chunk({"content": "abc"})))
    assert assembler.first_token_seen
    assert assembler.output_chars == 3
    assembler.feed_events([ServerSentEvent(json.dumps(chunk({"reasoning": "r\u00e9"})))])
    assembler.feed(json.dumps(chunk({"content": "de"})))
    assert assembler.output_chars == 7
    assert assembler.output_chars == 7  # reading twice does not count twice
    assert assembler.tool_call_count == 0
    assembler.feed(json.dumps(chunk({"tool_calls": [tool_delta(0, "{", id="c", name="f")]})))
    assembler.feed_events(
        [ServerSentEvent(json.dumps(chunk({"tool_calls": [tool_delta(0, '"k":1}')]})))]
    )
    assert assembler.tool_call_count == 1
    assert assembler.chunks == 6


def test_first_token_seen_on_a_tool_call_alone() -> None:
    assembler = TurnAssembler()
    assembler.feed(json.dumps(chunk({"tool_calls": [tool_delta(0, "", id="c", name="f")]})))
    assert assembler.first_token_seen


def test_first_token_seen_on_reasoning_alone() -> None:
    assembler = TurnAssembler()
    assembler.feed(json.dumps(chunk({"reasoning_content": "hm"})))
    assert assembler.first_token_seen


# -- both entry points agree with a plain reading of the chunks ----------------------------------

TOKENS = st.sampled_from(["a", " b", "\u00e9", "\U0001f642", "\n", '"', "\\", ""])


@st.composite
def chunk_streams(draw: st.DrawFn) -> tuple[list[str], str, str, int]:
    """Varied but valid chunks, and the text, reasoning and ignored count they mean."""
    payloads: list[str] = []
    text: list[str] = []
    reasoning: list[str] = []
    ignored = 0
    for _ in range(draw(st.integers(0, 25))):
        token = draw(TOKENS)
        shape = draw(st.integers(0, 8))
        if shape == 0:  # the fast shape
            payloads.append(json.dumps(chunk({"content": token})))
            text.append(token)
        elif shape == 1:  # extra delta members
            payloads.append(json.dumps(chunk({"role": "assistant", "content": token})))
            text.append(token)
        elif shape == 2:  # no index: position 0
            payloads.append(json.dumps(chunk({"content": token}, index=None)))
            text.append(token)
        elif shape == 3:  # another choice
            payloads.append(json.dumps(chunk({"content": token}, index=1)))
            ignored += 1
        elif shape == 4:  # reasoning
            payloads.append(json.dumps(chunk({"reasoning_content": token})))
            reasoning.append(token)
        elif shape == 5:  # usage chunk
            payloads.append(json.dumps({"choices": [], "usage": {"prompt_tokens": 1}}))
        elif shape == 6:  # compact separators and raw UTF-8, as some servers write
            body = chunk({"content": token})
            payloads.append(json.dumps(body, separators=(",", ":"), ensure_ascii=False))
            text.append(token)
        elif shape == 7:  # content and a finish reason together
            payloads.append(json.dumps(chunk({"content": token}, "stop")))
            text.append(token)
        else:  # content and reasoning in one delta
            payloads.append(json.dumps(chunk({"content": token, "reasoning_content": "r"})))
            text.append(token)
            reasoning.append("r")
    return payloads, "".join(text), "".join(reasoning), ignored


@settings(max_examples=300, deadline=None)
@given(chunk_streams())
def test_entry_points_agree_with_a_plain_reading(
    stream: tuple[list[str], str, str, int],
) -> None:
    payloads, text, reasoning, ignored = stream
    for feeder in FEEDERS:
        turn = assemble(feeder, list(payloads))
        assert turn.text == text
        assert turn.reasoning == reasoning
        assert turn.stats.ignored_choices == ignored
        assert turn.stats.chunks == len(payloads)


def test_through_the_sse_decoder() -> None:
    body = (
        b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in text_chunks("x", "y\u00e9"))
        + b"data: [DONE]\n\n"
    )
    decoder = SSEDecoder()
    assembler = TurnAssembler()
    done = False
    for i in range(0, len(body), 7):
        done = assembler.feed_events(decoder.feed(body[i : i + 7])) or done
    assert done
    assert assembler.finish().text == "xy\u00e9"
