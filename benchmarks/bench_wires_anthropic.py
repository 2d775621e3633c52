"""How fast the Anthropic Messages wire turns its stream into a turn, against a floor and
anthropic-python's `MessageStream` accumulator, on the same bytes.

Run: `.venv/bin/python benchmarks/bench_wires_anthropic.py` (`--quick` for 3 rounds,
`--repeat N` for N rounds). Prints ratios measured in this one run; asserts nothing.
(`anthropic_main` is the function `bench_wires.py` calls beside its Responses cases.)

Streams are built in memory in the shape the Messages API sends them: `message_start`
with usage, per call `content_block_start` (`tool_use`, `input: {}`), `input_json_delta`
fragments of 3-12 characters, `content_block_stop`, then `message_delta` and
`message_stop`, with `event:` lines; fed in network-sized reads (4-16 KB, seeded).
Cases: one call (~200 bytes of arguments), ten parallel calls (~200 bytes each), one
call with ~10 KB of arguments.

Candidates, best of N interleaved rounds (`bench_stream.timed_rounds`):

- `steadyloop`: `SSEDecoder.feed_data` per read and `AnthropicAssembler.feed_events`,
  `finish()`, as the model activity runs them;
- `floor/orjson`: split each read into lines and `orjson.loads` every `data:` payload;
- `anthropic`: the official client's path on the same bytes, as `MessageStream` runs
  it: its `SSEDecoder`, `json.loads`, `construct_type(RawMessageStreamEvent)`,
  `accumulate_event` (which re-parses the growing partial JSON with `jiter` on every
  `input_json_delta`) and `build_events`.

Targets (issue 26 section 7): steadyloop at most 1.3x its floor, at least 20x faster
than the SDK.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from bench_stream import _fragments, _tool_arguments
from bench_wires import measure

from steadyloop.stream.anthropic_assembly import AnthropicAssembler
from steadyloop.stream.completion import AssembledTurn
from steadyloop.stream.sse import SSEDecoder

Case = tuple[str, bytes, int]  # name, body, calls


def _sse(payload: dict[str, Any]) -> bytes:
    name = str(payload["type"]).encode()
    return b"event: " + name + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


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


def anthropic_cases() -> list[Case]:
    return [
        ("one call", build_messages_stream(1, 200), 1),
        ("ten parallel", build_messages_stream(10, 200), 10),
        ("10 KB args", build_messages_stream(1, 10_000), 1),
    ]


def steadyloop_anthropic(reads: list[bytes]) -> AssembledTurn:
    decoder = SSEDecoder()
    assembler = AnthropicAssembler(endpoint="bench")
    for read in reads:
        events = decoder.feed_data(read)
        if events and assembler.feed_events(events):
            break
    return assembler.finish()


def sdk_anthropic(reads: list[bytes]) -> Any:
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


def check(name: str, turn: AssembledTurn, body: bytes, calls: int, sdk: Any) -> None:
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


def anthropic_main(rounds: int) -> None:
    print(f"Anthropic Messages, best of {rounds} rounds "
          "(targets: steadyloop/floor <= 1.3x, anthropic/steadyloop >= 20x)")  # fmt: skip
    lines = measure(anthropic_cases(), steadyloop_anthropic, sdk_anthropic, rounds,
                    peer="anthropic", check=check)  # fmt: skip
    for line in lines:
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 15)")
    args = parser.parse_args(argv)
    anthropic_main(args.repeat or (3 if args.quick else 15))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
