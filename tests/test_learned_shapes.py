"""`TurnAssembler`'s learned chunk shapes: a shortcut that must never change a result.

A payload that repeats a learned chunk byte for byte around its text is folded by
parsing the text alone. Every test here feeds the same payloads with the shape cache
on and off (`shape_cache=False` parses every payload whole) and requires the same
turn, or the same failure, down to the counters; the first tests also pin that the
shortcut is taken at all, by counting whole-payload parses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_shapes import CONTENT_SHAPES, ContentShape

from steadyloop._routing.taxonomy import StreamFailed, StreamFailure
from steadyloop._stream import turn_assembly
from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.sse import MessageData
from steadyloop._stream.turn_assembly import TurnAssembler

OPENAI_TOP = {
    "id": "chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq",
    "object": "chat.completion.chunk",
    "created": 1769092764,
    "model": "gpt-4o-mini-2024-07-18",
    "service_tier": "default",
    "system_fingerprint": "fp_29330a9688",
}


def text_chunk(token: str, padding: str | None = None, **choice: Any) -> dict[str, Any]:
    """OpenAI's chunk shape; with `padding`, today's OpenAI (`obfuscation` last)."""
    body: dict[str, Any] = {
        **OPENAI_TOP,
        "choices": [
            {
                "index": 0,
                "delta": {"content": token},
                "logprobs": None,
                "finish_reason": None,
                **choice,
            }
        ],
    }
    if padding is not None:
        body["obfuscation"] = padding
    return body


# How servers send a reasoning token (the delta alone).
REASONING_DELTAS: dict[str, Callable[[str], dict[str, Any]]] = {
    "vllm": lambda token: {"reasoning_content": token},
    "deepseek": lambda token: {"content": None, "reasoning_content": token},
    "ollama": lambda token: {"role": "assistant", "content": "", "reasoning": token},
    "both-names": lambda token: {"reasoning_content": token, "reasoning": token},
}


def reasoning_chunk(server: str, token: str) -> dict[str, Any]:
    body = text_chunk("")
    body["choices"][0]["delta"] = REASONING_DELTAS[server](token)
    return body


def tool_chunk(index: int, arguments: str, **opening: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, **opening, "function": {"arguments": arguments}}
    if "name" in opening:
        call["function"] = {"name": call.pop("name"), "arguments": arguments}
    return {
        **OPENAI_TOP,
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [call]},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    }


def compact(payload: dict[str, Any]) -> bytes:
    """What OpenAI, vLLM and llama.cpp write: compact JSON, raw UTF-8."""
    return orjson.dumps(payload)


Outcome = tuple[str, Any]


def outcome(
    payloads: Sequence[bytes], *, shape_cache: bool, batches: Sequence[int] = (7,)
) -> Outcome:
    """Feed `payloads` as the decoder hands them over, in batches; the turn, or the
    failure with the number of chunks counted when it was raised."""
    assembler = TurnAssembler(shape_cache=shape_cache)
    start, turn = 0, 0
    try:
        while start < len(payloads):
            size = batches[turn % len(batches)]
            if assembler.feed_events(MessageData(list(payloads[start : start + size]))):
                break
            start, turn = start + size, turn + 1
        finished: AssembledTurn = assembler.finish()
    except StreamFailed as failed:
        failure: StreamFailure = failed.failure
        return "failed", (failure, assembler.chunks)
    calls = assembler.calls
    return "turn", (finished, calls.defects, calls.call_count)


def assert_cache_changes_nothing(
    payloads: Sequence[bytes], batches: Sequence[int] = (7,)
) -> Outcome:
    cached = outcome(payloads, shape_cache=True, batches=batches)
    assert cached == outcome(payloads, shape_cache=False, batches=batches)
    return cached


@pytest.fixture
def whole_parses(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many payloads were parsed whole (a parse of anything starting with `{`)."""
    seen: list[int] = []
    real = turn_assembly._loads

    def counting(data: bytes | str) -> Any:
        if data[:1] in (b"{", "{"):
            seen.append(1)
        return real(data)

    monkeypatch.setattr(turn_assembly, "_loads", counting)
    return lambda: len(seen)


