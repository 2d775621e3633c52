"""How fast each wire turns its stream into a turn, against its parse floor and the SDK.

Run: `.venv/bin/python benchmarks/bench_wires.py` (`--quick` for 3 rounds, `--repeat N`
for N rounds, `--wire NAME` for one wire). Prints one table of ratios measured in this
one run; asserts nothing.

Streams are built in memory in the shape each API sends them, and fed in network-sized
reads (4-16 KB, seeded):

- `chat`: Chat Completions chunks (`bench_stream`'s shape): the role, per call a head
  with id and name, argument deltas of 3-12 characters, the finish reason, usage and
  `[DONE]`; `data:` lines only.
- `responses`: OpenAI Responses: `response.created`, `response.in_progress`, then per
  call `output_item.added`, argument deltas of 3-12 characters with `output_index`,
  `item_id` and `sequence_number`, `function_call_arguments.done`, `output_item.done`,
  and `response.completed` repeating the output with usage; `event:` lines kept.
- `anthropic`: Anthropic Messages: `message_start` with usage, per call
  `content_block_start` (`tool_use`, `input: {}`), `input_json_delta` fragments of 3-12
  characters, `content_block_stop`, then `message_delta` and `message_stop`; `event:`
  lines kept.

Cases: `one call` (~200 bytes of arguments), `ten parallel` (ten calls of ~200 bytes),
`10 KB args` (one call of ~10 KB).

Candidates, best of N interleaved rounds (`bench_stream.timed_rounds`); a small case is
run several times per round (the same count for every candidate), so that one sample
is milliseconds, not the timer's grain. Each sample follows a full collection and one
untimed run of the candidate (`timed_rounds` says why):

- `steadyloop`: `SSEDecoder.feed_data` per read (`event_names` as the wire sets it)
  and the wire's assembler (`feed_events`, `finish()`), as the model activity runs it;
- `floor/json`, `floor/orjson`: split each read into lines and parse every `data:`
  payload with `json.loads` or `orjson.loads` (the least any reader does; no SSE spec,
  no assembly). The issue's floor is `json.loads`; steadyloop parses with orjson, so
  the orjson floor is the same-parser measure of what the rest costs, printed beside it;
- the official SDK's accumulator on the same bytes: for `chat`, openai-python's SSE
  decoder, `construct_type(ChatCompletionChunk)` and `ChatCompletionStreamState`
  (`bench_stream.openai_assemble`); for `responses`, its decoder,
  `construct_type(ResponseStreamEvent)` and `ResponseStreamState.handle_event`, then the
  final response, as `client.responses.stream()` does; for `anthropic`,
  anthropic-python's decoder, `construct_type(RawMessageStreamEvent)`,
  `accumulate_event` (which re-parses the growing partial JSON with `jiter` on every
  `input_json_delta`) and `build_events`, as `MessageStream` runs them.

The targets: every wire at most 1.3x its floor, and Responses and
Anthropic at least 20x faster than the SDK; the `goal` column says which are met.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from bench_stream import (
    _chunk,
    _event,
    _fragments,
    _tool_arguments,
    _usage_chunk,
    floor,
    network_reads,
    openai_assemble,
    steadyloop_assemble,
    timed_rounds,
)

from steadyloop._stream.anthropic_assembly import AnthropicAssembler
from steadyloop._stream.anthropic_wire import ANTHROPIC_WIRE
from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.responses_assembly import ResponsesAssembler
from steadyloop._stream.sse import SSEDecoder
from steadyloop._stream.wire import RESPONSES_WIRE, StreamAssembler

Case = tuple[str, bytes, int]  # name, body, calls
Checker = Callable[[str, AssembledTurn, bytes, int, Any], None]
FLOOR_GOAL = 1.3
SDK_GOAL = 20.0
# About this many body bytes per timed sample: a small case is run several times a round.
SAMPLE_BYTES = 200_000


def _sse(payload: dict[str, Any]) -> bytes:
    name: str = payload["type"]
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


# -- Chat Completions ------------------------------------------------------------------------


def build_chat_stream(calls: int, argument_chars: int, seed: int = 7) -> bytes:
    """A Chat Completions stream of `calls` tool calls of ~`argument_chars` each."""
    rng = random.Random(seed)
    parts = [_event(_chunk({"role": "assistant", "content": None, "refusal": None}))]
    for n in range(calls):
        head = {"index": n, "id": f"call_{rng.getrandbits(96):024x}", "type": "function",
                "function": {"name": "write_file", "arguments": ""}}  # fmt: skip
        parts.append(_event(_chunk({"tool_calls": [head]})))
        for fragment in _fragments(rng, _tool_arguments(rng, n, argument_chars)):
            delta = {"index": n, "function": {"arguments": fragment}}
            parts.append(_event(_chunk({"tool_calls": [delta]})))
    parts.append(_event(_chunk({}, "tool_calls")))
    parts.append(_event(_usage_chunk(1_530, len(parts))))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def check_chat(name: str, turn: AssembledTurn, body: bytes, calls: int, sdk: Any) -> None:
    """The candidates read the same calls (a benchmark of a wrong answer is no benchmark)."""
    assert len(turn.tool_calls) == calls and not turn.defects, name
    sent: dict[int, str] = {}
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            for delta in json.loads(line[6:])["choices"][:1]:
                for call in delta["delta"].get("tool_calls", []):
                    index = call["index"]
                    sent[index] = sent.get(index, "") + call["function"]["arguments"]
    assert [c.arguments for c in turn.tool_calls] == list(sent.values()), name
    got = [c.function.arguments for c in sdk.choices[0].message.tool_calls]
    assert got == list(sent.values()), name


# -- OpenAI Responses ------------------------------------------------------------------------


def build_responses_stream(calls: int, argument_chars: int, seed: int = 7) -> bytes:
    """An OpenAI Responses stream of `calls` function calls of ~`argument_chars` each."""
    rng = random.Random(seed)
    sequence = 0
    parts: list[bytes] = []

    def emit(payload: dict[str, Any]) -> None:
        nonlocal sequence
        parts.append(_sse({**payload, "sequence_number": sequence}))
        sequence += 1

    response = {"id": "resp_0123456789abcdef", "object": "response", "model": "gpt-5",
                "status": "in_progress", "output": []}  # fmt: skip
    emit({"type": "response.created", "response": response})
    emit({"type": "response.in_progress", "response": response})
    output = []
    for n in range(calls):
        item_id = f"fc_{rng.getrandbits(96):024x}"
        arguments = _tool_arguments(rng, n, argument_chars)
        item = {"id": item_id, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": f"call_{rng.getrandbits(96):024x}",
                "name": "write_file"}  # fmt: skip
        emit({"type": "response.output_item.added", "output_index": n, "item": item})
        for fragment in _fragments(rng, arguments):
            emit({"type": "response.function_call_arguments.delta", "item_id": item_id,
                  "output_index": n, "delta": fragment})  # fmt: skip
        emit({"type": "response.function_call_arguments.done", "item_id": item_id,
              "output_index": n, "arguments": arguments})  # fmt: skip
        done = {**item, "status": "completed", "arguments": arguments}
        emit({"type": "response.output_item.done", "output_index": n, "item": done})
        output.append(done)
    usage = {"input_tokens": 1530, "input_tokens_details": {"cached_tokens": 1024},
             "output_tokens": sequence, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 1530 + sequence}  # fmt: skip
    final = {**response, "status": "completed", "output": output, "usage": usage}
    emit({"type": "response.completed", "response": final})
    return b"".join(parts)


def _fold(reads: list[bytes], decoder: SSEDecoder, assembler: StreamAssembler) -> AssembledTurn:
    """The model activity's loop: each read decoded, its events folded, until the end."""
    for read in reads:
        events = decoder.feed_data(read)
        if events and assembler.feed_events(events):
            break
    return assembler.finish()


