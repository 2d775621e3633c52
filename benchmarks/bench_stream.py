"""How fast steadyloop turns a streamed chat completion into a turn, against baselines.

Run: `.venv/bin/python benchmarks/bench_stream.py` (`--quick` for 3 rounds, `--no-http`
to skip the loopback part, `--repeat N` for N rounds, `--instructions` to count
instructions under callgrind instead of timing).

SSE byte streams are built in memory, in the shapes real servers send:

1. `text`: a 20,000-token English answer, one token per chunk, in OpenAI's chunk shape
   (id, object, created, model, system_fingerprint, choices[0].delta.content, logprobs
   null, finish_reason null), raw UTF-8 with about one token in a hundred outside
   ASCII; a role chunk first, then a finish chunk, a usage chunk and `[DONE]`.
2. `tools4`: four parallel tool calls with ~4 KB of arguments each, streamed in 3-12
   character fragments; the first delta of each call carries index, id, type,
   function.name and arguments "".
3. `ollama`: the same four calls labelled the way Ollama labels them: every delta
   `index: 0` (the ids tell the calls apart on their first delta only).
4. `text-intl` (context): stream 1 with every token outside ASCII (CJK, accents,
   emoji), the decoder's slower path.
5. `text-padded` (context): stream 1 in OpenAI's current chunk shape, `service_tier`
   and an `obfuscation` member of random padding (1-12 characters) last in every chunk,
   so that no two chunks end alike.
6. `reasoning` (context): a reasoning model's 20,000 tokens, 16,000 of them reasoning
   (`delta.reasoning_content`) before a 4,000-token answer.

Each stream is fed in network-sized reads (4-16 KB, seeded) and timed with
`time.perf_counter`, best of N rounds, every round running each candidate once in a
rotating order (the summary also gives the median over rounds of the ratio within a
round, which load from elsewhere moves less than a best time):

- `steadyloop`: `SSEDecoder.feed_data` per read, `TurnAssembler.feed_events`,
  `finish()`, the model activity's loop. Context rows repeat it with `SSEDecoder.feed`
  (a `ServerSentEvent` object per event) and, for the tool streams, with the
  accumulator stubbed out, to show its share, and with the runaway guard's check after
  every read (default limits), as the model activity runs it; and with every chunk
  parsed whole (`TurnAssembler(shape_cache=False)`: no learned chunk shapes, see
  `steadyloop._stream.turn_assembly`), which is the path a stream takes when its chunks do not
  repeat byte for byte around their text.
- `floor/json`, `floor/orjson`: the least any reader can do: split each read into
  lines (carrying the partial line), and parse every `data: ` payload with `json.loads`
  or `orjson.loads`. No spec handling, no assembly.
- `openai`: what the official client does with the same bytes: its own `SSEDecoder`
  (`openai._streaming`), `json.loads` of each payload (`ServerSentEvent.json`),
  `construct_type(type_=ChatCompletionChunk, value=...)` (`_process_response_data`
  without strict validation, the client's default), then
  `ChatCompletionStreamState.handle_chunk` and `get_final_completion()`, as
  `chat.completions.stream()` does.

Then, over real HTTP on 127.0.0.1 for stream 1, a small asyncio server (in the same
process) sends the bytes, once in 64 KB writes and once one event per write as a model
server does, and these read them: a raw socket read to EOF (the floor), httpx bytes
alone, httpx + `SSEDecoder` + `TurnAssembler` (the whole steadyloop path), and
`AsyncOpenAI`'s `chat.completions.stream()` against the same server.

The printed tables are times and ratios; nothing here asserts a time.

Times on a shared machine move by several percent from run to run. `--instructions`
gives a repeatable second measure: each path runs under `valgrind --tool=callgrind`
(hash seed fixed), once for 1 and once for 1 + N passes over a stream, and the
difference divided by N is its instruction count per pass, startup and imports
cancelled out. Instructions are not time (a Python bytecode costs more time per
instruction than the JSON parser's tight loops), so the two ratios differ; both are
printed against the same floors.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson

from steadyloop._stream import turn_assembly
from steadyloop._stream.argument_limits import ArgumentLimits
from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.runaway_guard import RunawayGuard
from steadyloop._stream.sse import ServerSentEvent, SSEDecoder
from steadyloop._stream.turn_assembly import TurnAssembler

TEXT_TOKENS = 20_000
TOOL_CALLS = 4
TOOL_ARGUMENT_CHARS = 4_096
RESPONSE_ID = "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
MODEL = "gpt-4o-2024-08-06"
FINGERPRINT = "fp_eb9dce56a8"
CREATED = 1_741_570_283

# fmt: off
# English prose as a tokenizer cuts it: leading spaces, punctuation, markdown, digits.
_ENGLISH = (
    " the", " a", " stream", " of", " tokens", " is", " folded", " into", " one", " turn",
    ",", ".", " and", " tool", " calls", " never", " merge", " or", " drop", "\n", " We",
    " read", " each", " chunk", " once", ":", " `", "json", "`", " to", " in", " that",
    " it", " for", " with", " as", " on", " be", " this", " are", "\n\n", "**", " -",
    " 42", " (", ")", " \"quoted\"", " back\\slash", "\t", " retries", " worker",
)
# About one token in a hundred is not ASCII in English output (dashes, quotes, names).
_ENGLISH_RARE = (
    " \u2014", "\u2019s", " caf\u00e9", "\u2026", " na\u00efve", " \U0001f642", " \u201c",
    "\u201d",
)
# Every token outside ASCII: CJK, accented Latin, emoji.
_INTERNATIONAL = (
    "東京", "の", "ストリーム", "は", "一つ", "のターン", "に", "。", "、", "数据", "流", "会",
    " été", " déjà", " Straße", " 🙂", " 🚀", "—", " über", "ß",
)
# fmt: on


# -- stream builders (also used by tests/test_bench_streams.py) ---------------------------


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call a built stream carries, as it must come out of assembly."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class BuiltStream:
    """An SSE body and the turn it encodes."""

    name: str
    body: bytes
    chunks: int
    text: str
    tool_calls: tuple[ToolCallSpec, ...]
    reasoning: str = ""


def _event(payload: dict[str, Any]) -> bytes:
    # OpenAI sends compact JSON and raw UTF-8.
    return (
        b"data: "
        + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        + (b"\n\n")
    )


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


_PADDING = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _padded(chunk: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """OpenAI's chunk since 2025: `service_tier`, and `obfuscation` padding last, random
    text of random length so that chunk sizes do not reveal the tokens."""
    chunk = {**chunk, "service_tier": "default"}
    chunk["system_fingerprint"] = chunk.pop("system_fingerprint")
    chunk["choices"] = chunk.pop("choices")
    chunk["obfuscation"] = "".join(rng.choices(_PADDING, k=rng.randint(1, 12)))
    return chunk


def _usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "system_fingerprint": FINGERPRINT,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
    }


def _english_tokens(rng: random.Random, count: int) -> list[str]:
    return [
        rng.choice(_ENGLISH_RARE) if rng.random() < 0.01 else rng.choice(_ENGLISH)
        for _ in range(count)
    ]


def build_text_stream(
    tokens: int = TEXT_TOKENS, seed: int = 1, *, international: bool = False, padded: bool = False
) -> BuiltStream:
    """Stream 1: a long answer, one token per chunk (English, or every token non-ASCII);
    `padded`: in OpenAI's current shape, with `obfuscation` padding on every chunk."""
    rng = random.Random(seed)
    if international:
        words = [rng.choice(_INTERNATIONAL) for _ in range(tokens)]
    else:
        words = _english_tokens(rng, tokens)
    chunks = [_chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks.extend(_chunk({"content": word}) for word in words)
    chunks.append(_chunk({}, "stop"))
    if padded:
        chunks = [_padded(chunk, rng) for chunk in chunks]
    parts = [_event(chunk) for chunk in chunks]
    parts.append(_event(_usage_chunk(812, tokens)))
    parts.append(b"data: [DONE]\n\n")
    name = "text-intl" if international else "text-padded" if padded else "text"
    return BuiltStream(name, b"".join(parts), len(parts) - 1, "".join(words), ())


def build_reasoning_stream(tokens: int = TEXT_TOKENS, seed: int = 4) -> BuiltStream:
    """A reasoning model's answer: four tokens in five are reasoning (`reasoning_content`,
    as DeepSeek, vLLM and llama.cpp send it), then the answer, one token per chunk."""
    rng = random.Random(seed)
    thoughts = _english_tokens(rng, tokens * 4 // 5)
    words = _english_tokens(rng, tokens - len(thoughts))
    parts = [_event(_chunk({"role": "assistant", "content": ""}))]
    parts.extend(_event(_chunk({"reasoning_content": thought})) for thought in thoughts)
    parts.extend(_event(_chunk({"content": word})) for word in words)
    parts.append(_event(_chunk({}, "stop")))
    parts.append(_event(_usage_chunk(812, tokens)))
    parts.append(b"data: [DONE]\n\n")
    return BuiltStream(
        "reasoning", b"".join(parts), len(parts) - 1, "".join(words), (), "".join(thoughts)
    )


def _tool_arguments(rng: random.Random, number: int, chars: int) -> str:
    """A realistic arguments object of about `chars`: a path and a file body with escapes."""
    lines: list[str] = []
    size = 0
    while size < chars - 120:
        words = _english_tokens(rng, rng.randint(4, 12))
        line = "    " + " ".join(word.strip() or "x" for word in words)
        lines.append(line)
        size += len(line) + 2
    arguments = {
        "path": f"src/steadyloop/module_{number}.py",
        "content": "\n".join(lines),
        "overwrite": number % 2 == 0,
    }
    return json.dumps(arguments, ensure_ascii=False)


def _fragments(rng: random.Random, text: str) -> Iterator[str]:
    i = 0
    while i < len(text):
        step = rng.randint(3, 12)
        yield text[i : i + step]
        i += step


def build_tool_stream(
    *, ollama: bool = False, seed: int = 2, argument_chars: int = TOOL_ARGUMENT_CHARS
) -> BuiltStream:
    """Stream 2 (or 3 with `ollama=True`): four calls, ~4 KB arguments, 3-12 char fragments."""
    rng = random.Random(seed)
    names = ("read_file", "write_file", "read_file", "run_tests")
    calls = tuple(
        ToolCallSpec(
            id=f"call_{rng.getrandbits(96):024x}",
            name=names[n % len(names)],
            arguments=_tool_arguments(rng, n, argument_chars),
        )
        for n in range(TOOL_CALLS)
    )
    parts = [_event(_chunk({"role": "assistant", "content": None, "refusal": None}))]
    for n, call in enumerate(calls):
        index = 0 if ollama else n
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        parts.append(_event(_chunk({"tool_calls": [first]})))
        for fragment in _fragments(rng, call.arguments):
            delta = {"index": index, "function": {"arguments": fragment}}
            parts.append(_event(_chunk({"tool_calls": [delta]})))
    parts.append(_event(_chunk({}, "tool_calls")))
    parts.append(_event(_usage_chunk(1_530, len(parts))))
    parts.append(b"data: [DONE]\n\n")
    name = "ollama" if ollama else "tools4"
    return BuiltStream(name, b"".join(parts), len(parts) - 1, "", calls)


def network_reads(body: bytes, seed: int = 3, low: int = 4_096, high: int = 16_384) -> list[bytes]:
    """The body cut as a socket would deliver it: reads of 4-16 KB, at arbitrary bytes."""
    rng = random.Random(seed)
    reads: list[bytes] = []
    i = 0
    while i < len(body):
        step = rng.randint(low, high)
        reads.append(body[i : i + step])
        i += step
    return reads


# -- the paths being timed ------------------------------------------------------------------


def steadyloop_assemble(
    reads: list[bytes],
    *,
    stub_accumulator: bool = False,
    event_objects: bool = False,
    guard: bool = False,
    shape_cache: bool = True,
) -> AssembledTurn:
    """SSE decoding plus assembly, as the model activity runs it.

    The activity's loop is `assembler.feed_events(decoder.feed_data(read))`.
    `event_objects=True` uses `decoder.feed` instead (a `ServerSentEvent` per event),
    `stub_accumulator=True` swaps `ToolCallAccumulator` for a no-op, `guard=True` adds
    the runaway guard's check after each read, and `shape_cache=False` parses every
    chunk whole (no learned chunk shapes): context rows only.
    """
    decoder = SSEDecoder()
    assembler = TurnAssembler(shape_cache=shape_cache)
    if stub_accumulator:
        setattr(assembler, "_calls", _AccumulatorStub())  # noqa: B010
    feed_events = assembler.feed_events
    decode: Callable[[bytes], Sequence[ServerSentEvent | str]] = (
        decoder.feed if event_objects else decoder.feed_data
    )
    if guard:
        runaway = RunawayGuard(ArgumentLimits())
        calls = assembler.calls
        for read in reads:
            done = feed_events(decode(read))
            if not calls.is_empty and runaway.check(calls.records):
                raise AssertionError("the runaway guard cut a benchmark stream")
            if done:
                break
        else:
            feed_events(decoder.flush())
        return assembler.finish()
    for read in reads:
        if feed_events(decode(read)):
            break
    else:
        feed_events(decoder.flush())
    return assembler.finish()


def steadyloop_assemble_stdlib_json(reads: list[bytes]) -> AssembledTurn:
    """The same path with the stdlib `json` parser swapped in: the same-parser comparison
    against the `json.loads` floor, so parser speed does not hide or inflate our overhead."""
    saved = turn_assembly._loads, turn_assembly._OrjsonDecodeError
    turn_assembly._loads = json.loads  # type: ignore[assignment]
    turn_assembly._OrjsonDecodeError = json.JSONDecodeError  # type: ignore[assignment]
    try:
        return steadyloop_assemble(reads)
    finally:
        turn_assembly._loads, turn_assembly._OrjsonDecodeError = saved


class _AccumulatorStub:
    """A no-op stand-in for `ToolCallAccumulator` (benchmark context rows only)."""

    is_empty = True
    dropped_deltas = 0
    malformed_aliases = 0
    call_count = 0

    def __init__(self) -> None:
        # Where the assembler appends bare fragments: a list per index that keeps nothing.
        self.parts_by_index: defaultdict[int, deque[str]] = defaultdict(lambda: deque(maxlen=0))

    def observe(self, deltas: object) -> None:
        pass

    def assembled(self) -> list[Any]:
        return []


def floor(loads: Callable[[bytes], Any]) -> Callable[[list[bytes]], int]:
    """Split reads into lines and parse each `data: ` payload: no spec, no assembly."""

    def run(reads: list[bytes]) -> int:
        parsed = 0
        pending = b""
        for read in reads:
            lines = (pending + read).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    loads(line[6:])
                    parsed += 1
        return parsed

    return run


def openai_assemble(reads: list[bytes]) -> Any:
    """The official client's path: its SSE decoder, json.loads, construct_type, stream state."""
    from openai._models import construct_type
    from openai._streaming import SSEDecoder as OpenAISSEDecoder
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: Any = ChatCompletionStreamState()
    for sse in OpenAISSEDecoder().iter_bytes(iter(reads)):
        if sse.data.startswith("[DONE]"):
            break
        chunk = construct_type(type_=ChatCompletionChunk, value=sse.json())
        for _event in state.handle_chunk(chunk):
            pass
    return state.get_final_completion()


def timed_rounds(
    runs: Mapping[str, Callable[[], object]],
    rounds: int,
    warm: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, list[float]]:
    """Wall time of each run in each of `rounds` rounds, interleaved.

    Every round runs each candidate once, in a rotating order, so a burst of load from
    elsewhere on the machine hits all of them alike instead of one whole series. Each
    sample starts after a full collection, so no candidate pays for another's garbage.
    That collection also empties CPython's free lists, and the code after it runs slower
    for a while: about 0.3 ms here, which a sample of 48 runs of a 30-us path would count
    as 7 us a run. `warm[label]`, when given, runs untimed after the collection (one run
    of what the sample repeats), so a sample times the path, not that refill.
    """
    times: dict[str, list[float]] = {label: [] for label in runs}
    labels = list(runs)
    for round_number in range(rounds):
        shift = round_number % len(labels)
        for label in labels[shift:] + labels[:shift]:
            gc.collect()
            if warm is not None:
                warm[label]()
            start = time.perf_counter()
            runs[label]()
            times[label].append(time.perf_counter() - start)
    return times


def best_of(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best wall time of each run over `rounds` interleaved rounds (`timed_rounds`)."""
    return {label: min(times) for label, times in timed_rounds(runs, rounds).items()}


def median_ratio(times: dict[str, list[float]], label: str, base: str) -> float:
    """The median over rounds of `label`'s time / `base`'s time in the same round: the
    two ran back to back, so load from elsewhere mostly hits both or neither."""
    return statistics.median(t / b for t, b in zip(times[label], times[base], strict=True))


# -- loopback HTTP ----------------------------------------------------------------------------


async def _serve(body: bytes, *, per_event: bool) -> tuple[asyncio.Server, int]:
    """A loopback server answering every request with `body` as an SSE response.

    `per_event=False` writes the body in 64 KB pieces (the transport at full speed: the
    harshest floor); `per_event=True` writes one event at a time, as a model server does
    while it generates, draining every 64 events.
    """
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
    )
    if per_event:
        pieces = [event + b"\n\n" for event in body.split(b"\n\n") if event]
    else:
        pieces = [body[i : i + 65_536] for i in range(0, len(body), 65_536)]
    drain_every = 64 if per_event else 1

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Read the request head (and a body, if announced) before answering.
        raw = await reader.readuntil(b"\r\n\r\n")
        for line in raw.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                await reader.readexactly(int(line.split(b":", 1)[1]))
        writer.write(head)
        for number, piece in enumerate(pieces, 1):
            writer.write(piece)
            if number % drain_every == 0:
                await writer.drain()
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port


async def _raw_socket(port: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    total = 0
    while True:
        data = await reader.read(65_536)
        if not data:
            break
        total += len(data)
    writer.close()
    return total


async def _httpx_bytes(client: Any, url: str) -> int:
    total = 0
    async with client.stream("POST", url, json={"stream": True}) as response:
        async for data in response.aiter_raw():
            total += len(data)
    return total


async def _httpx_steadyloop(client: Any, url: str) -> AssembledTurn:
    decoder = SSEDecoder()
    assembler = TurnAssembler()
    async with client.stream("POST", url, json={"stream": True}) as response:
        async for data in response.aiter_raw():
            if assembler.feed_events(decoder.feed_data(data)):
                break
        else:
            assembler.feed_events(decoder.flush())
    return assembler.finish()


async def _activity_reader(client: Any, base_url: str) -> AssembledTurn:
    """The model activity's own path: `stream_turn`, watchdog and runaway guard included."""
    from steadyloop._activities.model_stream import stream_turn
    from steadyloop._chat import ChatMessage
    from steadyloop._routing.endpoints import EndpointConfig
    from steadyloop._stream.completion import CompletionRequest

    endpoint = EndpointConfig(name="bench", base_url=base_url, include_usage=False)
    request = CompletionRequest(
        endpoint="bench", model=MODEL, messages=[ChatMessage(role="user", content="hi")]
    )
    return await stream_turn(client, endpoint, request, api_key=None)


async def _openai_client(client: Any) -> Any:
    async with client.chat.completions.stream(
        model=MODEL, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        async for _event in stream:
            pass
        return await stream.get_final_completion()


async def _best_async(runs: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """`best_of` for coroutines: interleaved rounds, best time per label."""
    best = {label: float("inf") for label in runs}
    labels = list(runs)
    for round_number in range(rounds):
        shift = round_number % len(labels)
        for label in labels[shift:] + labels[:shift]:
            gc.collect()
            start = time.perf_counter()
            await runs[label]()
            best[label] = min(best[label], time.perf_counter() - start)
    return best


async def loopback(
    stream: BuiltStream, repeat: int, openai_repeat: int, *, per_event: bool
) -> dict[str, float]:
    """Time the HTTP paths against a server on 127.0.0.1 sending `stream.body`."""
    import httpx
    from openai import AsyncOpenAI

    server, port = await _serve(stream.body, per_event=per_event)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            turn = await _httpx_steadyloop(client, url)
            if turn.text != stream.text:
                raise AssertionError("the loopback path assembled the wrong text")
            results = await _best_async(
                {
                    "raw socket read to EOF (floor)": lambda: _raw_socket(port),
                    "httpx aiter_raw, bytes only": lambda: _httpx_bytes(client, url),
                    "httpx + SSEDecoder + TurnAssembler": lambda: _httpx_steadyloop(client, url),
                    "  the model activity's stream_turn (+ watchdog, guard)": lambda: (
                        _activity_reader(client, f"http://127.0.0.1:{port}/v1")
                    ),
                },
                repeat,
            )
        openai_client = AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-loopback", max_retries=0
        )
        try:
            completion = await _openai_client(openai_client)
            if completion.choices[0].message.content != stream.text:
                raise AssertionError("AsyncOpenAI assembled the wrong text")
            results.update(
                await _best_async(
                    {"AsyncOpenAI .stream() + stream state": lambda: _openai_client(openai_client)},
                    openai_repeat,
                )
            )
        finally:
            await openai_client.close()
    finally:
        server.close()
        await server.wait_closed()
    return results


# -- instruction counts (callgrind) -------------------------------------------------------------

STREAMS: dict[str, Callable[[], BuiltStream]] = {
    "text": build_text_stream,
    "tools4": build_tool_stream,
    "ollama": lambda: build_tool_stream(ollama=True),
    "text-intl": lambda: build_text_stream(international=True),
    "text-padded": lambda: build_text_stream(padded=True),
    "reasoning": build_reasoning_stream,
}

COUNTED_PATHS: dict[str, Callable[[list[bytes]], object]] = {
    "floor/orjson": floor(orjson.loads),
    "floor/json": floor(json.loads),
    "steadyloop": steadyloop_assemble,
    "steadyloop/stdlib": steadyloop_assemble_stdlib_json,
    "steadyloop/whole": lambda reads: steadyloop_assemble(reads, shape_cache=False),
}


def run_passes(stream_name: str, path: str, passes: int) -> None:
    """What one callgrind run executes: build one stream, run one path over it."""
    reads = network_reads(STREAMS[stream_name]().body)
    run = COUNTED_PATHS[path]
    for _ in range(passes):
        run(reads)


def _instructions(valgrind: str, stream_name: str, path: str, passes: int) -> int:
    result = subprocess.run(
        [
            valgrind,
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            os.path.abspath(__file__),
            "--passes",
            stream_name,
            path,
            str(passes),
        ],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"Collected : (\d+)", result.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{result.stderr}")
    return int(match.group(1))


def instruction_counts(extra_passes: int, jobs: int) -> int:
    """Instructions per pass of each path over each stream, and their ratios."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--instructions needs valgrind on PATH")
        return 1
    cases = [(stream, path) for stream in STREAMS for path in COUNTED_PATHS]

    def per_pass(case: tuple[str, str]) -> float:
        stream, path = case
        once = _instructions(valgrind, stream, path, 1)
        more = _instructions(valgrind, stream, path, 1 + extra_passes)
        return (more - once) / extra_passes

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        counts = dict(zip(cases, pool.map(per_pass, cases), strict=True))
    print(
        f"Instructions per pass (callgrind, Python {sys.version.split()[0]}, "
        f"difference of 1 and {1 + extra_passes} passes)\n"
    )
    print(f"  {'stream':<10} " + " ".join(f"{path:>18}" for path in COUNTED_PATHS))
    for stream in STREAMS:
        row = " ".join(f"{counts[stream, path] / 1e6:17.2f}M" for path in COUNTED_PATHS)
        print(f"  {stream:<10} {row}")
    print("\n  ratios: steadyloop / floor (orjson), steadyloop with stdlib json / floor (json)")
    for stream in STREAMS:
        ours = counts[stream, "steadyloop"] / counts[stream, "floor/orjson"]
        stdlib = counts[stream, "steadyloop/stdlib"] / counts[stream, "floor/json"]
        print(f"  {stream:<10} {ours:15.3f}x {stdlib:13.3f}x")
    return 0


# -- report -----------------------------------------------------------------------------------


def _header(ratio: str) -> str:
    return f"  {'path':<50} {'time':>12} {'throughput':>13} {ratio:>15}"


def _row(label: str, seconds: float, base: float, payload_bytes: int) -> str:
    return (
        f"  {label:<50} {seconds * 1e3:9.2f} ms {payload_bytes / seconds / 1e6:8.1f} MB/s"
        f" {seconds / base:14.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=25, help="rounds (best is kept)")
    parser.add_argument("--quick", action="store_true", help="3 repetitions")
    parser.add_argument("--no-http", action="store_true", help="skip the loopback HTTP part")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per pass under callgrind instead of timing (slow)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    parser.add_argument("--passes", nargs=3, help=argparse.SUPPRESS)  # one callgrind run
    args = parser.parse_args(argv)
    if args.passes:
        stream_name, path, passes = args.passes
        run_passes(stream_name, path, int(passes))
        return 0
    if args.instructions:
        return instruction_counts(extra_passes=2, jobs=args.jobs)
    repeat = 3 if args.quick else args.repeat
    openai_repeat = 1 if args.quick else 3

    streams = [build() for build in STREAMS.values()]
    floor_json = floor(json.loads)
    floor_orjson = floor(orjson.loads)
    print(f"Python {sys.version.split()[0]}, best of {repeat}; ratios are time / baseline time\n")
    summary: list[tuple[str, float, float, float, float, float, float]] = []
    for stream in streams:
        reads = network_reads(stream.body)
        turn = steadyloop_assemble(reads)
        calls = [(c.id, c.name, c.arguments) for c in turn.tool_calls]
        if (turn.text, turn.reasoning, calls) != (
            stream.text,
            stream.reasoning,
            [(c.id, c.name, c.arguments) for c in stream.tool_calls],
        ):
            print(f"{stream.name}: steadyloop assembled the wrong turn; not timing it")
            return 1
        runs: dict[str, Callable[[], object]] = {
            "orjson": lambda reads=reads: floor_orjson(reads),  # type: ignore[misc]
            "json": lambda reads=reads: floor_json(reads),  # type: ignore[misc]
            "ours": lambda reads=reads: steadyloop_assemble(reads),  # type: ignore[misc]
        }
        runs["objects"] = lambda reads=reads: steadyloop_assemble(  # type: ignore[misc]
            reads, event_objects=True
        )
        runs["stdlib"] = lambda reads=reads: steadyloop_assemble_stdlib_json(  # type: ignore[misc]
            reads
        )
        runs["whole"] = lambda reads=reads: steadyloop_assemble(  # type: ignore[misc]
            reads, shape_cache=False
        )
        if stream.tool_calls:
            runs["stubbed"] = lambda reads=reads: steadyloop_assemble(  # type: ignore[misc]
                reads, stub_accumulator=True
            )
            runs["guarded"] = lambda reads=reads: steadyloop_assemble(  # type: ignore[misc]
                reads, guard=True
            )
        samples = timed_rounds(runs, repeat)
        times = {label: min(seconds) for label, seconds in samples.items()}
        t_orjson, t_json, t_ours = times["orjson"], times["json"], times["ours"]
        t_openai = best_of(
            {"openai": lambda reads=reads: openai_assemble(reads)},  # type: ignore[misc]
            openai_repeat,
        )["openai"]
        size = len(stream.body)
        print(
            f"{stream.name}: {stream.chunks:,} chunks, {size / 1e6:.2f} MB, "
            f"{len(reads)} reads of 4-16 KB"
        )
        print(_header("/ floor orjson"))
        rows = [
            ("floor: split lines + orjson.loads", t_orjson),
            ("floor: split lines + json.loads", t_json),
            ("steadyloop SSEDecoder + TurnAssembler", t_ours),
            ("  (context: same, every chunk parsed whole)", times["whole"]),
            ("  (context: same via feed, ServerSentEvent objects)", times["objects"]),
            ("steadyloop with the stdlib json parser", times["stdlib"]),
        ]
        if "stubbed" in times:
            rows.append(("  (context: same, accumulator stubbed out)", times["stubbed"]))
            rows.append(("  (context: same, + runaway guard check per read)", times["guarded"]))
        rows.append(("openai SSEDecoder + ChatCompletionStreamState", t_openai))
        for label, seconds in rows:
            print(_row(label, seconds, t_orjson, size))
        print()
        summary.append(
            (
                stream.name,
                t_ours / t_orjson,
                median_ratio(samples, "ours", "orjson"),
                times["stdlib"] / t_json,
                median_ratio(samples, "stdlib", "json"),
                t_openai / t_ours,
                times["whole"] / t_orjson,
            )
        )

    print("Summary (targets: <= 1.3x the floor with the same parser; >= 20x faster than openai)")
    print("  orjson/orjson: steadyloop (orjson) / floor (orjson); json/json: both with stdlib json")
    print("  best: best time / best time; median: median over rounds of the same-round ratio")
    print("  whole: every chunk parsed whole (no learned chunk shapes) / floor (orjson)")
    columns = ("orjson/orjson", "median", "json/json", "median", "openai / steadyloop", "whole")
    print(
        f"  {'stream':<11} {columns[0]:>14} {columns[1]:>8} {columns[2]:>10} {columns[3]:>8}"
        f" {columns[4]:>20} {columns[5]:>7}"
    )
    for name, vs_orjson, med_orjson, vs_json, med_json, openai_ratio, whole in summary:
        print(
            f"  {name:<11} {vs_orjson:13.2f}x {med_orjson:7.2f}x {vs_json:9.2f}x {med_json:7.2f}x"
            f" {openai_ratio:19.1f}x {whole:6.2f}x"
        )

    if not args.no_http:
        text = streams[0]
        text_reads = network_reads(text.body, low=65_536, high=65_536)
        in_memory = best_of(
            {
                "orjson": lambda: floor_orjson(text_reads),
                "ours": lambda: steadyloop_assemble(text_reads),
            },
            repeat,
        )
        for per_event, how in (
            (False, "server writes the body in 64 KB pieces"),
            (True, "server writes one event per token, as a model server does"),
        ):
            results = asyncio.run(loopback(text, repeat, openai_repeat, per_event=per_event))
            base = results["raw socket read to EOF (floor)"]
            print(
                f"\nLoopback HTTP, stream 'text' ({len(text.body) / 1e6:.2f} MB), {how}, "
                f"best of {repeat}"
            )
            print(_header("/ raw socket"))
            for label, seconds in results.items():
                print(_row(label, seconds, base, len(text.body)))
            for label, seconds in (
                ("  (context: no HTTP, split + orjson.loads)", in_memory["orjson"]),
                ("  (context: no HTTP, SSEDecoder + TurnAssembler)", in_memory["ours"]),
            ):
                print(_row(label, seconds, base, len(text.body)))
        print("  (target: httpx + SSEDecoder + TurnAssembler <= 3x the raw socket)")
        print("  (context rows: the same work in memory, 64 KB reads, no socket at all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