# -- the shortcut is taken ---------------------------------------------------------------------


def test_a_text_stream_is_parsed_whole_once(whole_parses: Callable[[], int]) -> None:
    tokens = [f" w{n}" for n in range(200)]
    kind, (turn, _, _) = assert_cache_changes_nothing([compact(text_chunk(t)) for t in tokens])
    assert kind == "turn" and turn.text == "".join(tokens)
    assert turn.model == OPENAI_TOP["model"] and turn.response_id == OPENAI_TOP["id"]
    whole_parses_before = whole_parses()
    outcome([compact(text_chunk(t)) for t in tokens], shape_cache=True)
    # One parse to learn from; every other chunk is its text alone.
    assert whole_parses() - whole_parses_before == 1


def test_openai_padding_is_a_second_hole(whole_parses: Callable[[], int]) -> None:
    tokens = [f" w{n}" for n in range(200)]
    payloads = [compact(text_chunk(t, padding="x" * (n % 11))) for n, t in enumerate(tokens)]
    outcome(payloads, shape_cache=True)
    # The first learns a one-hole shape that the next padding breaks; the second learns
    # the padding hole.
    assert whole_parses() == 2
    _, (turn, _, _) = assert_cache_changes_nothing(payloads)
    assert turn.text == "".join(tokens)


def test_argument_fragments_follow_each_call(whole_parses: Callable[[], int]) -> None:
    payloads: list[bytes] = []
    expected: list[str] = []
    for index in range(4):
        arguments = json.dumps({"path": f"f{index}.py", "body": "line\n" * 40})
        payloads.append(compact(tool_chunk(index, "", id=f"call_{index}", name="write")))
        payloads.extend(compact(tool_chunk(index, arguments[i : i + 5])) for i in range(0, 250, 5))
        expected.append(arguments[:250])
    outcome(payloads, shape_cache=True)
    # Per call: its opening delta, and one fragment to learn the call's shape from.
    assert whole_parses() == 8
    _, (turn, _, _) = assert_cache_changes_nothing(payloads)
    assert [call.arguments for call in turn.tool_calls] == expected
    assert [call.id for call in turn.tool_calls] == [f"call_{i}" for i in range(4)]


def test_ollama_calls_labelled_index_0_stay_apart(whole_parses: Callable[[], int]) -> None:
    """Every call is `index: 0`, so one learned shape fits the fragments of all three:
    each must still go to the call that last claimed index 0."""
    payloads: list[bytes] = []
    expected: list[tuple[str, str]] = []
    for number, name in enumerate(("read", "write", "read")):
        arguments = json.dumps({"path": f"/tmp/{number}", "n": number})
        payloads.append(compact(tool_chunk(0, "", id=f"call_{number}", name=name)))
        pieces = range(0, len(arguments), 3)
        payloads.extend(compact(tool_chunk(0, arguments[i : i + 3])) for i in pieces)
        expected.append((name, arguments))
    outcome(payloads, shape_cache=True)
    assert whole_parses() == 3 + 1
    _, (turn, _, _) = assert_cache_changes_nothing(payloads, batches=(1, 5, 64))
    assert [(call.name, call.arguments) for call in turn.tool_calls] == expected