def steadyloop_responses(reads: list[bytes]) -> AssembledTurn:
    decoder = SSEDecoder(event_names=RESPONSES_WIRE.reads_event_names)
    return _fold(reads, decoder, ResponsesAssembler(endpoint="bench"))


def openai_responses(reads: list[bytes]) -> Any:
    """The official client's Responses path (see the module docstring)."""
    from openai._models import construct_type
    from openai._streaming import SSEDecoder as OpenAISSEDecoder
    from openai._types import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    for sse in OpenAISSEDecoder().iter_bytes(iter(reads)):
        event = construct_type(type_=ResponseStreamEvent, value=sse.json())
        for _ in state.handle_event(event):
            pass
    return state._completed_response


def check_responses(name: str, turn: AssembledTurn, body: bytes, calls: int, sdk: Any) -> None:
    """The candidates read the same calls (a benchmark of a wrong answer is no benchmark)."""
    assert len(turn.tool_calls) == calls and not turn.defects, name
    sent = [
        json.loads(line[6:])["item"]
        for line in body.split(b"\n")
        if line.startswith(b"data: ") and b'"response.output_item.done"' in line
    ]
    assert [c.arguments for c in turn.tool_calls] == [item["arguments"] for item in sent]
    assert [o.arguments for o in sdk.output] == [item["arguments"] for item in sent]


