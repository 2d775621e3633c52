"""Hostile values at every boundary, tested as a class.

A property test drives ToolLoopWorkflow on the time-skipping test server against the
scripted provider (real HTTP), with generated hostile values in every position a value
crosses a boundary: model text and reasoning, tool-call names, ids and arguments (lone
surrogates, split pairs, NUL, invalid UTF-8 bytes, 1 MB strings, deep nesting, numbers
outside float range, text that is not JSON), tool results (bytes, sets, objects, values
that cannot be printed, surrogates, 50 MB), provider errors and headers (the key echoed
in every field, absurd `Retry-After`), and run inputs (prompt, tenant, limits). After
every run `hostile_harness.check_invariants` holds: a named stop reason or a wait on a
person, every call answered once, no effect repeated, no workflow task failed, no
activity crashed on a value, no fragment of the provider key anywhere in history.

Beside the property, one plain parametrized test per hostile position (the exact repro
where the issue gives one) says in one line what broke when it fails.

Profiles: `ci` (default; derandomized, so CI is reproducible, and small enough for about a
minute on two cores) and `thorough` (`HYPOTHESIS_PROFILE=thorough`: more examples, with
shrinking). Shrinking is off in `ci`: a failing run costs seconds, and the failing
example is printed whole anyway.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pytest
from hostile_harness import (
    KEY,
    HostileWorld,
    Outcome,
    PlannedCall,
    Unprintable,
    check_invariants,
    hostile_world,
    key_leaks,
    task_failures,
    unhandled_activity_failures,
)
from hostile_wires import Api, WireWriter, raw_event
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History, HistoryEvent

from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._run.models import RunInput, RunLimits
from steadyloop.testing import (
    Pause,
    ScriptedResponse,
    chunk,
    finish_chunk,
    json_response,
    raw_response,
    sse_response,
    usage_chunk,
)

pytestmark = pytest.mark.slow

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "thorough",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


# -- hostile values, by name (the names are what a failing example prints) -------------

ONE_MB = 1_000_000

TEXTS: dict[str, str] = {
    "lone_high_surrogate": "half \ud83d",
    "lone_low_surrogate": "\ude00 tail",
    "undecodable_bytes": b"caf\xff\xfe".decode("utf-8", "surrogateescape"),
    "nul": "a\x00b\x00",
    "controls": "\x1b[2J\r\x07\x7f\u2028\u2029",
    "bidi_override": "\u202egnp.exe",
    "noncharacters": "\uffff\ufffe\U0010ffff",
    "empty": "",
    "one_mb": "x" * ONE_MB,
    "one_mb_emoji": "\U0001f600" * (ONE_MB // 4),
    "sse_lookalike": "data: [DONE]\n\ndata: {}\n\n",
}
SPLIT_PAIR = ("smile \ud83d", "\ude00 done")  # an emoji split across two chunks (item 2)

# JSON text for the `value` argument of a probe call, written into the arguments as is.
ARG_VALUES: dict[str, str] = {
    "escaped_lone_surrogate": '"half \\ud83d"',  # item 1: valid JSON, a lone surrogate
    "escaped_lone_low": '"\\ude00 x"',
    "raw_lone_surrogate": '"half \ud83d"',
    "escaped_pair_split": '"smile \\ud83d\\ude00"',  # sent in 3-character fragments
    "undecodable_bytes": '"' + TEXTS["undecodable_bytes"] + '"',
    "escaped_nul": '"a\\u0000b"',
    "one_mb_string": '"' + "x" * ONE_MB + '"',
    "deep_list_300": "[" * 300 + "]" * 300,
    "deep_list_3000": "[" * 3000 + "]" * 3000,
    "deep_dict_600": '{"a":' * 600 + "1" + "}" * 600,
    "deep_dict_3000": '{"a":' * 3000 + "1" + "}" * 3000,
    "float_overflow": "1e400",
    "negative_float_overflow": "-1e400",
    "float_underflow": "1e-400",
    "huge_exponent": "1e99999999999999999999",
    "huge_int": "1" + "0" * 5000,
    "nan_literal": "NaN",
    "infinity_literal": "-Infinity",
}
# Whole argument texts (not a probe's usual object).
WHOLE_ARGS: dict[str, str] = {
    "malformed": '{"city": Paris}',  # item 8: finished, not JSON: answered, not retried
    "not_an_object": "[1, 2]",
    "null": "null",
    "empty": "",
    "trailing_garbage": '{"value": 1} {"value": 2}',
    "byte_order_mark": "\ufeff{}",
    "unterminated": '{"ex": "',
}

RESULTS: dict[str, Callable[[], Any]] = {
    "bytes": lambda: b"\xff\xfe raw \x00",
    "set": lambda: {1, "two", 3.5},
    "frozenset_of_tuples": lambda: frozenset({(1, 2), (3, 4)}),
    "object": object,
    "unprintable_object": Unprintable,
    "exception_instance": lambda: ValueError("an exception as a value"),
    "lone_surrogate_text": lambda: "half \ud83d",
    "undecodable_text": lambda: b"caf\xff".decode("utf-8", "surrogateescape"),  # item 3
    "dict_with_bytes": lambda: {"data": b"\xff\x00"},  # item 3
    "dict_with_surrogate_key": lambda: {"\ud83d": 1},
    "nul_text": lambda: "a\x00b",
    "fifty_mb": lambda: "x" * 50_000_000,
    "fifty_mb_emoji": lambda: "\U0001f600" * 12_500_000,
    "nan": lambda: math.nan,
    "infinities": lambda: {"v": math.inf, "w": -math.inf},
    "huge_int": lambda: 10**5000,
    "deep_list": lambda: _nested(5000),
    "circular_list": lambda: _circular(),
    "none": lambda: None,
}

NAMES: dict[str, Any] = {
    "lone_surrogate": "pure_probe\ud83d",
    "nul": "pure\x00probe",
    "empty": "",
    "blank": "   ",
    "one_mb": "n" * ONE_MB,
    "unknown": "no_such_tool",
    "padded": " pure_probe ",
    "number": 42,
    "null": None,
}
IDS: dict[str, Any] = {
    "empty": "",
    "blank": " \t",
    "lone_surrogate": "call_\ud83d",
    "nul": "call\x00x",
    "one_mb": "i" * ONE_MB,
    "duplicate": "dup",
    "number": 7,
    "null": None,
    "omitted": "omit",
}
# Ids a plain call may carry and still be expected to run (they are minted anew).
MINTED_IDS = {"empty", "blank", "duplicate", "null", "omitted"}

MAX_FRAGMENTS = 256
CUT = 500  # the provider-error excerpt length of item 6


_JSON_HEAD = '{"error": {"message": "'


def _key_at(offset: int) -> str:
    return "x" * offset + KEY + " tail"


def _json_body_at_cut(inside: int) -> Callable[[], tuple[bytes, str]]:
    """A JSON error whose raw body has `inside` characters of the key before the cut."""
    return lambda: _json_error(message=_key_at(CUT - inside - len(_JSON_HEAD)))


def _text_body_at_cut(inside: int) -> Callable[[], tuple[bytes, str]]:
    return lambda: (_key_at(CUT - inside).encode(), "text/plain")


ERROR_BODIES: dict[str, Callable[[], tuple[bytes, str]]] = {
    "key_in_message": lambda: _json_error(message=f"Incorrect API key provided: {KEY}."),
    "key_in_code": lambda: _json_error(code=KEY),
    "key_in_type": lambda: _json_error(type=KEY),
    "key_in_param": lambda: _json_error(param=KEY),
    # The key straddles the excerpt's cut with 40, 20 and 8 of its characters before it
    # (`_JSON_HEAD` characters of the body come before the message).
    **{f"key_at_cut_{inside}_inside": _json_body_at_cut(inside) for inside in (40, 20, 8)},
    "key_in_code_at_cut": lambda: _json_error(message="m" * (CUT - 20), code=KEY),
    "key_nested": lambda: (
        json.dumps({"error": {"message": "no", "details": [{"meta": {"key": KEY}}]}}).encode(),
        "application/json",
    ),
    "key_unicode_escaped": lambda: (
        ('{"error":{"message":"' + "".join(f"\\u{ord(c):04x}" for c in KEY) + '"}}').encode(),
        "application/json",
    ),
    "key_in_text_body": lambda: (f"Unauthorized: {KEY}".encode(), "text/plain"),
    **{
        f"key_in_text_body_at_cut_{inside}_inside": _text_body_at_cut(inside)
        for inside in (40, 20, 8)
    },
    "key_in_html": lambda: (f"<html><body><h1>401</h1>{KEY}</body></html>".encode(), "text/html"),
    "key_with_invalid_utf8": lambda: (
        b'{"error":{"message":"bad \xff\xfe key ' + KEY.encode() + b'"}}',
        "application/json",
    ),
    "key_after_one_mb": lambda: _json_error(message="x" * ONE_MB + KEY),
    "error_is_a_string": lambda: (json.dumps({"error": KEY}).encode(), "application/json"),
    "error_list": lambda: (
        json.dumps([{"error": {"message": KEY, "code": 401}}]).encode(),
        "application/json",
    ),
    "key_as_surrogate_escapes": lambda: _json_error(message=KEY + " \ud83d", code="\udcff"),
}
ERROR_HEADERS: dict[str, dict[str, str]] = {
    "none": {},
    "retry_after_1e300": {"Retry-After": "1e300"},  # item 7
    "retry_after_inf": {"Retry-After": "inf"},
    "retry_after_nan": {"Retry-After": "nan"},
    "retry_after_negative": {"Retry-After": "-5"},
    "retry_after_30_digits": {"Retry-After": "9" * 30},
    "retry_after_year_9999": {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
    "retry_after_year_1": {"Retry-After": "Mon, 01 Jan 0001 00:00:00 GMT"},
    "retry_after_is_the_key": {"Retry-After": KEY},
    "retry_after_ms_1e300": {"retry-after-ms": "1e300"},
    "key_echoed_in_headers": {
        "X-Request-Id": KEY,
        "WWW-Authenticate": f'Bearer error="invalid_token", key="{KEY}"',
    },
}
STATUSES = [400, 401, 403, 404, 408, 429, 500, 502, 503]
# Usage numbers as the JSON text a provider sends (prompt or cache tokens, output tokens):
# past a double's range, NaN (not JSON, written anyway), negative, fractional, a string,
# null, an int of 5,000 digits.
USAGES: dict[str, tuple[str, str]] = {
    "1e300": ("1e300", "1e300"),
    "overflow": ("1e400", "-1e400"),
    "nan": ("NaN", "Infinity"),
    "negative": ("-1", "-5"),
    "fractional": ("0.5", "2.5"),
    "string": ('"7"', '"x"'),
    "null": ("null", "null"),
    "huge_int": ("1" + "0" * 5000, "9" * 30),
}


def _json_error(
    *,
    message: str = "scripted error",
    type: Any = "invalid_request_error",
    code: Any = None,
    param: Any = None,
) -> tuple[bytes, str]:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return json.dumps(body).encode("utf-8", "surrogatepass"), "application/json"


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _circular() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


# -- one example: a script of turns, run options, and what it expects -------------------

Wire = Literal["json", "raw"]


@dataclass(frozen=True)
class TextSpec:
    """Hostile text in a turn: `value` names a `TEXTS` entry, or `split_pair` (item 2),
    or `split_utf8` (an emoji's UTF-8 bytes cut across two socket writes)."""

    value: str
    field: Literal["content", "reasoning_content", "reasoning"] = "content"
    wire: Wire = "json"

    def parts(self) -> list[dict[str, Any] | bytes | Pause]:
        parts: list[dict[str, Any] | bytes | Pause]
        if self.value == "split_pair":
            parts = [
                chunk({self.field: SPLIT_PAIR[0]}),
                Pause(0.15),
                chunk({self.field: SPLIT_PAIR[1]}),
            ]
        elif self.value == "split_utf8":
            event = raw_event(chunk({self.field: "smile \U0001f600 done"}))
            cut = event.index("\U0001f600".encode()) + 2
            parts = [event[:cut], Pause(0.15), event[cut:]]
        else:
            piece = chunk({self.field: TEXTS[self.value]})
            parts = [raw_event(piece) if self.wire == "raw" else piece]
        if self.field != "content":
            parts.append(chunk({"content": "the answer"}))  # reasoning alone is no answer
        return parts

    def write(self, writer: WireWriter) -> None:
        """The same text on the Responses or Anthropic wire (`hostile_wires`)."""
        if self.field != "content":
            value = SPLIT_PAIR[0] + SPLIT_PAIR[1] if self.value == "split_pair" else None
            writer.reasoning(
                value or TEXTS.get(self.value, "smile \U0001f600 done"), raw=self.wire == "raw"
            )
            writer.text("the answer")  # reasoning alone is no answer
        elif self.value == "split_pair":
            writer.text(SPLIT_PAIR[0])
            writer.pause()
            writer.text(SPLIT_PAIR[1])
        elif self.value == "split_utf8":
            writer.text_cut_in_utf8("smile \U0001f600 done", "\U0001f600")
        else:
            writer.text(TEXTS[self.value], raw=self.wire == "raw")


@dataclass(frozen=True)
class CallSpec:
    """One tool call of a turn; every field but `tool` and `result` names a hostile
    variant or is `plain`."""

    tool: Literal["pure_probe", "opaque_probe"] = "opaque_probe"
    name: str = "plain"  # or a NAMES key, or "after_arguments" (item 11)
    id: str = "plain"  # or an IDS key
    args: str = "plain"  # or an ARG_VALUES or WHOLE_ARGS key
    wire: Wire = "json"
    fragment: int | None = None  # argument characters per delta
    result: str = "plain"  # or a RESULTS key

    def plain(self, index: str) -> bool:
        id_ok = self.id == "plain" or (index == "distinct" and self.id in MINTED_IDS)
        return self.name == "plain" and self.args == "plain" and id_ok


@dataclass(frozen=True)
class CallsTurn:
    calls: tuple[CallSpec, ...]
    text: TextSpec | None = None
    index: Literal["distinct", "zero", "omit"] = "distinct"
    repeat: bool = True  # the model asks the same calls again next turn


@dataclass(frozen=True)
class ErrorTurn:
    status: int
    body: str  # an ERROR_BODIES key
    headers: str = "none"  # an ERROR_HEADERS key
    in_stream: bool = False  # a 200 whose stream carries the error as an event


Turn = CallsTurn | ErrorTurn


@dataclass(frozen=True)
class Example:
    turns: tuple[Turn, ...] = ()
    final: TextSpec | None = None
    run_input: str = "plain"  # a RUN_INPUTS key
    forwarding: bool = False
    api: Api = "chat"  # the wire the run's endpoint speaks
    usage: str = "plain"  # a USAGES key, in every response of the run


@dataclass
class Built:
    script: list[ScriptedResponse] = field(default_factory=list)
    planned: list[PlannedCall] = field(default_factory=list)
    results: dict[int, Callable[[], Any]] = field(default_factory=dict)


def build(ex: str, example: Example) -> Built:
    """The scripted responses, planned probe calls and probe results of an example."""
    built = Built()
    n = 0
    usage = USAGES.get(example.usage)
    for number, turn in enumerate(example.turns):
        if isinstance(turn, ErrorTurn):
            built.script.append(_error_response(turn, example.api))
            continue
        numbered = []
        for spec in turn.calls:
            n += 1
            numbered.append((n, spec))
            if spec.result != "plain":
                built.results[n] = RESULTS[spec.result]
        plain_turn = turn.text is None and all(s.plain(turn.index) for _, s in numbered)
        if example.api == "anthropic" and turn.index == "omit":
            plain_turn = False  # a block index is its deltas' only label (`UNATTRIBUTABLE`)
        built.planned.extend(PlannedCall(spec.tool, k, plain=plain_turn) for k, spec in numbered)
        for label in ("t", "r") if turn.repeat else ("t",):
            built.script.append(
                _calls_response(ex, f"{label}{number}", turn, numbered, example.api, usage)
            )
    if example.final is not None and example.api != "chat":
        writer = WireWriter(example.api)
        example.final.write(writer)
        built.script.append(sse_response(writer.end(calls=False, **_usage(usage)), done=False))
    elif example.final is not None:
        built.script.append(
            sse_response([*example.final.parts(), finish_chunk("stop"), _usage_chunk(usage)])
        )
    return built


def _usage(usage: tuple[str, str] | None) -> dict[str, tuple[str, str]]:
    return {} if usage is None else {"usage": usage}


def _usage_chunk(usage: tuple[str, str] | None) -> dict[str, Any] | str:
    """The chat wire's usage chunk, with the numbers as JSON text when they are hostile."""
    if usage is None:
        return usage_chunk()
    prompt, completion = usage
    return (
        '{"id":"chatcmpl-h","object":"chat.completion.chunk","model":"m","choices":[],'
        f'"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},'
        f'"total_tokens":{completion},"prompt_tokens_details":{{"cached_tokens":{prompt}}}}}}}'
    )


def _wire_calls_response(
    ex: str,
    label: str,
    turn: CallsTurn,
    numbered: Sequence[tuple[int, CallSpec]],
    api: Api,
    usage: tuple[str, str] | None,
) -> ScriptedResponse:
    """`_calls_response` on the Responses or Anthropic wire (`hostile_wires`)."""
    writer = WireWriter(api, turn.index)
    if turn.text is not None:
        turn.text.write(writer)
    for n, spec in numbered:
        arguments, size = _arguments(ex, n, spec)
        frags = _fragments(arguments, size)
        name: Any = spec.tool if spec.name in ("plain", "after_arguments") else NAMES[spec.name]
        wire_id: Any = f"{label}_{n}" if spec.id == "plain" else IDS[spec.id]
        writer.call(
            wire_id,
            name,
            frags,
            raw=spec.wire == "raw",
            name_after_arguments=spec.name == "after_arguments",
        )
    return sse_response(writer.end(calls=True, **_usage(usage)), done=False)


def _calls_response(
    ex: str,
    label: str,
    turn: CallsTurn,
    numbered: Sequence[tuple[int, CallSpec]],
    api: Api = "chat",
    usage: tuple[str, str] | None = None,
) -> ScriptedResponse:
    if api != "chat":
        return _wire_calls_response(ex, label, turn, numbered, api, usage)
    parts: list[dict[str, Any] | bytes | str | Pause] = [
        chunk({"role": "assistant", "content": None})
    ]
    if turn.text is not None:
        parts.extend(turn.text.parts())
    for position, (n, spec) in enumerate(numbered):
        for delta in _deltas(ex, f"{label}_{n}", position, turn.index, n, spec):
            payload = chunk({"tool_calls": [delta]})
            parts.append(raw_event(payload) if spec.wire == "raw" else payload)
    parts.append(finish_chunk("tool_calls"))
    parts.append(_usage_chunk(usage))
    return sse_response(parts)


def _arguments(ex: str, n: int, spec: CallSpec) -> tuple[str, int | None]:
    """A call's whole arguments text and its fragment size (None: one fragment)."""
    if spec.args in WHOLE_ARGS:
        arguments = WHOLE_ARGS[spec.args]
    else:
        value = "null" if spec.args == "plain" else ARG_VALUES[spec.args]
        arguments = f'{{"ex": "{ex}", "n": {n}, "value": {value}}}'
    size = spec.fragment or (3 if spec.args == "escaped_pair_split" else None)
    if size:  # at most MAX_FRAGMENTS deltas: a 1 MB argument in 1-byte deltas tests nothing more
        size = max(size, -(-len(arguments) // MAX_FRAGMENTS))
    return arguments, size


def _fragments(arguments: str, size: int | None) -> list[str]:
    return (
        [arguments[i : i + size] for i in range(0, len(arguments), size)] if size else [arguments]
    ) or [""]


def _deltas(
    ex: str, call_id: str, position: int, index: str, n: int, spec: CallSpec
) -> list[dict[str, Any]]:
    arguments, size = _arguments(ex, n, spec)
    frags = _fragments(arguments, size)
    name: Any = spec.tool if spec.name in ("plain", "after_arguments") else NAMES[spec.name]
    wire_id: Any = call_id if spec.id == "plain" else IDS[spec.id]
    deltas: list[dict[str, Any]]
    if spec.name == "after_arguments":
        deltas = [{"function": {"arguments": f}} for f in frags]
        deltas.append({"function": {"name": name}})
    else:
        deltas = [{"type": "function", "function": {"name": name, "arguments": frags[0]}}]
        deltas.extend({"function": {"arguments": f}} for f in frags[1:])
    if wire_id != "omit":
        deltas[0] = {"id": wire_id, **deltas[0]}
    for delta in deltas:
        if index == "distinct":
            delta["index"] = position
        elif index == "zero":
            delta["index"] = 0
    return [{k: d[k] for k in ("index", "id", "type", "function") if k in d} for d in deltas]


def _error_response(turn: ErrorTurn, api: Api = "chat") -> ScriptedResponse:
    body, content_type = ERROR_BODIES[turn.body]()
    headers = dict(ERROR_HEADERS[turn.headers])
    if turn.in_stream and api != "chat":
        writer = WireWriter(api)
        writer.text("")
        writer.error(body)
        return sse_response(writer.parts, done=False, headers=headers)
    if turn.in_stream:
        return sse_response(
            [chunk({"role": "assistant", "content": ""}), b"data: " + body + b"\n\n"],
            headers=headers,
        )
    if content_type == "application/json":
        response = json_response({}, status=turn.status, headers=headers)
        return replace(response, parts=[body])
    return raw_response(body, status=turn.status, content_type=content_type, headers=headers)


# -- run inputs --------------------------------------------------------------------------

RunBuilder = Callable[[str], RunInput]


def _run(
    ex: str, *, prompt: str = "use the probes", limits: dict[str, Any] | None = None, **fields: Any
) -> RunInput:
    return RunInput(
        endpoint=ex,
        model=ex,
        prompt=prompt,
        system_prompt="You are a test agent.",
        tools=["pure_probe", "opaque_probe"],
        limits=RunLimits(**(limits or {})),
        **fields,
    )


def _unanswered_messages(ex: str) -> list[ChatMessage]:
    call = ToolCall(id="old_\ud83d", name="pure_probe", arguments='{"ex": "' + ex + '", "n": 0}')
    return [
        ChatMessage(role="user", content="earlier"),
        ChatMessage(role="assistant", tool_calls=[call]),
    ]


RUN_INPUTS: dict[str, RunBuilder] = {
    "plain": lambda ex: _run(ex),
    "prompt_lone_surrogate": lambda ex: _run(ex, prompt="half \ud83d"),
    "prompt_undecodable_bytes": lambda ex: _run(ex, prompt=TEXTS["undecodable_bytes"]),
    "prompt_nul": lambda ex: _run(ex, prompt="a\x00b"),
    "prompt_one_mb": lambda ex: _run(ex, prompt="p" * ONE_MB),
    "messages_with_unanswered_hostile_call": lambda ex: _run(ex, messages=_unanswered_messages(ex)),
    "tenant_empty": lambda ex: _run(ex, tenant_id=""),  # item 5
    "tenant_blank": lambda ex: _run(ex, tenant_id="  "),
    "tenant_lone_surrogate": lambda ex: _run(ex, tenant_id="t\ud83d"),
    "tenant_nul": lambda ex: _run(ex, tenant_id="t\x00"),
    "tenant_100k": lambda ex: _run(ex, tenant_id="t" * 100_000),
    "tenant_quotes": lambda ex: _run(ex, tenant_id='a"b\\c'),
    "deadline_1e12": lambda ex: _run(ex, limits={"deadline_s": 1e12}),  # item 4
    "deadline_inf": lambda ex: _run(ex, limits={"deadline_s": math.inf}),
    "deadline_1e-300": lambda ex: _run(ex, limits={"deadline_s": 1e-300}),
    "model_timeout_1e300": lambda ex: _run(ex, limits={"model_timeout_s": 1e300}),
    "heartbeat_timeout_1e300": lambda ex: _run(ex, limits={"model_heartbeat_timeout_s": 1e300}),
    "retry_initial_1e300": lambda ex: _run(ex, limits={"model_retry_initial_s": 1e300}),
    "retry_initial_1e-300": lambda ex: _run(ex, limits={"model_retry_initial_s": 1e-300}),
    "max_turns_1e18": lambda ex: _run(ex, limits={"max_turns": 10**18}),
    "token_budget_1e30": lambda ex: _run(ex, limits={"token_budget": 10**30}),
    "tool_concurrency_1e9": lambda ex: _run(ex, limits={"tool_concurrency": 10**9}),
    "model_attempts_1e9": lambda ex: _run(ex, limits={"model_attempts": 10**9}),
    "continue_as_new_every_turn": lambda ex: _run(ex, limits={"continue_as_new_after_turns": 1}),
    "continue_as_new_at_1_byte": lambda ex: _run(ex, limits={"continue_as_new_at_bytes": 1}),
}


def run_example(world: HostileWorld, example: Example) -> tuple[Outcome, list[str]]:
    ex = world.new_example(example.api)
    built = build(ex, example)

    def make_run() -> RunInput:
        run = RUN_INPUTS[example.run_input](ex)
        if example.forwarding:
            options = ForwardingOptions(enabled=True, batch_interval_s=0.05)
            run = run.model_copy(update={"forwarding": options})
        return run

    outcome = world.run(ex, make_run, built.script, built.results)
    broken = check_invariants(outcome, built.planned, input_position=example.run_input != "plain")
    return outcome, broken


def expect(world: HostileWorld, example: Example) -> Outcome:
    outcome, broken = run_example(world, example)
    if broken:
        raise AssertionError(f"{example}\n{outcome.describe()}\n  - " + "\n  - ".join(broken))
    return outcome


@pytest.fixture(scope="module")
def world() -> Iterator[HostileWorld]:
    with hostile_world() as shared:
        yield shared


# -- the property ------------------------------------------------------------------------


def _often_plain(options: Sequence[str], plain: str = "plain") -> st.SearchStrategy[str]:
    return st.one_of(st.just(plain), st.just(plain), st.sampled_from(list(options)))


texts = st.builds(
    TextSpec,
    value=st.sampled_from([*TEXTS, "split_pair", "split_utf8"]),
    field=st.sampled_from(["content", "reasoning_content", "reasoning"]),
    wire=st.sampled_from(["json", "raw"]),
)
call_specs = st.builds(
    CallSpec,
    tool=st.sampled_from(["pure_probe", "opaque_probe"]),
    name=_often_plain([*NAMES, "after_arguments"]),
    id=_often_plain(list(IDS)),
    args=_often_plain([*ARG_VALUES, *WHOLE_ARGS]),
    wire=st.sampled_from(["json", "raw"]),
    fragment=st.sampled_from([None, 1, 7]),
    result=st.sampled_from(["plain", *RESULTS]),
)
calls_turns = st.builds(
    CallsTurn,
    calls=st.lists(call_specs, min_size=1, max_size=2).map(tuple),
    text=st.none() | texts,
    index=st.sampled_from(["distinct", "distinct", "zero", "omit"]),
    repeat=st.booleans(),
)
error_turns = st.builds(
    ErrorTurn,
    status=st.sampled_from(STATUSES),
    body=st.sampled_from(list(ERROR_BODIES)),
    headers=st.sampled_from(list(ERROR_HEADERS)),
    in_stream=st.booleans(),
)
examples = st.builds(
    Example,
    turns=st.lists(st.one_of(calls_turns, calls_turns, error_turns), min_size=1, max_size=3).map(
        tuple
    ),
    final=st.none() | texts,
    run_input=_often_plain(list(RUN_INPUTS)),
    forwarding=st.booleans(),
    usage=_often_plain(list(USAGES)),
)
# The same class on the Responses and Anthropic wires (run inputs are the wire's concern
# no more than the chat wire's: they are drawn there).
wire_examples = st.builds(
    Example,
    turns=st.lists(st.one_of(calls_turns, calls_turns, error_turns), min_size=1, max_size=3).map(
        tuple
    ),
    final=st.none() | texts,
    forwarding=st.booleans(),
    api=st.sampled_from(["responses", "anthropic"]),
    usage=_often_plain(list(USAGES)),
)


@settings(settings.get_profile(PROFILE))
@given(example=examples)
def test_no_hostile_value_breaks_a_promise(world: HostileWorld, example: Example) -> None:
    expect(world, example)


@settings(
    settings.get_profile(PROFILE), max_examples=settings.get_profile(PROFILE).max_examples // 2
)
@given(example=wire_examples)
def test_no_hostile_value_breaks_a_promise_on_the_responses_and_anthropic_wires(
    world: HostileWorld, example: Example
) -> None:
    expect(world, example)


# -- one explicit example per position ---------------------------------------------------


def _calls(*specs: CallSpec, **turn: Any) -> Example:
    return Example(turns=(CallsTurn(calls=specs, **turn),))


EXPLICIT: dict[str, Example] = {
    # model text and reasoning
    "text_lone_surrogate": Example(final=TextSpec("lone_high_surrogate")),
    "text_undecodable_bytes_on_the_wire": Example(final=TextSpec("undecodable_bytes", wire="raw")),
    "text_raw_surrogate_bytes_on_the_wire": Example(
        final=TextSpec("lone_high_surrogate", wire="raw")
    ),
    "text_nul": Example(final=TextSpec("nul")),
    "text_one_mb": Example(final=TextSpec("one_mb")),
    "text_split_pair": Example(final=TextSpec("split_pair")),
    "text_split_pair_forwarded": Example(final=TextSpec("split_pair"), forwarding=True),
    "text_split_utf8_forwarded": Example(final=TextSpec("split_utf8"), forwarding=True),
    "text_lone_surrogate_forwarded": Example(
        final=TextSpec("lone_high_surrogate"), forwarding=True
    ),
    "reasoning_lone_surrogate": Example(
        final=TextSpec("lone_high_surrogate", field="reasoning_content")
    ),
    "reasoning_undecodable_bytes": Example(
        final=TextSpec("undecodable_bytes", field="reasoning", wire="raw")
    ),
    "text_beside_calls_lone_surrogate": _calls(CallSpec(), text=TextSpec("lone_high_surrogate")),
    # tool-call names
    **{f"name_{k}": _calls(CallSpec(name=k)) for k in NAMES},
    "name_after_arguments": _calls(CallSpec(name="after_arguments")),  # item 11
    # tool-call ids
    **{f"id_{k}": _calls(CallSpec(id=k), CallSpec(tool="pure_probe", id=k)) for k in IDS},
    # tool-call arguments
    **{f"args_{k}": _calls(CallSpec(args=k)) for k in ARG_VALUES},
    "args_undecodable_bytes_on_the_wire": _calls(CallSpec(args="undecodable_bytes", wire="raw")),
    "args_lone_surrogate_on_the_wire": _calls(CallSpec(args="raw_lone_surrogate", wire="raw")),
    **{f"args_{k}": _calls(CallSpec(args=k)) for k in WHOLE_ARGS},
    # tool results (each call asked twice: the second must replay, not run again)
    **{f"result_{k}": _calls(CallSpec(result=k)) for k in RESULTS},
    "result_undecodable_text_pure": _calls(CallSpec(tool="pure_probe", result="undecodable_text")),
    # provider errors and headers
    **{f"error_401_{k}": Example(turns=(ErrorTurn(401, k),)) for k in ERROR_BODIES},
    "error_in_stream_key_in_code": Example(turns=(ErrorTurn(200, "key_in_code", in_stream=True),)),
    **{
        f"error_429_{k}": Example(turns=(ErrorTurn(429, "key_in_message", headers=k),))
        for k in ERROR_HEADERS
    },
    "error_503_retry_after_1e300": Example(
        turns=(ErrorTurn(503, "key_in_type", headers="retry_after_1e300"),)
    ),
    # run inputs (each with a plain call, which must run)
    **{f"input_{k}": replace(_calls(CallSpec()), run_input=k) for k in RUN_INPUTS if k != "plain"},
    # usage numbers, beside a plain call and in the final answer
    **{f"usage_{k}": replace(_calls(CallSpec()), usage=k) for k in USAGES},
}


# Arguments a wire carries differently (split, escaped, raw bytes, large, deep, cut): the
# rest are read by the same reader once assembled, and the chat positions cover them.
WIRE_ARGS = {
    "escaped_lone_surrogate",
    "raw_lone_surrogate",
    "escaped_pair_split",
    "undecodable_bytes",
    "undecodable_bytes_on_the_wire",
    "lone_surrogate_on_the_wire",
    "escaped_nul",
    "one_mb_string",
    "deep_list_300",
    "deep_dict_600",
    "deep_dict_3000",
    "float_overflow",
    "huge_int",
    "malformed",
    "empty",
    "unterminated",
}


def _on_the_wires() -> dict[str, Example]:
    """The positions a wire writes differently, each on Responses and on Anthropic: text
    and reasoning (thinking) deltas, tool names, ids and arguments, the labels, error
    events after HTTP 200, usage numbers. Run inputs and tool results cross no wire."""
    wire_keys = [
        k
        for k in EXPLICIT
        if k.startswith(("text_", "reasoning_", "name_", "id_", "usage_"))
        or k.removeprefix("args_") in WIRE_ARGS
    ]
    positions: dict[str, Example] = {}
    for api in ("responses", "anthropic"):
        for key in wire_keys:
            if api == "anthropic" and key == "name_after_arguments":
                continue  # a tool_use block has no name after its start: `name_empty` is it
            positions[f"{api}_{key}"] = replace(EXPLICIT[key], api=api)
        positions |= {
            f"{api}_text_{k}": Example(api=api, final=TextSpec(k))
            for k in TEXTS
            if f"text_{k}" not in EXPLICIT
        }
        positions |= {
            f"{api}_reasoning_{k}": Example(api=api, final=TextSpec(k, field="reasoning"))
            for k in ("nul", "empty", "one_mb", "lone_low_surrogate", "split_pair")
        }
        positions |= {
            f"{api}_index_{index}": _calls(CallSpec(), CallSpec(tool="pure_probe"), index=index)
            for index in ("zero", "omit")
        }
        positions = {
            k: replace(v, api=api) if k.startswith(api) else v for k, v in positions.items()
        }
        for body in (
            "key_in_message",
            "key_in_code",
            "key_as_surrogate_escapes",
            "key_with_invalid_utf8",
            "key_in_text_body",
            "error_is_a_string",
            "error_list",
        ):
            turn = ErrorTurn(200, body, in_stream=True)
            positions[f"{api}_error_in_stream_{body}"] = Example(api=api, turns=(turn,))
        positions[f"{api}_error_401_key_in_message"] = Example(
            api=api, turns=(ErrorTurn(401, "key_in_message"),)
        )
        positions[f"{api}_error_429_retry_after_1e300"] = Example(
            api=api, turns=(ErrorTurn(429, "key_in_message", headers="retry_after_1e300"),)
        )
    return positions


EXPLICIT |= _on_the_wires()


def _base(position: str) -> str:
    """The chat position a wire position repeats (`responses_text_nul` -> `text_nul`)."""
    for api in ("responses_", "anthropic_"):
        if position.startswith(api):
            return position.removeprefix(api)
    return position


# What the issue promises beyond the invariants, for the explicit examples that show it.
FINAL_ANSWERS: dict[str, str] = {
    "text_split_pair": "smile \U0001f600 done",  # item 2, forwarding off
    "text_split_pair_forwarded": "smile \U0001f600 done",  # item 2
    "text_split_utf8_forwarded": "smile \U0001f600 done",
}
# A finished call whose arguments do not parse is answered (item 8); a call with a lone
# surrogate in its arguments is answered (item 1); a name after the arguments opens the
# call (item 11): each of these calls must appear in the transcript, answered.
ANSWERED_IN_TRANSCRIPT = {
    "args_malformed",
    "args_escaped_lone_surrogate",
    "args_escaped_lone_low",
    "args_raw_lone_surrogate",
    "name_after_arguments",
}
# Durations Temporal and `datetime` cannot represent, and non-finite ones, are refused
# with a message naming the field (item 4), at the client or by the workflow, never run.
REFUSED_NAMING: dict[str, str] = {
    "input_deadline_1e12": "deadline_s",
    "input_deadline_inf": "deadline_s",
    "input_model_timeout_1e300": "model_timeout_s",
    "input_heartbeat_timeout_1e300": "model_heartbeat_timeout_s",
}
# Positions where a named refusal that stops the run is a correct answer, not a failure.
MAY_STOP_FAILED = {k for k in EXPLICIT if _base(k).startswith(("error_", "input_"))}
# Anthropic labels a block's deltas only by the block's `index`: without it no delta can
# be attributed, the turn is a defect, and a fresh completion is asked for.
UNATTRIBUTABLE = {"anthropic_index_omit"}
# Asked twice, these are a completion defect twice (the runaway guard cuts them), and a
# defect that persists after a fresh completion stops the run: named, and not a bug.
MAY_STOP_ON_DEFECT = {"args_one_mb_string", "name_one_mb", "id_one_mb"}
# Hostile model text sent as valid JSON is the answer (replaced or kept), not a reason to
# throw the completion away and ask again (the provider's fallback answer is "done").
TAKEN_AS_ANSWER = {
    k
    for k, e in EXPLICIT.items()
    if _base(k).startswith(("text_", "reasoning_"))
    and e.final is not None
    and e.final.wire == "json"
    and e.final.value != "empty"  # no text is no answer: a fresh completion is asked for
}


@pytest.mark.parametrize("position", list(EXPLICIT))
def test_hostile_position(world: HostileWorld, position: str) -> None:
    outcome = expect(world, EXPLICIT[position])
    base = _base(position)  # a wire position expects what its chat position does
    if position in REFUSED_NAMING:
        refusal = outcome.refused or outcome.workflow_failure
        assert refusal is not None, f"{outcome.describe()}: ran instead of being refused"
        text = f"{refusal} {getattr(refusal, 'cause', '')}"
        assert REFUSED_NAMING[position] in text, f"{outcome.describe()}: the refusal names no field"
    result = outcome.result
    if result is None:
        return  # refused at the client or waiting on a person: the invariants held
    defect_stop = base in MAY_STOP_ON_DEFECT and "completion defect" in result.detail
    if position not in MAY_STOP_FAILED and not defect_stop:
        assert result.stop_reason == "final_answer", outcome.describe()
    if position in TAKEN_AS_ANSWER:
        assert result.final_answer != "done", f"{outcome.describe()}: the answer was dropped"
    if base in FINAL_ANSWERS:
        assert result.final_answer == FINAL_ANSWERS[base], outcome.describe()
    if base in ANSWERED_IN_TRANSCRIPT:
        calls = [c for m in result.transcript if m.role == "assistant" for c in m.tool_calls]
        assert calls, f"{outcome.describe()}: the call never reached the transcript"
    if base == "name_after_arguments":
        assert outcome.executions[("opaque_probe", 1)] == 1, outcome.describe()
    if base.startswith("result_"):
        assert (
            outcome.executions[("opaque_probe", 1)] + outcome.executions[("pure_probe", 1)] == 1
        ), outcome.describe()
    if base.startswith(("index_", "usage_")) and position not in UNATTRIBUTABLE:
        # Plain calls under any labels or usage numbers run, each once.
        assert outcome.executions[("opaque_probe", 1)] == 1, outcome.describe()
    if outcome.requests and EXPLICIT[position].api != "chat":
        wire = EXPLICIT[position].api
        path = "/responses" if wire == "responses" else "/messages"
        assert all(r.path.endswith(path) for r in outcome.requests), "posted on another wire"


# -- the detectors themselves (a check that cannot fail proves nothing) ---------------------


def _failed_activity_event(detail: bytes, kind: str = "http_status") -> HistoryEvent:
    event = HistoryEvent(event_id=9, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED)
    failure = event.activity_task_failed_event_attributes.failure
    failure.message = "scripted"
    failure.application_failure_info.type = kind
    payload = failure.application_failure_info.details.payloads.add()
    payload.metadata["encoding"] = b"json/plain"
    payload.data = detail
    return event


def test_the_key_detector_reads_payloads_nested_in_failures_and_maps() -> None:
    fragment = KEY[20:28].encode()
    in_details = _failed_activity_event(b'{"body_excerpt": "xx' + fragment + b'"}')
    in_memo = HistoryEvent(event_id=1, event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
    memo = in_memo.workflow_execution_started_event_attributes.memo.fields["m"]
    memo.data = b'"' + fragment + b'"'
    clean = _failed_activity_event(b'{"body_excerpt": "' + KEY[20:27].encode() + b'"}')
    for event, leaks in ((in_details, 1), (in_memo, 1), (clean, 0)):
        outcome = Outcome(ex="ex-detector", run=None, history=History(events=[event]))
        assert len(key_leaks(outcome)) == leaks, event


def test_the_crash_and_task_failure_detectors() -> None:
    crashed = _failed_activity_event(b"{}", kind="OverflowError")
    classified = _failed_activity_event(b"{}", kind="http_status")
    task = HistoryEvent(event_id=4, event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    task.workflow_task_failed_event_attributes.failure.message = "date value out of range"
    history = History(events=[crashed, classified, task])
    assert unhandled_activity_failures(history) == ["OverflowError: scripted"]
    assert len(task_failures(history)) == 1


def test_the_answer_detector() -> None:
    call = ToolCall(id="a", name="pure_probe", arguments="{}")
    asked = [ChatMessage(role="assistant", tool_calls=[call])]
    answered = [*asked, ChatMessage(role="tool", tool_call_id="a", content="ok")]
    outcome = Outcome(ex="ex-detector", run=None, transcript=asked)
    outcome.result = None
    assert check_invariants(replace(outcome, transcript=answered, awaiting_person=True)) == []
    unanswered = check_invariants(replace(outcome, awaiting_person=True, transcript=asked))
    assert unanswered == []  # a batch a person decides on is answered later
    twice = [*answered, ChatMessage(role="tool", tool_call_id="a", content="again")]
    assert check_invariants(replace(outcome, awaiting_person=True, transcript=twice))