@pytest.fixture
def serializations(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many times `orjson.dumps` ran: once per attempt to learn a shape."""
    seen: list[int] = []
    real = orjson.dumps

    def counting(value: Any, *args: Any, **kwargs: Any) -> bytes:
        seen.append(1)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(orjson, "dumps", counting)
    return lambda: len(seen)


@pytest.mark.parametrize("server", list(REASONING_DELTAS))
def test_reasoning_tokens_learn_their_shape(
    server: str, whole_parses: Callable[[], int], serializations: Callable[[], int]
) -> None:
    thoughts = [f" r{n}" for n in range(100)]
    answer = [f" a{n}" for n in range(50)]
    payloads = [compact(reasoning_chunk(server, t)) for t in thoughts]
    payloads += [compact(text_chunk(t)) for t in answer]
    before = serializations()
    outcome(payloads, shape_cache=True)
    # One to learn from per kind. A gateway that repeats the text under both names
    # cannot be learned (the text in two places), so it is parsed whole throughout
    # and not even tried: one serialization, for the answer's shape.
    both = server == "both-names"
    assert whole_parses() == (len(thoughts) + 1 if both else 2)
    assert serializations() - before == (1 if both else 2)
    _, (turn, _, _) = assert_cache_changes_nothing(payloads)
    assert turn.reasoning == "".join(thoughts)
    assert turn.text == "".join(answer)


def test_a_shape_that_never_repeats_stops_being_learned(
    serializations: Callable[[], int],
) -> None:
    """A timestamp per chunk: every learned shape misses the next chunk. Learning is
    capped (8, then one per 64 chunks received), so it cannot cost a serialization per
    token."""
    payloads = [compact({**text_chunk(f" t{n}"), "created": n}) for n in range(3_200)]
    before = serializations()
    _, (turn, _, _) = assert_cache_changes_nothing(payloads, batches=(40,))
    learned = serializations() - before
    before = serializations()
    outcome(payloads, shape_cache=True, batches=(40,))
    assert 8 <= serializations() - before <= 8 + 3_200 // 64 + 1
    assert turn.text == "".join(f" t{n}" for n in range(3_200))
    assert learned == serializations() - before  # the cache-off run learns nothing


# -- payloads that fit a learned shape's bytes but are not that chunk --------------------------

TEXT_PREFIX, TEXT_SUFFIX = compact(text_chunk("\x00")).split(b'"\\u0000"')
PAD_PREFIX, PAD_REST = compact(text_chunk("\x00", padding="\x01")).split(b'"\\u0000"')
PAD_MIDDLE, PAD_END = PAD_REST.split(b'"\\u0001"')

# Between a learned shape's bytes: what a string literal is, and what only looks like one.
HOLES = [
    b'"plain"',
    b'"esc\\n\\"\\u00e9\\ud83d\\ude00"',
    b' "spaced" ',
    b'""',
    b'"\\ud83d"',  # a lone surrogate: orjson refuses it, the stdlib reads it
    b'"unterminated',
    b'"a","b"',
    b'"a"},"x":{"y":"b"',
    b'"a"}],"choices":[{"index":0,"delta":{"content":"b"',
    b"42",
    b"null",
    b"[]",
    b'{"k":"v"}',
    b"",
    b'"\xff\xfe"',  # invalid UTF-8 inside a string
    b'"tab\tinside"',  # a raw control character: invalid JSON
]


def _node_id(raw: bytes) -> str:
    """A parameter id as hex: a `repr` id holds brackets and backslashes, and a node id
    with those cannot be handed back to pytest (mutmut reruns tests by node id)."""
    return "x" + raw.hex()


def learned_then(*payloads: bytes) -> list[bytes]:
    """A few chunks to learn from (both shapes), the payloads, then one more chunk."""
    head = [compact(text_chunk("a")), compact(text_chunk("b"))]
    return [*head, *payloads, compact(text_chunk("z"))]


@pytest.mark.parametrize("hole", HOLES, ids=_node_id)
def test_one_hole_fits_only_a_string(hole: bytes) -> None:
    assert_cache_changes_nothing(learned_then(TEXT_PREFIX + hole + TEXT_SUFFIX), batches=(1, 9))


@pytest.mark.parametrize("hole", HOLES, ids=_node_id)
@pytest.mark.parametrize("padding", [b'"p"', b'""', b"7", b'"p","q"', b'"p"}x', b""], ids=_node_id)
def test_two_holes_fit_only_two_strings(hole: bytes, padding: bytes) -> None:
    head = [compact(text_chunk(t, padding="ab"[: n % 3])) for n, t in enumerate("abc")]
    payload = PAD_PREFIX + hole + PAD_MIDDLE + padding + PAD_END
    assert_cache_changes_nothing([*head, payload, compact(text_chunk("z", "q"))], batches=(1, 9))


def test_text_that_holds_the_bytes_between_the_holes() -> None:
    """The cut is searched for: text containing what follows it must still be read whole."""
    middle = PAD_MIDDLE.decode()
    tokens = ["a", middle, f"x{middle}y", "}", '"', "b"]
    payloads = [compact(text_chunk(t, padding="pq"[: n % 3])) for n, t in enumerate(tokens)]
    _, (turn, _, _) = assert_cache_changes_nothing(payloads, batches=(1,))
    assert turn.text == "".join(tokens)


def test_a_changed_finish_reason_or_choice_is_read_whole() -> None:
    payloads = learned_then(
        compact(text_chunk("c", finish_reason="length")),
        compact(text_chunk("d", index=1)),
        compact(text_chunk("e")),
        compact(
            {
                **text_chunk("", finish_reason="stop"),
                "usage": {"prompt_tokens": 3, "completion_tokens": 4},
            }
        ),
    )
    _, (turn, _, _) = assert_cache_changes_nothing(payloads)
    assert turn.text == "abcez"
    assert turn.finish_reason == "stop"
    assert turn.stats.ignored_choices == 1
    assert turn.usage is not None and turn.usage.completion_tokens == 4


def test_an_error_chunk_after_a_learned_shape_still_fails() -> None:
    error = compact({"error": {"message": "overloaded", "code": "503"}})
    kind, (failure, chunks) = assert_cache_changes_nothing(learned_then(error))
    assert kind == "failed" and failure.kind == "stream_error" and chunks == 3


def test_a_padding_hole_is_not_learned_while_the_id_is_unknown() -> None:
    """With the id last and written `"id": ""` (a space the shape does not have), only a
    two-hole shape fits, and its hole would be the id. The fast path reads the id until
    one is known; so must the shape, by not being learned yet."""
    choices = text_chunk("t")["choices"]
    unknown = [b'{"choices":' + orjson.dumps(choices) + b',"id": ""}' for _ in range(3)]
    known = b'{"choices":' + orjson.dumps(choices) + b',"id": "chatcmpl-9"}'
    _, (turn, _, _) = assert_cache_changes_nothing([*unknown, known], batches=(1,))
    assert turn.response_id == "chatcmpl-9"


def test_the_json_parser_swapped_for_the_stdlib_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The benchmark's same-parser comparison swaps `_loads`; the shortcut uses it too."""
    payloads = learned_then(*(TEXT_PREFIX + hole + TEXT_SUFFIX for hole in HOLES))
    with_orjson = outcome(payloads, shape_cache=True)
    monkeypatch.setattr(turn_assembly, "_loads", json.loads)
    monkeypatch.setattr(turn_assembly, "_OrjsonDecodeError", json.JSONDecodeError)
    assert_cache_changes_nothing(payloads)
    assert outcome(payloads, shape_cache=True)[0] == with_orjson[0]


# -- properties --------------------------------------------------------------------------------

TOKENS = st.sampled_from(["a", " b", "\u00e9", "\U0001f642", "\n", '"', "\\", "}", ",", ""])
PADDING = st.none() | st.text(alphabet="abcXYZ019", max_size=6)


@st.composite
def gateway_streams(draw: st.DrawFn) -> list[bytes]:
    """Text and tool chunks, mostly compact and repeating, with the variations that
    break or shift a learned shape: padding, spaces, other members, other choices,
    finish reasons, Ollama's index 0, reasoning as each server names it, bytes spliced
    into a learned shape."""
    payloads: list[bytes] = []
    calls = 0
    for _ in range(draw(st.integers(0, 40))):
        shape = draw(st.integers(0, 10))
        token = draw(TOKENS)
        if shape <= 3:
            payloads.append(compact(text_chunk(token, draw(PADDING))))
        elif shape == 4:
            payloads.append(json.dumps(text_chunk(token)).encode())  # spaced: never learned
        elif shape == 5:
            index = draw(st.integers(0, 2))
            if draw(st.booleans()) or not calls:
                calls += 1
                opening = tool_chunk(index, token, id=f"c{calls}", name=draw(st.sampled_from("fg")))
                payloads.append(compact(opening))
            else:
                payloads.append(compact(tool_chunk(index, token)))
        elif shape == 6:
            payloads.extend(compact(tool_chunk(0, t)) for t in draw(st.lists(TOKENS, max_size=5)))
        elif shape == 7:
            payloads.append(
                compact(text_chunk(token, finish_reason=draw(st.sampled_from([None, "stop"]))))
            )
        elif shape == 8:
            hole = draw(st.sampled_from(HOLES) | st.binary(max_size=12))
            payloads.append(TEXT_PREFIX + hole + TEXT_SUFFIX)
        elif shape == 9:
            hole = draw(st.sampled_from(HOLES))
            padding = draw(st.sampled_from([b'"p"', b"1", b'"p","q"', b""]) | st.binary(max_size=6))
            payloads.append(PAD_PREFIX + hole + PAD_MIDDLE + padding + PAD_END)
        else:
            server = draw(st.sampled_from(list(REASONING_DELTAS)))
            payloads.append(compact(reasoning_chunk(server, token)))
    return payloads


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gateway_streams(), st.lists(st.integers(1, 8), min_size=1, max_size=3))
def test_the_cache_never_changes_a_turn_or_a_failure(
    payloads: list[bytes], batches: list[int]
) -> None:
    assert_cache_changes_nothing(payloads, batches)