# -- Anthropic Messages ----------------------------------------------------------------------


def build_messages_stream(calls: int, argument_chars: int, seed: int = 7) -> bytes:
    """An Anthropic Messages stream of `calls` tool_use blocks of ~`argument_chars` each."""
    rng = random.Random(seed)
    message: dict[str, Any] = {
               "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
               "content": [], "model": "claude-sonnet-4-5", "stop_reason": None,
               "stop_sequence": None,
               "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 1024, "output_tokens": 2}}  # fmt: skip
    parts = [_sse({"type": "message_start", "message": message})]
    for n in range(calls):
        block = {"type": "tool_use", "id": f"toolu_{rng.getrandbits(96):024x}",
                 "name": "write_file", "input": {}}  # fmt: skip
        parts.append(_sse({"type": "content_block_start", "index": n, "content_block": block}))
        for fragment in _fragments(rng, _tool_arguments(rng, n, argument_chars)):
            delta = {"type": "input_json_delta", "partial_json": fragment}
            parts.append(_sse({"type": "content_block_delta", "index": n, "delta": delta}))
        parts.append(_sse({"type": "content_block_stop", "index": n}))
    parts.append(_sse({"type": "message_delta",
                       "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                       "usage": {"output_tokens": len(parts)}}))  # fmt: skip
    parts.append(_sse({"type": "message_stop"}))
    return b"".join(parts)


def steadyloop_anthropic(reads: list[bytes]) -> AssembledTurn:
    decoder = SSEDecoder(event_names=ANTHROPIC_WIRE.reads_event_names)
    return _fold(reads, decoder, AnthropicAssembler(endpoint="bench"))


def anthropic_messages(reads: list[bytes]) -> Any:
    """anthropic-python's `MessageStream` path (see the module docstring)."""
    from anthropic._models import construct_type
    from anthropic._streaming import SSEDecoder as AnthropicSSEDecoder
    from anthropic.lib.streaming._messages import accumulate_event, build_events
    from anthropic.types import RawMessageStreamEvent

    snapshot: Any = None
    json_bufs: dict[int, bytes] = {}
    for sse in AnthropicSSEDecoder().iter_bytes(iter(reads)):
        event: Any = construct_type(type_=RawMessageStreamEvent, value=sse.json())
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
        for _ in build_events(event=event, message_snapshot=snapshot):
            pass
    return snapshot


def check_anthropic(name: str, turn: AssembledTurn, body: bytes, calls: int, sdk: Any) -> None:
    """Both candidates read the same calls (a benchmark of a wrong answer is no benchmark)."""
    assert len(turn.tool_calls) == calls and not turn.defects, name
    sent: dict[int, str] = {}
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and b'"input_json_delta"' in line:
            event = json.loads(line[6:])
            sent[event["index"]] = sent.get(event["index"], "") + event["delta"]["partial_json"]
    assert [c.arguments for c in turn.tool_calls] == list(sent.values()), name
    assert [json.dumps(b.input) for b in sdk.content] == [
        json.dumps(json.loads(a)) for a in sent.values()
    ], name


# -- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WireBench:
    """One wire's candidates: how it builds a case's stream, steadyloop's path, the SDK's
    path (`peer` names it), the check that both read the calls sent, and whether the
    SDK goal applies to it."""

    wire: str
    build: Callable[[int, int], bytes]
    assemble: Callable[[list[bytes]], AssembledTurn]
    sdk: Callable[[list[bytes]], Any]
    peer: str
    check: Checker
    sdk_goal: bool


WIRE_BENCHES = (
    WireBench("chat", build_chat_stream, steadyloop_assemble, openai_assemble, "openai",
              check_chat, sdk_goal=False),
    WireBench("responses", build_responses_stream, steadyloop_responses, openai_responses,
              "openai", check_responses, sdk_goal=True),
    WireBench("anthropic", build_messages_stream, steadyloop_anthropic, anthropic_messages,
              "anthropic", check_anthropic, sdk_goal=True),
)  # fmt: skip
CASES = (("one call", 1, 200), ("ten parallel", 10, 200), ("10 KB args", 1, 10_000))


def cases(bench: WireBench) -> list[Case]:
    return [(name, bench.build(calls, chars), calls) for name, calls, chars in CASES]


def _repeated(
    run: Callable[[list[bytes]], object], reads: list[bytes], times: int
) -> Callable[[], None]:
    def go() -> None:
        for _ in range(times):
            run(reads)

    return go


HEADER = (
    f"{'wire':<10} {'case':<13} {'events':>6} {'KB':>6}  {'/floor(json)':>12}  "
    f"{'/floor(orjson)':>14}  {'sdk/steadyloop':>14}  {'sdk':<9}  goal"
)


def measure(bench: WireBench, rounds: int) -> list[str]:
    """One row per case: best of `rounds` for each candidate, once `bench.check` has
    found that steadyloop and the SDK read the calls the stream sent."""
    lines = []
    for name, body, calls in cases(bench):
        reads = network_reads(body)
        bench.check(name, bench.assemble(reads), body, calls, bench.sdk(reads))
        times = max(1, SAMPLE_BYTES // len(body))
        paths: dict[str, Callable[[list[bytes]], object]] = {
            "steadyloop": bench.assemble,
            "floor/json": floor(json.loads),
            "floor/orjson": floor(orjson.loads),
            "sdk": bench.sdk,
        }
        runs = {label: _repeated(path, reads, times) for label, path in paths.items()}
        warm = {label: _repeated(path, reads, 1) for label, path in paths.items()}
        samples = timed_rounds(runs, rounds, warm)
        best = {label: min(values) for label, values in samples.items()}
        to_floor = best["steadyloop"] / best["floor/json"]
        to_orjson = best["steadyloop"] / best["floor/orjson"]
        sdk = best["sdk"] / best["steadyloop"]
        events = body.count(b"\ndata: ") + body.startswith(b"data: ")
        met = to_floor <= FLOOR_GOAL and (sdk >= SDK_GOAL or not bench.sdk_goal)
        lines.append(
            f"{bench.wire:<10} {name:<13} {events:>6} "
            f"{len(body) / 1024:>6.1f}  {to_floor:>11.2f}x  {to_orjson:>13.2f}x  "
            f"{sdk:>13.1f}x  {bench.peer:<9}  {'met' if met else 'MISSED'}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 15)")
    wires = [bench.wire for bench in WIRE_BENCHES]
    parser.add_argument("--wire", choices=wires, action="append", help="only this wire")
    args = parser.parse_args(argv)
    rounds = args.repeat or (3 if args.quick else 15)
    print(f"Wire assembly, best of {rounds} rounds. Goals: /floor(json) <= {FLOOR_GOAL}x on "
          f"every wire, sdk/steadyloop >= {SDK_GOAL:.0f}x on responses and anthropic")  # fmt: skip
    print(HEADER)
    for bench in WIRE_BENCHES:
        if args.wire and bench.wire not in args.wire:
            continue
        for line in measure(bench, rounds):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
