"""The benchmark's streams, assembled once: so the benchmark cannot time a broken path.

`benchmarks/bench_stream.py` times `SSEDecoder` + `TurnAssembler` on these exact bytes.
If assembly were wrong (a merged call, a lost token, a reused id), its figures would be
for a path that does not work; these assert the result is exactly what was generated.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_stream


def test_text_stream_comes_out_token_for_token() -> None:
    stream = bench_stream.build_text_stream()
    reads = bench_stream.network_reads(stream.body)
    assert len(reads) > 100  # really cut into network-sized reads
    turn = bench_stream.steadyloop_assemble(reads)
    assert stream.text and turn.text == stream.text
    assert stream.chunks == bench_stream.TEXT_TOKENS + 3  # role, tokens, finish, usage
    assert turn.stats.chunks == stream.chunks
    assert turn.stats.saw_done
    assert turn.finish_reason == "stop"
    assert turn.usage is not None and turn.usage.completion_tokens == bench_stream.TEXT_TOKENS
    assert turn.tool_calls == [] and turn.defects == []
    assert any(not ch.isascii() for ch in stream.text)  # the non-ASCII path is exercised


def test_international_text_stream() -> None:
    stream = bench_stream.build_text_stream(2_000, international=True)
    turn = bench_stream.steadyloop_assemble(bench_stream.network_reads(stream.body))
    assert turn.text == stream.text
    assert all(not token.isascii() for token in stream.text.split())


@pytest.mark.parametrize("ollama", [False, True], ids=["tools4", "ollama"])
def test_tool_streams_come_out_call_for_call(ollama: bool) -> None:
    stream = bench_stream.build_tool_stream(ollama=ollama)
    assert len(stream.tool_calls) == 4
    if ollama:
        assert b'"index":1' not in stream.body  # every delta really is labelled 0
    turn = bench_stream.steadyloop_assemble(bench_stream.network_reads(stream.body))
    got = [(call.id, call.name, call.arguments) for call in turn.tool_calls]
    assert got == [(call.id, call.name, call.arguments) for call in stream.tool_calls]
    assert len({call.id for call in turn.tool_calls}) == 4
    for call in turn.tool_calls:
        assert len(call.arguments) > 3_500
        assert isinstance(json.loads(call.arguments), dict)
    assert turn.defects == []
    assert turn.stats.dropped_deltas == 0
    assert turn.finish_reason == "tool_calls"


@pytest.mark.parametrize("size", [1, 7, 4_096])
def test_read_size_does_not_change_the_turn(size: int) -> None:
    stream = bench_stream.build_tool_stream(ollama=True)
    body = stream.body[:40_000] + stream.body[-2_000:]  # cut short: keep it fast
    reads = [body[i : i + size] for i in range(0, len(body), size)]
    whole = bench_stream.steadyloop_assemble([body])
    assert bench_stream.steadyloop_assemble(reads).model_dump() == whole.model_dump()


@pytest.mark.parametrize("international", [False, True])
def test_feed_and_feed_data_paths_agree(international: bool) -> None:
    stream = bench_stream.build_text_stream(3_000, international=international)
    reads = bench_stream.network_reads(stream.body)
    via_data = bench_stream.steadyloop_assemble(reads)
    via_objects = bench_stream.steadyloop_assemble(reads, event_objects=True)
    assert via_data.model_dump() == via_objects.model_dump()
    assert via_data.text == stream.text


def test_context_and_counted_paths_run() -> None:
    stream = bench_stream.build_tool_stream(argument_chars=600)
    reads = bench_stream.network_reads(stream.body)
    plain = bench_stream.steadyloop_assemble(reads)
    assert bench_stream.steadyloop_assemble(reads, guard=True).model_dump() == plain.model_dump()
    assert [(c.id, c.name, c.arguments) for c in plain.tool_calls] == [
        (c.id, c.name, c.arguments) for c in stream.tool_calls
    ]
    stubbed = bench_stream.steadyloop_assemble(reads, stub_accumulator=True)
    assert stubbed.tool_calls == [] and stubbed.stats.chunks == plain.stats.chunks
    # What `--instructions` runs under callgrind, once.
    bench_stream.run_passes("tools4", "steadyloop", 1)


def test_floor_parses_every_payload() -> None:
    stream = bench_stream.build_text_stream(500)
    reads = bench_stream.network_reads(stream.body)
    assert bench_stream.floor(json.loads)(reads) == stream.chunks


def test_openai_baseline_assembles_the_same_turn() -> None:
    # The baseline must do the same job, or the ratio against it means nothing.
    text = bench_stream.build_text_stream(300)
    completion = bench_stream.openai_assemble(bench_stream.network_reads(text.body))
    assert completion.choices[0].message.content == text.text
    tools = bench_stream.build_tool_stream(argument_chars=300)
    completion = bench_stream.openai_assemble(bench_stream.network_reads(tools.body))
    calls = completion.choices[0].message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        (c.id, c.name, c.arguments) for c in tools.tool_calls
    ]


@pytest.mark.parametrize("name", list(bench_stream.STREAMS))
def test_learned_shapes_and_whole_parses_give_the_same_turn(name: str) -> None:
    """The main rows learn chunk shapes; the `whole` row parses every chunk. Both must
    be the turn the stream encodes, or one of the two figures is for a broken path."""
    stream = bench_stream.STREAMS[name]()
    reads = bench_stream.network_reads(stream.body)
    learned = bench_stream.steadyloop_assemble(reads)
    assert (
        learned.model_dump()
        == bench_stream.steadyloop_assemble(reads, shape_cache=False).model_dump()
    )
    assert learned.text == stream.text and learned.reasoning == stream.reasoning
    assert [(c.id, c.name, c.arguments) for c in learned.tool_calls] == [
        (c.id, c.name, c.arguments) for c in stream.tool_calls
    ]
    assert learned.stats.chunks == stream.chunks and learned.stats.saw_done


def test_padded_stream_is_openai_current_shape() -> None:
    stream = bench_stream.build_text_stream(200, padded=True)
    payloads = [line[6:] for line in stream.body.split(b"\n\n") if line.startswith(b"data: {")]
    tokens = [json.loads(p) for p in payloads[1:-2]]
    assert all(list(chunk)[-1] == "obfuscation" for chunk in tokens)
    assert len({chunk["obfuscation"] for chunk in tokens}) > 100  # no two chunks end alike
    assert all(chunk["service_tier"] == "default" for chunk in tokens)