def test_text_equal_to_the_learning_sentinel_does_not_move_the_hole() -> None:
    """The sentinel is found by its bytes: a chunk that already holds it elsewhere (here
    its id) must not have its hole put there."""
    sentinel = turn_assembly._SENTINEL
    head = [compact({**text_chunk(sentinel), "id": sentinel}) for _ in range(3)]
    odd = compact({**text_chunk(sentinel), "id": "chatcmpl-other"})
    _, (turn, _, _) = assert_cache_changes_nothing([*head, odd], batches=(1,))
    assert turn.text == sentinel * 4


@pytest.mark.parametrize("shape", CONTENT_SHAPES, ids=[s.case for s in CONTENT_SHAPES])
def test_content_given_as_typed_parts_inside_a_learned_shape_is_parsed_whole(
    shape: ContentShape,
) -> None:
    """Mistral's list content (`wire_shapes.CONTENT_SHAPES`) in the very frame a text
    chunk taught: the hole then holds a list, never taken for text; the parts are read as
    the full reading reads them, cache on or off."""

    def payload(delta: dict[str, Any]) -> bytes:
        body = text_chunk("")
        body["choices"][0]["delta"] = dict(delta)
        # The stdlib writer: NaN and lone surrogates as the escapes providers send.
        return json.dumps(body, separators=(",", ":")).encode()

    lead = [compact(text_chunk(f"w{n} ")) for n in range(10)]
    payloads = [*lead, *(payload(d) for d in shape.deltas), compact(text_chunk(" end"))]
    for batches in ((1,), (3, 7), (64,)):
        kind, (turn, _, _) = assert_cache_changes_nothing(payloads, batches)
        assert kind == "turn"
        lead_text = "".join(f"w{n} " for n in range(10))
        assert (turn.text, turn.reasoning) == (lead_text + shape.text + " end", shape.reasoning)
