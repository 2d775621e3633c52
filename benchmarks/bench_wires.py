"""How fast each non-chat wire turns its stream into a turn, against a floor and the SDK.

Run: `.venv/bin/python benchmarks/bench_wires.py` (`--quick` for 3 rounds, `--repeat N`
for N rounds). Prints ratios measured in this one run; asserts nothing.

Streams are built in memory in the shape the official API sends them (OpenAI Responses:
`response.created`, `response.in_progress`, then per call `output_item.added`, argument
deltas of 3-12 characters with `output_index`, `item_id` and `sequence_number`,
`function_call_arguments.done`, `output_item.done`, and `response.completed` repeating
the output with usage), fed in network-sized reads (4-16 KB, seeded). Cases:

- `one call`: one call with ~200 bytes of arguments;
- `ten parallel`: ten calls of ~200 bytes each;
- `10 KB args`: one call with ~10 KB of arguments.

Candidates, best of N interleaved rounds (`bench_stream.timed_rounds`):

- `steadyloop`: `SSEDecoder.feed_data` per read and the wire's assembler
  (`ResponsesAssembler.feed_events`, `finish()`), as the model activity runs it;
- `floor/orjson`: split each read into lines and `orjson.loads` every `data:` payload
  (the least any reader does; no SSE spec, no assembly);
- `openai`: the official client's path on the same bytes: its `SSEDecoder`,
  `json.loads`, `construct_type(ResponseStreamEvent)` and
  `openai.lib.streaming.responses.ResponseStreamState.handle_event`, then the final
  response, as `client.responses.stream()` does.

The targets (issue 26 section 7): steadyloop at most 1.3x its floor, and at least 20x
faster than the SDK. Anthropic's cases go in `anthropic_cases()` beside these.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from bench_stream import _fragments, _tool_arguments, floor, network_reads, timed_rounds

from steadyloop.stream.completion import AssembledTurn
from steadyloop.stream.responses_assembly import ResponsesAssembler
from steadyloop.stream.sse import SSEDecoder
from steadyloop.stream.wire import RESPONSES_WIRE

Case = tuple[str, bytes, int]  # name, body, calls


def _sse(payload: dict[str, Any]) -> bytes:
    name: str = payload["type"]
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


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


def responses_cases() -> list[Case]:
    return [
        ("one call", build_responses_stream(1, 200), 1),
        ("ten parallel", build_responses_stream(10, 200), 10),
        ("10 KB args", build_responses_stream(1, 10_000), 1),
    ]


def steadyloop_responses(reads: list[bytes]) -> AssembledTurn:
    decoder = SSEDecoder(event_names=RESPONSES_WIRE.reads_event_names)
    assembler = ResponsesAssembler(endpoint="bench")
    for read in reads:
        events = decoder.feed_data(read)
        if events and assembler.feed_events(events):
            break
    return assembler.finish()


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


def check(name: str, turn: AssembledTurn, body: bytes, calls: int, sdk: Any) -> None:
    """The candidates read the same calls (a benchmark of a wrong answer is no benchmark)."""
    assert len(turn.tool_calls) == calls and not turn.defects, name
    sent = [
        json.loads(line[6:])["item"]
        for line in body.split(b"\n")
        if line.startswith(b"data: ") and b'"response.output_item.done"' in line
    ]
    assert [c.arguments for c in turn.tool_calls] == [item["arguments"] for item in sent]
    assert [o.arguments for o in sdk.output] == [item["arguments"] for item in sent]


Checker = Callable[[str, AssembledTurn, bytes, int, Any], None]


def measure(cases: list[Case], assemble: Callable[[list[bytes]], AssembledTurn],
            sdk: Callable[[list[bytes]], Any], rounds: int, *, peer: str = "openai",
            check: Checker = check) -> list[str]:  # fmt: skip
    """Best of `rounds` for each case: steadyloop against the parse floor, and the `peer`
    SDK's accumulator (`sdk`) against steadyloop, once `check` has found they agree."""
    ratio = f"{peer}/steadyloop"
    lines = [f"{'case':<14} {'events':>6} {'KB':>6}  {'steadyloop/floor':>16}  {ratio:>17}"]
    for name, body, calls in cases:
        reads = network_reads(body)
        check(name, assemble(reads), body, calls, sdk(reads))
        runs: dict[str, Callable[[], object]] = {
            "steadyloop": partial(assemble, reads),
            "floor/orjson": partial(floor(orjson.loads), reads),
            peer: partial(sdk, reads),
        }
        times = timed_rounds(runs, rounds)
        best = {label: min(values) for label, values in times.items()}
        events = body.count(b"\ndata: ")
        lines.append(
            f"{name:<14} {events:>6} {len(body) / 1024:>6.1f}  "
            f"{best['steadyloop'] / best['floor/orjson']:>15.2f}x  "
            f"{best[peer] / best['steadyloop']:>{max(16, len(ratio) - 1)}.1f}x"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 15)")
    args = parser.parse_args(argv)
    rounds = args.repeat or (3 if args.quick else 15)
    print(f"OpenAI Responses, best of {rounds} rounds "
          "(targets: steadyloop/floor <= 1.3x, openai/steadyloop >= 20x)")  # fmt: skip
    for line in measure(responses_cases(), steadyloop_responses, openai_responses, rounds):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
